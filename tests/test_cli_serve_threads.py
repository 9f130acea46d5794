"""`empeval serve`'s threads: its server hands a request to a thread only once the request has arrived whole, so
raters still uploading hold no thread, even at one thread per process; under gunicorn (`--gunicorn`, kept for
comparison and for use behind a buffering proxy) a thread is held by its client until the request has arrived
whole, so at one thread per worker one unfinished upload per worker leaves every other rater unanswered. --threads
sets the number of each process. A real `empeval serve` on a real SQLite file, on 127.0.0.1; each test stops the
server it starts. The stall tests run one process: with two, which process accepts each connection is the kernel's
choice, and a test that counts on it passes or fails by luck."""
from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
import requests

from empeval.server.web.serving import DEFAULT_THREADS
from tests.conftest import REPO


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def _served(url: str, *extra: str, workers: int = 2) -> Iterator[tuple[str, subprocess.Popen]]:
    """`empeval serve --workers N *extra` on `url`: (its base URL, the process), stopped on exit."""
    port = _free_port()
    server = subprocess.Popen([sys.executable, "-m", "empeval.cli", "--database-url", url, "serve", "--port", str(port),
                               "--workers", str(workers), *extra], cwd=REPO, stdout=subprocess.DEVNULL,
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
        yield base, server
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(timeout=30)


def _seconds_to_answer_beside_slow_uploads(base: str, uploads: int) -> float:
    """Seconds until /healthz is answered while `uploads` clients have sent a submission's headers and the first
    byte of its body, and nothing more. Under gunicorn each is refused before its body is read and holds its
    thread about 5 s without a token (gunicorn 27's gthread workers, measured); a rater's real submission holds it
    until the body has arrived (over 40 s, measured), so these tests show the least a slow client costs there."""
    host, port = base.removeprefix("http://").split(":")
    slow = [socket.create_connection((host, int(port))) for _ in range(uploads)]
    try:
        for connection in slow:
            connection.sendall(b"POST /api/assignments/1/submit HTTP/1.1\r\nHost: x\r\nContent-Type: "
                               b"application/json\r\nContent-Length: 100\r\n\r\n{")
        time.sleep(0.2)  # the uploads reach the worker first
        started = time.monotonic()
        assert requests.get(f"{base}/healthz", timeout=60).status_code == 200
        return time.monotonic() - started
    finally:
        for connection in slow:
            connection.close()


def test_raters_still_uploading_leave_the_others_answered_at_the_default_threads(sqlite_url):
    assert DEFAULT_THREADS > 1
    with _served(sqlite_url, workers=1) as (base, _server):
        assert _seconds_to_answer_beside_slow_uploads(base, DEFAULT_THREADS - 1) < 2.5


def test_at_one_thread_per_process_raters_still_uploading_hold_no_thread(sqlite_url):
    with _served(sqlite_url, "--threads", "1", workers=1) as (base, _server):
        assert _seconds_to_answer_beside_slow_uploads(base, 4) < 2.5


def test_under_gunicorn_at_one_thread_per_worker_one_rater_still_uploading_stalls_the_others(sqlite_url):
    # Why gunicorn is only for use behind a proxy that buffers whole requests (README: "Serving for real").
    with _served(sqlite_url, "--gunicorn", "--threads", "1", workers=1) as (base, _server):
        assert _seconds_to_answer_beside_slow_uploads(base, 1) > 2.5


@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="counts threads in /proc (Linux)")
def test_threads_sets_the_threads_of_each_process(sqlite_url):
    with _served(sqlite_url, "--threads", "1") as (base, server):
        with requests.Session() as session:
            for _ in range(20):
                assert session.get(f"{base}/healthz", timeout=10).status_code == 200
        # Each process: its main thread (the I/O loop) and the threads that run whole requests. The one the kernel
        # gave no connection may still be starting its threads on a loaded machine: read again for up to 10 s.
        deadline = time.monotonic() + 10
        while True:
            workers = subprocess.run(["pgrep", "-P", str(server.pid)], capture_output=True, text=True).stdout.split()
            counts = [len(os.listdir(Path("/proc") / pid / "task")) for pid in workers]
            if (len(workers) == 2 and counts == [1 + 1, 1 + 1]) or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        assert len(workers) == 2 and counts == [1 + 1, 1 + 1], counts
