"""initial schema

Revision ID: 0001
Revises:
Create Date: 2026-11-29 17:00:27.891472
"""

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "annotator",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("provider", sa.String(length=30), nullable=False),
        sa.Column("pseudonym", sa.String(length=100), nullable=False),
        sa.Column("display_name", sa.String(length=100), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_annotator")),
        sa.UniqueConstraint("provider", "pseudonym", name=op.f("uq_annotator_provider_pseudonym")),
    )
    op.create_table(
        "dataset",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=100), nullable=False),
        sa.Column("source", sa.Text(), nullable=False),
        sa.Column("license", sa.String(length=100), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_dataset")),
        sa.UniqueConstraint("name", name=op.f("uq_dataset_name")),
    )
    op.create_table(
        "study",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=100), nullable=False),
        sa.Column("config", sa.JSON(), nullable=False),
        sa.Column("seed", sa.Integer(), nullable=False),
        sa.Column("status", sa.String(length=20), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_study")),
        sa.UniqueConstraint("name", name=op.f("uq_study_name")),
    )
    op.create_table(
        "system",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=100), nullable=False),
        sa.Column("kind", sa.String(length=50), nullable=False),
        sa.Column("version", sa.String(length=200), nullable=False),
        sa.Column("parameters", sa.JSON(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_system")),
        sa.UniqueConstraint("name", "version", name=op.f("uq_system_name_version")),
    )
    op.create_table(
        "assignment",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("study_id", sa.Integer(), nullable=False),
        sa.Column("annotator_id", sa.Integer(), nullable=True),
        sa.Column("status", sa.String(length=20), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("submitted_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("submission_id", sa.String(length=100), nullable=True),
        sa.CheckConstraint(
            "status IN ('open', 'assigned', 'submitted', 'expired')", name=op.f("ck_assignment_status_known")
        ),
        sa.ForeignKeyConstraint(["annotator_id"], ["annotator.id"], name=op.f("fk_assignment_annotator_id_annotator")),
        sa.ForeignKeyConstraint(
            ["study_id"], ["study.id"], name=op.f("fk_assignment_study_id_study"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_assignment")),
        sa.UniqueConstraint("submission_id", name=op.f("uq_assignment_submission_id")),
    )
    with op.batch_alter_table("assignment", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_assignment_annotator_id"), ["annotator_id"], unique=False)
        batch_op.create_index(batch_op.f("ix_assignment_study_id"), ["study_id"], unique=False)

    op.create_table(
        "dialogue",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("dataset_id", sa.Integer(), nullable=False),
        sa.Column("conv_id", sa.String(length=200), nullable=False),
        sa.Column("split", sa.String(length=20), nullable=False),
        sa.Column("emotion", sa.String(length=50), nullable=True),
        sa.Column("situation", sa.Text(), nullable=True),
        sa.Column("content_hash", sa.String(length=64), nullable=False),
        sa.ForeignKeyConstraint(
            ["dataset_id"], ["dataset.id"], name=op.f("fk_dialogue_dataset_id_dataset"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_dialogue")),
        sa.UniqueConstraint("dataset_id", "conv_id", name=op.f("uq_dialogue_dataset_id_conv_id")),
    )
    with op.batch_alter_table("dialogue", schema=None) as batch_op:
        batch_op.create_index("ix_dialogue_dataset_split", ["dataset_id", "split"], unique=False)

    op.create_table(
        "turn",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("dialogue_id", sa.Integer(), nullable=False),
        sa.Column("idx", sa.Integer(), nullable=False),
        sa.Column("role", sa.String(length=10), nullable=False),
        sa.Column("text", sa.Text(), nullable=False),
        sa.CheckConstraint("role IN ('speaker', 'listener')", name=op.f("ck_turn_role_known")),
        sa.CheckConstraint("idx >= 1", name=op.f("ck_turn_idx_positive")),
        sa.ForeignKeyConstraint(
            ["dialogue_id"], ["dialogue.id"], name=op.f("fk_turn_dialogue_id_dialogue"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_turn")),
        sa.UniqueConstraint("dialogue_id", "idx", name=op.f("uq_turn_dialogue_id_idx")),
    )
    op.create_table(
        "context",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("dialogue_id", sa.Integer(), nullable=False),
        sa.Column("n_turns", sa.Integer(), nullable=False),
        sa.Column("reference_turn_id", sa.Integer(), nullable=False),
        sa.CheckConstraint("n_turns >= 1", name=op.f("ck_context_n_turns_positive")),
        sa.ForeignKeyConstraint(
            ["dialogue_id"], ["dialogue.id"], name=op.f("fk_context_dialogue_id_dialogue"), ondelete="CASCADE"
        ),
        sa.ForeignKeyConstraint(
            ["reference_turn_id"], ["turn.id"], name=op.f("fk_context_reference_turn_id_turn"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_context")),
        sa.UniqueConstraint("dialogue_id", "n_turns", name=op.f("uq_context_dialogue_id_n_turns")),
        sa.UniqueConstraint("reference_turn_id", name=op.f("uq_context_reference_turn_id")),
    )
    op.create_table(
        "response",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("context_id", sa.Integer(), nullable=False),
        sa.Column("system_id", sa.Integer(), nullable=False),
        sa.Column("text", sa.Text(), nullable=False),
        sa.Column("provenance", sa.JSON(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("latency_ms", sa.Double(), nullable=True),
        sa.ForeignKeyConstraint(
            ["context_id"], ["context.id"], name=op.f("fk_response_context_id_context"), ondelete="CASCADE"
        ),
        sa.ForeignKeyConstraint(
            ["system_id"], ["system.id"], name=op.f("fk_response_system_id_system"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_response")),
        sa.UniqueConstraint("context_id", "system_id", name=op.f("uq_response_context_id_system_id")),
    )
    with op.batch_alter_table("response", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_response_system_id"), ["system_id"], unique=False)

    op.create_table(
        "study_item",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("study_id", sa.Integer(), nullable=False),
        sa.Column("response_id", sa.Integer(), nullable=False),
        sa.Column("is_control", sa.Boolean(), nullable=False),
        sa.Column("control_target", sa.String(length=32), nullable=True),
        sa.Column("design", sa.JSON(), nullable=False),
        sa.CheckConstraint(
            "NOT is_control OR control_target IS NOT NULL", name=op.f("ck_study_item_control_has_target")
        ),
        sa.ForeignKeyConstraint(
            ["response_id"], ["response.id"], name=op.f("fk_study_item_response_id_response"), ondelete="RESTRICT"
        ),
        sa.ForeignKeyConstraint(
            ["study_id"], ["study.id"], name=op.f("fk_study_item_study_id_study"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_study_item")),
        sa.UniqueConstraint("study_id", "response_id", name=op.f("uq_study_item_study_id_response_id")),
    )
    op.create_table(
        "assignment_item",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("assignment_id", sa.Integer(), nullable=False),
        sa.Column("item_id", sa.Integer(), nullable=False),
        sa.Column("position", sa.Integer(), nullable=False),
        sa.CheckConstraint("position >= 0", name=op.f("ck_assignment_item_position_nonnegative")),
        sa.ForeignKeyConstraint(
            ["assignment_id"],
            ["assignment.id"],
            name=op.f("fk_assignment_item_assignment_id_assignment"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["item_id"], ["study_item.id"], name=op.f("fk_assignment_item_item_id_study_item"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_assignment_item")),
        sa.UniqueConstraint("assignment_id", "item_id", name=op.f("uq_assignment_item_assignment_id_item_id")),
        sa.UniqueConstraint("assignment_id", "position", name=op.f("uq_assignment_item_assignment_id_position")),
    )
    with op.batch_alter_table("assignment_item", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_assignment_item_item_id"), ["item_id"], unique=False)

    op.create_table(
        "rating",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("assignment_id", sa.Integer(), nullable=False),
        sa.Column("item_id", sa.Integer(), nullable=False),
        sa.Column("annotator_id", sa.Integer(), nullable=False),
        sa.Column("criterion", sa.String(length=32), nullable=False),
        sa.Column("score", sa.Integer(), nullable=False),
        sa.Column("submitted_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("submission_id", sa.String(length=100), nullable=False),
        sa.CheckConstraint("score >= 0", name=op.f("ck_rating_score_nonnegative")),
        sa.ForeignKeyConstraint(["annotator_id"], ["annotator.id"], name=op.f("fk_rating_annotator_id_annotator")),
        sa.ForeignKeyConstraint(
            ["assignment_id"], ["assignment.id"], name=op.f("fk_rating_assignment_id_assignment"), ondelete="CASCADE"
        ),
        sa.ForeignKeyConstraint(
            ["item_id"], ["study_item.id"], name=op.f("fk_rating_item_id_study_item"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_rating")),
        sa.UniqueConstraint(
            "assignment_id", "item_id", "criterion", name=op.f("uq_rating_assignment_id_item_id_criterion")
        ),
        sa.UniqueConstraint(
            "item_id", "annotator_id", "criterion", name=op.f("uq_rating_item_id_annotator_id_criterion")
        ),
    )
    with op.batch_alter_table("rating", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_rating_annotator_id"), ["annotator_id"], unique=False)
        batch_op.create_index(batch_op.f("ix_rating_item_id"), ["item_id"], unique=False)
        batch_op.create_index(batch_op.f("ix_rating_submission_id"), ["submission_id"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("rating", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_rating_submission_id"))
        batch_op.drop_index(batch_op.f("ix_rating_item_id"))
        batch_op.drop_index(batch_op.f("ix_rating_annotator_id"))

    op.drop_table("rating")
    with op.batch_alter_table("assignment_item", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_assignment_item_item_id"))

    op.drop_table("assignment_item")
    op.drop_table("study_item")
    with op.batch_alter_table("response", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_response_system_id"))

    op.drop_table("response")
    op.drop_table("context")
    op.drop_table("turn")
    with op.batch_alter_table("dialogue", schema=None) as batch_op:
        batch_op.drop_index("ix_dialogue_dataset_split")

    op.drop_table("dialogue")
    with op.batch_alter_table("assignment", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_assignment_study_id"))
        batch_op.drop_index(batch_op.f("ix_assignment_annotator_id"))

    op.drop_table("assignment")
    op.drop_table("system")
    op.drop_table("study")
    op.drop_table("dataset")
    op.drop_table("annotator")
