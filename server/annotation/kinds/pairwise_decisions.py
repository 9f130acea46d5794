"""The pairwise (A/B) kind's part in a look at a study's pre-registered decisions (server/annotation/decisions.py):
each comparison's label sequence, read from the stored judgments.

A comparison "A vs B on criterion" is looked at on the contexts where the pair (A, B) was judged on that criterion,
whichever side each was shown on. Each judgment is oriented to the comparison: +1 when A was chosen, -1 when B was,
0 for a tie (the screen side stored in `choice` is turned into a system by the placement's `shown_left`). A
context's label is the mean of its judgments so far, its net preference for A (in [-1, 1]; 0.1 is ten points of
wins minus losses); the contexts come in the order their last judgment came in (ties by context id), as the Likert
sequence's do. The monitoring runs the one-sample anytime-valid sequence on these labels (their mean is A's net
preference over B). Control pairs are left out of the labels; the paid ratings count every stored judgment of the
study, controls included (as the Likert count takes every stored rating).

Model-assisted (a study with design.human_share, whose pairs a judge of differences compared on every context:
`empeval judge NAME --judges pairwise-http-judge`): PPI++ beside the human-only sequence, the judge's verdict on a
context's pair the predictor of its net preference, the contexts only the judge compared the unlabelled ones
(``ppi_confidence_sequence``). The sequences are tuned at the contexts people judge by design.

An actively sampled study (design.sampling = "active", drawn by `empeval study sample`) is looked at with the
inverse-probability weighted sequences (``ipw_ppi_confidence_sequence``) over every context of the study, with
each drawn context's recorded probability: human-only (a judge of zeros) and, with a verdict on every context,
model-assisted. The plain sequences would estimate the mean net preference of the contexts the draw favoured (those
the judges disagreed on), not the study's.
"""
from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

import pandas as pd
from sqlalchemy import func, select
from sqlalchemy.orm import Session, aliased

from empeval.analysis.kinds.pairwise.judged import oriented_verdicts
from empeval.analysis.stats.sequential import (
    Decision,
    confidence_sequence,
    decide,
    ipw_ppi_confidence_sequence,
    ppi_confidence_sequence,
)
from empeval.server.annotation.decision_state import (
    ComparisonState,
    DecisionLook,
    JudgeInput,
    KindLook,
    last_interval,
)
from empeval.server.store.kinds.likert import StudyContext
from empeval.server.store.kinds.pairwise import AssignmentPair, Choice, PairItem
from empeval.server.store.models import Response, Study, System
from empeval.server.store.study_decisions import Comparison, Decisions

# A judgment's value for the pair's sorted-first system: +1 when it was chosen, -1 when the other one was.
_CHOSEN_SIDE = {("left", "a"): "a", ("left", "b"): "b", ("right", "a"): "b", ("right", "b"): "a"}


@dataclass(frozen=True)
class NetPreferences:
    """One comparison's looks: `contexts` in the order their last judgment came in, `labels` their net preference
    for A so far (the mean of +1 for A chosen, -1 for B, 0 for a tie), and `planned` the contexts the design has
    the pair judged on (what the sequence's rho is tuned at)."""

    contexts: tuple[int, ...]
    labels: tuple[float, ...]
    planned: int


@dataclass
class _Context:
    total: float = 0.0  # judgments for the pair's sorted-first system minus those for the other
    count: int = 0
    last: datetime | None = None


