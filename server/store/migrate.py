"""Alembic, driven from Python: `empeval db upgrade` and every command that needs the schema call here.

Each revision is applied whole or not at all, on SQLite as on PostgreSQL (migrations/env.py, and
engine.migration_connection): a process killed mid-upgrade leaves the store at the last revision it committed.
Versions of empeval before that applied SQLite's DDL statement by statement, so a store they were upgrading when
killed may say it is at one revision while holding part of the next; an upgrade that then fails is explained by
`HalfAppliedRevision` (what is there that should not be, what is missing, what to do) instead of a traceback.
"""
from __future__ import annotations

import ast
import functools
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from sqlalchemy import Connection, Engine, inspect, text
from sqlalchemy.exc import DBAPIError

from empeval.server.errors import BadInput, Conflict
from empeval.server.store.engine import make_engine

if TYPE_CHECKING:
    from alembic.config import Config

# Alembic (with mako and pygments, which it imports) is loaded only when a migration runs: the check every app and
# every command make, "is this store at the newest revision?" (ensure_schema), reads the version table and the
# revision files without it. That check is the whole of what most processes ever ask of migrations, and alembic
# cost each of them about 0.1 s of CPU at start (2026-12-04).
MIGRATIONS_DIR = Path(__file__).with_name("migrations")
VERSIONS_DIR = MIGRATIONS_DIR / "versions"
VERSION_TABLE = "alembic_version"


class HalfAppliedRevision(Conflict):
    """The store says it is at one revision but holds part of the next: an upgrade by an older empeval was
    interrupted. The message names what differs and what to do."""


def alembic_config(engine: Engine) -> Config:
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    # Hand the live engine to env.py, so SQLite pragmas and in-memory test databases just work.
    config.attributes["engine"] = engine
    return config


def upgrade(engine: Engine, revision: str = "head") -> None:
    """Apply the revisions up to `revision`, each in its own transaction. BadInput for a revision that does not
    exist; HalfAppliedRevision when the upgrade fails on a SQLite store left half-way by an older empeval."""
    from alembic import command
    from alembic.util import CommandError

    try:
        command.upgrade(alembic_config(engine), revision)
    except CommandError as error:
        raise BadInput(f"cannot upgrade to {revision!r}: {error}") from None
    except DBAPIError:
        if (half := half_applied(engine)) is not None:
            raise half from None
        raise


def downgrade(engine: Engine, revision: str = "base") -> None:
    from alembic import command
    from alembic.util import CommandError

    try:
        command.downgrade(alembic_config(engine), revision)
    except CommandError as error:
        raise BadInput(f"cannot downgrade to {revision!r}: {error}") from None


def current_revision(engine: Engine) -> str | None:
    """The revision the store records (None: an empty store, without the version table)."""
    with engine.connect() as connection:
        return _recorded_revision(connection)


def _recorded_revision(connection: Connection) -> str | None:
    """What alembic's MigrationContext.get_current_revision answers, read with one query: the version table's one
    row, None when the table is absent or empty. Our migrations are one line (no branches), so a store holds at
    most one row; more than one is a store this code did not make, and is refused as alembic refuses it."""
    if not inspect(connection).has_table(VERSION_TABLE):
        return None
    rows = connection.execute(text(f"SELECT version_num FROM {VERSION_TABLE}")).scalars().all()
    if len(rows) > 1:
        raise Conflict(f"the store records {len(rows)} revisions ({', '.join(sorted(rows))}) in {VERSION_TABLE}; "
                       "empeval's migrations are a single line, so this store was changed by other tools")
    return rows[0] if rows else None


@functools.cache
def revision_chain() -> tuple[str, ...]:
    """The revisions shipped with this code, oldest first, read once per process from the `revision` and
    `down_revision` assignments of migrations/versions/*.py (parsed, not run: alembic's ScriptDirectory runs every
    script, which needs alembic itself loaded). tests/store/test_migrate_revisions.py holds this to alembic's own
    reading."""
    follows: dict[str | None, str] = {}
    for path in sorted(VERSIONS_DIR.glob("*.py")):
        assigned = {target.id: node.value
                    for node in ast.parse(path.read_text(encoding="utf-8")).body if isinstance(node, ast.Assign)
                    for target in node.targets if isinstance(target, ast.Name)}
        if "revision" not in assigned:
            continue
        down_node = assigned.get("down_revision")
        revision = ast.literal_eval(assigned["revision"])
        down = None if down_node is None else ast.literal_eval(down_node)
        if down in follows:
            raise RuntimeError(f"{path.name}: revisions {follows[down]} and {revision} both follow {down}")
        follows[down] = revision
    chain, at = [], None
    while at in follows:
        at = follows.pop(at)
        chain.append(at)
    if follows:
        raise RuntimeError(f"revisions not reachable from the first: {', '.join(sorted(follows.values()))}")
    return tuple(chain)


