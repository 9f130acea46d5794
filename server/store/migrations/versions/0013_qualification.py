"""Qualification: a study's gold items, each rater's answers to them, one outcome per rater and study

Revision ID: 0013
Revises: 0012
Create Date: 2026-12-02 21:10:49.807791

New tables only (server/store/qualification_tables.py); no existing row changes, so downgrade drops them again.
Indexes are created with plain CREATE INDEX (no batch table copy on SQLite).
"""

import sqlalchemy as sa
from alembic import op

revision = "0013"
down_revision = "0012"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "qualification_item",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("study_id", sa.Integer(), nullable=False),
        sa.Column("position", sa.Integer(), nullable=False),
        sa.Column("panels", sa.JSON(), nullable=False),
        sa.Column("accepted", sa.JSON(), nullable=False),
        sa.Column("feedback", sa.Text(), nullable=False),
        sa.CheckConstraint("position >= 0", name=op.f("ck_qualification_item_position_nonnegative")),
        sa.ForeignKeyConstraint(
            ["study_id"], ["study.id"], name=op.f("fk_qualification_item_study_id_study"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_qualification_item")),
        sa.UniqueConstraint("study_id", "id", name=op.f("uq_qualification_item_study_id_id")),
        sa.UniqueConstraint("study_id", "position", name=op.f("uq_qualification_item_study_id_position")),
    )
    op.create_table(
        "qualification_outcome",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("study_id", sa.Integer(), nullable=False),
        sa.Column("annotator_id", sa.Integer(), nullable=False),
        sa.Column(
            "status",
            sa.Enum("pending", "passed", "failed", name="qualificationstatus", native_enum=False, length=20),
            nullable=False,
        ),
        sa.Column("attempt", sa.Integer(), nullable=False),
        sa.Column("correct", sa.Integer(), nullable=False),
        sa.Column("items", sa.Integer(), nullable=False),
        sa.Column("decided_at", sa.DateTime(timezone=True), nullable=False),
        sa.CheckConstraint("status IN ('passed', 'failed')", name=op.f("ck_qualification_outcome_status_decided")),
        sa.CheckConstraint(
            "attempt >= 1 AND correct >= 0 AND correct <= items",
            name=op.f("ck_qualification_outcome_counts_consistent"),
        ),
        sa.ForeignKeyConstraint(
            ["annotator_id"],
            ["annotator.id"],
            name=op.f("fk_qualification_outcome_annotator_id_annotator"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["study_id"], ["study.id"], name=op.f("fk_qualification_outcome_study_id_study"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_qualification_outcome")),
        sa.UniqueConstraint("study_id", "annotator_id", name=op.f("uq_qualification_outcome_study_id_annotator_id")),
    )
    op.create_index(
        op.f("ix_qualification_outcome_annotator_id"), "qualification_outcome", ["annotator_id"], unique=False
    )

    op.create_table(
        "qualification_answer",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("study_id", sa.Integer(), nullable=False),
        sa.Column("item_id", sa.Integer(), nullable=False),
        sa.Column("annotator_id", sa.Integer(), nullable=False),
        sa.Column("attempt", sa.Integer(), nullable=False),
        sa.Column("answer", sa.JSON(), nullable=False),
        sa.Column("correct", sa.Boolean(), nullable=False),
        sa.Column("answered_at", sa.DateTime(timezone=True), nullable=False),
        sa.CheckConstraint("attempt >= 1", name=op.f("ck_qualification_answer_attempt_positive")),
        sa.ForeignKeyConstraint(
            ["annotator_id"],
            ["annotator.id"],
            name=op.f("fk_qualification_answer_annotator_id_annotator"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["item_id"],
            ["qualification_item.id"],
            name=op.f("fk_qualification_answer_item_id_qualification_item"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["study_id", "item_id"],
            ["qualification_item.study_id", "qualification_item.id"],
            name=op.f("fk_qualification_answer_study_id_qualification_item"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["study_id"], ["study.id"], name=op.f("fk_qualification_answer_study_id_study"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_qualification_answer")),
        sa.UniqueConstraint(
            "annotator_id", "item_id", "attempt", name=op.f("uq_qualification_answer_annotator_id_item_id_attempt")
        ),
    )
    op.create_index(op.f("ix_qualification_answer_item_id"), "qualification_answer", ["item_id"], unique=False)
    op.create_index(
        "ix_qualification_answer_study_annotator",
        "qualification_answer",
        ["study_id", "annotator_id", "attempt"],
        unique=False,
    )


def downgrade() -> None:
    op.drop_index("ix_qualification_answer_study_annotator", table_name="qualification_answer")
    op.drop_index(op.f("ix_qualification_answer_item_id"), table_name="qualification_answer")

    op.drop_table("qualification_answer")
    op.drop_index(op.f("ix_qualification_outcome_annotator_id"), table_name="qualification_outcome")

    op.drop_table("qualification_outcome")
    op.drop_table("qualification_item")
