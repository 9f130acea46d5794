"""composite indexes for hand-out at scale: open assignments in design order, an annotator's by status, overdue

Revision ID: 0004
Revises: 0003
Create Date: 2026-12-01 04:40:00.000000

Hand-out picks the first open assignment of a study in design order (LIMIT 1), reads an annotator's active
assignment and the active ones past their deadline; with single-column indexes each of these read every
assignment of the study. Indexes only: no row changes, so downgrade just drops them.
"""

from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None

INDEXES = {
    "ix_assignment_study_status_order": ["study_id", "status", "design_index", "id"],
    "ix_assignment_study_annotator_status": ["study_id", "annotator_id", "status"],
    "ix_assignment_study_status_expires": ["study_id", "status", "expires_at"],
}


def upgrade() -> None:
    for name, columns in INDEXES.items():
        op.create_index(name, "assignment", columns, unique=False)


def downgrade() -> None:
    for name in INDEXES:
        op.drop_index(name, table_name="assignment")
