"""The tests' head template (tests/empty_store_template.py) gives the store the real migrations make, on both
backends: the same objects with the same definitions, at the same revision."""
from __future__ import annotations

import os
import re

from sqlalchemy import Engine, text

from empeval.server.store import make_engine, open_store
from empeval.server.store.migrate import current_revision, head_revision
from tests import empty_store_template

_POSTGRES_OBJECTS = """
    SELECT 'column', table_name || '.' || column_name || ' ' || data_type || ' ' || is_nullable || ' '
           || coalesce(column_default, '')
    FROM information_schema.columns WHERE table_schema = 'public'
    UNION ALL SELECT 'index', indexdef FROM pg_indexes WHERE schemaname = 'public'
    UNION ALL SELECT 'constraint', conrelid::regclass || ' ' || pg_get_constraintdef(oid)
    FROM pg_constraint WHERE connamespace = 'public'::regnamespace
"""


def _clauses(sql: str | None) -> tuple[str, ...]:
    """A SQLite CREATE statement's clauses, sorted: Alembic's batch mode writes a rebuilt table's constraints in an
    order that differs from one real migration to the next (seen on `assignment`), so only the set is the same."""
    return tuple(sorted(part.strip() for part in re.split(r",\s*\n", sql or "")))


def _objects(engine: Engine) -> list[tuple]:
    with engine.connect() as connection:
        if engine.dialect.name == "sqlite":
            rows = [(kind, name, table, _clauses(sql)) for kind, name, table, sql
                    in connection.exec_driver_sql("SELECT type, name, tbl_name, sql FROM sqlite_master")]
        else:
            rows = connection.execute(text(_POSTGRES_OBJECTS)).all()
    return sorted(tuple(row) for row in rows)


def test_an_empty_store_from_the_template_is_the_store_the_migrations_make(store_url, request, tmp_path):
    templated = open_store(store_url)
    if templated.dialect.name == "sqlite":
        migrated = make_engine(f"sqlite:///{tmp_path / 'migrated.db'}")
    else:
        name = "migrated_" + store_url.rsplit("/", 1)[1]
        admin = make_engine(request.getfixturevalue("postgres_admin_url"), isolation_level="AUTOCOMMIT")
        with admin.connect() as connection:
            connection.execute(text(f'CREATE DATABASE "{name}"'))
        migrated = make_engine(store_url.rsplit("/", 1)[0] + f"/{name}")
    try:
        empty_store_template.real_upgrade(migrated)
        assert current_revision(templated) == current_revision(migrated) == head_revision()
        objects = _objects(migrated)
        assert len(objects) > 50 and _objects(templated) == objects
        if templated.dialect.name == "sqlite" and os.environ.get("EMPEVAL_TEST_REAL_MIGRATIONS") != "1":
            assert empty_store_template.copied()  # this store was copied, not migrated
    finally:
        templated.dispose()
        migrated.dispose()
        if migrated.dialect.name != "sqlite":
            with admin.connect() as connection:
                connection.execute(text(f'DROP DATABASE "{name}" WITH (FORCE)'))
            admin.dispose()
