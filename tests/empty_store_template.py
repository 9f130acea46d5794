"""Empty test stores brought to the newest schema by copying one the real migrations made, not by migrating again.

Hundreds of tests open an empty store (`open_store`, `upgrade(engine)`, an app on a new database). Each ran all
fifteen revisions: about 0.2 s of CPU on SQLite, more on PostgreSQL, some 4% of the suite's CPU on the 2-core machine
(py-spy over a full run, 2026-12-04). Here the first such SQLite store of a test process is migrated for real, by
`empeval.server.store.migrate.upgrade`, into a template file; every later one receives the template's pages
through SQLite's online backup API (a few milliseconds), which leaves the destination file, its permissions and
the engine's connections in place: the same store, page for page, as the migrations made.

An empty PostgreSQL database is made again as a copy of a head template database on the same server (DROP, then
CREATE DATABASE ... TEMPLATE, once the engine has let go of its connections), as the sample stores are
(tests/conftest.py, SampleTemplates).

What still migrates for real: stores that are not empty, revisions other than head, every subprocess (`empeval db
upgrade`, `serve` and the CLI as a user runs them), every test of a file whose name says it tests migrations
(test_migration*.py) or that is marked `real_migrations`, and every store when EMPEVAL_TEST_REAL_MIGRATIONS=1 is
set (the whole suite on real migrations, as before this template).
"""
from __future__ import annotations

import atexit
import os
import shutil
import sqlite3
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path

from sqlalchemy import Engine

_state: dict = {"real": False, "template": None, "real_upgrade": None}
_lock = threading.Lock()


_COUNT_OBJECTS = {
    "sqlite": "SELECT count(*) FROM sqlite_master",
    # tables, indexes, sequences and types in the public schema
    "postgresql": "SELECT (SELECT count(*) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
                  "WHERE n.nspname = 'public') + (SELECT count(*) FROM pg_type t JOIN pg_namespace n "
                  "ON n.oid = t.typnamespace WHERE n.nspname = 'public')",
}


def _is_empty(engine: Engine) -> bool:
    query = _COUNT_OBJECTS.get(engine.dialect.name)
    if query is None:
        return False
    with engine.connect() as connection:
        return connection.exec_driver_sql(query).scalar() == 0


def settle_wal(engine: Engine) -> None:
    """Move a SQLite store's whole content into its main file, nothing left in the WAL (so a file copy or the
    backup API copies all of it); PostgreSQL needs nothing."""
    if engine.dialect.name == "sqlite":
        with engine.connect() as connection:
            connection.exec_driver_sql("PRAGMA wal_checkpoint(TRUNCATE)")


def _build_template(real_upgrade: Callable[..., None]) -> Path:
    from empeval.server.store.engine import make_engine

    folder = Path(tempfile.mkdtemp(prefix="empeval-head-template-"))
    atexit.register(shutil.rmtree, folder, ignore_errors=True)
    template = folder / "head.db"
    engine = make_engine(f"sqlite:///{template}")
    try:
        real_upgrade(engine)
        settle_wal(engine)
    finally:
        engine.dispose()
    return template


def _copy_template(template: Path, engine: Engine) -> None:
    source = sqlite3.connect(f"file:{template}?mode=ro", uri=True)
    try:
        with engine.connect() as connection:
            source.backup(connection.connection.driver_connection)
    finally:
        source.close()


def install(recreate_at_head: Callable[[Engine, Callable[..., None]], None]) -> None:
    """Make `migrate.upgrade` (and so `open_store`, `ensure_schema`, `empeval db upgrade` run in-process) copy the
    head template into an empty store, unless the running test asks for real migrations. `recreate_at_head(engine,
    real_upgrade)` makes an empty PostgreSQL database a copy of its server's head template."""
    from empeval.server import store
    from empeval.server.store import migrate

    real_upgrade = _state["real_upgrade"] = migrate.upgrade

    def upgrade(engine: Engine, revision: str = "head") -> None:
        if _state["real"] or revision != "head" or not _is_empty(engine):
            real_upgrade(engine, revision)
            return
        if engine.dialect.name != "sqlite":
            recreate_at_head(engine, real_upgrade)
            return
        with _lock:
            if _state["template"] is None:
                _state["template"] = _build_template(real_upgrade)
        _copy_template(_state["template"], engine)

    upgrade.__doc__ = real_upgrade.__doc__
    migrate.upgrade = upgrade
    store.upgrade = upgrade


def real_migrations_for(item) -> None:
    """Before each test: real migrations for a migration test file or a test marked `real_migrations`."""
    _state["real"] = (os.environ.get("EMPEVAL_TEST_REAL_MIGRATIONS") == "1"
                      or item.path.name.startswith("test_migration")
                      or item.get_closest_marker("real_migrations") is not None)


def real_upgrade(engine: Engine, revision: str = "head") -> None:
    """The real `migrate.upgrade`, whatever the running test asked for."""
    _state["real_upgrade"](engine, revision)


def copied() -> bool:
    """Whether this process has made its SQLite head template (so a store was copied from it)."""
    return _state["template"] is not None