def net_preferences(session: Session, study_id: int,
                    comparisons: tuple[Comparison, ...]) -> tuple[dict[Comparison, NetPreferences], int]:
    """Each comparison's net-preference labels (module docstring) from the judgments stored for study `study_id`,
    and the study's paid ratings: its stored judgments (one per pair, annotator and criterion), controls included.
    Read in the caller's session, two statements and a count."""
    response_a, response_b = aliased(Response), aliased(Response)
    system_a, system_b = aliased(System), aliased(System)
    judged = session.execute(
        select(PairItem.context_id, system_a.name, system_b.name, AssignmentPair.shown_left, Choice.criterion,
               Choice.choice, Choice.submitted_at)
        .join(AssignmentPair, (AssignmentPair.assignment_id == Choice.assignment_id)
              & (AssignmentPair.pair_item_id == Choice.pair_item_id))
        .join(PairItem, PairItem.id == Choice.pair_item_id)
        .join(response_a, response_a.id == PairItem.response_a_id).join(system_a, system_a.id == response_a.system_id)
        .join(response_b, response_b.id == PairItem.response_b_id).join(system_b, system_b.id == response_b.system_id)
        .where(PairItem.study_id == study_id, PairItem.is_control.is_(False))).all()
    items = session.execute(
        select(system_a.name, system_b.name, func.count(PairItem.id))
        .join(response_a, response_a.id == PairItem.response_a_id).join(system_a, system_a.id == response_a.system_id)
        .join(response_b, response_b.id == PairItem.response_b_id).join(system_b, system_b.id == response_b.system_id)
        .where(PairItem.study_id == study_id, PairItem.is_control.is_(False),
               PairItem.context_id.not_in(select(StudyContext.context_id).where(
                   StudyContext.study_id == study_id, StudyContext.human_rated.is_(False))))
        .group_by(system_a.name, system_b.name)).all()
    paid = session.scalar(select(func.count(Choice.id)).join(PairItem, PairItem.id == Choice.pair_item_id)
                          .where(PairItem.study_id == study_id)) or 0

    planned: dict[frozenset[str], int] = {}
    for name_a, name_b, count in items:
        planned[frozenset((name_a, name_b))] = planned.get(frozenset((name_a, name_b)), 0) + int(count)
    # (sorted pair, criterion) -> context -> what its judgments say for the sorted-first system
    by_pair: dict[tuple[tuple[str, str], str], dict[int, _Context]] = {}
    for context_id, name_a, name_b, shown_left, criterion, choice, at in judged:
        pair = (name_a, name_b) if name_a < name_b else (name_b, name_a)
        context = by_pair.setdefault((pair, criterion), {}).setdefault(context_id, _Context())
        if choice != "tie":
            chosen = name_a if _CHOSEN_SIDE[choice, shown_left] == "a" else name_b
            context.total += 1.0 if chosen == pair[0] else -1.0
        context.count += 1
        context.last = at if context.last is None or at > context.last else context.last

    out: dict[Comparison, NetPreferences] = {}
    for comparison in comparisons:
        a, b = comparison.system_a, comparison.system_b
        pair = (a, b) if a < b else (b, a)
        sign = 1.0 if pair[0] == a else -1.0
        contexts = by_pair.get((pair, comparison.criterion), {})
        order = sorted(contexts, key=lambda c: (contexts[c].last, c))
        out[comparison] = NetPreferences(
            contexts=tuple(order), labels=tuple(sign * contexts[c].total / contexts[c].count for c in order),
            planned=planned.get(frozenset((a, b)), 0))
    return out, int(paid)


def pairwise_look(session: Session, study: Study, decisions: Decisions, judge_diffs: pd.DataFrame | None,
                   judge: str | None) -> KindLook:
    """A pairwise (A/B) study's comparisons: one-sample sequences over the contexts' net preferences for A (module
    docstring) and, with a judge of differences' verdicts (``judge_pair_scores``' table) on a study with a human
    share, the PPI++ sequence beside each; a note says why a model-assisted interval is missing."""
    labels, paid = net_preferences(session, study.id, decisions.comparisons)
    recorded = session.execute(select(StudyContext.context_id, StudyContext.human_rated,
                                      StudyContext.inclusion_probability)
                               .where(StudyContext.study_id == study.id)).all()
    sampled = {context_id: human for context_id, human, _ in recorded}
    notes: list[str] = []
    if study.config.setup.actively_sampled:
        drawn_with = {context_id: float(p) for context_id, _, p in recorded if p is not None}
        states = tuple(weighted_net_preference_state(comparison, labels[comparison], decisions, judge_diffs,
                                                     drawn_with, notes) for comparison in decisions.comparisons)
    else:
        states = tuple(net_preference_state(comparison, labels[comparison], decisions, judge_diffs, sampled, notes)
                       for comparison in decisions.comparisons)
    return KindLook(states, paid, tuple(notes))