def head_revision() -> str | None:
    """The newest revision of the migrations shipped with this code (None if there were none)."""
    chain = revision_chain()
    return chain[-1] if chain else None


def next_revision(revision: str | None) -> str | None:
    """The revision that follows `revision` (None: the first one); None after the newest, or for a revision this
    code does not know."""
    chain = revision_chain()
    if revision is None:
        return chain[0] if chain else None
    if revision not in chain:
        return None
    position = chain.index(revision)
    return chain[position + 1] if position + 1 < len(chain) else None


def ensure_schema(engine: Engine) -> None:
    """Bring the database to the newest schema if it is behind (cheap when it is current)."""
    if current_revision(engine) != head_revision():
        upgrade(engine)


@dataclass(frozen=True)
class SchemaShape:
    """What a schema holds, by name: its tables with their columns (in order) and its indexes, the version
    table and SQLite's own objects left out. Two stores at the same revision, migrated cleanly, have equal shapes."""

    tables: dict[str, tuple[str, ...]]
    indexes: frozenset[str]


def sqlite_schema_shape(connection: Connection) -> SchemaShape:
    """The SchemaShape of the SQLite database on `connection` (from sqlite_master and PRAGMA table_info)."""
    rows = connection.exec_driver_sql(
        "SELECT type, name FROM sqlite_master WHERE type IN ('table', 'index') AND name NOT LIKE 'sqlite_%'"
    ).all()
    tables = {
        name: tuple(column[1] for column in connection.exec_driver_sql(f'PRAGMA table_info("{name}")'))
        for object_type, name in rows
        if object_type == "table" and name != VERSION_TABLE
    }
    return SchemaShape(tables, frozenset(name for object_type, name in rows if object_type == "index"))


def clean_schema_shape(revision: str | None) -> SchemaShape:
    """The SchemaShape a store has at `revision` (None: before the first), from a clean upgrade of an
    in-memory SQLite database."""
    engine = make_engine("sqlite://")
    try:
        if revision is not None:
            upgrade(engine, revision)
        with engine.connect() as connection:
            return sqlite_schema_shape(connection)
    finally:
        engine.dispose()


def half_applied(engine: Engine) -> HalfAppliedRevision | None:
    """HalfAppliedRevision, with what differs and what to do, if the SQLite store's schema is not the one its
    recorded revision has; None if it is (or the store is not SQLite, whose DDL was always transactional)."""
    if engine.dialect.name != "sqlite":
        return None
    with engine.connect() as connection:
        at = _recorded_revision(connection)
        found = sqlite_schema_shape(connection)
    following = next_revision(at)
    if following is None:  # at the newest revision, or one this version does not know: no upgrade was cut short
        return None
    expected = clean_schema_shape(at)
    if found == expected:
        return None
    extra_tables = sorted(found.tables.keys() - expected.tables.keys())
    missing_tables = sorted(expected.tables.keys() - found.tables.keys())
    extra_indexes = sorted(found.indexes - expected.indexes)
    missing_indexes = sorted(expected.indexes - found.indexes)
    changed = sorted(name for name in found.tables.keys() & expected.tables.keys()
                     if found.tables[name] != expected.tables[name])
    differences = [
        *([f"tables it should not have yet: {', '.join(extra_tables)}"] if extra_tables else []),
        *([f"indexes it should not have yet: {', '.join(extra_indexes)}"] if extra_indexes else []),
        *([f"tables with other columns than at {at or 'base'}: {', '.join(changed)}"] if changed else []),
        *([f"missing tables: {', '.join(missing_tables)}"] if missing_tables else []),
        *([f"missing indexes: {', '.join(missing_indexes)}"] if missing_indexes else []),
    ]
    where = engine.url.database or str(engine.url)
    drops = [f"DROP INDEX {name};" for name in extra_indexes] + [f"DROP TABLE {name};" for name in extra_tables]
    undo = (f"without one, undo what {following} added: sqlite3 {where} '{' '.join(drops)}'"
            if drops and not (changed or missing_tables or missing_indexes)
            else f"without one, make its schema that of revision {at or 'base'} again by hand")
    return HalfAppliedRevision(
        f"{where}: the store says it is at revision {at or 'base (empty)'} but holds part of revision {following}: "
        f"an upgrade by an older empeval (which applied SQLite migrations statement by statement) was interrupted. "
        f"What differs from revision {at or 'base'}: {'; '.join(differences)}. Restore the copy of the database made "
        f"before that upgrade (with its -wal file) and run `empeval db upgrade` again; {undo}, then run "
        f"`empeval db upgrade`.")
