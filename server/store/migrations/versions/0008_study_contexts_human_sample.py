"""study contexts: a Likert study's contexts, and whether people rate each (the human share's sample)

Revision ID: 0008
Revises: 0007
Create Date: 2026-12-01 10:50:00.000000

A new table only; no existing row changes, so downgrade drops it again. Studies created before this
revision have no rows (every context of theirs is rated by people; server.backend.judges.scores.human_sample
says so from their items).
"""

import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "study_context",
        sa.Column("study_id", sa.Integer(), nullable=False),
        sa.Column("context_id", sa.Integer(), nullable=False),
        sa.Column("human_rated", sa.Boolean(), nullable=False),
        sa.ForeignKeyConstraint(["context_id"], ["context.id"], name=op.f("fk_study_context_context_id_context"),
                                ondelete="RESTRICT"),
        sa.ForeignKeyConstraint(["study_id"], ["study.id"], name=op.f("fk_study_context_study_id_study"),
                                ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("study_id", "context_id", name=op.f("pk_study_context")),
    )
    op.create_index(op.f("ix_study_context_context_id"), "study_context", ["context_id"], unique=False)


def downgrade() -> None:
    op.drop_index(op.f("ix_study_context_context_id"), table_name="study_context")
    op.drop_table("study_context")
