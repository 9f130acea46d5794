"""The Likert kind's part in a look at a study's pre-registered decisions (server/annotation/decisions.py): each
comparison's paired sequence over the items' mean ratings, a - b, on the study's scale (prior variance: the scale's
span squared, the largest variance of a difference), model-assisted with a judge's scores (PPI++ with a predictable
lambda) when a judge scored every rated context and some contexts only the judge scored. An actively sampled study
(design.sampling = "active") is looked at with the inverse-probability weighted sequences, human-only and
model-assisted, over every context of the study (the draw's recorded probabilities). A two-phase draw hands out its
uniform burn-in before phase 2, so its looks are not drawn in proportion to the overall probabilities: its
intervals intersect the burn-in's sequence (a uniform sample) with phase 2's weighted one over the contexts the
burn-in left, each at alpha / 2 (``analysis.stats.sequential.two_phase_interval``)."""
from __future__ import annotations

import pandas as pd
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from empeval.analysis.stats.sequential import (
    Decision,
    decide,
    ipw_ppi_confidence_sequence,
    paired_confidence_sequence,
    ppi_paired_confidence_sequence,
    two_phase_interval,
)
from empeval.server.annotation.decision_state import ComparisonState, DecisionLook, KindLook, last_interval
from empeval.server.annotation.study_log import ACTIVE_DRAW
from empeval.server.store.kinds.likert import ACTIVE_SAMPLING, LikertSetup, Rating, StudyContext, StudyItem
from empeval.server.store.models import Response, Study, StudyLogEntry, System
from empeval.server.store.study_decisions import Comparison, Decisions


def likert_look(session: Session, study: Study, decisions: Decisions, judge_scores: pd.DataFrame | None,
                 judge: str | None) -> KindLook:
    """A Likert study's comparisons: paired sequences over the items' mean ratings (server/annotation/decisions.py)."""
    setup = study.config.setup
    assert isinstance(setup, LikertSetup)
    rows = session.execute(
        select(Response.context_id, System.name, Rating.criterion, Rating.score, Rating.submitted_at)
        .join(StudyItem, StudyItem.id == Rating.item_id).join(Response, Response.id == StudyItem.response_id)
        .join(System, System.id == Response.system_id)
        .where(StudyItem.study_id == study.id, StudyItem.is_control.is_(False))).all()
    paid = session.scalar(select(func.count(Rating.id)).join(StudyItem, StudyItem.id == Rating.item_id)
                          .where(StudyItem.study_id == study.id)) or 0
    recorded = session.execute(select(StudyContext.context_id, StudyContext.human_rated,
                                      StudyContext.inclusion_probability)
                               .where(StudyContext.study_id == study.id)).all()
    sampled = {context_id: human for context_id, human, _ in recorded}
    # An active draw (design.sampling = "active") recorded each context's probability: the sequences weigh by it.
    drawn_with = ({context_id: float(p) for context_id, _, p in recorded if p is not None}
                  if setup.sampling == ACTIVE_SAMPLING else None)
    notes: list[str] = []
    phases = _phases(session, study.id) if drawn_with is not None else None
    overall = drawn_with or {}
    columns = ["context_id", "system", "criterion", "score", "at"]
    if phases is not None:
        # A two-phase design hands out its uniform burn-in first, then phase 2 (module docstring): the burn-in's
        # sequence is a uniform sample's, phase 2's is weighted over the contexts the burn-in left.
        burn_in, _, phase_two = phases
        drawn_with = None
        sampled = {context_id: context_id in burn_in for context_id in sampled}
        ratings_rows = [r for r in rows if r[0] in burn_in]
        notes.append(f"two-phase active design: the intervals intersect the sequence of the {len(burn_in)} contexts "
                     "of the uniform burn-in with phase 2's weighted one, each at half the error rate"
                     + ("" if phase_two else " (phase 2 is not drawn yet)"))
    else:
        ratings_rows = list(rows)
    ratings = pd.DataFrame([tuple(r) for r in ratings_rows], columns=columns)
    planned = sum(sampled.values()) if sampled else len(set(ratings["context_id"])) or 1
    spread = float(setup.scale.max - setup.scale.min)
    states: list[ComparisonState] = []
    second = pd.DataFrame([tuple(r) for r in rows if phases is not None and r[0] in phases[2]], columns=columns)
    for comparison in decisions.comparisons:
        state = comparison_state(comparison, ratings, judge_scores, sampled, decisions, planned_n=max(planned, 1),
                                 prior_variance=max(spread**2, 1.0), notes=notes, drawn_with=drawn_with,
                                 alpha=decisions.alpha_each / 2 if phases is not None else None)
        if phases is not None and len(second):
            state = _with_phase_two(state, comparison, ratings, second, judge_scores, overall, phases, decisions,
                                    prior_variance=max(spread**2, 1.0), notes=notes)
        states.append(state)
    return KindLook(tuple(states), int(paid), tuple(notes))


