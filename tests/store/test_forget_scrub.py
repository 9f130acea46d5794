"""After `empeval annotators forget` on PostgreSQL (issue 29, finding 8): the tables she was removed from are
VACUUMed, with --vacuum-full rewritten so that no table file keeps her comment or name, and the command says what
PostgreSQL keeps regardless (WAL segments, base backups and archives). SQLite's side is in test_durability.py."""
from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy import text

from empeval.server.annotation.annotators import invite
from empeval.server.store import make_engine
from tests.annotation.conftest import add_responses, make_study
from tests.annotation.researcher_helpers import cli_run, work

pytestmark = pytest.mark.postgres

NAME = "Quentin Marlowe-5512"
COMMENT = "please tell my cousin Ophelia Brightwater-93ab that I rated these"  # short: stored inline, uncompressed


@pytest.fixture(autouse=True)
def signing_secret(monkeypatch):
    monkeypatch.setenv("EMPEVAL_SECRET_KEY", "forget-scrub-tests-" + "k" * 32)


def _files_of(engine, table: str) -> list[Path]:
    """The files holding `table`'s rows now (its main fork, segments included), or skip when the server's data
    directory is not readable from here (a server of $EMPEVAL_TEST_POSTGRES_URL elsewhere)."""
    with engine.connect() as connection:
        connection.execute(text("CHECKPOINT"))
        data = Path(connection.execute(text("SHOW data_directory")).scalar_one())
        relative = connection.execute(text("SELECT pg_relation_filepath(:t)"), {"t": table}).scalar_one()
    try:
        return sorted(data.glob(relative + "*"))
    except PermissionError:
        pytest.skip("the PostgreSQL data directory is not readable from the tests")


def _holds(files: list[Path], needle: str) -> bool:
    return any(needle.encode() in path.read_bytes() for path in files if "_" not in path.name)  # not _fsm, _vm


def _store_with_her_work(postgres_url, sample_templates):
    sample_templates.fill(postgres_url)
    engine = make_engine(postgres_url)
    add_responses(engine, ["sys-a", "sys-b"], 6)
    make_study(engine, count=6, k=1, per_assignment=4, control_rate=0.0, systems=["sys-a", "sys-b"], controls=[])
    rater, _ = invite(engine, NAME, "pilot")
    work(engine, rater.id, comment=COMMENT)
    return engine


def test_forget_vacuum_full_leaves_no_table_file_with_her_comment_or_name(postgres_url, sample_templates):
    engine = _store_with_her_work(postgres_url, sample_templates)
    try:
        assert _holds(_files_of(engine, "assignment"), "Ophelia Brightwater-93ab")  # the check can see it
        assert _holds(_files_of(engine, "annotator"), NAME)
        done = cli_run(engine, "annotators", "forget", NAME, "--study", "pilot", "--vacuum-full")
        assert done.exit_code == 0, done.output
        assert "storage: VACUUM FULL rewrote" in done.output
        assert "WAL segments" in done.output and "base backups" in done.output
        assert not _holds(_files_of(engine, "assignment"), "Ophelia Brightwater-93ab")
        assert not _holds(_files_of(engine, "annotator"), NAME)
    finally:
        engine.dispose()


def test_forget_vacuums_and_says_what_stays_without_full(postgres_url, sample_templates):
    engine = _store_with_her_work(postgres_url, sample_templates)
    try:
        done = cli_run(engine, "annotators", "forget", NAME, "--study", "pilot")
        assert done.exit_code == 0, done.output
        assert "storage: VACUUM of rating, assignment, annotator" in done.output
        assert "--vacuum-full" in done.output and "free space" in done.output
        with engine.connect() as connection:
            vacuumed = connection.execute(text(
                "SELECT count(*) FROM pg_stat_user_tables WHERE relname IN ('rating', 'assignment', 'annotator') "
                "AND last_vacuum IS NOT NULL")).scalar_one()
        assert vacuumed == 3
        again = cli_run(engine, "annotators", "forget", NAME, "--study", "pilot")
        assert again.exit_code == 0 and "already" in again.output and "VACUUM" in again.output
    finally:
        engine.dispose()
