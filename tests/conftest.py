"""Fixtures shared by every room's tests: real databases (a SQLite file, a real PostgreSQL server)."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import uuid
from pathlib import Path

import pytest
from sqlalchemy import text

from empeval.server.store import make_engine

REPO = Path(__file__).resolve().parents[1]
FULL_ED = Path(os.environ.get("EMPEVAL_FULL_ED", REPO.parent / "shared" / "data" / "empatheticdialogues"))
SAMPLE_ED = REPO / "server" / "data" / "ed_sample"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _postgres_bin() -> Path | None:
    candidates = sorted(
        Path("/usr/lib/postgresql").glob("*/bin"),
        key=lambda p: [int(x) for x in p.parent.name.split(".") if x.isdigit()],
    )
    for candidate in reversed(candidates):
        if (candidate / "initdb").exists() and (candidate / "pg_ctl").exists():
            return candidate
    return None


class PostgresServer:
    """A throwaway PostgreSQL cluster on 127.0.0.1, run as the `postgres` user when we are root
    (PostgreSQL refuses to run as root)."""

    def __init__(self, bindir: Path):
        self.bindir = bindir
        self.root = Path(tempfile.mkdtemp(prefix="empeval-pg-"))
        self.datadir = self.root / "data"
        self.port = _free_port()
        self.as_postgres = os.geteuid() == 0
        if self.as_postgres:
            shutil.chown(self.root, "postgres", "postgres")
            os.chmod(self.root, 0o700)

    def _run(self, *args: str) -> None:
        command = [str(a) for a in args]
        if self.as_postgres:
            command = ["runuser", "-u", "postgres", "--", *command]
        subprocess.run(command, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, timeout=120)

    def start(self) -> None:
        self._run(self.bindir / "initdb", "-D", self.datadir, "-A", "trust", "-U", "empeval", "-E", "UTF8", "--no-sync")
        options = f"-p {self.port} -k {self.root} -c listen_addresses=127.0.0.1 -c fsync=off"
        self._run(self.bindir / "pg_ctl", "-D", self.datadir, "-o", options, "-l", self.root / "log", "-w", "start")

    def stop(self) -> None:
        try:
            self._run(self.bindir / "pg_ctl", "-D", self.datadir, "-m", "fast", "-w", "stop")
        finally:
            shutil.rmtree(self.root, ignore_errors=True)

    @property
    def admin_url(self) -> str:
        return f"postgresql+psycopg://empeval@127.0.0.1:{self.port}/postgres"


@pytest.fixture(scope="session")
def postgres_admin_url():
    """URL of a PostgreSQL server for tests: $EMPEVAL_TEST_POSTGRES_URL, else one this session starts."""
    if url := os.environ.get("EMPEVAL_TEST_POSTGRES_URL"):
        yield url
        return
    bindir = _postgres_bin()
    if bindir is None:
        reason = "PostgreSQL server binaries not found (make test installs them with apt-get: package postgresql)"
        if os.environ.get("CI"):
            pytest.fail(reason)
        pytest.skip(reason)
    server = PostgresServer(bindir)
    try:
        server.start()
    except subprocess.CalledProcessError as error:
        server.stop()
        pytest.fail(f"could not start PostgreSQL: {error.stderr.decode(errors='replace')}")
    yield server.admin_url
    server.stop()


@pytest.fixture
def postgres_url(postgres_admin_url):
    """A fresh, empty PostgreSQL database for one test, dropped afterwards."""
    name = f"t_{uuid.uuid4().hex[:12]}"
    admin = make_engine(postgres_admin_url, isolation_level="AUTOCOMMIT")
    with admin.connect() as connection:
        connection.execute(text(f'CREATE DATABASE "{name}"'))
    url = postgres_admin_url.rsplit("/", 1)[0] + f"/{name}"
    yield url
    with admin.connect() as connection:
        connection.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
    admin.dispose()


@pytest.fixture(scope="session", autouse=True)
def empeval_home(tmp_path_factory):
    """Secret files of stores without a folder of their own (PostgreSQL) go to a temporary EMPEVAL_HOME, not
    the home directory of whoever runs the tests."""
    home = tmp_path_factory.mktemp("empeval-home")
    previous = os.environ.get("EMPEVAL_HOME")
    os.environ["EMPEVAL_HOME"] = str(home)
    yield home
    if previous is None:
        os.environ.pop("EMPEVAL_HOME", None)
    else:
        os.environ["EMPEVAL_HOME"] = previous


@pytest.fixture
def sqlite_url(tmp_path) -> str:
    return f"sqlite:///{tmp_path / 'store.db'}"


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def store_url(request) -> str:
    """An empty database on each supported backend: a SQLite file, then a real PostgreSQL database."""
    if request.param == "sqlite":
        return request.getfixturevalue("sqlite_url")
    return request.getfixturevalue("postgres_url")


@pytest.fixture
def full_ed() -> Path:
    if not (FULL_ED / "test.csv").is_file():
        pytest.skip(f"full EmpatheticDialogues data not found at {FULL_ED} (set EMPEVAL_FULL_ED)")
    return FULL_ED


@pytest.fixture(scope="session")
def embedding_cache_dir(tmp_path_factory) -> Path:
    """One embedding cache per test session, so MiniLM encodes the sample's candidates once."""
    return tmp_path_factory.mktemp("embedding-cache")
