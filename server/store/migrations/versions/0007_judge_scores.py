"""judge scores: one automatic judge's score of one response on one criterion, with provenance

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-01 08:40:00.000000

A new table only; no existing row changes, so downgrade drops it again. A failure is a row with no score and
the error (never a score), so a re-run of `empeval judge` retries the failures only.
"""

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "judge_score",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("response_id", sa.Integer(), nullable=False),
        sa.Column("criterion", sa.String(length=32), nullable=False),
        sa.Column("judge", sa.String(length=100), nullable=False),
        sa.Column("judge_kind", sa.String(length=50), nullable=False),
        sa.Column("judge_version", sa.String(length=200), nullable=False),
        sa.Column("prompt_hash", sa.String(length=64), nullable=False),
        sa.Column("score", sa.Double(), nullable=True),
        sa.Column("raw_output", sa.Text(), nullable=True),
        sa.Column("latency_ms", sa.Double(), nullable=True),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("details", sa.JSON(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.CheckConstraint("(score IS NULL) <> (error IS NULL)", name=op.f("ck_judge_score_score_or_error")),
        sa.ForeignKeyConstraint(["response_id"], ["response.id"], name=op.f("fk_judge_score_response_id_response"),
                                ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_judge_score")),
        sa.UniqueConstraint("response_id", "criterion", "judge", "judge_version",
                            name=op.f("uq_judge_score_response_id_criterion_judge_judge_version")),
    )
    op.create_index(op.f("ix_judge_score_judge"), "judge_score", ["judge", "judge_version"], unique=False)


def downgrade() -> None:
    op.drop_index(op.f("ix_judge_score_judge"), table_name="judge_score")
    op.drop_table("judge_score")