def comparison_state(comparison: Comparison, ratings: pd.DataFrame, judge_scores: pd.DataFrame | None,
                      sampled: dict[int, bool], decisions: Decisions, *, planned_n: int, prior_variance: float,
                      notes: list[str], drawn_with: dict[int, float] | None = None,
                      alpha: float | None = None) -> ComparisonState:
    """One comparison of a Likert study: the paired anytime-valid sequence of a - b over the contexts rated for both
    systems (each context's label the mean of its item's ratings, in the order their last rating came in;
    Waudby-Smith et al. 2024), and with judge scores the PPI++ sequence beside it (a predictable lambda); each
    with its state (``decide``). A note says why a model-assisted interval is missing. `alpha` defaults to the
    decisions' error rate per comparison (a two-phase draw's burn-in spends half of it)."""
    a, b, criterion = comparison.system_a, comparison.system_b, comparison.criterion
    both = _rated_for_both(ratings, a, b, criterion)
    labels_a = both["label"][a].to_numpy(dtype=float) if len(both) else []
    labels_b = both["label"][b].to_numpy(dtype=float) if len(both) else []
    alpha, margin = decisions.alpha_each if alpha is None else alpha, decisions.margin
    if drawn_with is not None:
        drawn = {c: p for c, p in drawn_with.items() if sampled.get(c, False)}  # a rated context the draw made
        return _actively_drawn_state(comparison, both, labels_a, labels_b, judge_scores, drawn_with, decisions,
                                     prior_variance=prior_variance, notes=notes, drawn=drawn)
    human = paired_confidence_sequence(labels_a, labels_b, planned_n=planned_n, alpha=alpha,
                                       prior_variance=prior_variance)
    estimate, low, high = last_interval(human)
    state = ComparisonState(comparison, len(both), estimate, low, high, decide(low, high, margin=margin))
    if judge_scores is None or not len(both):
        return state
    scores = judge_scores[judge_scores["criterion"] == criterion].pivot_table(
        index="context_id", columns="system", values="judge_score", aggfunc="first")
    if not {a, b} <= set(scores.columns):
        notes.append(f"{comparison.describe()}: the judge scored no response of {a if a not in scores else b}")
        return state
    differences = (scores[a] - scores[b]).dropna()
    rated = [c for c in both.index if c in differences.index]
    unrated = [c for c in differences.index if not sampled.get(c, True)]
    if len(rated) < len(both) or not unrated:
        notes.append(f"{comparison.describe()}: no model-assisted interval ("
                     + ("the judge did not score every rated context" if len(rated) < len(both)
                        else "no context only the judge scored") + ")")
        return state
    ppi = ppi_paired_confidence_sequence(
        labels_a, labels_b, scores.loc[rated, a].to_numpy(), scores.loc[rated, b].to_numpy(),
        scores.loc[unrated, a].to_numpy(), scores.loc[unrated, b].to_numpy(), planned_n=planned_n, alpha=alpha,
        prior_variance=prior_variance).iloc[-1]
    p_low, p_high = float(ppi["low"]), float(ppi["high"])
    return ComparisonState(comparison, len(both), estimate, low, high, state.human_state, float(ppi["estimate"]),
                           p_low, p_high, decide(p_low, p_high, margin=margin))


