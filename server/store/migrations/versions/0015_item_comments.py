"""Per-item comments: what a rater wrote under one item of an assignment

Revision ID: 0015
Revises: 0014
Create Date: 2026-12-03 05:00:00.000000

A new table (`item_comment`, server/store/item_comment_tables.py), one row per (assignment, item), deleted with its
assignment. No existing row is touched; a study without `design.item_comments` has no rows in it. Downgrade drops
it again.
"""

import sqlalchemy as sa
from alembic import op

revision = "0015"
down_revision = "0014"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "item_comment",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("assignment_id", sa.Integer(), nullable=False),
        sa.Column("item_id", sa.Integer(), nullable=False),
        sa.Column("comment", sa.Text(), nullable=False),
        sa.Column("submitted_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(["assignment_id"], ["assignment.id"],
                                name=op.f("fk_item_comment_assignment_id_assignment"), ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_item_comment")),
        sa.UniqueConstraint("assignment_id", "item_id", name=op.f("uq_item_comment_assignment_id_item_id")),
    )


def downgrade() -> None:
    op.drop_table("item_comment")
