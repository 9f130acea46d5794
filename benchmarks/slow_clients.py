"""Slow and idle clients beside real raters (issue 29): real next/submit latency with and without 200 slow sockets.

32 real raters (next, then submit, in a loop; a keep-alive connection each, opened anew every --reconnect-every
requests) run against `empeval serve` on a SQLite store for --seconds, first alone, then beside --partial sockets
that send part of a request's headers and stop and --trickling sockets that send a submission's headers and then
its body at a byte a second, all from 127.0.0.2 (Linux routes 127.0.0.0/8 on lo). A hostile socket the server
closes (refused over the per-address cap, or closed at a deadline) is opened again a second later, as an attacker
would. Printed per server: p50/p95/p99 of the real calls, their errors (an answer other than 200, or no answer
within --call-timeout: its latency is then counted as the time waited), requests/s, and what the hostile sockets
met (held open, refused, closed at a deadline); the figures: p99 with / without the slow sockets (goal: at most 2x
for `empeval serve`) and the errors beside them (goal: 0).

Servers (--servers): `serve` (the default: waitress processes, one per core, 4 threads, 64 connections per address
and process), `serve-nocap` (the same with --max-per-address 0: only the asynchronous reading and the deadlines
protect it) and `gunicorn` (the earlier `serve --workers 2`: gunicorn gthread, 2 workers x 4 threads; no goal, for
comparison).

    .venv/bin/python -m benchmarks slow_clients
    .venv/bin/python -m benchmarks slow_clients --servers serve --seconds 10
"""

from __future__ import annotations

import argparse
import http.client
import json
import multiprocessing
import os
import selectors
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from benchmarks.annotation_load import _ratings, _wait_for, build_study, free_port, percentile  # noqa: E402
from benchmarks.figures import Figure, at_most  # noqa: E402
from benchmarks.session import report, run_script  # noqa: E402
from empeval.server.annotation.annotators import invite  # noqa: E402
from empeval.server.store import make_engine  # noqa: E402

HOSTILE = "127.0.0.2"
RATIO_GOAL = 2.0
SERVERS: dict[str, list[str]] = {
    "serve": [],
    "serve-nocap": ["--max-per-address", "0"],
    "gunicorn": ["--gunicorn", "--workers", "2"],
}
PARTIAL_HEAD = b"GET /api/annotate/next HTTP/1.1\r\nHost: 127.0.0.1\r\nUser-Agent: slo"
TRICKLE_HEAD = (b"POST /api/assignments/1/submit HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                b"Content-Length: 100000\r\n\r\n")


# --- the real raters --------------------------------------------------------------------------------------------


def _raters(port: int, tokens: list[str], deadline: float, call_timeout: float, reconnect_every: int,
            queue: Any) -> None:
    """One client process: a thread per token doing next then submit until `deadline`; every call's latency and
    every error (a status other than 200, or an exception such as a timeout) recorded, the connection opened anew
    after an error."""
    results: list[dict] = []
    lock = threading.Lock()

    def rater(token: str) -> None:
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=call_timeout)
        headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
        mine: dict[str, Any] = {"ms": [], "requests": 0, "errors": []}

        def call(method: str, path: str, body: bytes | None = None) -> tuple[int, bytes] | None:
            nonlocal connection
            started = time.perf_counter()
            try:
                connection.request(method, path, body=body, headers=headers)
                answer = connection.getresponse()
                status, data = answer.status, answer.read()
            except (OSError, http.client.HTTPException) as error:
                mine["ms"].append((time.perf_counter() - started) * 1000)
                mine["errors"].append(type(error).__name__)
                connection.close()
                connection = http.client.HTTPConnection("127.0.0.1", port, timeout=call_timeout)
                return None
            mine["ms"].append((time.perf_counter() - started) * 1000)
            mine["requests"] += 1
            if status != 200:
                mine["errors"].append(status)
                return None
            return status, data

        while time.time() < deadline:
            if reconnect_every and mine["requests"] and mine["requests"] % reconnect_every == 0:
                connection.close()
            answer = call("GET", "/api/annotate/next")
            if answer is None:
                continue
            assignment = json.loads(answer[1]).get("assignment")
            if assignment is None:
                mine["errors"].append("no work left")
                break
            if time.time() >= deadline:
                break
            call("POST", f"/api/assignments/{assignment['assignment_id']}/submit",
                 json.dumps(_ratings(assignment)).encode())
        connection.close()
        with lock:
            results.append(mine)

    threads = [threading.Thread(target=rater, args=(token,)) for token in tokens]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    queue.put(results)


