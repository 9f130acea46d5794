"""A store that cannot be written: a full disk (simulated with SQLite's max_page_count, which fails a write with
SQLITE_FULL exactly as a full disk does), a read-only database (SQLite's query_only, PostgreSQL's
default_transaction_read_only), a database that cannot be opened. The app answers 503 with one line, writes
nothing, and works again as soon as the store does, without a restart; a command prints one line and exits 4.
"""
from __future__ import annotations

import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner
from sqlalchemy import event, text
from sqlalchemy.exc import IntegrityError, OperationalError

from empeval.cli import cli
from empeval.server.annotation.annotators import invite
from empeval.server.annotation.secrets import admin_token, secret_key
from empeval.server.datasets.ed_csv import parse_ed_csv
from empeval.server.datasets.importer import import_dialogues
from empeval.server.store import make_engine, upgrade
from empeval.server.web import create_app
from empeval.server.web.storage_errors import StorageUnavailable, storage_failure_message
from tests.annotation.conftest import add_responses, make_study
from tests.conftest import REPO, SAMPLE_ED
from tests.store.helpers import snapshot

RATERS = [f"rater-{i}" for i in range(8)]


@pytest.fixture
def secret_home(tmp_path, monkeypatch):
    monkeypatch.setenv("EMPEVAL_HOME", str(tmp_path / "home"))
    for name in ("EMPEVAL_SECRET_KEY", "EMPEVAL_SECRET_FILE", "EMPEVAL_ADMIN_TOKEN", "EMPEVAL_DATABASE_URL"):
        monkeypatch.delenv(name, raising=False)


def _study_store(url: str) -> tuple[dict[str, str], str]:
    """A study with room for every rater; their invite tokens and the admin token."""
    engine = make_engine(url)
    upgrade(engine)
    import_dialogues(engine, parse_ed_csv(SAMPLE_ED / "test.csv", "test"), dataset="empatheticdialogues")
    add_responses(engine, ["sys-a", "sys-b"], 40)
    make_study(engine, count=20, k=len(RATERS), per_assignment=5, systems=["sys-a", "sys-b"], controls=[])
    tokens = {name: invite(engine, name, "pilot")[1] for name in RATERS}
    admin = admin_token(secret_key(engine))
    engine.dispose()
    return tokens, admin


class StoreSwitch:
    """Turns a failure of the app's store on and off: applied to every connection as it is checked out of the
    pool, so the next request after `off()` meets a healthy store through the very same engine and pool."""

    def __init__(self, engine, failing: str, healthy: str):
        self.on_sql, self.off_sql, self.failing = failing, healthy, False
        event.listen(engine, "checkout", self._apply)

    def _apply(self, dbapi_connection, _record, _proxy) -> None:
        cursor = dbapi_connection.cursor()
        sql = self.on_sql if self.failing else self.off_sql
        if "{pages}" in sql:
            sql = sql.format(pages=cursor.execute("PRAGMA page_count").fetchone()[0])
        cursor.execute(sql)
        cursor.close()
        if not isinstance(dbapi_connection, sqlite3.Connection):
            dbapi_connection.commit()  # PostgreSQL: the SET outlives the transaction SQLAlchemy begins next


def _requests(client, token: str, *, comment: str = "x" * 2000):
    """A rater's work as its two requests, each made when the generator is advanced: claim the next
    assignment, then submit it whole. Yields each answer; stops after one that is not a 200."""
    headers = {"Authorization": f"Bearer {token}"}
    claimed = client.get("/api/annotate/next", headers=headers)
    yield claimed
    if claimed.status_code != 200:
        return
    assignment = claimed.get_json()["assignment"]
    criteria = [c["key"] for c in assignment["criteria"]]
    body = {"submission_id": f"sub-{assignment['assignment_id']:08d}", "comment": comment,
            "ratings": [{"item_id": item["item_id"], "scores": dict.fromkeys(criteria, 4)}
                        for item in assignment["items"]]}
    yield client.post(f"/api/assignments/{assignment['assignment_id']}/submit", json=body, headers=headers)


def _claim_and_submit(client, token: str):
    """The last answer of a rater's work: the receipt, or the first answer that is not a 200."""
    answers = list(_requests(client, token))
    return answers[-1]


