from sqlalchemy import inspect

from empeval.server.store import downgrade, make_engine, upgrade
from empeval.server.store.migrate import current_revision, head_revision
from empeval.server.store.models import Base


def test_upgrade_from_empty_creates_every_model_table_and_downgrade_removes_them(store_url):
    engine = make_engine(store_url)
    assert current_revision(engine) is None
    upgrade(engine)
    assert current_revision(engine) == head_revision()
    tables = set(inspect(engine).get_table_names())
    assert {t.name for t in Base.metadata.sorted_tables} <= tables
    downgrade(engine, "base")
    assert current_revision(engine) is None
    assert set(inspect(engine).get_table_names()) <= {"alembic_version"}
    upgrade(engine)  # and back up again: migrations are repeatable
    assert current_revision(engine) == head_revision()
    engine.dispose()


def test_migrated_schema_matches_the_models(store_url):
    """No drift between the ORM models and the migrations (what `alembic check` verifies)."""
    from alembic.autogenerate import compare_metadata
    from alembic.migration import MigrationContext

    engine = make_engine(store_url)
    upgrade(engine)
    with engine.connect() as connection:
        diff = compare_metadata(MigrationContext.configure(connection), Base.metadata)
    assert diff == []
    engine.dispose()


def test_sqlite_store_uses_wal_and_enforces_foreign_keys(sqlite_url):
    from sqlalchemy import text

    engine = make_engine(sqlite_url)
    with engine.connect() as connection:
        assert connection.execute(text("PRAGMA journal_mode")).scalar() == "wal"
        assert connection.execute(text("PRAGMA foreign_keys")).scalar() == 1
    engine.dispose()


def test_lookups_of_the_indexes_migration_0009_dropped_still_search_by_an_index(sqlite_url):
    """Migration 0009 dropped single-column indexes that a longer index begins with; the lookups they served
    (and the cascades from study, study_item and pair_item) must still be index searches, not table scans."""
    from sqlalchemy import text

    engine = make_engine(sqlite_url)
    upgrade(engine)
    with engine.connect() as connection:
        for table, column in (("rating", "item_id"), ("choice", "pair_item_id"), ("assignment", "study_id")):
            plan = " ".join(row[-1] for row in connection.execute(
                text(f"EXPLAIN QUERY PLAN SELECT id FROM {table} WHERE {column} = 1")))
            assert "USING" in plan and "INDEX" in plan and not plan.startswith("SCAN"), (table, plan)
    engine.dispose()