def _rated_for_both(ratings: pd.DataFrame, a: str, b: str, criterion: str) -> pd.DataFrame:
    """The contexts rated for both systems on `criterion`, each item's mean rating (``label``) and last rating time
    (``at``) per system, in the order their last rating came in."""
    of = ratings[(ratings["criterion"] == criterion) & ratings["system"].isin([a, b])]
    items = of.groupby(["context_id", "system"]).agg(label=("score", "mean"), at=("at", "max")).reset_index()
    wide = items.pivot(index="context_id", columns="system", values=["label", "at"])
    both = wide.dropna() if {a, b} <= set(items["system"]) else wide.iloc[0:0]
    if len(both):
        order = pd.concat([both["at"][a], both["at"][b]], axis=1).max(axis=1).sort_values(kind="stable").index
        both = both.loc[order]
    return both


def _phases(session: Session, study_id: int) -> tuple[set[int], float, set[int]] | None:
    """A two-phase active design's burn-in contexts (its phase-1 log entry's ``drawn``), the burn-in's probability
    p1 and phase 2's contexts (empty until it is drawn); None for a study drawn in one go or not yet drawn."""
    entries = session.scalars(select(StudyLogEntry.detail).where(StudyLogEntry.study_id == study_id,
                                                                 StudyLogEntry.event == ACTIVE_DRAW)).all()
    phase_one = [detail for detail in entries if detail.get("phase") == 1]
    if not phase_one:
        return None
    phase_two = [detail for detail in entries if detail.get("phase") == 2]
    return ({int(c) for c in phase_one[0].get("drawn", ())}, float(phase_one[0]["p1"]),
            {int(c) for c in phase_two[0].get("drawn", ())} if phase_two else set())


def _with_phase_two(state: ComparisonState, comparison: Comparison, burn_ratings: pd.DataFrame,
                    second: pd.DataFrame, judge_scores: pd.DataFrame | None, overall: dict[int, float],
                    phases: tuple[set[int], float, set[int]], decisions: Decisions, *, prior_variance: float,
                    notes: list[str]) -> ComparisonState:
    """The burn-in's state (its sequences at alpha / 2) intersected with phase 2's (module docstring): phase 2's
    inverse-probability weighted sequences, at alpha / 2, of the mean difference over the contexts the burn-in did
    not draw, each weighted by its phase-2 probability q = (pi - p1) / (1 - p1), the burn-in's differences the known
    rest of the study mean (``two_phase_interval``); human-only, and model-assisted where the burn-in's state has a
    model-assisted interval and the judge scored every context."""
    a, b, criterion = comparison.system_a, comparison.system_b, comparison.criterion
    burn_in, p1, _ = phases
    burnt = _rated_for_both(burn_ratings, a, b, criterion)
    if set(burnt.index) != burn_in:
        notes.append(f"{comparison.describe()}: phase 2 left out ({len(burn_in - set(burnt.index))} burn-in "
                     "context(s) lack a rating of both systems, so the study mean's known part is incomplete)")
        return state
    later = _rated_for_both(second, a, b, criterion)
    if not len(later):
        return state
    rest = sorted(set(overall) - burn_in)
    q = {c: (overall[c] - p1) / (1 - p1) for c in rest}
    differences = (later["label"][a] - later["label"][b]).to_numpy(dtype=float)
    pi = [q[c] for c in later.index]
    known_sum = float((burnt["label"][a] - burnt["label"][b]).sum())
    budget = float(sum(q.values()))
    alpha, margin = decisions.alpha_each / 2, decisions.margin

    def combined(first: tuple[float, float, float], judged_rated, judged_all) -> tuple[float, float, float]:
        sequence = ipw_ppi_confidence_sequence(differences, judged_rated, pi, judged_all, expected_rated=budget,
                                               planned_n=max(budget, 1.0), alpha=alpha, prior_variance=prior_variance)
        return two_phase_interval(first, last_interval(sequence), known_sum=known_sum, n_total=len(overall),
                                  n_rest=len(rest))

    estimate, low, high = combined((state.human_estimate, state.human_low, state.human_high),
                                   [0.0] * len(pi), [0.0] * len(rest))
    n = state.n + len(later)
    human = ComparisonState(comparison, n, estimate, low, high, decide(low, high, margin=margin))
    if judge_scores is None or state.ppi_estimate is None:
        return human
    scores = judge_scores[judge_scores["criterion"] == criterion].pivot_table(
        index="context_id", columns="system", values="judge_score", aggfunc="first")
    judged = (scores[a] - scores[b]).dropna() if {a, b} <= set(scores.columns) else pd.Series(dtype=float)
    if not set(rest) <= set(judged.index):
        notes.append(f"{comparison.describe()}: the model-assisted interval uses the burn-in alone (the judge did "
                     "not score every context phase 2 could draw)")
        return ComparisonState(comparison, n, estimate, low, high, human.human_state, state.ppi_estimate,
                               state.ppi_low, state.ppi_high, state.ppi_state)
    assert state.ppi_low is not None and state.ppi_high is not None
    p_estimate, p_low, p_high = combined((state.ppi_estimate, state.ppi_low, state.ppi_high),
                                         judged.loc[list(later.index)].to_numpy(), judged.loc[rest].to_numpy())
    return ComparisonState(comparison, n, estimate, low, high, human.human_state, p_estimate, p_low, p_high,
                           decide(p_low, p_high, margin=margin))


