"""`empeval serve --workers N` gives each gunicorn worker as many threads as its store wants when --threads is not
given (server.web.gunicorn_app.DEFAULT_THREADS: 1 on SQLite, 4 on PostgreSQL), and --threads overrides it. Counted
on a real `empeval serve`: the threads of its worker process after 16 clients at once (gunicorn's gthread worker
starts its pool threads as requests arrive, up to --threads). Each test stops the server it starts."""
from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import requests

from server.web.gunicorn_app import DEFAULT_THREADS, default_threads
from tests.conftest import REPO


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _worker_threads_under_load(url: str, *extra: str) -> int:
    """Threads of the one gunicorn worker of `empeval serve --workers 1 *extra` after 16 clients asked at once."""
    port = _free_port()
    server = subprocess.Popen([sys.executable, "-m", "entry.cli", "--database-url", url, "serve", "--port", str(port),
                               "--workers", "1", *extra], cwd=REPO, stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        base = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 60
        while True:
            assert server.poll() is None, f"serve exited with {server.returncode}"
            try:
                requests.get(f"{base}/healthz", timeout=2)
                break
            except requests.ConnectionError:
                assert time.monotonic() < deadline, "serve did not answer within 60 s"
                time.sleep(0.2)

        def client() -> None:
            with requests.Session() as session:
                for _ in range(30):
                    assert session.get(f"{base}/healthz", timeout=10).status_code == 200

        clients = [threading.Thread(target=client) for _ in range(16)]
        for thread in clients:
            thread.start()
        for thread in clients:
            thread.join()
        workers = subprocess.run(["pgrep", "-P", str(server.pid)], capture_output=True, text=True).stdout.split()
        assert len(workers) == 1, workers
        return len(os.listdir(Path("/proc") / workers[0] / "task"))  # its main thread and its pool's
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(timeout=30)


def test_default_threads_follow_the_store():
    assert default_threads("sqlite:////tmp/x.db") == DEFAULT_THREADS["sqlite"] == 1
    assert default_threads("postgresql://u@127.0.0.1/db") == DEFAULT_THREADS["postgresql"] == 4


@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="counts threads in /proc (Linux)")
def test_a_sqlite_worker_serves_with_one_thread_unless_told_otherwise(sqlite_url):
    assert _worker_threads_under_load(sqlite_url) == 1 + 1
    assert _worker_threads_under_load(sqlite_url, "--threads", "3") > 1 + 1


@pytest.mark.postgres
@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="counts threads in /proc (Linux)")
def test_a_postgresql_worker_serves_with_several_threads(postgres_url):
    assert _worker_threads_under_load(postgres_url) > 1 + 1
