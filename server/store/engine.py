"""Where the database is and how to talk to it.

The URL comes from EMPEVAL_DATABASE_URL; without it, a SQLite file `empeval.db` in the working
directory. SQLite connections get WAL journaling (readers don't block the writer) and foreign keys on
(SQLite leaves them off by default, which would silently allow dangling rows).

Acknowledged means durable: SQLite runs with synchronous=FULL, so a commit returns only once its WAL frames are on
the disk. NORMAL, SQLite's usual choice in WAL mode, stays consistent but may lose the last commits on a power
loss or an OS crash: a rating the rater was told is stored could vanish. FULL costs an fsync per commit (the submit
throughput it costs is printed by `python -m benchmarks annotation_load --parts durability`). And secure_delete is
on, so that deleted rows (a withdrawn rater's name and comments, `empeval annotators forget`) are overwritten with
zeros in the database and WAL pages rather than left in free space; whether a build has it on by default varies.

SQLite has one writer at a time. A unit of work (`unit_of_work`) on SQLite is a write transaction from its
start (BEGIN IMMEDIATE): it waits for the lock once, up front, instead of reading first and failing (or
retrying) when it turns into a writer. Before that, writers queue without polling: the threads of a process on
a lock, the processes (gunicorn workers, commands) on a flock of `<database>-writer.lock`; SQLite's busy handler
(which polls, sleeping up to 100 ms between tries) is left for writers that do not queue there. The annotation API's
writes (a claim, a submission) go further: a process's threads that would queue there hand their write to the one
inside, which runs them in its transaction and commits them with one fsync (store.group_commit).

A SQLite file holds every rating and annotator, so it is created readable by its owner only (0600), and
an existing one (with its -wal, -shm and -journal files) that others could read loses their rights when it
is opened (0644 becomes 0600; a read-only 0444 becomes 0400). SQLite gives the -wal and -shm files it
creates the permissions of the database file.
"""
from __future__ import annotations

import fcntl
import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from sqlalchemy import Connection, Engine, create_engine, event
from sqlalchemy.engine import make_url
from sqlalchemy.exc import OperationalError
from sqlalchemy.orm import Session

DATABASE_URL_ENV = "EMPEVAL_DATABASE_URL"
DEFAULT_SQLITE_FILE = "empeval.db"
PRIVATE_FILE_MODE = 0o600
SQLITE_COMPANIONS = ("-wal", "-shm", "-journal")
# Beside the database: the file writers flock to take turns (see unit_of_work).
WRITER_LOCK_SUFFIX = "-writer.lock"
# How long a SQLite writer waits for the write lock (in SQLite's busy handler, and before it for this process's
# other threads) before it gives up with an error.
BUSY_TIMEOUT_S = 30
# How SQLite syncs a commit to disk (see the module docstring). Read at each connection; the load benchmark sets it
# to NORMAL in the server it starts to measure what FULL costs.
SQLITE_SYNCHRONOUS = "FULL"


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
    cursor.execute(f"PRAGMA synchronous={SQLITE_SYNCHRONOUS}")
    cursor.execute("PRAGMA secure_delete=ON")
    # Several app workers may write at once; wait for the lock rather than fail.
    cursor.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_S * 1000}")
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


class _WriterGate:
    """Writers to one SQLite database take turns here before BEGIN IMMEDIATE: this process's threads on a lock,
    then the processes on an exclusive flock of a file beside the database. A waiter sleeps in the kernel and wakes
    when the holder lets go, where SQLite's busy handler would poll (sleeping up to 100 ms between tries, so a
    process's own threads, which never sleep, would take the lock over and over and starve the other processes).
    Re-entrant: a thread already inside passes."""

    def __init__(self, path: Path | None):
        self.path, self.lock, self.depth, self.fd = path, threading.RLock(), 0, -1
        self.owner: int | None = None  # the thread inside, if any

    def __enter__(self) -> None:
        if not self.lock.acquire(timeout=BUSY_TIMEOUT_S):
            raise OperationalError("BEGIN IMMEDIATE", None, TimeoutError(
                f"{self.path}: another write transaction of this process held the database for more than "
                f"{BUSY_TIMEOUT_S} s"))
        self.owner = threading.get_ident()
        if self.depth == 0 and self.path is not None:
            try:
                self.fd = os.open(self.path.with_name(self.path.name + WRITER_LOCK_SUFFIX), os.O_RDWR | os.O_CREAT,
                                  PRIVATE_FILE_MODE)
                fcntl.flock(self.fd, fcntl.LOCK_EX)
            except OSError:  # a read-only folder, say: SQLite's own lock (and busy handler) still apply
                self._close()
        self.depth += 1

    def __exit__(self, *_exc: object) -> None:
        self.depth -= 1
        if self.depth == 0:
            self._close()
            self.owner = None
        self.lock.release()

    def _close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)  # closing the file lets go of the flock
            self.fd = -1


_writer_gates: dict[str, _WriterGate] = {}
_writer_gates_guard = threading.Lock()


def _writer_gate(engine: Engine) -> _WriterGate:
    """The gate of the engine's SQLite database (one per database in this process, shared by its engines)."""
    url = engine.url.render_as_string(hide_password=False)
    with _writer_gates_guard:
        if url not in _writer_gates:
            _writer_gates[url] = _WriterGate(sqlite_file(url))
        return _writer_gates[url]


def writer_gate_held_here(engine: Engine) -> bool:
    """Whether the calling thread is inside the writer gate of the engine's database (always False but on SQLite)."""
    return engine.dialect.name == "sqlite" and _writer_gate(engine).owner == threading.get_ident()


