"""What a look at a study's pre-registered decisions finds, shared by the kinds' looks and the status
(server/annotation/decisions.py): each comparison's interval and state, and what one kind's look returns. No kind is
named here: each kind's look lives in its own module (server/annotation/kinds/likert_decisions.py,
pairwise_decisions.py) and is found through its annotation part (`AnnotationKind.decision_look`)."""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING

from empeval.server.store.study_decisions import Comparison, Decisions

if TYPE_CHECKING:  # types only: the annotation kinds import this module, and none of them needs pandas to start
    import pandas as pd
    from sqlalchemy.orm import Session

    from empeval.analysis.stats.sequential import Decision
    from empeval.server.store.models import Study


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
class KindLook:
    """What one kind's look found: each comparison's state, the paid ratings so far, notes for the status."""

    comparisons: tuple[ComparisonState, ...]
    paid: int
    notes: tuple[str, ...] = ()


class JudgeInput(StrEnum):
    """Which judges' output a kind's model-assisted look takes: a judge's scores of single responses
    (``server.backend.judges.scores.judge_scores``: context_id, system, criterion, judge_score) or a judge of
    differences' verdicts on pairs (``server.backend.judges.pair_scores.judge_pair_scores``: criterion, context_id,
    system_a, system_b, judge_diff, error)."""

    ITEM_SCORES = "item scores"
    PAIR_DIFFERENCES = "pair differences"


@dataclass(frozen=True)
class DecisionLook:
    """A kind's part in the decisions: `look` reads its labels in the study's transaction and computes each
    comparison's state (session, study, decisions, judge output or None, the judge asked for or None);
    `model_assisted` says whether a judge's output gives it model-assisted intervals, and `judged_by` which
    judges' output that is."""

    look: Callable[[Session, Study, Decisions, pd.DataFrame | None, str | None], KindLook]
    model_assisted: bool
    judged_by: JudgeInput = JudgeInput.ITEM_SCORES


def last_interval(sequence: pd.DataFrame) -> tuple[float, float, float]:
    """(estimate, low, high) of a confidence sequence's last look; (nan, -inf, inf) before any look."""
    if not len(sequence):
        return float("nan"), float("-inf"), float("inf")
    last = sequence.iloc[-1]
    return float(last["estimate"]), float(last["low"]), float(last["high"])