def weighted_net_preference_state(comparison: Comparison, labels: NetPreferences, decisions: Decisions,
                                  judge_diffs: pd.DataFrame | None, drawn_with: dict[int, float],
                                  notes: list[str]) -> ComparisonState:
    """One comparison of an actively sampled A/B study (module docstring): the inverse-probability weighted
    sequences of A's mean net preference over every context of the study (``ipw_ppi_confidence_sequence``,
    prior variance 1 as in ``net_preference_state``), human-only and, with the judge's verdict on every context,
    model-assisted; each with its state (``decide``). A note says why an interval is missing."""
    if not labels.labels:  # nothing judged yet (before the draw, or before the first submission)
        return ComparisonState(comparison, 0, float("nan"), float("-inf"), float("inf"), Decision.UNDECIDED)
    contexts = sorted(drawn_with)
    budget = sum(drawn_with.values())
    if not contexts or budget <= 0 or any(c not in drawn_with for c in labels.contexts):
        notes.append(f"{comparison.describe()}: no interval (contexts people judged have no probability recorded by "
                     "the active draw)")
        return ComparisonState(comparison, len(labels.labels), float("nan"), float("-inf"), float("inf"),
                               Decision.UNDECIDED)
    pi = [drawn_with[c] for c in labels.contexts]
    planned = max(budget, 1.0)
    human = ipw_ppi_confidence_sequence(list(labels.labels), [0.0] * len(pi), pi, [0.0] * len(contexts),
                                        expected_rated=budget, planned_n=planned, alpha=decisions.alpha_each,
                                        prior_variance=1.0)
    estimate, low, high = last_interval(human)
    state = ComparisonState(comparison, len(labels.labels), estimate, low, high,
                            decide(low, high, margin=decisions.margin))
    if judge_diffs is None:
        return state
    verdicts = oriented_verdicts(judge_diffs, comparison.system_a, comparison.system_b, comparison.criterion)
    if not set(contexts) <= set(verdicts.index):
        notes.append(f"{comparison.describe()}: no model-assisted interval (the judge compared "
                     f"{len(set(contexts) & set(verdicts.index))} of the actively sampled study's {len(contexts)} "
                     "contexts; the weighted estimator needs every one)")
        return state
    ppi = ipw_ppi_confidence_sequence(list(labels.labels), verdicts.loc[list(labels.contexts)].to_numpy(), pi,
                                      verdicts.loc[contexts].to_numpy(), expected_rated=budget, planned_n=planned,
                                      alpha=decisions.alpha_each, prior_variance=1.0).iloc[-1]
    p_low, p_high = float(ppi["low"]), float(ppi["high"])
    return ComparisonState(comparison, len(labels.labels), estimate, low, high, state.human_state,
                           float(ppi["estimate"]), p_low, p_high, decide(p_low, p_high, margin=decisions.margin))


def net_preference_state(comparison: Comparison, labels: NetPreferences, decisions: Decisions,
                          judge_diffs: pd.DataFrame | None = None, sampled: dict[int, bool] | None = None,
                          notes: list[str] | None = None) -> ComparisonState:
    """The confidence sequence (``confidence_sequence``, Waudby-Smith et al. 2024) of the mean net preference for A
    over the contexts' labels in arrival order, tuned at the contexts the design has the pair judged on, with one
    pseudo-observation of variance 1 (the largest a label in [-1, 1] can have); its last look's interval and state
    (``decide`` with the margin in net-preference units).

    With a judge of differences' verdicts (`judge_diffs`) and the design's sample (`sampled`: context -> whether
    people judge it), the PPI++ sequence beside it (``ppi_confidence_sequence``, a predictable lambda): the judge's
    verdicts on the judged contexts in the same order, and on the contexts only the judge compared (by context id).
    A verdict's units need not match a label's: lambda weighs the judge. Without a verdict on every judged context,
    or without a context only the judge compared (no human share), a note says so and the state is human-only."""
    sequence = confidence_sequence(list(labels.labels), planned_n=max(labels.planned, len(labels.labels), 1),
                                   alpha=decisions.alpha_each, prior_variance=1.0)
    estimate, low, high = last_interval(sequence)
    state = ComparisonState(comparison, len(labels.labels), estimate, low, high,
                            decide(low, high, margin=decisions.margin))
    if judge_diffs is None or not labels.labels:
        return state
    verdicts = oriented_verdicts(judge_diffs, comparison.system_a, comparison.system_b, comparison.criterion)
    missing = [c for c in labels.contexts if c not in verdicts.index]
    unrated = sorted(c for c in verdicts.index if sampled is not None and sampled.get(c) is False)
    if missing or not unrated:
        if notes is not None:
            why = (f"the judge compared {len(labels.contexts) - len(missing)} of the {len(labels.contexts)} contexts "
                   "people judged" if missing else "no context only the judge compared (design.human_share gives "
                   "some)")
            notes.append(f"{comparison.describe()}: no model-assisted interval ({why})")
        return state
    ppi = ppi_confidence_sequence(list(labels.labels), verdicts.loc[list(labels.contexts)].to_numpy(),
                                  verdicts.loc[unrated].to_numpy(),
                                  planned_n=max(labels.planned, len(labels.labels), 1), alpha=decisions.alpha_each,
                                  prior_variance=1.0).iloc[-1]
    p_low, p_high = float(ppi["low"]), float(ppi["high"])
    return ComparisonState(comparison, len(labels.labels), estimate, low, high, state.human_state,
                           float(ppi["estimate"]), p_low, p_high, decide(p_low, p_high, margin=decisions.margin))


PAIRWISE_LOOK = DecisionLook(pairwise_look, model_assisted=True, judged_by=JudgeInput.PAIR_DIFFERENCES)
