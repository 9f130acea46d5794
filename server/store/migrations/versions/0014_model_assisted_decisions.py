"""Decisions with fewer paid ratings: pairwise judge verdicts, recorded sampling probabilities, claims closed

Revision ID: 0014
Revises: 0013
Create Date: 2026-12-03 04:20:00.000000

A new table (`judge_pair_score`, server/store/model_assisted_tables.py) and three nullable columns added with plain
ALTER TABLE ... ADD COLUMN (no batch table copy on SQLite, so no row of `study` or `study_context` is rewritten):
`study_context.inclusion_probability`, `study.claims_closed_at`, `study.claims_closed_reason`. Existing rows read
NULL: a uniform sample, a study that hands out work. Downgrade drops them again.
"""

import sqlalchemy as sa
from alembic import op

revision = "0014"
down_revision = "0013"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "judge_pair_score",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("response_a_id", sa.Integer(), nullable=False),
        sa.Column("response_b_id", sa.Integer(), nullable=False),
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
        sa.CheckConstraint("(score IS NULL) <> (error IS NULL)", name=op.f("ck_judge_pair_score_score_or_error")),
        sa.CheckConstraint("response_a_id < response_b_id", name=op.f("ck_judge_pair_score_responses_ordered")),
        sa.ForeignKeyConstraint(["response_a_id"], ["response.id"],
                                name=op.f("fk_judge_pair_score_response_a_id_response"), ondelete="CASCADE"),
        sa.ForeignKeyConstraint(["response_b_id"], ["response.id"],
                                name=op.f("fk_judge_pair_score_response_b_id_response"), ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_judge_pair_score")),
        sa.UniqueConstraint("response_a_id", "response_b_id", "criterion", "judge", "judge_version",
                            name=op.f("uq_judge_pair_score_response_a_id_response_b_id_criterion_judge_judge_version")),
    )
    op.create_index("ix_judge_pair_score_judge", "judge_pair_score", ["judge", "judge_version"], unique=False)
    op.create_index(op.f("ix_judge_pair_score_response_b_id"), "judge_pair_score", ["response_b_id"], unique=False)
    op.add_column("study_context", sa.Column("inclusion_probability", sa.Double(), nullable=True))
    op.add_column("study", sa.Column("claims_closed_at", sa.DateTime(timezone=True), nullable=True))
    op.add_column("study", sa.Column("claims_closed_reason", sa.Text(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("study") as batch:
        batch.drop_column("claims_closed_reason")
        batch.drop_column("claims_closed_at")
    with op.batch_alter_table("study_context") as batch:
        batch.drop_column("inclusion_probability")
    op.drop_index(op.f("ix_judge_pair_score_response_b_id"), table_name="judge_pair_score")
    op.drop_index("ix_judge_pair_score_judge", table_name="judge_pair_score")
    op.drop_table("judge_pair_score")
