"""study log: what the researcher did to a study (a participant withdrawn), when, and what it removed

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-01 07:45:00.000000

A new table only; no existing row changes, so downgrade drops it again.
"""

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "study_log",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("study_id", sa.Integer(), nullable=False),
        sa.Column("at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("event", sa.String(length=40), nullable=False),
        sa.Column("annotator_id", sa.Integer(), nullable=True),
        sa.Column("detail", sa.JSON(), nullable=False),
        sa.ForeignKeyConstraint(["annotator_id"], ["annotator.id"], name=op.f("fk_study_log_annotator_id_annotator")),
        sa.ForeignKeyConstraint(["study_id"], ["study.id"], name=op.f("fk_study_log_study_id_study"),
                                ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_study_log")),
    )
    op.create_index(op.f("ix_study_log_study_id"), "study_log", ["study_id"], unique=False)
    op.create_index(op.f("ix_study_log_annotator_id"), "study_log", ["annotator_id"], unique=False)


def downgrade() -> None:
    op.drop_index(op.f("ix_study_log_annotator_id"), table_name="study_log")
    op.drop_index(op.f("ix_study_log_study_id"), table_name="study_log")
    op.drop_table("study_log")
