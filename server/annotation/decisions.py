"""Where a study's pre-registered comparisons stand ([decisions], server/store/study_decisions.py): for each, the
anytime-valid interval of the difference a - b (``empeval.analysis.stats.sequential``) human-only and, when a
judge's scores are given, model-assisted, with its state (undecided, A better, B better, equivalent within margin),
and the paid ratings so far; and closing a study's claims once everything is decided or the budget is spent.

The sequence's looks are the contexts people have rated for both systems of a comparison, in the order their last
rating came in; each look's label is the mean of the item's ratings so far. Each comparison is at level
alpha / m (Bonferroni over the m comparisons). The state a study stops on is the model-assisted interval's when a
judge's scores were given, else the human-only one's: one interval per comparison, so the split of alpha holds.

When claims close (``close_claims_if_decided``): after submissions, in a look taken in the background at a
bounded cost (server/web/decisions_watch.py: at most one look per study every few seconds per process), on
`empeval study status`, and by whoever calls it. The study page only shows the decisions. Not inside each
submission's transaction: reading every rating of the study is not cheap, and the claim path pays one column test
(hot_sql: the claim UPDATE refuses a study whose claims_closed_at is set), nothing more. What is claimed between
the decisive rating and the next look is finished and stored (started work is never cut off).

Likert studies only: the labels are the items' mean ratings on the study's scale.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import pandas as pd
from sqlalchemy import Engine, func, select

from empeval.analysis.stats.sequential import (
    Decision,
    decide,
    paired_confidence_sequence,
    ppi_paired_confidence_sequence,
)
from empeval.server.errors import BadInput
from empeval.server.store.engine import unit_of_work
from empeval.server.store.kinds.likert import LikertSetup, Rating, StudyContext, StudyItem
from empeval.server.store.models import Response, System
from empeval.server.store.queries import now_utc, study_by_name
from empeval.server.store.study_decisions import Comparison, Decisions

# What claims_closed_reason says.
REASON_DECIDED = "every pre-registered comparison is decided"
REASON_BUDGET = "the budget of paid ratings is spent"


@dataclass(frozen=True)
class ComparisonState:
    """One comparison now: `n` contexts people rated for both systems, the human-only interval and state, and the
    model-assisted ones (None without judge scores, or too few contexts for them)."""

    comparison: Comparison
    n: int
    human_estimate: float
    human_low: float
    human_high: float
    human_state: Decision
    ppi_estimate: float | None = None
    ppi_low: float | None = None
    ppi_high: float | None = None
    ppi_state: Decision | None = None

    @property
    def state(self) -> Decision:
        """The state the study stops on: the model-assisted one when there is one, else the human-only one."""
        return self.ppi_state if self.ppi_state is not None else self.human_state


@dataclass(frozen=True)
class DecisionStatus:
    """A study's decisions now: its [decisions] table, each comparison's state, the paid ratings so far."""

    study: str
    decisions: Decisions
    comparisons: tuple[ComparisonState, ...]
    paid_ratings: int
    judge: str | None = None
    claims_closed_at: datetime | None = None
    claims_closed_reason: str | None = None
    notes: tuple[str, ...] = field(default=())

    @property
    def all_decided(self) -> bool:
        return bool(self.comparisons) and all(c.state != Decision.UNDECIDED for c in self.comparisons)

    @property
    def budget_spent(self) -> bool:
        return self.decisions.budget is not None and self.paid_ratings >= self.decisions.budget

    def lines(self) -> list[str]:
        """The status as `empeval study status` prints it."""
        d = self.decisions
        budget = f" of a budget of {d.budget}" if d.budget is not None else ""
        margin = f"margin {d.margin:g}" if d.margin is not None else "no margin (equivalence not declared)"
        out = [f"decisions: {len(d.comparisons)} comparisons, alpha {d.alpha:g} (Bonferroni: {d.alpha_each:.4g} "
               f"each), {margin}; {self.paid_ratings} paid ratings so far{budget}"]
        for c in self.comparisons:
            human = _interval(c.human_estimate, c.human_low, c.human_high)
            line = f"  {c.comparison.describe()}: n={c.n} human-only {human} {c.human_state}"
            if c.ppi_state is not None:
                line += (f"; model-assisted ({self.judge}) {_interval(c.ppi_estimate, c.ppi_low, c.ppi_high)} "
                         f"{c.ppi_state}")
            out.append(line)
        out += [f"  note: {note}" for note in self.notes]
        if self.claims_closed_at is not None:
            out.append(f"claims closed at {self.claims_closed_at:%Y-%m-%d %H:%M} UTC: {self.claims_closed_reason} "
                       "(assignments already started may still be submitted)")
        elif d.stop_when_decided:
            out.append("stop_when_decided: claims close when every comparison is decided"
                       + (" or the budget is spent" if d.budget is not None else ""))
        return out

    def as_dict(self) -> dict[str, Any]:
        """For the dashboard's template."""
        return {"decisions": self.decisions, "paid_ratings": self.paid_ratings, "judge": self.judge,
                "claims_closed_at": self.claims_closed_at, "claims_closed_reason": self.claims_closed_reason,
                "comparisons": self.comparisons, "notes": self.notes, "lines": self.lines()}


