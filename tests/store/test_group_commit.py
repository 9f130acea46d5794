"""Group commit on SQLite (server/store/group_commit.py): the write units that a process's threads queue while one of
them waits for or holds the write lock run in one transaction, each under its own savepoint, and share one commit;
each request gets its own result, only after that commit; one unit's failure rolls back that unit alone; a failed
commit fails every unit of the batch. Real SQLite files, real threads.

A batch is forced, not left to timing: the test holds the writer gate (a unit_of_work) while the threads queue, so
that one of them leads and waits at the gate and the others wait for it; then lets go."""
from __future__ import annotations

import sqlite3
import threading
import time

import pytest
from sqlalchemy import event
from sqlalchemy.exc import IntegrityError

import empeval.server.store.engine as engine_module
import empeval.server.store.group_commit as group_commit
from empeval.server.store import make_engine, unit_of_work
from empeval.server.store.engine import sqlite_file
from empeval.server.store.group_commit import run_write_unit, write_group

WAIT = 10  # seconds a thread may take before the test fails (never reached when all is well)


@pytest.fixture
def engine(sqlite_url, monkeypatch):
    # A loaded machine must not cut the forced batch short: the time cap is tested apart.
    monkeypatch.setattr(group_commit, "MAX_BATCH_SECONDS", WAIT)
    engine = make_engine(sqlite_url)
    with engine.begin() as connection:
        connection.exec_driver_sql("CREATE TABLE parent (id INTEGER PRIMARY KEY)")
        connection.exec_driver_sql("CREATE TABLE note (id INTEGER PRIMARY KEY, key TEXT UNIQUE NOT NULL, "
                                   "parent_id INTEGER REFERENCES parent (id))")
    yield engine
    engine.dispose()


class Commits:
    """COMMITs the engine sent while counting (each one fsync under synchronous=FULL)."""

    def __init__(self, engine):
        self.count = 0
        event.listen(engine, "commit", self._commit)

    def _commit(self, _connection):
        self.count += 1


def _notes(engine) -> list[str]:
    """The keys stored, read on a connection of its own (what another process would see)."""
    reader = sqlite3.connect(sqlite_file(engine.url.render_as_string()))
    try:
        return sorted(key for (key,) in reader.execute("SELECT key FROM note"))
    finally:
        reader.close()


def _insert(key: str):
    """A unit: insert a note, return its key and how many notes its transaction saw before it."""
    def unit(connection):
        before = connection.exec_driver_sql("SELECT count(*) FROM note").scalar_one()
        connection.exec_driver_sql("INSERT INTO note (key) VALUES (?)", (key,))
        return key, before
    return unit


def _refused(_connection):
    raise PermissionError("refused")  # as a refusal (Forbidden, Conflict) raised inside a unit


def _in_one_batch(engine, units: dict[str, object]) -> dict[str, object]:
    """Run each unit from its own thread (named by its key) while the writer gate is held, so that they queue; let
    go once all have; each thread's result or exception, and whether its note was readable when it was answered."""
    results: dict[str, object] = {}
    group = write_group(engine)

    def run(name, unit):
        with engine.connect() as connection:
            try:
                results[name] = run_write_unit(connection, unit)
            except Exception as error:  # noqa: BLE001 - handed back to the test
                results[name] = error
        results[name + " saw itself"] = name in _notes(engine)

    threads = [threading.Thread(target=run, args=item, name=item[0]) for item in units.items()]
    with unit_of_work(engine):
        for thread in threads:
            thread.start()
        deadline = time.monotonic() + WAIT
        while not (group.leading and len(group.queue) == len(units) - 1):  # the leader's own unit left the queue
            assert time.monotonic() < deadline, "the units did not queue"
            time.sleep(0.005)
    for thread in threads:
        thread.join(WAIT)
        assert not thread.is_alive(), f"{thread.name} still waiting: a unit is stuck"
    return results


