"""Where the database is and how to talk to it.

The URL comes from EMPEVAL_DATABASE_URL; without it, a SQLite file `empeval.db` in the working
directory. SQLite connections get WAL journaling (readers don't block the writer) and foreign keys on
(SQLite leaves them off by default, which would silently allow dangling rows).

A SQLite file holds every rating and annotator, so it is created readable by its owner only (0600), and
an existing one (with its -wal, -shm and -journal files) that others could read loses their rights when it
is opened (0644 becomes 0600; a read-only 0444 becomes 0400). SQLite gives the -wal and -shm files it
creates the permissions of the database file.
"""
from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from sqlalchemy import Engine, create_engine, event
from sqlalchemy.engine import make_url
from sqlalchemy.orm import Session

DATABASE_URL_ENV = "EMPEVAL_DATABASE_URL"
DEFAULT_SQLITE_FILE = "empeval.db"
PRIVATE_FILE_MODE = 0o600
SQLITE_COMPANIONS = ("-wal", "-shm", "-journal")


def database_url(url: str | None = None) -> str:
    """The URL to use: the argument, else $EMPEVAL_DATABASE_URL, else ./empeval.db."""
    if url:
        return url
    env = os.environ.get(DATABASE_URL_ENV)
    if env:
        return env
    return f"sqlite:///{Path.cwd() / DEFAULT_SQLITE_FILE}"


def sqlite_file(url: str) -> Path | None:
    """The database file of a SQLite URL (absolute); None for other databases and in-memory SQLite."""
    parsed = make_url(url)
    name = parsed.database
    if parsed.get_backend_name() != "sqlite" or not name or name == ":memory:" or name.startswith("file:"):
        return None
    return Path(name).expanduser().resolve()


def make_private_sqlite_file(path: Path) -> None:
    """Create `path` empty with mode 0600 if it does not exist (an empty file is an empty SQLite database), and
    take every right of group and others from it and its companion files when they are ours."""
    try:
        os.close(os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, PRIVATE_FILE_MODE))
    except FileExistsError:
        pass
    except FileNotFoundError:  # no such folder: SQLite will say so when it connects
        return
    for candidate in (path, *(path.with_name(path.name + suffix) for suffix in SQLITE_COMPANIONS)):
        try:
            status = candidate.stat()
        except FileNotFoundError:
            continue
        if status.st_mode & 0o077 and status.st_uid == os.getuid():
            candidate.chmod(status.st_mode & 0o700)  # the owner's bits stay (a read-only file stays read-only)


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
    if (path := sqlite_file(url)) is not None:
        make_private_sqlite_file(path)
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