def _assert_one_line_503(answer, says: str) -> None:
    assert answer.status_code == 503, answer.get_data(as_text=True)[:300]
    payload = answer.get_json()
    assert payload["error"] == "StorageUnavailable"
    assert says in payload["message"] and "\n" not in payload["message"], payload["message"]
    assert answer.headers["Retry-After"].isdigit()


def _app(url: str):
    return create_app({"DATABASE_URL": url, "AUTH_FAILURE_LIMIT": 10**6})  # with the input guards installed


def test_a_full_disk_is_a_503_in_one_line_and_the_app_recovers_without_a_restart(sqlite_url, secret_home):
    tokens, admin = _study_store(sqlite_url)
    app = _app(sqlite_url)
    engine = app.extensions["empeval.engine"]
    disk = StoreSwitch(engine, failing="PRAGMA max_page_count = {pages}", healthy="PRAGMA max_page_count = 1073741823")
    client = app.test_client()
    assert _claim_and_submit(client, tokens["rater-0"]).status_code == 200

    disk.failing = True
    # Writes that fit in pages the file already has still succeed, as on a real full disk: go on until one does not.
    failed = None
    for name in RATERS[1:]:
        before = snapshot(engine)
        for answer in _requests(client, tokens[name]):
            if answer.status_code != 200:
                failed = name
                _assert_one_line_503(answer, "the database is full")
                assert snapshot(engine) == before, "a write that failed for lack of space left something behind"
            before = snapshot(engine)
        if failed:
            break
    assert failed is not None, "the database never filled up"
    # Reading still works while the disk is full.
    assert client.get("/healthz").status_code == 200
    assert client.get("/api/studies/pilot/progress", headers={"Authorization": f"Bearer {admin}"}).status_code == 200

    disk.failing = False  # space is back: the same app, engine and pool
    assert _claim_and_submit(client, tokens[failed]).status_code == 200
    later = RATERS[RATERS.index(failed) + 1]
    assert _claim_and_submit(client, tokens[later]).status_code == 200


