"""assignment design metadata: round, hand-out order, expiry copies, late flag, comment, time per item; app settings

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-29 17:05:26.524399
"""

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "app_setting",
        sa.Column("key", sa.String(length=100), nullable=False),
        sa.Column("value", sa.Text(), nullable=False),
        sa.PrimaryKeyConstraint("key", name=op.f("pk_app_setting")),
    )
    with op.batch_alter_table("assignment", schema=None) as batch_op:
        batch_op.add_column(sa.Column("round", sa.Integer(), nullable=False, server_default="0"))
        batch_op.add_column(sa.Column("design_index", sa.Integer(), nullable=False, server_default="0"))
        batch_op.add_column(sa.Column("replaces_id", sa.Integer(), nullable=True))
        batch_op.add_column(sa.Column("late", sa.Boolean(), nullable=False, server_default=sa.false()))
        batch_op.add_column(sa.Column("comment", sa.Text(), nullable=True))
        batch_op.create_foreign_key(
            batch_op.f("fk_assignment_replaces_id_assignment"), "assignment", ["replaces_id"], ["id"]
        )

    with op.batch_alter_table("assignment_item", schema=None) as batch_op:
        batch_op.add_column(sa.Column("seconds_on_item", sa.Double(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("assignment_item", schema=None) as batch_op:
        batch_op.drop_column("seconds_on_item")

    with op.batch_alter_table("assignment", schema=None) as batch_op:
        batch_op.drop_constraint(batch_op.f("fk_assignment_replaces_id_assignment"), type_="foreignkey")
        batch_op.drop_column("comment")
        batch_op.drop_column("late")
        batch_op.drop_column("replaces_id")
        batch_op.drop_column("design_index")
        batch_op.drop_column("round")

    op.drop_table("app_setting")
