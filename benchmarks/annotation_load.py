"""Load benchmark of the annotation path: N concurrent annotators against gunicorn on 127.0.0.1.

Each simulated annotator asks for its next assignment and submits it, until the study runs out of work
or the time limit is reached. Prints submissions/s, p50/p99 latency of both calls, acknowledged vs stored
ratings (they must be equal), and the same server's throughput on a trivial endpoint (/healthz) at the
same concurrency as the ceiling, with the ratio.

    .venv/bin/python benchmarks/annotation_load.py --annotators 16 --workers 2 --contexts 200
"""

from __future__ import annotations

import argparse
import os
import random
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import requests
from sqlalchemy import func, select
from sqlalchemy.orm import Session

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from server.annotation.annotators import invite  # noqa: E402
from server.datasets.ed_csv import parse_ed_csv  # noqa: E402
from server.datasets.importer import import_dialogues  # noqa: E402
from server.store import make_engine, unit_of_work, upgrade  # noqa: E402
from server.store.models import Context, Dialogue, Rating, Response, System  # noqa: E402
from tasks.study_create import create_study  # noqa: E402
from tasks.study_file import parse_study  # noqa: E402


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def build_store(url: str, contexts: int, systems: int, k: int) -> None:
    engine = make_engine(url)
    upgrade(engine)
    import_dialogues(
        engine, parse_ed_csv(REPO / "server/data/ed_sample/test.csv", "test"), dataset="empatheticdialogues"
    )
    names = [f"system-{i}" for i in range(systems)]
    with unit_of_work(engine) as session:
        ids = session.scalars(
            select(Context.id).join(Dialogue).where(Dialogue.split == "test").order_by(Context.id).limit(contexts)
        ).all()
        for name in names:
            system = System(name=name, kind="bench", version="1", parameters={})
            session.add(system)
            session.flush()
            session.add_all(
                Response(
                    context_id=c,
                    system_id=system.id,
                    text=f"{name} says something kind.",
                    provenance={},
                    latency_ms=0.0,
                )
                for c in ids
            )
    create_study(
        engine,
        parse_study(
            {
                "name": "load",
                "seed": 1,
                "contexts": {"count": len(ids)},
                "systems": {"names": names},
                "design": {"ratings_per_response": k, "items_per_assignment": 10},
            }
        ),
    )
    engine.dispose()


def percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def annotator_loop(base: str, token: str, deadline: float, stats: dict, lock: threading.Lock) -> None:
    session = requests.Session()
    headers = {"Authorization": f"Bearer {token}"}
    rng = random.Random(token)
    while time.perf_counter() < deadline:
        t0 = time.perf_counter()
        body = session.get(f"{base}/api/annotate/next", headers=headers, timeout=30).json()
        t1 = time.perf_counter()
        assignment = body.get("assignment")
        with lock:
            stats["next_ms"].append((t1 - t0) * 1000)
        if assignment is None:
            return
        ratings = [
            {
                "item_id": i["item_id"],
                "scores": {c["key"]: rng.randint(1, 5) for c in assignment["criteria"]},
                "seconds": 5.0,
            }
            for i in assignment["items"]
        ]
        payload = {"submission_id": uuid.uuid4().hex, "ratings": ratings}
        t2 = time.perf_counter()
        answer = session.post(
            f"{base}/api/assignments/{assignment['assignment_id']}/submit", json=payload, headers=headers, timeout=30
        )
        t3 = time.perf_counter()
        with lock:
            stats["submit_ms"].append((t3 - t2) * 1000)
            if answer.status_code == 200:
                stats["acknowledged"] += answer.json()["ratings"]
                stats["submissions"] += 1
            else:
                stats["errors"].append(answer.status_code)


def ceiling(base: str, concurrency: int, seconds: float) -> float:
    """Requests/s of GET /healthz at the same concurrency: what the server does with no real work."""
    count = [0]
    lock = threading.Lock()
    deadline = time.perf_counter() + seconds

    def loop():
        s = requests.Session()
        while time.perf_counter() < deadline:
            s.get(f"{base}/healthz", timeout=30)
            with lock:
                count[0] += 1

    start = time.perf_counter()
    with ThreadPoolExecutor(concurrency) as pool:
        for _ in range(concurrency):
            pool.submit(loop)
    return count[0] / (time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--annotators", type=int, default=16)
    parser.add_argument("--workers", type=int, default=2, help="gunicorn worker processes")
    parser.add_argument("--contexts", type=int, default=200)
    parser.add_argument("--systems", type=int, default=4)
    parser.add_argument("--k", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=30.0, help="time limit of the rating phase")
    parser.add_argument("--database-url", default=None, help="default: a fresh SQLite file")
    args = parser.parse_args()

    scratch = Path(tempfile.mkdtemp(prefix="empeval-load-"))
    url = args.database_url or f"sqlite:///{scratch / 'load.db'}"
    build_store(url, args.contexts, args.systems, args.k)
    engine = make_engine(url)
    tokens = [invite(engine, f"bench-{i}", "load")[1] for i in range(args.annotators)]

    port = free_port()
    env = {**os.environ, "EMPEVAL_DATABASE_URL": url}
    server = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "entry.cli",
            "serve",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--workers",
            str(args.workers),
        ],
        env=env,
        cwd=REPO,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        for _ in range(100):
            try:
                if requests.get(f"{base}/healthz", timeout=1).ok:
                    break
            except requests.ConnectionError:
                time.sleep(0.2)
        else:
            raise SystemExit("the server did not start")
        stats = {"next_ms": [], "submit_ms": [], "acknowledged": 0, "submissions": 0, "errors": []}
        lock = threading.Lock()
        start = time.perf_counter()
        deadline = start + args.seconds
        with ThreadPoolExecutor(args.annotators) as pool:
            for token in tokens:
                pool.submit(annotator_loop, base, token, deadline, stats, lock)
        elapsed = time.perf_counter() - start
        trivial = ceiling(base, args.annotators, min(10.0, args.seconds))
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(timeout=30)

    with Session(engine) as session:
        stored = session.scalar(select(func.count(Rating.id)))
    requests_per_s = (len(stats["next_ms"]) + len(stats["submit_ms"])) / elapsed
    print(
        f"store: {url.split(':')[0]}, gunicorn workers: {args.workers}, annotators: {args.annotators}, "
        f"{args.contexts} contexts x {args.systems} systems x k={args.k}"
    )
    print(
        f"submissions: {stats['submissions']} in {elapsed:.1f} s = {stats['submissions'] / elapsed:.1f} submissions/s "
        f"({stats['acknowledged'] / elapsed:.0f} ratings/s)"
    )
    print(
        f"next assignment latency: p50 {percentile(stats['next_ms'], 0.5):.1f} ms, "
        f"p99 {percentile(stats['next_ms'], 0.99):.1f} ms"
    )
    print(
        f"submit latency:          p50 {percentile(stats['submit_ms'], 0.5):.1f} ms, "
        f"p99 {percentile(stats['submit_ms'], 0.99):.1f} ms"
    )
    print(
        f"ratings acknowledged: {stats['acknowledged']}, stored: {stored}, equal: {stats['acknowledged'] == stored}; "
        f"errors: {len(stats['errors'])} {sorted(set(stats['errors']))}"
    )
    print(
        f"API requests/s: {requests_per_s:.1f}; trivial endpoint ceiling: {trivial:.1f} req/s; "
        f"ratio API/ceiling: {requests_per_s / trivial:.2f}"
    )
    engine.dispose()


if __name__ == "__main__":
    main()
