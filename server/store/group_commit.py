"""Group commit: on SQLite, the write units that a process's threads queue while one of them holds the write lock
run in that one's transaction, each under a savepoint of its own, and become durable by one commit (one fsync).

Why: with synchronous=FULL (store.engine) a commit returns once its WAL frames are on the disk, and that fsync is
most of the 4.5-8 ms a claim or a submission held SQLite's one write lock: under a few thousand raters the lock was
held most of the time and requests queued behind it (issue 31). Batched, the fsync is paid once per batch.

How (`run_write_unit`): a request expresses its write as a unit, a function of a connection, and queues it on its
engine's group. The thread that finds no batch running leads: it takes the writer gate and BEGIN IMMEDIATE
(store.engine.write_transaction, on its own connection), runs its own unit, then those queued by the others, in
the order they came and while they come, up to MAX_UNITS or MAX_BATCH_SECONDS, commits once, and only then wakes
the others, each with its own unit's result or error. The others wait meanwhile (not for the gate); the next
batch's leader is one of those still waiting once the batch is done.

What it guarantees:
- a unit's effects are committed as a whole or not at all, as in a transaction of its own: a unit that raises
  (an IntegrityError, a refusal) is rolled back to its savepoint, the others of its batch are kept, and the error
  is raised to its own request alone;
- a result is handed back only after the commit that made it durable: nobody is told "stored" before the fsync;
  if the commit fails (or the batch is abandoned), every unit of the batch not failed already gets that error,
  and none of its effects was kept;
- units of a batch run one after another in one transaction, each seeing the effects of those before it, exactly
  as if they had committed one after another: every rule the database keeps (unique keys, the WHERE of a claim's
  UPDATE) holds across a batch as across transactions, so the hand-out's and the submission's promises hold
  unchanged (k distinct raters, nobody shown a context twice, nothing acknowledged and lost, resubmission
  idempotent).

A unit runs in the leader's thread, on the leader's connection (of the same engine): it must do its work through
the connection it is given, nothing thread-local, and nothing but statements (no commit of its own). Other writers
(unit_of_work, write_transaction, other processes) take turns with batches at the writer gate as before.
PostgreSQL, which has no one writer, runs each unit in a transaction of its own on the caller's connection, as
write_transaction does.
"""
from __future__ import annotations

import threading
import time
import weakref
from collections import deque
from collections.abc import Callable
from typing import Any, Generic, TypeVar

from sqlalchemy import Connection, Engine
from sqlalchemy.exc import OperationalError

from empeval.server.store.engine import BUSY_TIMEOUT_S, write_transaction, writer_gate_held_here

T = TypeVar("T")

# A batch takes no more units than this, and no more once it has run this long (seconds, from its BEGIN): the units
# waiting at its end are not kept waiting for an ever longer batch, and other processes get their turn at the gate.
MAX_UNITS = 32
MAX_BATCH_SECONDS = 0.015


class _Unit(Generic[T]):
    """A queued write: the work, and once its batch is done, its result or its error."""

    __slots__ = ("work", "taken", "done", "result", "error")

    def __init__(self, work: Callable[[Connection], T]):
        self.work = work
        self.taken = self.done = False
        self.result: Any = None
        self.error: BaseException | None = None

    def outcome(self) -> T:
        if self.error is not None:
            raise self.error
        return self.result