def real_load(port: int, tokens: list[str], seconds: float, args: argparse.Namespace) -> dict:
    """The raters for `seconds` over --client-processes processes: latencies (ms), errors, requests/s."""
    context = multiprocessing.get_context("fork")
    queue = context.Queue()
    deadline = time.time() + seconds
    started = time.perf_counter()
    processes = [context.Process(target=_raters, args=(port, tokens[i::args.client_processes], deadline,
                                                      args.call_timeout, args.reconnect_every, queue))
                 for i in range(args.client_processes)]
    for process in processes:
        process.start()
    merged: dict[str, Any] = {"ms": [], "requests": 0, "errors": []}
    for _ in processes:
        for mine in queue.get():
            for key, value in mine.items():
                merged[key] += value
    for process in processes:
        process.join()
    merged["elapsed"] = time.perf_counter() - started
    return merged


# --- the slow sockets -------------------------------------------------------------------------------------------


def _hostile(port: int, partial: int, trickling: int, stop: Any, queue: Any) -> None:
    """Keep `partial` + `trickling` slow sockets open from 127.0.0.2 until `stop` is set (a slot whose socket the
    server closed connects again a second later); what they met goes to `queue`."""
    selector = selectors.DefaultSelector()
    slots: list[dict[str, Any]] = [{"trickle": i >= partial, "sock": None, "retry_at": 0.0, "opened": 0.0,
                                    "next_byte": 0.0} for i in range(partial + trickling)]
    met = {"opened": 0, "refused": 0, "closed_later": 0, "connect_failed": 0, "held_samples": []}
    next_sample = time.monotonic() + 1

    def close(slot: dict[str, Any], *, now: float) -> None:
        selector.unregister(slot["sock"])
        slot["sock"].close()
        met["refused" if now - slot["opened"] < 1.0 else "closed_later"] += 1
        slot["sock"], slot["retry_at"] = None, now + 1.0

    while not stop.is_set():
        now = time.monotonic()
        for slot in slots:
            if slot["sock"] is None and now >= slot["retry_at"]:
                connection = socket.socket()
                connection.bind((HOSTILE, 0))
                connection.settimeout(1.0)
                try:
                    connection.connect(("127.0.0.1", port))
                    connection.sendall(TRICKLE_HEAD if slot["trickle"] else PARTIAL_HEAD)
                except OSError:
                    connection.close()
                    met["connect_failed"] += 1
                    slot["retry_at"] = now + 1.0
                    continue
                connection.setblocking(False)
                selector.register(connection, selectors.EVENT_READ, slot)
                slot.update(sock=connection, opened=now, next_byte=now + 1.0)
                met["opened"] += 1
            elif slot["sock"] is not None and slot["trickle"] and now >= slot["next_byte"]:
                try:
                    slot["sock"].send(b" ")
                    slot["next_byte"] += 1.0
                except BlockingIOError:
                    pass
                except OSError:
                    close(slot, now=now)
        for key, _ in selector.select(timeout=0.05):
            slot = key.data
            try:
                data = slot["sock"].recv(4096)
            except BlockingIOError:
                continue
            except OSError:
                data = b""
            if not data or data.startswith(b"HTTP/1.1 503"):  # closed, or the cap's answer before the close
                close(slot, now=time.monotonic())
        if time.monotonic() >= next_sample:
            met["held_samples"].append(sum(slot["sock"] is not None for slot in slots))
            next_sample += 1
    for slot in slots:
        if slot["sock"] is not None:
            slot["sock"].close()
    queue.put(met)


# --- one server ---------------------------------------------------------------------------------------------------


def measure(name: str, url: str, tokens: list[str], args: argparse.Namespace) -> dict:
    """Start the server `name` on `url`, run the raters alone then beside the slow sockets, stop it."""
    port = free_port()
    command = [sys.executable, "-m", "empeval.cli", "serve", "--host", "127.0.0.1", "--port", str(port),
               *SERVERS[name]]
    server = subprocess.Popen(command, env={**os.environ, "EMPEVAL_DATABASE_URL": url}, cwd=REPO,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    context = multiprocessing.get_context("fork")
    try:
        _wait_for(port)
        real_load(port, tokens, 2.0, args)  # warm-up: every process has served a claim and a submit
        alone = real_load(port, tokens, args.seconds, args)
        stop, queue = context.Event(), context.Queue()
        hostile = context.Process(target=_hostile, args=(port, args.partial, args.trickling, stop, queue))
        hostile.start()
        time.sleep(3.0)  # the slow sockets are in place (and over the cap, refused) before the raters start
        beside = real_load(port, tokens, args.seconds, args)
        stop.set()
        met = queue.get(timeout=60)
        hostile.join(timeout=30)
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, signal.SIGKILL)
            server.wait(timeout=30)
    return {"alone": alone, "beside": beside, "hostile": met}


