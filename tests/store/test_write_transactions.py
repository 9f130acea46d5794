"""SQLite write transactions: a unit of work holds the write lock from its start (BEGIN IMMEDIATE), writers queue
on a flock beside the database rather than polling in SQLite's busy handler; and the statement counter that the
annotation API's tests and benchmark use counts what was asked for, not BEGIN, COMMIT or PRAGMA."""
from __future__ import annotations

import fcntl
import os
import sqlite3
import stat
import threading

import pytest
from sqlalchemy import select, text

from empeval.server.store import make_engine, unit_of_work, upgrade
from empeval.server.store.engine import WRITER_LOCK_SUFFIX, counting_statements, sqlite_file
from empeval.server.store.models import AppSetting


@pytest.fixture
def engine(sqlite_url):
    engine = make_engine(sqlite_url)
    upgrade(engine)
    yield engine
    engine.dispose()


def test_a_unit_of_work_holds_the_write_lock_before_its_first_statement(engine):
    path = sqlite_file(engine.url.render_as_string())
    with unit_of_work(engine):
        other = sqlite3.connect(path, timeout=0, isolation_level=None)
        try:
            with pytest.raises(sqlite3.OperationalError, match="locked"):
                other.execute("BEGIN IMMEDIATE")
        finally:
            other.close()
    other = sqlite3.connect(path, timeout=0, isolation_level=None)
    other.execute("BEGIN IMMEDIATE")  # and lets go of it at the end
    other.execute("ROLLBACK")
    other.close()


def test_a_unit_of_work_still_commits_and_rolls_back(engine):
    with unit_of_work(engine) as session:
        session.add(AppSetting(key="kept", value="1"))
    with pytest.raises(RuntimeError), unit_of_work(engine) as session:
        session.add(AppSetting(key="dropped", value="1"))
        session.flush()
        raise RuntimeError("undo")
    with unit_of_work(engine) as session:
        assert session.scalars(select(AppSetting.key)).all() == ["kept"]


def test_writers_queue_on_a_private_lock_file_that_a_unit_of_work_holds(engine):
    path = sqlite_file(engine.url.render_as_string())
    lock_file = path.with_name(path.name + WRITER_LOCK_SUFFIX)
    entered = threading.Event()
    with unit_of_work(engine):
        assert stat.S_IMODE(lock_file.stat().st_mode) == 0o600
        fd = os.open(lock_file, os.O_RDWR)
        try:
            with pytest.raises(BlockingIOError):  # held: another process's writer would wait here
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        finally:
            os.close(fd)
        def write():
            with unit_of_work(engine):
                entered.set()

        waiter = threading.Thread(target=write)
        waiter.start()
        assert not entered.wait(0.3)  # another thread of this process waits too
    waiter.join(10)
    assert entered.is_set()


def test_statements_are_counted_without_transaction_control(engine):
    with counting_statements(engine) as count:
        with unit_of_work(engine) as session:
            session.add(AppSetting(key="counted", value="1"))
        with engine.connect() as connection:
            connection.execute(text("PRAGMA foreign_keys"))
            connection.execute(select(AppSetting.value))
    assert [s.split()[0] for s in count.statements] == ["INSERT", "SELECT"] and len(count) == 2
