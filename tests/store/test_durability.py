"""Acknowledged means durable, and deleted means gone (issue 29, findings 10 and 8), on a real SQLite file: every
connection of the store's engine syncs each commit to disk (synchronous=FULL in WAL mode) and overwrites what it
deletes (secure_delete=ON), whatever the SQLite build's defaults; after `empeval annotators forget` the withdrawn
rater's comment and name are in neither the database file nor its WAL."""
from __future__ import annotations

import sqlite3

import pytest

from empeval.server.annotation.annotators import invite
from empeval.server.store import make_engine
from tests.annotation.conftest import add_responses, make_study
from tests.annotation.researcher_helpers import cli_run, work

SYNCHRONOUS_FULL = 2  # PRAGMA synchronous reads back 0 OFF, 1 NORMAL, 2 FULL, 3 EXTRA
NAME = "Zelda Quixote-7731"
# Long enough in UTF-8 (3 bytes a character here) to spill onto overflow pages, which a deletion frees whole: without
# secure_delete a freed page keeps its bytes in the file.
COMMENT = "my cousin Ophelia Brightwater would rate these higher: " + "感谢" * 900 + " 4f2a9c-end"


def _pragma(engine, name: str):
    with engine.connect() as connection:
        return connection.exec_driver_sql(f"PRAGMA {name}").scalar()


@pytest.fixture
def build_without_secure_delete(monkeypatch):
    """Every new sqlite3 connection starts with secure_delete off, as on SQLite builds without
    SQLITE_SECURE_DELETE (this machine's build has it on by default, which would hide a store that never sets it)."""
    connect = sqlite3.dbapi2.connect

    def connect_without(*args, **kwargs):
        connection = connect(*args, **kwargs)
        connection.execute("PRAGMA secure_delete=OFF")
        return connection

    monkeypatch.setattr(sqlite3.dbapi2, "connect", connect_without)


def test_a_sqlite_commit_is_synced_to_disk_in_wal_mode(tmp_path):
    engine = make_engine(f"sqlite:///{tmp_path / 'store.db'}")
    try:
        assert _pragma(engine, "journal_mode") == "wal"
        assert _pragma(engine, "synchronous") == SYNCHRONOUS_FULL
    finally:
        engine.dispose()


def test_sqlite_overwrites_what_it_deletes_whatever_the_build_default(tmp_path, build_without_secure_delete):
    with sqlite3.dbapi2.connect(tmp_path / "plain.db") as plain:
        assert plain.execute("PRAGMA secure_delete").fetchone()[0] == 0  # the build this test stands for
    engine = make_engine(f"sqlite:///{tmp_path / 'store.db'}")
    try:
        assert _pragma(engine, "secure_delete") == 1
    finally:
        engine.dispose()


def test_forget_leaves_no_byte_of_her_comment_or_name_in_the_database_or_its_wal(
        tmp_path, sample_templates, build_without_secure_delete):
    url = f"sqlite:///{tmp_path / 'store.db'}"
    sample_templates.fill(url)
    engine = make_engine(url)
    add_responses(engine, ["sys-a", "sys-b"], 6)
    make_study(engine, count=6, k=1, per_assignment=4, control_rate=0.0, systems=["sys-a", "sys-b"], controls=[])
    rater, _ = invite(engine, NAME, "pilot")
    work(engine, rater.id, comment=COMMENT)
    with engine.connect() as connection:  # her comment now lies in the database file only, the WAL emptied
        connection.exec_driver_sql("PRAGMA wal_checkpoint(TRUNCATE)")
    database, wal = tmp_path / "store.db", tmp_path / "store.db-wal"
    parts = (COMMENT[:30], "4f2a9c-end", NAME)  # her comment's first words, its last (on an overflow page), her name
    assert all(part.encode() in database.read_bytes() for part in parts)

    done = cli_run(engine, "annotators", "forget", NAME, "--study", "pilot")
    assert done.exit_code == 0, done.output
    # forget itself copied the pages it wrote from the WAL into the file and truncated the WAL.
    assert "storage: the WAL was checkpointed into the database file and truncated" in done.output
    assert wal.stat().st_size == 0
    engine.dispose()
    for path in (database, wal):
        stored = path.read_bytes()
        for part in parts:
            assert part.encode() not in stored, f"{part!r} is still in {path.name}"