def _line(label: str, phase: dict) -> str:
    ms = phase["ms"]
    errors = phase["errors"]
    kinds = sorted({str(error) for error in errors})
    return (f"  {label:<26} p50 {percentile(ms, 0.5):8.1f} ms, p95 {percentile(ms, 0.95):8.1f} ms, p99 "
            f"{percentile(ms, 0.99):8.1f} ms; {phase['requests'] / phase['elapsed']:6.1f} answered req/s; "
            f"errors {len(errors)}{' ' + str(kinds) if kinds else ''}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--servers", default="serve,serve-nocap,gunicorn", help=f"of {', '.join(SERVERS)}")
    parser.add_argument("--raters", type=int, default=32, help="real raters")
    parser.add_argument("--partial", type=int, default=100, help="sockets that send part of the headers and stop")
    parser.add_argument("--trickling", type=int, default=100, help="sockets that trickle a body at 1 byte/s")
    parser.add_argument("--seconds", type=float, default=20.0, help="each phase (alone, beside the slow sockets)")
    parser.add_argument("--call-timeout", type=float, default=10.0, help="a real call unanswered after this fails")
    parser.add_argument("--client-processes", type=int, default=2, help="processes of the real raters")
    parser.add_argument("--reconnect-every", type=int, default=100,
                        help="requests per keep-alive connection before a rater opens another (spreads the raters "
                             "over the server's processes)")
    parser.add_argument("--assignments", type=int, default=20000, help="assignments of the study (one per server)")
    args = parser.parse_args()
    names = [name.strip() for name in args.servers.split(",") if name.strip()]
    unknown = [name for name in names if name not in SERVERS]
    if unknown:
        parser.error(f"unknown server(s) {', '.join(unknown)}; known: {', '.join(SERVERS)}")

    print(f"load average at start: {' '.join(f'{x:.2f}' for x in os.getloadavg())}; cpus: {os.cpu_count()}; "
          f"{args.raters} raters, {args.partial} partial-header + {args.trickling} trickling sockets from {HOSTILE}, "
          f"{args.seconds:.0f} s per phase")
    scratch = Path(tempfile.mkdtemp(prefix="empeval-slow-"))
    try:
        for name in names:
            url = f"sqlite:///{scratch / name}.db"
            build_study(url, args.assignments, done=0.0, active=0, callers=0)
            engine = make_engine(url)
            tokens = [invite(engine, f"rater-{i}", "scale")[1] for i in range(args.raters)]
            engine.dispose()
            result = measure(name, url, tokens, args)
            alone, beside, met = result["alone"], result["beside"], result["hostile"]
            held = met["held_samples"] or [0]
            print(f"\n{name} ({' '.join(['serve', *SERVERS[name]])}), load {os.getloadavg()[0]:.2f}")
            print(_line("alone", alone))
            print(_line("beside the slow sockets", beside))
            print(f"  slow sockets: {met['opened']} connections opened, held open {min(held)}-{max(held)} at once "
                  f"(median {sorted(held)[len(held) // 2]}), {met['refused']} refused within 1 s, "
                  f"{met['closed_later']} closed later (deadlines), {met['connect_failed']} connects failed")
            ratio = percentile(beside["ms"], 0.99) / percentile(alone["ms"], 0.99)
            goal = name.startswith("serve")
            report(Figure(f"{name}: p99 of real next/submit beside 200 slow sockets / alone", ratio, "x",
                          goal=at_most(RATIO_GOAL) if goal else None, fmt=".2f",
                          note=f"{percentile(beside['ms'], 0.99):.1f} vs {percentile(alone['ms'], 0.99):.1f} ms"))
            report(Figure(f"{name}: errors of real calls beside the slow sockets", len(beside["errors"]),
                          goal=at_most(0) if goal else None,
                          note=f"{beside['requests']} answered; {len(alone['errors'])} errors alone"))
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    print(f"\nload average at end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    run_script(__file__, main)
