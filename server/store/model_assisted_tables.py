"""The tables of model-assisted evaluation beyond the per-response judge scores (`judge_score`, models.py): a judge's
verdict on a pair of responses, and what the design recorded when it drew contexts for human rating.

- `judge_pair_score`: one judge's estimate of how much better response A is than response B on one criterion, for
  two responses to the same context (a pairwise judge asked "which response is more empathetic" in both orders, or
  a learned difference judge); `score` is in points of the study's scale (A's rating minus B's), so that it serves
  as the predictor of a per-context human difference in prediction-powered inference. One row per (pair, criterion,
  judge, judge version); the pair is stored in one order only (`response_a_id < response_b_id`, the writer negates
  the score when it swaps), so a pair can never carry two contradicting verdicts of one judge version. A failure is
  a row with the error and no score, as in `judge_score`.
- `study_context.inclusion_probability` (a column of server/store/kinds/likert.py's StudyContext, added by migration
  0014): the probability with which the design drew the context for human rating, recorded when it was drawn
  (active sampling, `design.sampling = "active"`), so that the estimator weights each human-rated context by its
  inverse; NULL for a fixed-size uniform sample.
- `study.claims_closed_at` / `study.claims_closed_reason` (columns of models.py's Study, migration 0014): set when a
  study stops handing out new work while its status stays open (`design.stop_when_decided`: every pre-registered
  comparison decided, or the budget spent); assignments already started can still be submitted.
"""
from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import CheckConstraint, ForeignKey, Index, String, Text, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from empeval.server.store.models import Base, utcnow


class JudgePairScore(Base):
    """One judge's verdict on one pair of responses to the same context on one criterion: `score` is its estimate of
    A's rating minus B's in points of the study's scale (response_a_id < response_b_id), with the provenance a
    `judge_score` row has (judge name, kind, version, prompt hash, raw output of each order asked, latency)."""

    __tablename__ = "judge_pair_score"
    __table_args__ = (
        UniqueConstraint("response_a_id", "response_b_id", "criterion", "judge", "judge_version"),
        CheckConstraint("(score IS NULL) <> (error IS NULL)", name="score_or_error"),
        CheckConstraint("response_a_id < response_b_id", name="responses_ordered"),
        Index("ix_judge_pair_score_judge", "judge", "judge_version"),
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    response_a_id: Mapped[int] = mapped_column(ForeignKey("response.id", ondelete="CASCADE"))
    response_b_id: Mapped[int] = mapped_column(ForeignKey("response.id", ondelete="CASCADE"), index=True)
    criterion: Mapped[str] = mapped_column(String(32))
    judge: Mapped[str] = mapped_column(String(100))
    judge_kind: Mapped[str] = mapped_column(String(50))
    judge_version: Mapped[str] = mapped_column(String(200))
    prompt_hash: Mapped[str] = mapped_column(String(64))
    score: Mapped[float | None]
    raw_output: Mapped[str | None] = mapped_column(Text)
    latency_ms: Mapped[float | None]
    error: Mapped[str | None] = mapped_column(Text)
    details: Mapped[dict[str, Any]] = mapped_column(default=dict)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