def _actively_drawn_state(comparison: Comparison, both: pd.DataFrame, labels_a, labels_b,
                          judge_scores: pd.DataFrame | None, drawn_with: dict[int, float], decisions: Decisions, *,
                          prior_variance: float, notes: list[str], drawn: dict[int, float]) -> ComparisonState:
    """One comparison of an actively sampled study: the inverse-probability weighted sequences
    (``ipw_ppi_confidence_sequence``) of the mean difference over every context of the study, human-only (a judge of
    zeros) and, with judge scores of every context, model-assisted. The plain sequences would estimate the mean of
    the contexts the draw favoured (the ones the judges were unsure of), not the study's."""
    a, b = comparison.system_a, comparison.system_b
    alpha, margin = decisions.alpha_each, decisions.margin
    if not len(both):  # nothing rated yet (before the draw, or before the first submission)
        return ComparisonState(comparison, 0, float("nan"), float("-inf"), float("inf"), Decision.UNDECIDED)
    contexts = sorted(drawn_with)
    budget = sum(drawn_with.values())
    rated = [c for c in both.index if c in drawn]
    if len(rated) < len(both) or not contexts or budget <= 0:
        notes.append(f"{comparison.describe()}: no interval ({len(both) - len(rated)} rated context(s) were not "
                     "drawn by the active draw, or it recorded no probability for them)")
        return ComparisonState(comparison, len(both), float("nan"), float("-inf"), float("inf"), Decision.UNDECIDED)
    pi = [drawn_with[c] for c in rated]
    differences = (pd.Series(labels_a, index=both.index) - pd.Series(labels_b, index=both.index)).loc[rated]
    planned = max(budget, 1.0)
    human = ipw_ppi_confidence_sequence(differences.to_numpy(), [0.0] * len(rated), pi, [0.0] * len(contexts),
                                        expected_rated=budget, planned_n=planned, alpha=alpha,
                                        prior_variance=prior_variance)
    estimate, low, high = last_interval(human)
    state = ComparisonState(comparison, len(rated), estimate, low, high, decide(low, high, margin=margin))
    if judge_scores is None:
        return state
    scores = judge_scores[judge_scores["criterion"] == comparison.criterion].pivot_table(
        index="context_id", columns="system", values="judge_score", aggfunc="first")
    judged = (scores[a] - scores[b]).dropna() if {a, b} <= set(scores.columns) else pd.Series(dtype=float)
    if not set(contexts) <= set(judged.index):
        notes.append(f"{comparison.describe()}: no model-assisted interval (the judge did not score every context "
                     "of the actively sampled study)")
        return state
    ppi = ipw_ppi_confidence_sequence(differences.to_numpy(), judged.loc[rated].to_numpy(), pi,
                                      judged.loc[contexts].to_numpy(), expected_rated=budget, planned_n=planned,
                                      alpha=alpha, prior_variance=prior_variance).iloc[-1]
    p_low, p_high = float(ppi["low"]), float(ppi["high"])
    return ComparisonState(comparison, len(rated), estimate, low, high, state.human_state, float(ppi["estimate"]),
                           p_low, p_high, decide(p_low, p_high, margin=margin))


LIKERT_LOOK = DecisionLook(likert_look, model_assisted=True)