@pytest.mark.parametrize("backend", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def test_a_read_only_database_is_a_503_in_one_line_and_writable_again_without_a_restart(backend, request,
                                                                                        secret_home):
    url = request.getfixturevalue(f"{backend}_url")
    tokens, _admin = _study_store(url)
    app = _app(url)
    engine = app.extensions["empeval.engine"]
    if backend == "sqlite":
        switch = StoreSwitch(engine, failing="PRAGMA query_only = ON", healthy="PRAGMA query_only = OFF")
    else:
        switch = StoreSwitch(engine, failing="SET default_transaction_read_only = on",
                             healthy="SET default_transaction_read_only = off")
    client = app.test_client()
    switch.failing = True
    before = snapshot(engine)
    _assert_one_line_503(_claim_and_submit(client, tokens["rater-0"]), "read-only")
    assert snapshot(engine) == before
    switch.failing = False
    assert _claim_and_submit(client, tokens["rater-0"]).status_code == 200


def test_other_database_errors_are_not_taken_for_storage_failures():
    """A constraint or a bug stays what it is (a 409 where the code expects it, else a 500 with its traceback):
    only the store's own state is a 503."""
    integrity = IntegrityError("INSERT ...", {}, sqlite3.IntegrityError("UNIQUE constraint failed: rating.id"))
    assert storage_failure_message(integrity) is None
    assert storage_failure_message(ValueError("no")) is None
    assert storage_failure_message(OSError(2, "No such file or directory")) is None
    assert "full" in (storage_failure_message(OSError(28, "No space left on device")) or "")
    assert "read-only" in (storage_failure_message(OSError(30, "Read-only file system")) or "")


def test_real_driver_errors_are_classified(tmp_path):
    """The codes come from the drivers themselves, not from parsing their English."""
    full = sqlite3.connect(tmp_path / "full.db")
    full.execute("CREATE TABLE t (x TEXT)")
    pages = full.execute("PRAGMA page_count").fetchone()[0]
    full.execute(f"PRAGMA max_page_count = {pages}")
    with pytest.raises(sqlite3.OperationalError) as raised:
        full.executemany("INSERT INTO t VALUES (?)", [("x" * 1000,)] * 100)
    assert (storage_failure_message(raised.value) or "").startswith("the database is full")
    read_only = sqlite3.connect(f"file:{tmp_path / 'full.db'}?mode=ro", uri=True)
    with pytest.raises(sqlite3.OperationalError) as raised:
        read_only.execute("INSERT INTO t VALUES ('x')")
    assert (storage_failure_message(raised.value) or "").startswith("the database is read-only")
    with pytest.raises(OperationalError) as wrapped:
        make_engine(f"sqlite:///{tmp_path / 'no-such-folder' / 'x.db'}").connect()
    assert (storage_failure_message(wrapped.value) or "").startswith("the database cannot be opened")
    assert isinstance(StorageUnavailable("m"), Exception) and StorageUnavailable.http_status == 503


@pytest.mark.postgres
def test_an_unreachable_postgres_server_is_a_storage_failure(postgres_admin_url):
    closed = postgres_admin_url.rsplit("@", 1)[0] + "@127.0.0.1:1/postgres"
    with pytest.raises(OperationalError) as raised, make_engine(closed).connect():
        pass
    assert (storage_failure_message(raised.value) or "").startswith("the database server cannot be reached")
    engine = make_engine(postgres_admin_url)
    with pytest.raises(Exception) as read_only, engine.connect() as connection:
        connection.execute(text("SET TRANSACTION READ ONLY"))
        connection.execute(text("CREATE TABLE should_not_exist (x int)"))
    assert (storage_failure_message(read_only.value) or "").startswith("the database is read-only")
    engine.dispose()


# Commands: one line and exit 4 instead of a traceback.

def _read_only_sqlite(path: Path) -> str:
    return f"sqlite:///file:{path}?mode=ro&uri=true"


def _migrated(path: Path) -> Path:
    engine = make_engine(f"sqlite:///{path}")
    upgrade(engine)
    engine.dispose()
    return path


COMMANDS = {
    "invite into a read-only database": (lambda tmp: _read_only_sqlite(_migrated(tmp / "store.db")),
                                         ["annotators", "invite", "bob", "--study", "pilot"], "read-only"),
    "import into a read-only database": (lambda tmp: _read_only_sqlite(_migrated(tmp / "store.db")),
                                         ["data", "import-sample"], "read-only"),
    "migrate a read-only database": (lambda tmp: _read_only_sqlite(tmp / "empty.db"), ["db", "upgrade"],
                                     "read-only"),
    "a database in a folder that does not exist": (lambda tmp: f"sqlite:///{tmp / 'missing' / 'store.db'}",
                                                   ["data", "summary"], "cannot be opened"),
}


@pytest.mark.parametrize("name", COMMANDS)
def test_a_command_on_an_unusable_store_says_so_in_one_line_and_exits_4(name, tmp_path, secret_home):
    make_url, args, says = COMMANDS[name]
    (tmp_path / "empty.db").touch()
    url = make_url(tmp_path)
    result = CliRunner().invoke(cli, ["--database-url", url, *args])
    assert result.exit_code == 4, (result.output, result.exception)
    assert "Traceback" not in result.output
    errors = [line for line in result.output.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1 and says in errors[0] and url in errors[0], result.output


def test_the_one_line_names_the_database_without_its_password():
    from empeval.storage import storage_failure

    full = OSError(28, "No space left on device")
    said = storage_failure(full, database="postgresql://empeval:s3cret@db.example.org/empeval")
    assert said is not None and "s3cret" not in said.message and "db.example.org/empeval: the database is full" \
        in said.message
    assert storage_failure(ValueError("not ours")) is None


def test_serve_on_a_read_only_database_stops_at_start_with_one_line(tmp_path, secret_home):
    """`empeval serve` on a store it cannot migrate: one line on stderr and exit 4, not a traceback (and not a
    server that starts and answers 500 to everything)."""
    (tmp_path / "empty.db").touch()
    url = _read_only_sqlite(tmp_path / "empty.db")
    done = subprocess.run([sys.executable, "-m", "empeval.cli", "--database-url", url, "serve", "--port", "0"],
                          cwd=REPO, capture_output=True, text=True, timeout=120)
    assert done.returncode == 4, done.stderr[-2000:]
    assert "Traceback" not in done.stderr
    errors = [line for line in done.stderr.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1 and "read-only" in errors[0], done.stderr[-2000:]
