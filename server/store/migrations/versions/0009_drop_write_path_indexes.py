"""drop five indexes no query needs, each of which every submission or claim had to write

Revision ID: 0009
Revises: 0008
Create Date: 2026-12-01 20:00:00.000000

A submission inserts 30 ratings, one per (item, criterion), and every index of `rating` takes each of them.
`ix_rating_item_id` repeats the leading column of the unique key (item_id, annotator_id, criterion), which
serves every lookup by item (and the cascade from study_item) as well; and since an assignment's items lie
scattered over the study, its ten items meant about ten more B-tree pages written per submission.
`ix_rating_submission_id` is read by no query: a resubmission is recognised by the assignment's own
submission id. `choice` (A/B studies) had the same two. `ix_assignment_study_id` repeats the leading column of
the composite hand-out indexes of migration 0004, and a claim rewrote it too. benchmarks/annotation_load.py
measured about 0.6 ms less server CPU per request without them (3.4-3.8 against 2.9-3.0 ms, SQLite, alternating runs).

Indexes only: downgrade creates them again.
"""

from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None

# name -> (table, columns)
INDEXES = {
    "ix_rating_item_id": ("rating", ["item_id"]),
    "ix_rating_submission_id": ("rating", ["submission_id"]),
    "ix_choice_pair_item_id": ("choice", ["pair_item_id"]),
    "ix_choice_submission_id": ("choice", ["submission_id"]),
    "ix_assignment_study_id": ("assignment", ["study_id"]),
}


def upgrade() -> None:
    for name, (table, _columns) in INDEXES.items():
        op.drop_index(name, table_name=table)


def downgrade() -> None:
    for name, (table, columns) in INDEXES.items():
        op.create_index(name, table, columns, unique=False)
