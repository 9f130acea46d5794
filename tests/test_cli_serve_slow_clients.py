"""`empeval serve` holds up against slow and idle clients by default (issue 29), and its default is a production
server (issue 31): sockets that stall in a request line or trickle a body leave real calls answered at once; a
request must arrive whole within --request-timeout and a silent connection is closed after --idle-timeout; one
address holds at most --max-per-address connections per process while others are served; `--dev` is Werkzeug's
server; SIGTERM stops every process and a process that dies is replaced.

A real `empeval serve` on a real SQLite file on 127.0.0.1; the hostile sockets come from 127.0.0.2 (Linux routes
all of 127.0.0.0/8 on lo). Each test stops the server and the sockets it starts; every wait is bounded polling."""
from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest
import requests

from empeval.server.annotation.annotators import invite
from empeval.server.store import make_engine
from tests.annotation.conftest import add_responses, make_study
from tests.conftest import REPO

HOSTILE = "127.0.0.2"
CRITERIA = ("empathy", "relevance", "fluency")
PROMPT_S = 2.0  # a real call beside the hostile sockets is answered within this (milliseconds when all is well)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _children(pid: int) -> list[int]:
    found = subprocess.run(["pgrep", "-P", str(pid)], capture_output=True, text=True).stdout.split()
    return [int(child) for child in found]


def _alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def _until(condition: Callable[[], bool], seconds: float, what: str) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, what
        time.sleep(0.05)


@dataclass
class Server:
    base: str
    port: int
    process: subprocess.Popen
    stderr: Path

    def said(self) -> str:
        """What the server has written to its stderr so far."""
        return self.stderr.read_text(errors="replace")