def test_a_batch_of_concurrent_writes_commits_once_and_answers_each_its_own_result(engine):
    group, commits = write_group(engine), Commits(engine)
    batches, units = group.batches, group.units
    keys = [f"k{n}" for n in range(8)]
    results = _in_one_batch(engine, {key: _insert(key) for key in keys})
    assert commits.count == 2  # the unit_of_work that held the gate, then the batch: 8 writes, one commit
    assert (group.batches - batches, group.units - units) == (1, 8)
    assert {key: results[key][0] for key in keys} == {key: key for key in keys}
    # Each unit saw the effects of those before it in the batch (one transaction): 0, 1, ... 7 notes before.
    assert sorted(results[key][1] for key in keys) == list(range(8))
    assert all(results[key + " saw itself"] for key in keys)  # answered only after the commit
    assert _notes(engine) == keys


def test_a_failing_unit_is_rolled_back_alone_and_its_error_goes_to_its_own_request(engine):
    with engine.begin() as connection:
        connection.exec_driver_sql("INSERT INTO note (key) VALUES ('taken')")

    def half_then_duplicate(connection):  # writes one note, then breaks a unique key: none of it may stay
        connection.exec_driver_sql("INSERT INTO note (key) VALUES ('half')")
        connection.exec_driver_sql("INSERT INTO note (key) VALUES ('taken')")

    commits = Commits(engine)
    results = _in_one_batch(engine, {"a": _insert("a"), "dup": half_then_duplicate, "refused": _refused,
                                     "b": _insert("b"), "c": _insert("c")})
    assert isinstance(results["dup"], IntegrityError)
    assert isinstance(results["refused"], PermissionError)
    assert [results[key][0] for key in "abc"] == list("abc")
    assert commits.count == 2
    assert _notes(engine) == ["a", "b", "c", "taken"]


def test_a_failed_commit_fails_every_unit_of_its_batch_and_keeps_nothing(engine):
    def dangling(connection):  # a foreign key checked at COMMIT only: the commit itself fails
        connection.exec_driver_sql("PRAGMA defer_foreign_keys = ON")
        connection.exec_driver_sql("INSERT INTO note (key, parent_id) VALUES ('dangling', 42)")

    results = _in_one_batch(engine, {"a": _insert("a"), "dangling": dangling, "refused": _refused,
                                     "b": _insert("b")})
    assert isinstance(results["refused"], PermissionError)  # failed on its own already: keeps its own error
    for key in ("a", "dangling", "b"):
        assert isinstance(results[key], IntegrityError), results[key]
        assert "FOREIGN KEY" in str(results[key])
    assert _notes(engine) == []
    with engine.connect() as connection:  # and the next batch works
        assert run_write_unit(connection, _insert("after")) == ("after", 0)
    assert _notes(engine) == ["after"]


def test_a_batch_takes_no_more_units_than_its_cap(engine, monkeypatch):
    monkeypatch.setattr(group_commit, "MAX_UNITS", 3)
    group, commits = write_group(engine), Commits(engine)
    batches = group.batches
    keys = [f"k{n}" for n in range(7)]
    results = _in_one_batch(engine, {key: _insert(key) for key in keys})
    assert all(results[key][0] == key for key in keys)
    assert group.batches - batches == 3 and commits.count == 1 + 3  # 3 + 3 + 1
    assert _notes(engine) == keys


def test_a_batch_takes_no_more_units_once_its_time_is_up(engine, monkeypatch):
    monkeypatch.setattr(group_commit, "MAX_BATCH_SECONDS", 0)  # up at once: each batch is its leader's unit alone
    group = write_group(engine)
    batches = group.batches
    keys = [f"k{n}" for n in range(4)]
    results = _in_one_batch(engine, {key: _insert(key) for key in keys})
    assert all(results[key][0] == key for key in keys)
    assert group.batches - batches == 4
    assert _notes(engine) == keys


def test_a_thread_inside_the_writer_gate_writes_in_a_transaction_of_its_own(engine):
    group = write_group(engine)
    batches = group.batches
    with engine_module._writer_gate(engine), engine.connect() as connection:  # as a migration holds it
        # Queued, it would wait for a leader waiting for the gate this thread holds.
        assert run_write_unit(connection, _insert("alone")) == ("alone", 0)
    assert group.batches == batches
    assert _notes(engine) == ["alone"]
