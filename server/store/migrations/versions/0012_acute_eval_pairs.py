"""ACUTE-Eval studies: pairs of conversations, their placements, choices with justifications

Revision ID: 0012
Revises: 0011
Create Date: 2026-12-02 18:45:22.942429

New tables only (server/store/kinds/acute.py); no existing row changes, so downgrade drops them again. Indexes are
created with plain CREATE INDEX (no batch table copy on SQLite).
"""

import sqlalchemy as sa
from alembic import op

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "acute_pair",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("study_id", sa.Integer(), nullable=False),
        sa.Column("conversation_a_id", sa.Integer(), nullable=False),
        sa.Column("conversation_b_id", sa.Integer(), nullable=False),
        sa.Column("context_a_id", sa.Integer(), nullable=False),
        sa.Column("context_b_id", sa.Integer(), nullable=False),
        sa.Column("is_control", sa.Boolean(), nullable=False),
        sa.Column("control_target", sa.String(length=32), nullable=True),
        sa.Column("control_side", sa.String(length=1), nullable=True),
        sa.Column("design", sa.JSON(), nullable=False),
        sa.CheckConstraint("control_side IN ('a', 'b')", name=op.f("ck_acute_pair_control_side_known")),
        sa.CheckConstraint(
            "(is_control AND control_target IS NOT NULL AND control_side IS NOT NULL) OR "
            "(NOT is_control AND control_target IS NULL AND control_side IS NULL)",
            name=op.f("ck_acute_pair_control_has_target_and_side"),
        ),
        sa.CheckConstraint("conversation_a_id < conversation_b_id", name=op.f("ck_acute_pair_conversations_ordered")),
        sa.ForeignKeyConstraint(
            ["context_a_id"], ["context.id"], name=op.f("fk_acute_pair_context_a_id_context"), ondelete="RESTRICT"
        ),
        sa.ForeignKeyConstraint(
            ["context_b_id"], ["context.id"], name=op.f("fk_acute_pair_context_b_id_context"), ondelete="RESTRICT"
        ),
        sa.ForeignKeyConstraint(
            ["conversation_a_id"],
            ["assignment_conversation.id"],
            name=op.f("fk_acute_pair_conversation_a_id_assignment_conversation"),
            ondelete="RESTRICT",
        ),
        sa.ForeignKeyConstraint(
            ["conversation_b_id"],
            ["assignment_conversation.id"],
            name=op.f("fk_acute_pair_conversation_b_id_assignment_conversation"),
            ondelete="RESTRICT",
        ),
        sa.ForeignKeyConstraint(
            ["study_id"], ["study.id"], name=op.f("fk_acute_pair_study_id_study"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_acute_pair")),
        sa.UniqueConstraint(
            "study_id",
            "conversation_a_id",
            "conversation_b_id",
            name=op.f("uq_acute_pair_study_id_conversation_a_id_conversation_b_id"),
        ),
    )
    op.create_index(op.f("ix_acute_pair_conversation_a_id"), "acute_pair", ["conversation_a_id"], unique=False)
    op.create_index(op.f("ix_acute_pair_conversation_b_id"), "acute_pair", ["conversation_b_id"], unique=False)
    op.create_index(op.f("ix_acute_pair_study_id"), "acute_pair", ["study_id"], unique=False)

    op.create_table(
        "assignment_acute_pair",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("assignment_id", sa.Integer(), nullable=False),
        sa.Column("acute_pair_id", sa.Integer(), nullable=False),
        sa.Column("position", sa.Integer(), nullable=False),
        sa.Column("shown_left", sa.String(length=1), nullable=False),
        sa.Column("seconds_on_item", sa.Double(), nullable=True),
        sa.CheckConstraint("shown_left IN ('a', 'b')", name=op.f("ck_assignment_acute_pair_shown_left_known")),
        sa.CheckConstraint("position >= 0", name=op.f("ck_assignment_acute_pair_position_nonnegative")),
        sa.ForeignKeyConstraint(
            ["acute_pair_id"],
            ["acute_pair.id"],
            name=op.f("fk_assignment_acute_pair_acute_pair_id_acute_pair"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["assignment_id"],
            ["assignment.id"],
            name=op.f("fk_assignment_acute_pair_assignment_id_assignment"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_assignment_acute_pair")),
        sa.UniqueConstraint(
            "assignment_id", "acute_pair_id", name=op.f("uq_assignment_acute_pair_assignment_id_acute_pair_id")
        ),
        sa.UniqueConstraint("assignment_id", "position", name=op.f("uq_assignment_acute_pair_assignment_id_position")),
    )
    op.create_index(
        op.f("ix_assignment_acute_pair_acute_pair_id"), "assignment_acute_pair", ["acute_pair_id"], unique=False
    )

    op.create_table(
        "acute_choice",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("assignment_id", sa.Integer(), nullable=False),
        sa.Column("acute_pair_id", sa.Integer(), nullable=False),
        sa.Column("annotator_id", sa.Integer(), nullable=False),
        sa.Column("criterion", sa.String(length=32), nullable=False),
        sa.Column("choice", sa.String(length=5), nullable=False),
        sa.Column("justification", sa.Text(), nullable=False),
        sa.Column("submitted_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("submission_id", sa.String(length=100), nullable=False),
        sa.CheckConstraint("choice IN ('left', 'right')", name=op.f("ck_acute_choice_choice_known")),
        sa.CheckConstraint("length(justification) > 0", name=op.f("ck_acute_choice_justification_given")),
        sa.ForeignKeyConstraint(
            ["acute_pair_id"],
            ["acute_pair.id"],
            name=op.f("fk_acute_choice_acute_pair_id_acute_pair"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["annotator_id"], ["annotator.id"], name=op.f("fk_acute_choice_annotator_id_annotator")
        ),
        sa.ForeignKeyConstraint(
            ["assignment_id", "acute_pair_id"],
            ["assignment_acute_pair.assignment_id", "assignment_acute_pair.acute_pair_id"],
            name=op.f("fk_acute_choice_assignment_id_assignment_acute_pair"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["assignment_id"],
            ["assignment.id"],
            name=op.f("fk_acute_choice_assignment_id_assignment"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_acute_choice")),
        sa.UniqueConstraint(
            "acute_pair_id",
            "annotator_id",
            "criterion",
            name=op.f("uq_acute_choice_acute_pair_id_annotator_id_criterion"),
        ),
        sa.UniqueConstraint(
            "assignment_id",
            "acute_pair_id",
            "criterion",
            name=op.f("uq_acute_choice_assignment_id_acute_pair_id_criterion"),
        ),
    )
    op.create_index(op.f("ix_acute_choice_annotator_id"), "acute_choice", ["annotator_id"], unique=False)


def downgrade() -> None:
    op.drop_index(op.f("ix_acute_choice_annotator_id"), table_name="acute_choice")

    op.drop_table("acute_choice")
    op.drop_index(op.f("ix_assignment_acute_pair_acute_pair_id"), table_name="assignment_acute_pair")

    op.drop_table("assignment_acute_pair")
    op.drop_index(op.f("ix_acute_pair_study_id"), table_name="acute_pair")
    op.drop_index(op.f("ix_acute_pair_conversation_b_id"), table_name="acute_pair")
    op.drop_index(op.f("ix_acute_pair_conversation_a_id"), table_name="acute_pair")

    op.drop_table("acute_pair")
