"""chat studies: conversations, their placements, turns, turn annotations, ratings

Revision ID: 0011
Revises: 0010
Create Date: 2026-12-02 18:10:37.717512

New tables only (server/store/kinds/chat.py); no existing row changes, so downgrade drops them again. Indexes are
created with plain CREATE INDEX (no batch table copy on SQLite).
"""

import sqlalchemy as sa
from alembic import op

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "chat_conversation",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("study_id", sa.Integer(), nullable=False),
        sa.Column("context_id", sa.Integer(), nullable=False),
        sa.Column("system", sa.String(length=100), nullable=False),
        sa.Column("is_control", sa.Boolean(), nullable=False),
        sa.Column("control_target", sa.String(length=32), nullable=True),
        sa.Column("design", sa.JSON(), nullable=False),
        sa.CheckConstraint(
            "(is_control AND control_target IS NOT NULL) OR (NOT is_control AND control_target IS NULL)",
            name=op.f("ck_chat_conversation_control_has_target"),
        ),
        sa.ForeignKeyConstraint(
            ["context_id"], ["context.id"], name=op.f("fk_chat_conversation_context_id_context"), ondelete="RESTRICT"
        ),
        sa.ForeignKeyConstraint(
            ["study_id"], ["study.id"], name=op.f("fk_chat_conversation_study_id_study"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_chat_conversation")),
        sa.UniqueConstraint(
            "study_id", "context_id", "system", name=op.f("uq_chat_conversation_study_id_context_id_system")
        ),
    )
    op.create_index(op.f("ix_chat_conversation_context_id"), "chat_conversation", ["context_id"], unique=False)
    op.create_index(op.f("ix_chat_conversation_study_id"), "chat_conversation", ["study_id"], unique=False)

    op.create_table(
        "assignment_conversation",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("assignment_id", sa.Integer(), nullable=False),
        sa.Column("conversation_id", sa.Integer(), nullable=False),
        sa.Column("position", sa.Integer(), nullable=False),
        sa.Column("seconds_on_item", sa.Double(), nullable=True),
        sa.Column("ended_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("failed", sa.Boolean(), nullable=False),
        sa.Column("failure", sa.Text(), nullable=True),
        sa.CheckConstraint(
            "NOT (failed AND ended_at IS NOT NULL)", name=op.f("ck_assignment_conversation_failed_or_ended")
        ),
        sa.CheckConstraint("position >= 0", name=op.f("ck_assignment_conversation_position_nonnegative")),
        sa.ForeignKeyConstraint(
            ["assignment_id"],
            ["assignment.id"],
            name=op.f("fk_assignment_conversation_assignment_id_assignment"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["conversation_id"],
            ["chat_conversation.id"],
            name=op.f("fk_assignment_conversation_conversation_id_chat_conversation"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_assignment_conversation")),
        sa.UniqueConstraint(
            "assignment_id", "conversation_id", name=op.f("uq_assignment_conversation_assignment_id_conversation_id")
        ),
        sa.UniqueConstraint(
            "assignment_id", "position", name=op.f("uq_assignment_conversation_assignment_id_position")
        ),
    )
    op.create_index(
        op.f("ix_assignment_conversation_conversation_id"), "assignment_conversation", ["conversation_id"], unique=False
    )

    op.create_table(
        "chat_rating",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("assignment_id", sa.Integer(), nullable=False),
        sa.Column("conversation_id", sa.Integer(), nullable=False),
        sa.Column("annotator_id", sa.Integer(), nullable=False),
        sa.Column("criterion", sa.String(length=32), nullable=False),
        sa.Column("score", sa.Integer(), nullable=False),
        sa.Column("submitted_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("submission_id", sa.String(length=100), nullable=False),
        sa.CheckConstraint("score >= 1", name=op.f("ck_chat_rating_score_positive")),
        sa.ForeignKeyConstraint(["annotator_id"], ["annotator.id"], name=op.f("fk_chat_rating_annotator_id_annotator")),
        sa.ForeignKeyConstraint(
            ["assignment_id", "conversation_id"],
            ["assignment_conversation.assignment_id", "assignment_conversation.conversation_id"],
            name=op.f("fk_chat_rating_assignment_id_assignment_conversation"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["assignment_id"],
            ["assignment.id"],
            name=op.f("fk_chat_rating_assignment_id_assignment"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["conversation_id"],
            ["chat_conversation.id"],
            name=op.f("fk_chat_rating_conversation_id_chat_conversation"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_chat_rating")),
        sa.UniqueConstraint(
            "assignment_id",
            "conversation_id",
            "criterion",
            name=op.f("uq_chat_rating_assignment_id_conversation_id_criterion"),
        ),
        sa.UniqueConstraint(
            "conversation_id",
            "annotator_id",
            "criterion",
            name=op.f("uq_chat_rating_conversation_id_annotator_id_criterion"),
        ),
    )
    op.create_index(op.f("ix_chat_rating_annotator_id"), "chat_rating", ["annotator_id"], unique=False)

    op.create_table(
        "chat_turn",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("assignment_id", sa.Integer(), nullable=False),
        sa.Column("conversation_id", sa.Integer(), nullable=False),
        sa.Column("idx", sa.Integer(), nullable=False),
        sa.Column("speaker", sa.String(length=6), nullable=False),
        sa.Column("text", sa.Text(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("system", sa.String(length=100), nullable=True),
        sa.Column("version", sa.String(length=200), nullable=True),
        sa.Column("parameters", sa.JSON(), nullable=True),
        sa.Column("latency_ms", sa.Float(), nullable=True),
        sa.Column("context_sent", sa.JSON(), nullable=True),
        sa.CheckConstraint(
            "(speaker = 'rater' AND idx % 2 = 0) OR (speaker = 'system' AND idx % 2 = 1)",
            name=op.f("ck_chat_turn_speakers_alternate"),
        ),
        sa.CheckConstraint(
            "speaker = 'rater' OR (system IS NOT NULL AND version IS NOT NULL)",
            name=op.f("ck_chat_turn_system_turn_has_provenance"),
        ),
        sa.CheckConstraint("idx >= 0", name=op.f("ck_chat_turn_idx_nonnegative")),
        sa.ForeignKeyConstraint(
            ["assignment_id", "conversation_id"],
            ["assignment_conversation.assignment_id", "assignment_conversation.conversation_id"],
            name=op.f("fk_chat_turn_assignment_id_assignment_conversation"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["assignment_id"], ["assignment.id"], name=op.f("fk_chat_turn_assignment_id_assignment"), ondelete="CASCADE"
        ),
        sa.ForeignKeyConstraint(
            ["conversation_id"],
            ["chat_conversation.id"],
            name=op.f("fk_chat_turn_conversation_id_chat_conversation"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_chat_turn")),
        sa.UniqueConstraint(
            "assignment_id", "conversation_id", "idx", name=op.f("uq_chat_turn_assignment_id_conversation_id_idx")
        ),
    )
    op.create_index(op.f("ix_chat_turn_conversation_id"), "chat_turn", ["conversation_id"], unique=False)

    op.create_table(
        "chat_turn_annotation",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("assignment_id", sa.Integer(), nullable=False),
        sa.Column("conversation_id", sa.Integer(), nullable=False),
        sa.Column("idx", sa.Integer(), nullable=False),
        sa.Column("annotator_id", sa.Integer(), nullable=False),
        sa.Column("question", sa.String(length=32), nullable=False),
        sa.Column("submitted_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("submission_id", sa.String(length=100), nullable=False),
        sa.CheckConstraint("idx % 2 = 1", name=op.f("ck_chat_turn_annotation_system_turns_only")),
        sa.ForeignKeyConstraint(
            ["annotator_id"], ["annotator.id"], name=op.f("fk_chat_turn_annotation_annotator_id_annotator")
        ),
        sa.ForeignKeyConstraint(
            ["assignment_id", "conversation_id", "idx"],
            ["chat_turn.assignment_id", "chat_turn.conversation_id", "chat_turn.idx"],
            name=op.f("fk_chat_turn_annotation_assignment_id_chat_turn"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["assignment_id"],
            ["assignment.id"],
            name=op.f("fk_chat_turn_annotation_assignment_id_assignment"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["conversation_id"],
            ["chat_conversation.id"],
            name=op.f("fk_chat_turn_annotation_conversation_id_chat_conversation"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_chat_turn_annotation")),
        sa.UniqueConstraint(
            "assignment_id",
            "conversation_id",
            "idx",
            "question",
            name=op.f("uq_chat_turn_annotation_assignment_id_conversation_id_idx_question"),
        ),
    )
    op.create_index(
        op.f("ix_chat_turn_annotation_annotator_id"), "chat_turn_annotation", ["annotator_id"], unique=False
    )


def downgrade() -> None:
    op.drop_index(op.f("ix_chat_turn_annotation_annotator_id"), table_name="chat_turn_annotation")

    op.drop_table("chat_turn_annotation")
    op.drop_index(op.f("ix_chat_turn_conversation_id"), table_name="chat_turn")

    op.drop_table("chat_turn")
    op.drop_index(op.f("ix_chat_rating_annotator_id"), table_name="chat_rating")

    op.drop_table("chat_rating")
    op.drop_index(op.f("ix_assignment_conversation_conversation_id"), table_name="assignment_conversation")

    op.drop_table("assignment_conversation")
    op.drop_index(op.f("ix_chat_conversation_study_id"), table_name="chat_conversation")
    op.drop_index(op.f("ix_chat_conversation_context_id"), table_name="chat_conversation")

    op.drop_table("chat_conversation")