@contextmanager
def unit_of_work(engine: Engine) -> Iterator[Session]:
    """One session, one transaction: committed if the block finishes, rolled back if it raises. On SQLite a write
    transaction from the start, one per process at a time (see the module docstring): keep it short."""
    if engine.dialect.name != "sqlite":
        with Session(engine, expire_on_commit=False) as session, session.begin():
            yield session
        return
    with _writer_gate(engine), Session(engine, expire_on_commit=False) as session, session.begin():
        # The driver (pysqlite) opens transactions itself, as BEGIN DEFERRED before the first write; one opened
        # here first is the one it commits or rolls back.
        session.connection().exec_driver_sql("BEGIN IMMEDIATE")
        yield session


@contextmanager
def write_connection(engine: Engine) -> Iterator[Connection]:
    """unit_of_work's Core twin, for hot paths that run prepared statements and load no ORM object: one
    connection, one transaction, committed if the block finishes and rolled back if it raises; on SQLite a write
    transaction from the start (BEGIN IMMEDIATE), one per process at a time, taken in turn with the other
    processes' writers (see the module docstring)."""
    # The connection is taken from the pool (and given back) outside the gate: the lock is held for the work only.
    with engine.connect() as connection, write_transaction(connection):
        yield connection


@contextmanager
def write_transaction(connection: Connection) -> Iterator[Connection]:
    """write_connection on a connection the caller already holds (a request that reads, writes, then reads again
    takes one connection from the pool, not three): a read transaction it has open is ended first (nothing of it
    is kept), then the block runs in one write transaction as write_connection's does."""
    if connection.in_transaction():
        connection.rollback()
    if connection.dialect.name != "sqlite":
        with connection.begin():
            yield connection
        return
    with _writer_gate(connection.engine), connection.begin():
        connection.exec_driver_sql("BEGIN IMMEDIATE")  # opened before the driver opens a deferred one
        yield connection


@contextmanager
def migration_connection(engine: Engine) -> Iterator[Connection]:
    """The connection Alembic migrates on, on which every transaction is all-or-nothing, DDL included.

    PostgreSQL's DDL is transactional as it comes. SQLite's is too, but the driver (pysqlite, in its legacy
    transaction control) opens a transaction only before INSERT, UPDATE, DELETE and REPLACE: a CREATE, DROP or
    ALTER sent first ran on its own and was committed at once, so a migration killed half-way left some of its
    DDL behind, without its alembic_version row. Here, as SQLAlchemy's pysqlite notes prescribe, the driver's
    own transaction control is switched off (isolation_level None) and each transaction SQLAlchemy begins starts
    with an explicit BEGIN IMMEDIATE (a write transaction from the start, taken in turn with the other writers);
    with Alembic's transaction_per_migration (migrations/env.py) a revision's DDL, its data changes and its
    alembic_version update commit together or not at all.

    Foreign keys are off on this connection while it migrates (and on again when it is given back): a batch
    migration recreates a table by copying it and dropping the old one, and with them on, SQLite's DROP TABLE
    runs an implicit DELETE whose ON DELETE CASCADE would empty the tables pointing at it (0002 recreates
    `assignment`, and every assignment_item and rating would go). The PRAGMA does nothing inside a transaction,
    so it is set here, before any begins; env.py runs PRAGMA foreign_key_check before each revision commits
    instead. One migrating process at a time holds the writer gate (see unit_of_work)."""
    if engine.dialect.name != "sqlite":
        with engine.connect() as connection:
            yield connection
        return
    with _writer_gate(engine), engine.connect() as connection:
        connection.exec_driver_sql("PRAGMA foreign_keys=OFF")
        connection.commit()  # nothing to commit: ends the transaction SQLAlchemy began for the PRAGMA
        driver: Any = connection.connection.driver_connection  # the sqlite3.Connection
        legacy = driver.isolation_level
        driver.isolation_level = None
        event.listen(connection, "begin", _begin_immediate)
        try:
            yield connection
        finally:
            event.remove(connection, "begin", _begin_immediate)
            if connection.in_transaction():
                connection.rollback()
            driver.isolation_level = legacy
            connection.exec_driver_sql("PRAGMA foreign_keys=ON")
            connection.commit()


def _begin_immediate(connection: Connection) -> None:
    connection.exec_driver_sql("BEGIN IMMEDIATE")


# Transaction control and connection set-up: what a statement count leaves out (it counts the work asked for).
_NOT_COUNTED = ("BEGIN", "COMMIT", "ROLLBACK", "PRAGMA", "SAVEPOINT", "RELEASE", "SET ")


class StatementCount:
    """SQL statements an engine sent to the database while `counting_statements` was open, in this thread."""

    def __init__(self) -> None:
        self.statements: list[str] = []

    def __len__(self) -> int:
        return len(self.statements)


@contextmanager
def counting_statements(engine: Engine) -> Iterator[StatementCount]:
    """Count the statements `engine` executes in the calling thread within the block (an executemany counts
    once per statement sent, not per row: SQLAlchemy's cursor event fires once per call), leaving out BEGIN,
    COMMIT, ROLLBACK, SAVEPOINT and PRAGMA. For tests and benchmarks of how many round trips a call costs."""
    count, thread = StatementCount(), threading.get_ident()

    def record(_conn, _cursor, statement: str, _parameters, _context, _executemany) -> None:
        if threading.get_ident() == thread and not statement.lstrip().upper().startswith(_NOT_COUNTED):
            count.statements.append(statement)

    event.listen(engine, "before_cursor_execute", record)
    try:
        yield count
    finally:
        event.remove(engine, "before_cursor_execute", record)