class _Group:
    """The write units of one engine's threads, and the one batch running at a time (see the module docstring).
    `batches` and `units` count what ran (for tests and the load benchmark)."""

    def __init__(self) -> None:
        self.turns = threading.Condition(threading.Lock())
        self.queue: deque[_Unit[Any]] = deque()
        self.leading = False
        self.batches = self.units = 0

    def run(self, connection: Connection, work: Callable[[Connection], T]) -> T:
        """Queue `work`; wait while a batch runs: for it to be done in that batch, or to lead the next one (see
        run_write_unit). OperationalError when it waited BUSY_TIMEOUT_S without being taken into a batch."""
        unit = _Unit(work)
        deadline = time.monotonic() + BUSY_TIMEOUT_S
        with self.turns:
            self.queue.append(unit)
            while self.leading and not unit.done:
                if unit.taken:  # a batch is running it: its outcome comes with the batch's end
                    self.turns.wait()
                    continue
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    self.queue.remove(unit)
                    raise OperationalError("BEGIN IMMEDIATE", None, TimeoutError(
                        f"{connection.engine.url}: other write transactions of this process held the database for "
                        f"more than {BUSY_TIMEOUT_S} s"))
                self.turns.wait(remaining)
            if unit.done:
                return unit.outcome()
            self.leading = True  # no batch running and its unit not done: this thread leads the next
            self.queue.remove(unit)
            unit.taken = True
        self._lead(connection, unit)
        return unit.outcome()

    def _lead(self, connection: Connection, own: _Unit[Any]) -> None:
        """Run a batch on `connection`: `own` first, then queued units while they come and the batch has room;
        one commit; then every unit of it is done and its thread woken. When nobody is waiting as the batch begins,
        `own` runs alone with no savepoint (what it raises rolls the transaction back), so a lone writer sends
        the statements it sent before group commit; units queued meanwhile make the next batch."""
        batch = [own]
        try:
            with write_transaction(connection):
                began = time.monotonic()
                with self.turns:
                    alone = not self.queue
                if alone:  # nobody waiting: a transaction of its own, as without group commit (no savepoint)
                    own.result = own.work(connection)
                    return
                _run_in_savepoint(connection, own)
                while len(batch) < MAX_UNITS and time.monotonic() - began < MAX_BATCH_SECONDS:
                    with self.turns:
                        if not self.queue:
                            break
                        unit = self.queue.popleft()
                        unit.taken = True
                    batch.append(unit)
                    _run_in_savepoint(connection, unit)
        except BaseException as failure:  # a lone unit, the commit, BEGIN or a savepoint failed: nothing kept
            for unit in batch:
                if unit.error is None:
                    unit.result, unit.error = None, failure
            if not isinstance(failure, Exception):
                raise
        finally:
            with self.turns:
                self.batches += 1
                self.units += len(batch)
                for unit in batch:
                    unit.done = True
                self.leading = False
                self.turns.notify_all()


def _run_in_savepoint(connection: Connection, unit: _Unit[Any]) -> None:
    """The unit's work under a savepoint: its result kept, or its error kept and its effects rolled back. An error
    in the savepoint's own RELEASE or ROLLBACK TO is raised: the transaction is unusable, the batch fails."""
    savepoint = connection.begin_nested()
    try:
        unit.result = unit.work(connection)
    except Exception as error:
        unit.error = error
        savepoint.rollback()
        return
    savepoint.commit()


_groups: weakref.WeakKeyDictionary[Engine, _Group] = weakref.WeakKeyDictionary()
_groups_guard = threading.Lock()


def write_group(engine: Engine) -> _Group:
    """The engine's group (one per engine in this process)."""
    with _groups_guard:
        group = _groups.get(engine)
        if group is None:
            group = _groups[engine] = _Group()
        return group


def run_write_unit(connection: Connection, work: Callable[[Connection], T]) -> T:
    """`work(c)` in a write transaction, its result returned once committed; what it raises is raised, with nothing
    of it kept. On SQLite its transaction may be shared with other threads' units and its commit with theirs (see
    the module docstring): `work` must run its statements on `c` (which need not be `connection`) and keep nothing
    thread-local. A read transaction open on `connection` is ended first, as by write_transaction.

    A thread already holding the writer gate (inside a unit_of_work, or a unit calling this) runs `work` in a
    transaction of its own, as before group commit: queueing behind a batch that needs the gate it holds would
    wait for itself."""
    if connection.in_transaction():
        connection.rollback()
    if connection.dialect.name != "sqlite" or writer_gate_held_here(connection.engine):
        with write_transaction(connection):
            return work(connection)
    return write_group(connection.engine).run(connection, work)