@contextmanager
def served(url: str, *options: str, env: dict[str, str] | None = None) -> Iterator[Server]:
    """`empeval serve --port P OPTIONS` on `url` in its own process group, answering /healthz; stopped on exit."""
    port = _free_port()
    stderr = Path(tempfile.mkstemp(prefix="serve-", suffix=".stderr")[1])
    with stderr.open("wb") as sink:
        process = subprocess.Popen([sys.executable, "-m", "empeval.cli", "--database-url", url, "serve", "--port",
                                    str(port), *options], cwd=REPO, env={**os.environ, **(env or {})},
                                   stdout=subprocess.DEVNULL, stderr=sink, start_new_session=True)
    base = f"http://127.0.0.1:{port}"
    server = Server(base, port, process, stderr)
    try:
        deadline = time.monotonic() + 60
        while True:
            assert process.poll() is None, f"serve exited with {process.returncode}: {server.said()}"
            try:
                if requests.get(f"{base}/healthz", timeout=2).status_code == 200:
                    break
            except requests.ConnectionError:
                pass
            assert time.monotonic() < deadline, f"serve did not answer within 60 s: {server.said()}"
            time.sleep(0.1)
        if "--workers" in options and "--dev" not in options:
            # The first process can answer before a busy machine lets the supervisor fork the others.
            workers = int(options[options.index("--workers") + 1])
            try:
                _until(lambda: len(_children(process.pid)) == workers, max(deadline - time.monotonic(), 5),
                       f"serve did not start its {workers} processes")
            except AssertionError as failed:  # its stderr as it is at the failure, read only then
                raise AssertionError(f"{failed}: {server.said()}") from None
        yield server
    finally:
        try:
            os.killpg(process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        process.wait(timeout=30)
        stderr.unlink()


def hostile_socket(port: int) -> socket.socket:
    """A connection to the server from 127.0.0.2."""
    connection = socket.socket()
    connection.bind((HOSTILE, 0))
    connection.connect(("127.0.0.1", port))
    return connection


def closed_by_server(connection: socket.socket, wait: float = 0.0) -> bool:
    """Whether the server has closed `connection` (or answered and closed it), waiting up to `wait` seconds."""
    connection.settimeout(max(wait, 0.001))
    try:
        while True:
            data = connection.recv(4096)
            if not data:
                return True
            # an answer (the cap's 503): read on to the close
    except (TimeoutError, BlockingIOError):
        return False
    except OSError:  # reset
        return True


class Trickler:
    """Sockets that send a request a byte every `every` seconds from a thread, until stopped (bounded by `limit`
    seconds). `head` is sent first, whole; `tail` then byte by byte."""

    def __init__(self, sockets: list[socket.socket], head: bytes, tail: bytes, every: float, limit: float = 120):
        self.sockets, self.head, self.tail, self.every, self.limit = sockets, head, tail, every, limit
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        for connection in self.sockets:
            connection.sendall(self.head)
        deadline = time.monotonic() + self.limit
        for byte in self.tail:
            if self.stop.wait(self.every) or time.monotonic() > deadline:
                return
            for connection in self.sockets:
                try:
                    connection.send(bytes([byte]))
                except OSError:
                    pass  # closed by the server: what the deadline test waits for

    def __enter__(self) -> Trickler:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join(timeout=10)
        for connection in self.sockets:
            connection.close()


@pytest.fixture
def study_store(sqlite_url, sample_templates, monkeypatch) -> Iterator[tuple[str, list[str], dict[str, str]]]:
    """A SQLite store with a Likert study of the sample: (its URL, 4 raters' tokens, the env that signs them)."""
    sample_templates.fill(sqlite_url)
    engine = make_engine(sqlite_url)
    add_responses(engine, ["sys-a", "sys-b", "sys-c"], 40)
    make_study(engine, count=40, k=2, per_assignment=4, controls=[])
    secret = uuid.uuid4().hex * 2
    monkeypatch.setenv("EMPEVAL_SECRET_KEY", secret)
    tokens = [invite(engine, f"rater{i}", "pilot")[1] for i in range(4)]
    engine.dispose()
    yield sqlite_url, tokens, {"EMPEVAL_SECRET_KEY": secret}


def real_calls(base: str, tokens: list[str]) -> list[float]:
    """Each rater asks for work and submits it whole, with /healthz between: the seconds each call took."""
    took = []
    for token in tokens:
        headers = {"Authorization": f"Bearer {token}"}
        started = time.monotonic()
        assert requests.get(f"{base}/healthz", timeout=30).status_code == 200
        took.append(time.monotonic() - started)
        started = time.monotonic()
        answer = requests.get(f"{base}/api/annotate/next", headers=headers, timeout=30)
        took.append(time.monotonic() - started)
        assert answer.status_code == 200, answer.text
        assignment = answer.json()["assignment"]
        body = {"submission_id": uuid.uuid4().hex,
                "ratings": [{"item_id": item["item_id"], "scores": {c: 3 for c in CRITERIA}}
                            for item in assignment["items"]]}
        started = time.monotonic()
        sent = requests.post(f"{base}/api/assignments/{assignment['assignment_id']}/submit", json=body,
                             headers=headers, timeout=30)
        took.append(time.monotonic() - started)
        assert sent.status_code == 200, sent.text
    return took


def test_stalled_request_lines_and_trickled_bodies_leave_real_calls_answered_promptly(study_store):
    url, tokens, env = study_store
    with served(url, "--workers", "2", "--threads", "1", env=env) as server, ExitStack() as stack:
        # What took gunicorn --workers 2 down (issue 29): 16 sockets that send part of a request line and stop.
        stalled = [stack.enter_context(hostile_socket(server.port)) for _ in range(16)]
        for connection in stalled:
            connection.sendall(b"GET /api/annotate/ne")
        # And submissions whose body comes a byte a second: each would hold a gunicorn thread while it trickles.
        trickled = [hostile_socket(server.port) for _ in range(8)]
        head = (b"POST /api/assignments/1/submit HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                b"Content-Length: 200\r\n\r\n")
        stack.enter_context(Trickler(trickled, head, b"{" + b" " * 199, every=1.0))
        time.sleep(0.5)  # the hostile sockets reach both processes first
        took = real_calls(server.base, tokens)
        assert max(took) < PROMPT_S, [round(t, 3) for t in took]
        assert not any(closed_by_server(c) for c in stalled), "stalled sockets were closed before their deadlines"


def test_a_request_must_arrive_whole_within_the_request_timeout_and_silence_ends_at_the_idle_timeout(sqlite_url):
    with served(sqlite_url, "--workers", "1", "--request-timeout", "3", "--idle-timeout", "2") as server:
        silent = hostile_socket(server.port)
        trickling, body = hostile_socket(server.port), hostile_socket(server.port)
        keep_alive = requests.Session()
        head = b"POST /api/assignments/1/submit HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n"
        with silent, Trickler([trickling], b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Pad: ", b"a" * 60, every=0.25), \
                Trickler([body], head, b" " * 60, every=0.25):
            started = time.monotonic()
            _until(lambda: closed_by_server(silent), 6, "a connection that never sent a byte was not closed")
            silent_for = time.monotonic() - started
            # Never silent for 0.25 s, so only the deadline of the whole request can end them: headers, or body.
            _until(lambda: closed_by_server(trickling), 8, "a trickling request head was not closed at its deadline")
            _until(lambda: closed_by_server(body), 1, "a trickling body was not closed at its deadline")
            trickled_for = time.monotonic() - started
            # A keep-alive connection whose requests each arrive at once outlives the request timeout.
            for _ in range(8):
                assert keep_alive.get(f"{server.base}/healthz", timeout=5).status_code == 200
                time.sleep(0.5)
        keep_alive.close()
    assert 1.5 <= silent_for <= 4.5, silent_for
    assert 2.5 <= trickled_for <= 5.5, trickled_for


def test_one_address_holds_at_most_the_cap_while_other_addresses_are_served(sqlite_url):
    with served(sqlite_url, "--workers", "1", "--max-per-address", "4") as server, ExitStack() as stack:
        hostile = [stack.enter_context(hostile_socket(server.port)) for _ in range(10)]
        time.sleep(0.5)
        refused = [closed_by_server(connection, wait=0.2) for connection in hostile]
        assert refused == [False] * 4 + [True] * 6
        assert requests.get(f"{server.base}/healthz", timeout=PROMPT_S).status_code == 200  # from 127.0.0.1
        # The cap counts open connections: once the address closes some, it is served again.
        for connection in hostile[:4]:
            connection.close()
        time.sleep(0.3)
        again = stack.enter_context(hostile_socket(server.port))
        again.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        again.settimeout(5)
        assert again.recv(64).startswith(b"HTTP/1.1 200")


def test_serve_is_the_production_server_by_default_and_werkzeug_only_with_dev(sqlite_url):
    with served(sqlite_url, "--workers", "2") as server:
        answer = requests.get(f"{server.base}/healthz", headers={"X-Forwarded-Proto": "https"}, timeout=10)
        assert answer.headers["Server"] == "empeval"
        assert "Strict-Transport-Security" not in answer.headers  # no --proxies: a forwarded header means nothing
        assert len(_children(server.process.pid)) == 2, server.said()
        assert "ended" not in server.said()  # the two are the first two: none died and was replaced
    with served(sqlite_url, "--proxies", "1", "--workers", "1") as server:
        answer = requests.get(f"{server.base}/healthz", headers={"X-Forwarded-Proto": "https"}, timeout=10)
        assert "Strict-Transport-Security" in answer.headers  # with --proxies the app's ProxyFix reads it
    with served(sqlite_url, "--dev") as server:
        assert requests.get(f"{server.base}/healthz", timeout=10).headers["Server"].startswith("Werkzeug")
        assert _children(server.process.pid) == []


def test_sigterm_stops_every_process_and_a_process_that_dies_is_replaced(sqlite_url):
    with served(sqlite_url, "--workers", "2") as server:
        first = _children(server.process.pid)
        assert len(first) == 2, server.said()
        os.kill(first[0], signal.SIGKILL)
        _until(lambda: len(set(_children(server.process.pid)) - {first[0]}) == 2, 10, "the dead process was not "
               "replaced")
        assert requests.get(f"{server.base}/healthz", timeout=10).status_code == 200
        children = _children(server.process.pid)
        os.kill(server.process.pid, signal.SIGTERM)  # the supervisor alone: it stops the others
        assert server.process.wait(timeout=20) == 0
        _until(lambda: not any(_alive(pid) for pid in children), 10, "a server process outlived SIGTERM")
        with pytest.raises(requests.ConnectionError):
            requests.get(f"{server.base}/healthz", timeout=2)


def test_serve_help_states_the_defaults_the_server_applies():
    from click.testing import CliRunner

    from empeval.cli import cli
    from empeval.server.web import serving

    said = " ".join(CliRunner().invoke(cli, ["serve", "--help"]).output.split())
    for option, default in (("--threads", serving.DEFAULT_THREADS),
                            ("--request-timeout", serving.DEFAULT_REQUEST_TIMEOUT_S),
                            ("--idle-timeout", serving.DEFAULT_IDLE_TIMEOUT_S),
                            ("--max-per-address", serving.DEFAULT_PER_ADDRESS),
                            ("--max-connections", serving.DEFAULT_MAX_CONNECTIONS)):
        described = said.split(option, 1)[1].split(" --", 1)[0]
        assert f"Default: {default:g}" in described, (option, described)
