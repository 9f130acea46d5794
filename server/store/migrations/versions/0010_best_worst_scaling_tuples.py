"""best-worst scaling studies: tuples of responses, their members, their placements with the order shown, choices

Revision ID: 0010
Revises: 0009
Create Date: 2026-12-02 13:14:23.960105

New tables only (server/store/kinds/best_worst.py); no existing row changes, so downgrade drops them again.
"""

import sqlalchemy as sa
from alembic import op

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "tuple_item",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("study_id", sa.Integer(), nullable=False),
        sa.Column("context_id", sa.Integer(), nullable=False),
        sa.Column("is_control", sa.Boolean(), nullable=False),
        sa.Column("control_target", sa.String(length=32), nullable=True),
        sa.Column("control_slot", sa.Integer(), nullable=True),
        sa.Column("design", sa.JSON(), nullable=False),
        sa.CheckConstraint(
            "(is_control AND control_target IS NOT NULL AND control_slot IS NOT NULL) OR "
            "(NOT is_control AND control_target IS NULL AND control_slot IS NULL)",
            name=op.f("ck_tuple_item_control_has_target_and_slot"),
        ),
        sa.ForeignKeyConstraint(
            ["context_id"], ["context.id"], name=op.f("fk_tuple_item_context_id_context"), ondelete="RESTRICT"
        ),
        sa.ForeignKeyConstraint(
            ["study_id"], ["study.id"], name=op.f("fk_tuple_item_study_id_study"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_tuple_item")),
        sa.UniqueConstraint("id", "context_id", name="uq_tuple_item_id_context_id"),
    )
    op.create_index(op.f("ix_tuple_item_context_id"), "tuple_item", ["context_id"], unique=False)
    op.create_index(op.f("ix_tuple_item_study_id"), "tuple_item", ["study_id"], unique=False)

    op.create_table(
        "assignment_tuple",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("assignment_id", sa.Integer(), nullable=False),
        sa.Column("tuple_item_id", sa.Integer(), nullable=False),
        sa.Column("position", sa.Integer(), nullable=False),
        sa.Column("shown_order", sa.String(length=6), nullable=False),
        sa.Column("seconds_on_item", sa.Double(), nullable=True),
        sa.CheckConstraint("length(shown_order) BETWEEN 3 AND 6", name=op.f("ck_assignment_tuple_shown_order_length")),
        sa.CheckConstraint("position >= 0", name=op.f("ck_assignment_tuple_position_nonnegative")),
        sa.ForeignKeyConstraint(
            ["assignment_id"],
            ["assignment.id"],
            name=op.f("fk_assignment_tuple_assignment_id_assignment"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["tuple_item_id"],
            ["tuple_item.id"],
            name=op.f("fk_assignment_tuple_tuple_item_id_tuple_item"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_assignment_tuple")),
        sa.UniqueConstraint("assignment_id", "position", name=op.f("uq_assignment_tuple_assignment_id_position")),
        sa.UniqueConstraint(
            "assignment_id", "tuple_item_id", name=op.f("uq_assignment_tuple_assignment_id_tuple_item_id")
        ),
    )
    op.create_index(op.f("ix_assignment_tuple_tuple_item_id"), "assignment_tuple", ["tuple_item_id"], unique=False)

    op.create_table(
        "tuple_member",
        sa.Column("tuple_item_id", sa.Integer(), nullable=False),
        sa.Column("slot", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("response_id", sa.Integer(), nullable=False),
        sa.Column("context_id", sa.Integer(), nullable=False),
        sa.CheckConstraint("slot >= 0 AND slot < 6", name=op.f("ck_tuple_member_slot_in_range")),
        sa.ForeignKeyConstraint(
            ["response_id", "context_id"],
            ["response.id", "response.context_id"],
            name=op.f("fk_tuple_member_response_id_response"),
            ondelete="RESTRICT",
        ),
        sa.ForeignKeyConstraint(
            ["tuple_item_id", "context_id"],
            ["tuple_item.id", "tuple_item.context_id"],
            name=op.f("fk_tuple_member_tuple_item_id_tuple_item"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("tuple_item_id", "slot", name=op.f("pk_tuple_member")),
        sa.UniqueConstraint("tuple_item_id", "response_id", name=op.f("uq_tuple_member_tuple_item_id_response_id")),
    )
    op.create_table(
        "best_worst_choice",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("assignment_id", sa.Integer(), nullable=False),
        sa.Column("tuple_item_id", sa.Integer(), nullable=False),
        sa.Column("annotator_id", sa.Integer(), nullable=False),
        sa.Column("criterion", sa.String(length=32), nullable=False),
        sa.Column("best_slot", sa.Integer(), nullable=False),
        sa.Column("worst_slot", sa.Integer(), nullable=False),
        sa.Column("submitted_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("submission_id", sa.String(length=100), nullable=False),
        sa.CheckConstraint("best_slot <> worst_slot", name=op.f("ck_best_worst_choice_best_is_not_worst")),
        sa.ForeignKeyConstraint(
            ["annotator_id"], ["annotator.id"], name=op.f("fk_best_worst_choice_annotator_id_annotator")
        ),
        sa.ForeignKeyConstraint(
            ["assignment_id", "tuple_item_id"],
            ["assignment_tuple.assignment_id", "assignment_tuple.tuple_item_id"],
            name=op.f("fk_best_worst_choice_assignment_id_assignment_tuple"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["assignment_id"],
            ["assignment.id"],
            name=op.f("fk_best_worst_choice_assignment_id_assignment"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["tuple_item_id", "best_slot"],
            ["tuple_member.tuple_item_id", "tuple_member.slot"],
            name="fk_best_worst_choice_best_member",
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["tuple_item_id", "worst_slot"],
            ["tuple_member.tuple_item_id", "tuple_member.slot"],
            name="fk_best_worst_choice_worst_member",
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["tuple_item_id"],
            ["tuple_item.id"],
            name=op.f("fk_best_worst_choice_tuple_item_id_tuple_item"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_best_worst_choice")),
        sa.UniqueConstraint(
            "assignment_id",
            "tuple_item_id",
            "criterion",
            name=op.f("uq_best_worst_choice_assignment_id_tuple_item_id_criterion"),
        ),
        sa.UniqueConstraint(
            "tuple_item_id",
            "annotator_id",
            "criterion",
            name=op.f("uq_best_worst_choice_tuple_item_id_annotator_id_criterion"),
        ),
    )
    op.create_index(op.f("ix_best_worst_choice_annotator_id"), "best_worst_choice", ["annotator_id"], unique=False)


def downgrade() -> None:
    op.drop_index(op.f("ix_best_worst_choice_annotator_id"), table_name="best_worst_choice")
    op.drop_table("best_worst_choice")
    op.drop_table("tuple_member")
    op.drop_index(op.f("ix_assignment_tuple_tuple_item_id"), table_name="assignment_tuple")
    op.drop_table("assignment_tuple")
    op.drop_index(op.f("ix_tuple_item_study_id"), table_name="tuple_item")
    op.drop_index(op.f("ix_tuple_item_context_id"), table_name="tuple_item")
    op.drop_table("tuple_item")
