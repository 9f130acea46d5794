"""pairwise (A/B) studies: pair items, their placements with the side shown on the left, choices

Revision ID: 0005
Revises: 0004
Create Date: 2026-12-01 04:45:00.000000

New tables only, and one unique index on response (id, context_id) that the pair items' composite foreign keys
need; no existing row changes, so downgrade drops them again.
"""

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # The composite foreign keys of pair_item point at (response.id, response.context_id): unique first.
    op.create_index("uq_response_id_context_id", "response", ["id", "context_id"], unique=True)
    op.create_table(
        "pair_item",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("study_id", sa.Integer(), nullable=False),
        sa.Column("context_id", sa.Integer(), nullable=False),
        sa.Column("response_a_id", sa.Integer(), nullable=False),
        sa.Column("response_b_id", sa.Integer(), nullable=False),
        sa.Column("is_control", sa.Boolean(), nullable=False),
        sa.Column("control_target", sa.String(length=32), nullable=True),
        sa.Column("control_side", sa.String(length=1), nullable=True),
        sa.Column("design", sa.JSON(), nullable=False),
        sa.CheckConstraint("control_side IN ('a', 'b')", name=op.f("ck_pair_item_control_side_known")),
        sa.CheckConstraint(
            "(is_control AND control_target IS NOT NULL AND control_side IS NOT NULL) OR "
            "(NOT is_control AND control_target IS NULL AND control_side IS NULL)",
            name=op.f("ck_pair_item_control_has_target_and_side"),
        ),
        sa.CheckConstraint("response_a_id < response_b_id", name=op.f("ck_pair_item_responses_ordered")),
        sa.ForeignKeyConstraint(
            ["context_id"], ["context.id"], name=op.f("fk_pair_item_context_id_context"), ondelete="RESTRICT"
        ),
        sa.ForeignKeyConstraint(
            ["response_a_id", "context_id"],
            ["response.id", "response.context_id"],
            name=op.f("fk_pair_item_response_a_id_response"),
            ondelete="RESTRICT",
        ),
        sa.ForeignKeyConstraint(
            ["response_b_id", "context_id"],
            ["response.id", "response.context_id"],
            name=op.f("fk_pair_item_response_b_id_response"),
            ondelete="RESTRICT",
        ),
        sa.ForeignKeyConstraint(
            ["study_id"], ["study.id"], name=op.f("fk_pair_item_study_id_study"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_pair_item")),
        sa.UniqueConstraint(
            "study_id", "response_a_id", "response_b_id", name=op.f("uq_pair_item_study_id_response_a_id_response_b_id")
        ),
    )
    op.create_index(op.f("ix_pair_item_context_id"), "pair_item", ["context_id"], unique=False)
    op.create_index(op.f("ix_pair_item_study_id"), "pair_item", ["study_id"], unique=False)
    op.create_table(
        "assignment_pair",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("assignment_id", sa.Integer(), nullable=False),
        sa.Column("pair_item_id", sa.Integer(), nullable=False),
        sa.Column("position", sa.Integer(), nullable=False),
        sa.Column("shown_left", sa.String(length=1), nullable=False),
        sa.Column("seconds_on_item", sa.Double(), nullable=True),
        sa.CheckConstraint("shown_left IN ('a', 'b')", name=op.f("ck_assignment_pair_shown_left_known")),
        sa.CheckConstraint("position >= 0", name=op.f("ck_assignment_pair_position_nonnegative")),
        sa.ForeignKeyConstraint(
            ["assignment_id"],
            ["assignment.id"],
            name=op.f("fk_assignment_pair_assignment_id_assignment"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["pair_item_id"],
            ["pair_item.id"],
            name=op.f("fk_assignment_pair_pair_item_id_pair_item"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_assignment_pair")),
        sa.UniqueConstraint(
            "assignment_id", "pair_item_id", name=op.f("uq_assignment_pair_assignment_id_pair_item_id")
        ),
        sa.UniqueConstraint("assignment_id", "position", name=op.f("uq_assignment_pair_assignment_id_position")),
    )
    op.create_index(op.f("ix_assignment_pair_pair_item_id"), "assignment_pair", ["pair_item_id"], unique=False)
    op.create_table(
        "choice",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("assignment_id", sa.Integer(), nullable=False),
        sa.Column("pair_item_id", sa.Integer(), nullable=False),
        sa.Column("annotator_id", sa.Integer(), nullable=False),
        sa.Column("criterion", sa.String(length=32), nullable=False),
        sa.Column("choice", sa.String(length=5), nullable=False),
        sa.Column("submitted_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("submission_id", sa.String(length=100), nullable=False),
        sa.CheckConstraint("choice IN ('left', 'right', 'tie')", name=op.f("ck_choice_choice_known")),
        sa.ForeignKeyConstraint(["annotator_id"], ["annotator.id"], name=op.f("fk_choice_annotator_id_annotator")),
        sa.ForeignKeyConstraint(
            ["assignment_id", "pair_item_id"],
            ["assignment_pair.assignment_id", "assignment_pair.pair_item_id"],
            name=op.f("fk_choice_assignment_id_assignment_pair"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["assignment_id"], ["assignment.id"], name=op.f("fk_choice_assignment_id_assignment"), ondelete="CASCADE"
        ),
        sa.ForeignKeyConstraint(
            ["pair_item_id"], ["pair_item.id"], name=op.f("fk_choice_pair_item_id_pair_item"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_choice")),
        sa.UniqueConstraint(
            "assignment_id", "pair_item_id", "criterion", name=op.f("uq_choice_assignment_id_pair_item_id_criterion")
        ),
        sa.UniqueConstraint(
            "pair_item_id", "annotator_id", "criterion", name=op.f("uq_choice_pair_item_id_annotator_id_criterion")
        ),
    )
    op.create_index(op.f("ix_choice_annotator_id"), "choice", ["annotator_id"], unique=False)
    op.create_index(op.f("ix_choice_pair_item_id"), "choice", ["pair_item_id"], unique=False)
    op.create_index(op.f("ix_choice_submission_id"), "choice", ["submission_id"], unique=False)


def downgrade() -> None:
    op.drop_table("choice")
    op.drop_table("assignment_pair")
    op.drop_table("pair_item")
    op.drop_index("uq_response_id_context_id", table_name="response")
