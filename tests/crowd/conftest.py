"""Crowd tests: a store with a small study, a per-test crowd directory and HOME, the crowd virtualenv.

Tests that need Mephisto skip when .venv-crowd is missing (`make crowd` builds it) and fail under CI, as
tests/browser.py does for a missing Chromium. Each test checks that its run left no router process and no
server directory behind.
"""
from __future__ import annotations

import fcntl
import functools
import hashlib
import importlib.util
import os
import socket
import subprocess
import tempfile
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from empeval.cli import cli
from empeval.tasks.crowd.contract import CrowdUnit
from tests.annotation.conftest import add_responses, make_study
from tests.conftest import REPO, sample_store_copy

CROWD_PYTHON = Path(os.environ.get("EMPEVAL_CROWD_PYTHON", REPO / ".venv-crowd" / "bin" / "python"))
BUNDLE = REPO / "tasks" / "webapp" / "dist" / "mephisto" / "task.js"


def require_crowd_env() -> Path:
    missing = [str(p) for p in (CROWD_PYTHON, BUNDLE) if not p.exists()]
    if missing:
        message = f"crowd environment missing ({', '.join(missing)}): run `make crowd`"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    return CROWD_PYTHON


def site_tmp() -> Path:
    return Path(subprocess.run([str(CROWD_PYTHON), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                               capture_output=True, text=True, check=True).stdout.strip()) / "tmp"


def leftovers() -> list[str]:
    """Router processes running from the crowd venv's tmp dir, and server dirs left there."""
    tmp = site_tmp()
    found = [str(p) for p in tmp.glob("local_server_*")]
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            try:
                cwd = os.readlink(proc / "cwd")
            except OSError:
                continue
            if cwd.startswith(str(tmp) + os.sep):
                found.append(f"pid {proc.name} in {cwd}")
    return found


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def crowd_python():
    """The crowd virtualenv's Python, held for this test alone: the runner refuses a second live run in one
    virtualenv (mephisto_compat.one_run_per_venv), so under pytest-xdist the tests that use the crowd
    environment take turns through an exclusive lock (a file in the temp dir named after the virtualenv's path)
    rather than fail on each other."""
    python = require_crowd_env()
    venv = hashlib.sha256(str(python.absolute().parent.parent).encode()).hexdigest()[:16]
    with open(Path(tempfile.gettempdir()) / f"empeval-crowd-tests-{venv}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield python
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


@pytest.fixture
def crowd_dir(tmp_path, monkeypatch):
    """Job directories go to a temp dir; HOME too, so nothing reaches the real ~/.mephisto or ~/.aws."""
    root = tmp_path / "crowd-runs"
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("EMPEVAL_CROWD_DIR", str(root))
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("AWS_SHARED_CREDENTIALS_FILE", raising=False)
    monkeypatch.delenv("AWS_CONFIG_FILE", raising=False)
    return root


@pytest.fixture
def crowd_store(tmp_path, monkeypatch):
    """A SQLite store with the sample, two systems and a generic control, and a study `pilot` whose
    assignments hold 2 real items and 1 control."""
    url = f"sqlite:///{tmp_path / 'crowd.db'}"
    engine = sample_store_copy(url)
    add_responses(engine, ["sys-a", "sys-b", "control-generic"], 12)
    make_study(engine, count=4, k=1, per_assignment=3, systems=["sys-a", "sys-b"], controls=["control-generic"],
               control_rate=0.34)
    monkeypatch.setenv("EMPEVAL_DATABASE_URL", url)
    monkeypatch.setenv("EMPEVAL_SECRET_KEY", "crowd-test-secret")
    yield engine
    engine.dispose()


def empeval(*args: str, input: str | None = None):
    return CliRunner().invoke(cli, list(args), input=input, catch_exceptions=False)


def wait_until(condition, timeout: float, what: str, interval: float = 0.2):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}")


@functools.cache
def load_runner():
    """tasks/crowd/runner.py loaded by path, as the crowd virtualenv runs it (its module level is standard
    library only; Mephisto is imported inside its commands)."""
    spec = importlib.util.spec_from_file_location("likert_runner", REPO / "tasks" / "crowd" / "runner.py")
    runner = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(runner)
    return runner


def fake_result(unit: CrowdUnit, worker: str, job_id: str, unit_id: int, score: int = 3, study: str = "pilot") -> dict:
    """A results.jsonl line as the runner writes it, every item of the unit rated `score` on every criterion."""
    ratings = [{"item_id": item["item_id"], "scores": {"empathy": score, "relevance": score, "fluency": score},
                "seconds": 4.0} for item in unit.payload["items"]]
    return {"submission_id": f"{job_id}.u{unit_id}", "job_id": job_id, "study": study, "provider": "mock",
            "unit_id": str(unit_id), "assignment_id": unit.assignment_id, "worker_name": worker,
            "outputs": {"ratings": ratings, "comment": "ok"}, "controls": {"n": 0, "passed": 0},
            "passed_controls": True}
