"""one active assignment per (study, annotator), contexts seen per (study, annotator), revocations

Revision ID: 0003
Revises: 0002
Create Date: 2026-12-02 10:00:00.000000

Before the unique index can exist, stores written by earlier versions are brought in line with it:
- an annotator holding several active assignments in a study (concurrent claims from two tabs) keeps the
  first one (lowest id); every other one is expired and a copy with the same items goes back to the pool,
  exactly as hand-out does for an abandoned assignment;
- every context shown to an annotator (in an assigned, submitted or expired assignment) becomes one
  seen_context row, pointing at the first assignment that showed it.
Ratings already stored twice for an (annotator, context) pair are left as they are: the migration cannot
know which of them the researcher wants to keep.

Downgrade drops what was added; expired duplicates stay expired (their copies stay in the pool).
"""

from datetime import UTC, datetime

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None

ACTIVE_WHERE = "status = 'assigned'"

_assignment = sa.table(
    "assignment",
    sa.column("id", sa.Integer()),
    sa.column("study_id", sa.Integer()),
    sa.column("annotator_id", sa.Integer()),
    sa.column("status", sa.String()),
    sa.column("created_at", sa.DateTime(timezone=True)),
    sa.column("round", sa.Integer()),
    sa.column("design_index", sa.Integer()),
    sa.column("replaces_id", sa.Integer()),
    sa.column("late", sa.Boolean()),
)
_assignment_item = sa.table(
    "assignment_item",
    sa.column("assignment_id", sa.Integer()),
    sa.column("item_id", sa.Integer()),
    sa.column("position", sa.Integer()),
)

_BACKFILL_SEEN = """
INSERT INTO seen_context (study_id, annotator_id, context_id, assignment_id, seen_at)
SELECT a.study_id, a.annotator_id, r.context_id, MIN(a.id),
       MIN(COALESCE(a.started_at, a.submitted_at, a.created_at))
FROM assignment a
JOIN assignment_item ai ON ai.assignment_id = a.id
JOIN study_item si ON si.id = ai.item_id
JOIN response r ON r.id = si.response_id
WHERE a.annotator_id IS NOT NULL AND a.status IN ('assigned', 'submitted', 'expired')
GROUP BY a.study_id, a.annotator_id, r.context_id
"""


def _expire_extra_active_assignments(connection: sa.Connection) -> None:
    doubled = connection.execute(
        sa.select(_assignment.c.study_id, _assignment.c.annotator_id, sa.func.min(_assignment.c.id))
        .where(_assignment.c.status == "assigned")
        .group_by(_assignment.c.study_id, _assignment.c.annotator_id)
        .having(sa.func.count() > 1)
    ).all()
    now = datetime.now(UTC)
    for study_id, annotator_id, kept in doubled:
        extra = connection.execute(
            sa.select(_assignment.c.id, _assignment.c.round, _assignment.c.design_index)
            .where(_assignment.c.study_id == study_id, _assignment.c.annotator_id == annotator_id,
                   _assignment.c.status == "assigned", _assignment.c.id != kept)
            .order_by(_assignment.c.id)
        ).all()
        for old_id, round_, design_index in extra:
            connection.execute(sa.update(_assignment).where(_assignment.c.id == old_id).values(status="expired"))
            copy_id = connection.execute(
                sa.insert(_assignment).values(study_id=study_id, status="open", created_at=now, round=round_,
                                              design_index=design_index, replaces_id=old_id, late=False)
                .returning(_assignment.c.id)
            ).scalar_one()
            items = connection.execute(
                sa.select(_assignment_item.c.item_id, _assignment_item.c.position)
                .where(_assignment_item.c.assignment_id == old_id)
            ).all()
            if items:
                connection.execute(sa.insert(_assignment_item),
                                   [{"assignment_id": copy_id, "item_id": item_id, "position": position}
                                    for item_id, position in items])


def upgrade() -> None:
    op.create_table(
        "study_revocation",
        sa.Column("study_id", sa.Integer(), nullable=False),
        sa.Column("annotator_id", sa.Integer(), nullable=False),
        sa.Column("revoked_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(["annotator_id"], ["annotator.id"],
                                name=op.f("fk_study_revocation_annotator_id_annotator"), ondelete="CASCADE"),
        sa.ForeignKeyConstraint(["study_id"], ["study.id"], name=op.f("fk_study_revocation_study_id_study"),
                                ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("study_id", "annotator_id", name=op.f("pk_study_revocation")),
    )
    op.create_table(
        "seen_context",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("study_id", sa.Integer(), nullable=False),
        sa.Column("annotator_id", sa.Integer(), nullable=False),
        sa.Column("context_id", sa.Integer(), nullable=False),
        sa.Column("assignment_id", sa.Integer(), nullable=False),
        sa.Column("seen_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(["annotator_id"], ["annotator.id"],
                                name=op.f("fk_seen_context_annotator_id_annotator"), ondelete="CASCADE"),
        sa.ForeignKeyConstraint(["assignment_id"], ["assignment.id"],
                                name=op.f("fk_seen_context_assignment_id_assignment"), ondelete="CASCADE"),
        sa.ForeignKeyConstraint(["context_id"], ["context.id"], name=op.f("fk_seen_context_context_id_context"),
                                ondelete="CASCADE"),
        sa.ForeignKeyConstraint(["study_id"], ["study.id"], name=op.f("fk_seen_context_study_id_study"),
                                ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_seen_context")),
        sa.UniqueConstraint("study_id", "annotator_id", "context_id",
                            name=op.f("uq_seen_context_study_id_annotator_id_context_id")),
    )
    with op.batch_alter_table("seen_context", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_seen_context_assignment_id"), ["assignment_id"], unique=False)
        batch_op.create_index(batch_op.f("ix_seen_context_context_id"), ["context_id"], unique=False)

    with op.batch_alter_table("annotator", schema=None) as batch_op:
        batch_op.add_column(sa.Column("revoked_at", sa.DateTime(timezone=True), nullable=True))

    connection = op.get_bind()
    _expire_extra_active_assignments(connection)
    connection.execute(sa.text(_BACKFILL_SEEN))

    op.create_index("uq_assignment_active_per_annotator", "assignment", ["study_id", "annotator_id"], unique=True,
                    sqlite_where=sa.text(ACTIVE_WHERE), postgresql_where=sa.text(ACTIVE_WHERE))


def downgrade() -> None:
    op.drop_index("uq_assignment_active_per_annotator", table_name="assignment")
    # A plain ALTER TABLE ... DROP COLUMN (SQLite >= 3.35): batch mode would copy and drop the annotator table,
    # which SQLite's enforced foreign keys refuse while assignments and ratings point at it.
    op.drop_column("annotator", "revoked_at")
    with op.batch_alter_table("seen_context", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_seen_context_context_id"))
        batch_op.drop_index(batch_op.f("ix_seen_context_assignment_id"))
    op.drop_table("seen_context")
    op.drop_table("study_revocation")
