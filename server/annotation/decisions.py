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

Per kind, a look reads the study's labels its own way: the kind's annotation part names its look
(``AnnotationKind.decision_look``; server/annotation/decision_state.py); a kind without one is refused (BadInput).
Likert (server/annotation/kinds/likert_decisions.py): the labels are the items' mean ratings on the study's scale,
per system, and the sequence is the paired one over a - b (prior variance: the scale's span squared, the largest
variance of a difference), model-assisted with a judge's scores; an actively sampled study's sequences weigh each
rated context by the inverse of the probability its draw recorded. Pairwise (A/B,
server/annotation/kinds/pairwise_decisions.py): a context's label is its net preference for A over B, the mean over
its judgments of +1 (A chosen), -1 (B chosen) and 0 (a tie), whichever side each system was shown on, and the
sequence is the one-sample one over those labels (``confidence_sequence``: their mean is A's net preference over B;
prior variance 1, the largest variance of a label in [-1, 1]); its `margin` is in net-preference units (0.1: ten
points of wins minus losses), its looks are tuned at the contexts the design has the pair judged on, and its paid
ratings are the stored judgments. Its model-assisted interval comes from a judge of differences (pairwise-http-judge)
that compared the pairs of every context of a study with a human share (design.human_share): PPI++ on the net
preferences, the judge's verdict on each pair the predictor (``JudgeInput``: which judges' output a kind takes).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

from sqlalchemy import Engine

from empeval.server.annotation.decision_state import ComparisonState, DecisionLook, JudgeInput
from empeval.server.annotation.kinds import annotation_kind, annotation_kinds
from empeval.server.errors import BadInput
from empeval.server.store.engine import unit_of_work
from empeval.server.store.queries import now_utc, study_by_name
from empeval.server.store.study_config import StudyConfig
from empeval.server.store.study_decisions import Decisions

if TYPE_CHECKING:  # types only: the app imports this module, and a server answering raters never needs pandas
    import pandas as pd

__all__ = ["REASON_BUDGET", "REASON_DECIDED", "ComparisonState", "DecisionStatus", "JudgeInput",
           "close_claims_if_decided", "decision_status", "judge_input", "model_assisted", "monitored"]

# What claims_closed_reason says.
REASON_DECIDED = "every pre-registered comparison is decided"
REASON_BUDGET = "the budget of paid ratings is spent"


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
        from empeval.analysis.stats.sequential import Decision

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
    (the judges' output the kind takes, ``judge_input``) adds the model-assisted intervals of a kind that has them;
    `judge` names the judge (a kind without them notes that it has none when one is named). BadInput for a study
    of a kind without a look (``AnnotationKind.decision_look``)."""
    with unit_of_work(engine) as session:
        study = study_by_name(session, name)
        config = study.config
        decisions = config.decisions
        if decisions is None:
            return None
        kind = _decision_look(name, config)
        found = kind.look(session, study, decisions, judge_scores if kind.model_assisted else None, judge)
        closed_at, reason = study.claims_closed_at, study.claims_closed_reason
    return DecisionStatus(study=name, decisions=decisions, comparisons=found.comparisons, paid_ratings=found.paid,
                          judge=judge if judge_scores is not None and kind.model_assisted else None,
                          claims_closed_at=closed_at, claims_closed_reason=reason, notes=found.notes)


def monitored(config: StudyConfig) -> bool:
    """Whether the decisions of a study with this configuration are computed (its kind names a look)."""
    return annotation_kind(config.kind).decision_look() is not None


def model_assisted(config: StudyConfig) -> bool:
    """Whether a judge's scores give the decisions of a study with this configuration model-assisted intervals."""
    look = annotation_kind(config.kind).decision_look()
    return look is not None and look.model_assisted


def judge_input(config: StudyConfig) -> JudgeInput | None:
    """Which judges' output gives the decisions of a study with this configuration model-assisted intervals: a
    Likert study's take judges' item scores, an A/B study's a judge of differences' verdicts; None for a kind
    without model-assisted decisions."""
    look = annotation_kind(config.kind).decision_look()
    return look.judged_by if look is not None and look.model_assisted else None


def _decision_look(name: str, config: StudyConfig) -> DecisionLook:
    look = annotation_kind(config.kind).decision_look()
    if look is None:
        kinds = " and ".join(k.name for k in annotation_kinds() if k.decision_look() is not None)
        raise BadInput(f"study {name!r} is a {config.setup.label} study; decisions are computed for {kinds} "
                       "studies")
    return look


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

