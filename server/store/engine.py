"""Where the database is and how to talk to it.

The URL comes from EMPEVAL_DATABASE_URL; without it, a SQLite file `empeval.db` in the working
directory. SQLite connections get WAL journaling (readers don't block the writer) and foreign keys on
(SQLite leaves them off by default, which would silently allow dangling rows).
"""
from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from sqlalchemy import Engine, create_engine, event
from sqlalchemy.orm import Session

DATABASE_URL_ENV = "EMPEVAL_DATABASE_URL"
DEFAULT_SQLITE_FILE = "empeval.db"


def database_url(url: str | None = None) -> str:
    """The URL to use: the argument, else $EMPEVAL_DATABASE_URL, else ./empeval.db."""
    if url:
        return url
    env = os.environ.get(DATABASE_URL_ENV)
    if env:
        return env
    return f"sqlite:///{Path.cwd() / DEFAULT_SQLITE_FILE}"


def _sqlite_pragmas(dbapi_connection, _record) -> None:
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute("PRAGMA synchronous=NORMAL")
    # Several app workers may write at once; wait for the lock rather than fail.
    cursor.execute("PRAGMA busy_timeout=30000")
    cursor.close()


def make_engine(url: str | None = None, **kwargs) -> Engine:
    """An Engine for `url` (see database_url), with SQLite tuned as described in the module docstring."""
    url = database_url(url)
    if url.startswith("postgresql://"):
        url = "postgresql+psycopg://" + url.removeprefix("postgresql://")
    engine = create_engine(url, **kwargs)
    if engine.dialect.name == "sqlite":
        event.listen(engine, "connect", _sqlite_pragmas)
    return engine


@contextmanager
def unit_of_work(engine: Engine) -> Iterator[Session]:
    """One session, one transaction: committed if the block finishes, rolled back if it raises."""
    with Session(engine, expire_on_commit=False) as session, session.begin():
        yield session