def _interval(estimate, low, high) -> str:
    def number(x):
        return f"{x:+.3f}" if x is not None and abs(x) != float("inf") else ("-inf" if x and x < 0 else "inf")
    return f"{number(estimate)} [{number(low)}, {number(high)}]"


def decision_status(engine: Engine, name: str, *, judge_scores: pd.DataFrame | None = None,
                    judge: str | None = None) -> DecisionStatus | None:
    """Study `name`'s decisions now (module docstring), or None when it has no [decisions] table. `judge_scores`
    (``server.backend.judges.scores.judge_scores``'s table: context_id, system, criterion, judge_score) adds the
    model-assisted intervals. BadInput for a study of another kind than Likert."""
    with unit_of_work(engine) as session:
        study = study_by_name(session, name)
        config = study.config
        decisions = config.decisions
        if decisions is None:
            return None
        setup = config.setup
        if not isinstance(setup, LikertSetup):
            raise BadInput(f"study {name!r} is a {setup.label} study; decisions are computed for Likert studies")
        rows = session.execute(
            select(Response.context_id, System.name, Rating.criterion, Rating.score, Rating.submitted_at)
            .join(StudyItem, StudyItem.id == Rating.item_id).join(Response, Response.id == StudyItem.response_id)
            .join(System, System.id == Response.system_id)
            .where(StudyItem.study_id == study.id, StudyItem.is_control.is_(False))).all()
        paid = session.scalar(select(func.count(Rating.id)).join(StudyItem, StudyItem.id == Rating.item_id)
                              .where(StudyItem.study_id == study.id)) or 0
        sampled = dict(session.execute(select(StudyContext.context_id, StudyContext.human_rated)
                                       .where(StudyContext.study_id == study.id)).all())
        closed_at, reason = study.claims_closed_at, study.claims_closed_reason
    ratings = pd.DataFrame([tuple(r) for r in rows], columns=["context_id", "system", "criterion", "score", "at"])
    planned = sum(sampled.values()) if sampled else len(set(ratings["context_id"])) or 1
    spread = float(setup.scale.max - setup.scale.min)
    states: list[ComparisonState] = []
    notes: list[str] = []
    for comparison in decisions.comparisons:
        states.append(_comparison_state(comparison, ratings, judge_scores, sampled, decisions,
                                        planned_n=max(planned, 1), prior_variance=max(spread**2, 1.0), notes=notes))
    return DecisionStatus(study=name, decisions=decisions, comparisons=tuple(states), paid_ratings=int(paid),
                          judge=judge if judge_scores is not None else None, claims_closed_at=closed_at,
                          claims_closed_reason=reason, notes=tuple(notes))


def _comparison_state(comparison: Comparison, ratings: pd.DataFrame, judge_scores: pd.DataFrame | None,
                      sampled: dict[int, bool], decisions: Decisions, *, planned_n: int, prior_variance: float,
                      notes: list[str]) -> ComparisonState:
    a, b, criterion = comparison.system_a, comparison.system_b, comparison.criterion
    of = ratings[(ratings["criterion"] == criterion) & ratings["system"].isin([a, b])]
    items = of.groupby(["context_id", "system"]).agg(label=("score", "mean"), at=("at", "max")).reset_index()
    wide = items.pivot(index="context_id", columns="system", values=["label", "at"])
    both = wide.dropna() if {a, b} <= set(items["system"]) else wide.iloc[0:0]
    if len(both):
        order = pd.concat([both["at"][a], both["at"][b]], axis=1).max(axis=1).sort_values(kind="stable").index
        both = both.loc[order]
    labels_a = both["label"][a].to_numpy(dtype=float) if len(both) else []
    labels_b = both["label"][b].to_numpy(dtype=float) if len(both) else []
    alpha, margin = decisions.alpha_each, decisions.margin
    human = paired_confidence_sequence(labels_a, labels_b, planned_n=planned_n, alpha=alpha,
                                       prior_variance=prior_variance)
    if len(human):
        last = human.iloc[-1]
        estimate, low, high = float(last["estimate"]), float(last["low"]), float(last["high"])
    else:
        estimate, low, high = float("nan"), float("-inf"), float("inf")
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


def close_claims_if_decided(engine: Engine, status: DecisionStatus, *, now: datetime | None = None) -> bool:
    """Close the study's claims (study.claims_closed_at and claims_closed_reason) when its [decisions] say
    stop_when_decided and every comparison is decided or the budget is spent; True when this call closed them.
    New work is refused from then on (hot_sql's claim); assignments already started may still be submitted."""
    if not status.decisions.stop_when_decided or status.claims_closed_at is not None:
        return False
    reason = REASON_DECIDED if status.all_decided else REASON_BUDGET if status.budget_spent else None
    if reason is None:
        return False
    with unit_of_work(engine) as session:
        study = study_by_name(session, status.study)
        if study.claims_closed_at is not None:
            return False
        study.claims_closed_at = now or now_utc()
        study.claims_closed_reason = reason
    return True
