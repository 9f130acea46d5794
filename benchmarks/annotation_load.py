"""The annotation API at scale (issue 12, goal 2), on SQLite and PostgreSQL. Prints goal, measured value and ratio:

1. SQL statements of `next` (a claim, a resume) and `submit`, counted at the engine (goal: at most 6 each, with
   3 or 30 items per assignment; BEGIN, COMMIT and PRAGMA not counted);
2. `next` per call (median of --calls claims, each undone untimed so every call meets the same store) on studies
   of 100 to 100,000 assignments, half of them submitted, some in progress, the callers with history (goal: the
   largest within 1.3x of the smallest);
2b. (part "lead") `next` of a rater working alone through a study of --lead-assignments, at her first claims and
   up to her --lead-upto-th, with the claim as it runs (the walk starts after her last claim) beside a walk from
   the start on a study built alike (no goal: how flat `next` stays for a rater far ahead of the others);
3. N concurrent simulated annotators (next, then submit, in a loop) against gunicorn on 127.0.0.1, against the
   same server's trivial endpoint (/healthz: a constant JSON answer, no database) at the same concurrency
   (goal: at least 0.5 of its requests/s), with submissions/s, p50/p99, acknowledged vs stored ratings and the
   CPU the load client and the server used (a client that used its CPU to the full measured itself); on SQLite
   the same load then runs against benchmarks/floor_app.py (the same routes, JSON and gunicorn settings over raw
   sqlite3 with no ORM, checks or validation), whose ratio is the most any annotation API on this stack reaches,
   and against benchmarks/schema_floor_app.py (empeval's own statements, schema and transactions through raw
   sqlite3, with the floor's Python), whose ratio is the most any code on top of empeval's SQL reaches;
3b. (part "settings", SQLite) part 3 and the floor again under each gunicorn WORKERSxTHREADS of --settings, a line
   each (no goal: how the ratio and the CPU per request follow the setting, beside `empeval serve`'s default);
3c. (part "durability", SQLite) part 3's load against a server whose SQLite connections run synchronous=NORMAL, then
   against one running the store's own setting, FULL (server.store.engine.SQLITE_SYNCHRONOUS: a commit returns once
   its WAL frames are on the disk), each on a new study: submissions/s and submit p50/p99 of each, and what FULL
   costs (no goal: the price of an acknowledged rating surviving a power loss). The figure depends on the disk's
   fsync: the scratch folder's file system is printed with it.
3d. (part "think", issue 31) raters as they work: each asks for a 10-item assignment, thinks U(--think) seconds
   (30-90 by default), submits it and asks again, every request over a new connection (Connection: close, as
   browsers behind NAT and phones often do), each rater from her own loopback address; per level of --levels
   (500 to 5,000 raters) they arrive over --ramp seconds, then the requests started in the --steady phase are
   timed. A row per level: requests/s, p50/p95/p99 of all, of `next` and of `submit`, errors, the CPU of the load
   client (asyncio processes that share the machine's cores with the server) and of the server, the load average.
   SQLite is served by one `empeval serve` of --workers processes, PostgreSQL by --think-servers `empeval serve`
   commands of one process each on the one database (the scale-out path); with both stores the curves are printed
   side by side. Goals: p99 < --think-p99-ms (500) at the largest level, 0 errors, ratings acknowledged = stored.
   --probe-writer times SQLite's writer gate in the server's processes (writes/s, the share of the time it is
   held, ms waited and held per write); --nice -10 puts the servers and the client ahead of other work on a shared
   machine (the niceness is printed with the load average).

The studies of parts 2, 2b, 3 and 3b are written with bulk inserts (COPY on PostgreSQL), not by `empeval study create`:
10 items per assignment, k = 3, items shuffled per round; synthetic two-turn dialogues, one per context.

    .venv/bin/python -m benchmarks annotation_load                       # both stores, every part
    .venv/bin/python -m benchmarks annotation_load --stores sqlite --sizes 100,1000 --seconds 10
    .venv/bin/python -m benchmarks annotation_load --stores sqlite --parts durability --seconds 20
    .venv/bin/python -m benchmarks annotation_load --parts think                   # about 10 minutes a store
    .venv/bin/python -m benchmarks annotation_load --stores sqlite --parts think --levels 3,6 --think 0.1,0.3 \
        --ramp 0.3 --steady 1 --client-processes 1                                 # the smoke size (its test's)

Goals and the ratios without a goal are printed as figures (benchmarks/figures.py), each named after its store.

PostgreSQL: --postgres-url (an admin URL; a database per study is created and dropped), else a throwaway cluster
on 127.0.0.1 as the tests start one (needs the PostgreSQL server binaries).
"""

from __future__ import annotations

import argparse
import http.client
import json
import multiprocessing
import os
import random
import resource
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from sqlalchemy import Engine, func, select, text  # noqa: E402
from sqlalchemy.orm import Session  # noqa: E402

from benchmarks.figures import Figure, at_least, at_most, below  # noqa: E402
from benchmarks.session import report, run_script  # noqa: E402
from empeval.server.annotation.annotators import invite  # noqa: E402
from empeval.server.annotation.handout import next_assignment_payload, release  # noqa: E402
from empeval.server.annotation.submission import submit_assignment  # noqa: E402
from empeval.server.store import make_engine, unit_of_work, upgrade  # noqa: E402
from empeval.server.store.engine import SQLITE_SYNCHRONOUS, counting_statements  # noqa: E402
from empeval.server.store.kinds.likert import Rating  # noqa: E402
from empeval.server.store.models import Study, System  # noqa: E402
from empeval.server.web.gunicorn_app import DEFAULT_THREADS  # noqa: E402
from empeval.tasks.study_file import parse_study  # noqa: E402

ITEMS_PER_ASSIGNMENT = 10
K = 3
SYSTEMS = 4
STATEMENT_GOAL = 6
SCALING_GOAL = 1.3
THROUGHPUT_GOAL = 0.5
CRITERIA = ("empathy", "relevance", "fluency")


# --- stores -------------------------------------------------------------------------------------------------


class Stores:
    """Fresh databases on demand: SQLite files in a scratch folder, PostgreSQL databases on one server."""

    def __init__(self, scratch: Path, postgres_admin_url: str | None):
        self.scratch, self.postgres_admin_url = scratch, postgres_admin_url
        self._created: list[str] = []

    def new(self, store: str, name: str) -> str:
        if store == "sqlite":
            return f"sqlite:///{self.scratch / name}.db"
        assert self.postgres_admin_url is not None
        admin = make_engine(self.postgres_admin_url, isolation_level="AUTOCOMMIT")
        with admin.connect() as connection:
            connection.exec_driver_sql(f'DROP DATABASE IF EXISTS "{name}"')
            connection.exec_driver_sql(f'CREATE DATABASE "{name}"')
        admin.dispose()
        self._created.append(name)
        return self.postgres_admin_url.rsplit("/", 1)[0] + f"/{name}"

    def drop_all(self) -> None:
        if not self._created:
            return
        admin = make_engine(self.postgres_admin_url, isolation_level="AUTOCOMMIT")
        with admin.connect() as connection:
            for name in self._created:
                connection.exec_driver_sql(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        admin.dispose()


@contextmanager
def postgres_admin(url: str | None, wanted: bool) -> Iterator[str | None]:
    """The admin URL given, else a throwaway cluster's (the tests' PostgresServer), else None."""
    if url or not wanted:
        yield url
        return
    from tests.conftest import PostgresServer, _postgres_bin

    bindir = _postgres_bin()
    if bindir is None:
        print("PostgreSQL: server binaries not found, skipped (give --postgres-url)")
        yield None
        return
    server = PostgresServer(bindir)
    server.start()
    try:
        yield server.admin_url
    finally:
        server.stop()


# --- a synthetic study, bulk-written -----------------------------------------------------------------------


def _bulk(engine: Engine, table: str, columns: Sequence[str], rows: Iterable[Sequence[Any]]) -> None:
    """Write rows fast: COPY on PostgreSQL, one executemany on SQLite (datetimes as SQLAlchemy stores them)."""
    raw = engine.raw_connection()
    try:
        cursor = raw.cursor()
        if engine.dialect.name == "postgresql":
            with cursor.copy(f"COPY {table} ({', '.join(columns)}) FROM STDIN") as copy:
                for row in rows:
                    copy.write_row(row)
        else:
            def plain(value: Any) -> Any:
                if isinstance(value, datetime):
                    return value.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S.%f")
                return value

            cursor.executemany(f"INSERT INTO {table} ({', '.join(columns)}) VALUES ({', '.join('?' * len(columns))})",
                               ([plain(v) for v in row] for row in rows))
        raw.commit()
    finally:
        raw.close()


class Built:
    def __init__(self, study: str, assignments: int, callers: list[int]):
        self.study, self.assignments, self.callers = study, assignments, callers


def build_study(url: str, assignments: int, *, done: float, active: int, callers: int, seed: int = 1) -> Built:
    """A study of `assignments` assignments (10 items each, k = 3, items shuffled per round), the first `done` of
    them in design order submitted (by raters with up to two assignments each, seen rows written), `active` more
    in progress, and `callers` raters who each submitted two of the done ones (their history)."""
    rng = random.Random(seed)
    engine = make_engine(url)
    upgrade(engine)
    now = datetime.now(UTC)
    n_items = -(-assignments * ITEMS_PER_ASSIGNMENT // K)
    n_contexts = -(-n_items // SYSTEMS)
    n_items = n_contexts * SYSTEMS
    with unit_of_work(engine) as session:
        spec = parse_study({"name": "scale", "seed": seed, "contexts": {"count": 1},
                            "systems": {"names": [f"system-{s}" for s in range(SYSTEMS)]},
                            "design": {"ratings_per_response": K, "items_per_assignment": ITEMS_PER_ASSIGNMENT,
                                       "assignment_minutes": 600}})
        session.add_all(System(id=s + 1, name=f"system-{s}", kind="bench", version="1", parameters={})
                        for s in range(SYSTEMS))
        session.add(Study(id=1, name="scale", config=spec, seed=seed, status="open"))
    _bulk(engine, "dataset", ["id", "name", "source", "license", "created_at"], [(1, "bench", "", "", now)])
    _bulk(engine, "dialogue", ["id", "dataset_id", "conv_id", "split", "emotion", "situation", "content_hash"],
          ((c, 1, f"bench:{c}", "test", "content", None, "x") for c in range(1, n_contexts + 1)))
    _bulk(engine, "turn", ["id", "dialogue_id", "idx", "role", "text"],
          ((2 * c - 1 + i, c, 1 + i, ("speaker", "listener")[i], f"turn {i + 1} of dialogue {c}")
           for c in range(1, n_contexts + 1) for i in range(2)))
    _bulk(engine, "context", ["id", "dialogue_id", "n_turns", "reference_turn_id"],
          ((c, c, 1, 2 * c) for c in range(1, n_contexts + 1)))
    _bulk(engine, "response", ["id", "context_id", "system_id", "text", "provenance", "created_at", "latency_ms"],
          ((i, (i - 1) // SYSTEMS + 1, (i - 1) % SYSTEMS + 1, f"response {i}", "{}", now, 0.0)
           for i in range(1, n_items + 1)))
    _bulk(engine, "study_item", ["id", "study_id", "response_id", "is_control", "control_target", "design"],
          ((i, 1, i, False, None, "{}") for i in range(1, n_items + 1)))

    plan: list[tuple[int, list[int]]] = []  # (round, item ids) in design order
    for round_ in range(K):
        order = list(range(1, n_items + 1))
        rng.shuffle(order)
        plan += [(round_, order[i:i + ITEMS_PER_ASSIGNMENT]) for i in range(0, n_items, ITEMS_PER_ASSIGNMENT)]
    plan = plan[:assignments]

    def context_of(item: int) -> int:
        return (item - 1) // SYSTEMS + 1

    # Who holds what: the done ones by raters with up to two assignments each (never a context twice), the first
    # `callers` of those raters being the ones the timing asks for; then `active` ones in progress.
    holder: dict[int, tuple[int, str]] = {}
    seen: list[tuple[int, int, int]] = []  # (annotator, context, assignment)
    annotator, held, contexts_seen = 0, 2, set()
    n_done = int(assignments * done)
    for index in range(n_done):
        contexts = {context_of(i) for i in plan[index][1]}
        if held == 2 or contexts & contexts_seen:
            annotator, held, contexts_seen = annotator + 1, 0, set()
        holder[index] = (annotator, "submitted")
        held += 1
        contexts_seen |= contexts
        seen += [(annotator, c, index + 1) for c in contexts]
    for index in range(n_done, min(assignments, n_done + active)):
        annotator += 1
        holder[index] = (annotator, "assigned")
        seen += [(annotator, c, index + 1) for c in {context_of(i) for i in plan[index][1]}]
    # The callers: raters with history for whom some open assignment still fits (in a small study most do not).
    history: dict[int, set[int]] = {}
    for who, context, _ in seen:
        history.setdefault(who, set()).add(context)
    open_contexts = [{context_of(i) for i in plan[index][1]} for index in range(len(plan)) if index not in holder]
    busy = {who for who, status in holder.values() if status == "assigned"}
    caller_ids = []
    for who in range(1, annotator + 1):
        if len(caller_ids) == callers:
            break
        if who not in busy and any(not (c & history[who]) for c in open_contexts):
            caller_ids.append(who)
    _bulk(engine, "annotator", ["id", "provider", "pseudonym", "display_name", "created_at", "revoked_at"],
          ((a, "bench", f"rater-{a}", f"rater-{a}", now, None) for a in range(1, annotator + 1)))
    far = datetime(2100, 1, 1, tzinfo=UTC)

    def assignment_row(index: int) -> tuple:
        round_, _ = plan[index]
        who, status = holder.get(index, (None, "open"))
        return (index + 1, 1, who, status, now, now if who else None, far if status == "assigned" else None,
                now if status == "submitted" else None, f"bench-{index + 1}" if status == "submitted" else None,
                round_, index, None, False, None)

    _bulk(engine, "assignment", ["id", "study_id", "annotator_id", "status", "created_at", "started_at",
                                 "expires_at", "submitted_at", "submission_id", "round", "design_index",
                                 "replaces_id", "late", "comment"], (assignment_row(i) for i in range(len(plan))))
    _bulk(engine, "assignment_item", ["id", "assignment_id", "item_id", "position", "seconds_on_item"],
          ((index * ITEMS_PER_ASSIGNMENT + position + 1, index + 1, item, position, None)
           for index, (_, items) in enumerate(plan) for position, item in enumerate(items)))
    _bulk(engine, "seen_context", ["id", "study_id", "annotator_id", "context_id", "assignment_id", "seen_at"],
          ((n + 1, 1, a, c, s, now) for n, (a, c, s) in enumerate(seen)))
    if engine.dialect.name == "postgresql":
        with engine.begin() as connection:  # ids were given: move each sequence past them
            for table in ("dataset", "dialogue", "turn", "context", "system", "response", "study", "study_item",
                          "annotator", "assignment", "assignment_item", "seen_context"):
                connection.exec_driver_sql(f"SELECT setval(pg_get_serial_sequence('{table}', 'id'), "
                                           f"(SELECT max(id) FROM {table}))")
            connection.exec_driver_sql("ANALYZE")  # what autovacuum would do after a load this size
    engine.dispose()
    return Built("scale", len(plan), caller_ids)


# --- 1. statements per call ----------------------------------------------------------------------------------


def _ratings(payload: dict) -> dict:
    return {"submission_id": uuid.uuid4().hex,
            "ratings": [{"item_id": item["item_id"], "scores": dict.fromkeys(CRITERIA, 4), "seconds": 3.0}
                        for item in payload["items"]]}


def statement_counts(url: str) -> dict[str, int]:
    """Statements of one claim, one resume and one submit by a rater with history, the most over 3 and 30 items
    per assignment (studies built with create_study, as the tests do)."""
    from empeval.server.datasets.ed_csv import parse_ed_csv
    from empeval.server.datasets.importer import import_dialogues
    from tests.annotation.conftest import add_responses, make_study
    from tests.conftest import SAMPLE_ED

    worst: dict[str, int] = {}
    for items in (3, 30):
        engine = make_engine(url.replace(".db", f"-{items}.db") if url.startswith("sqlite") else url)
        upgrade(engine)
        if items == 3 or url.startswith("sqlite"):
            import_dialogues(engine, parse_ed_csv(SAMPLE_ED / "test.csv", "test"), dataset="empatheticdialogues")
            add_responses(engine, ["s1", "s2", "s3"], 300)
        make_study(engine, name=f"count-{items}", count=300, k=3, per_assignment=items, systems=["s1", "s2", "s3"],
                   controls=[])
        rater, _ = invite(engine, f"counted-{items}", f"count-{items}")
        first = next_assignment_payload(engine, f"count-{items}", rater.id)
        submit_assignment(engine, first["assignment_id"], rater.id, _ratings(first))
        with counting_statements(engine) as claim:
            claimed = next_assignment_payload(engine, f"count-{items}", rater.id)
        with counting_statements(engine) as resume:
            next_assignment_payload(engine, f"count-{items}", rater.id)
        with counting_statements(engine) as submit:
            submit_assignment(engine, claimed["assignment_id"], rater.id, _ratings(claimed))
        for call, count in (("next (claim)", claim), ("next (resume)", resume), ("submit", submit)):
            worst[call] = max(worst.get(call, 0), len(count))
        engine.dispose()
    return worst


# --- 2. next at scale ----------------------------------------------------------------------------------------


def time_next(studies: dict[int, tuple[str, Built]], calls: int) -> dict[int, tuple[float, float]]:
    """Median wall and CPU seconds (of this process: on SQLite that is all the work, the database being a library)
    of `calls` claims per study by raters with history, each undone (untimed) before the next. The studies take
    turns call by call, so that the machine's load weighs on each alike."""
    engines = {size: make_engine(url) for size, (url, _) in studies.items()}
    times: dict[int, list[tuple[float, float]]] = {size: [] for size in studies}
    for n in range(calls):
        for size, (_, built) in studies.items():
            caller = built.callers[n % len(built.callers)]
            start, cpu = time.perf_counter(), time.process_time()
            payload = next_assignment_payload(engines[size], built.study, caller)
            times[size].append((time.perf_counter() - start, time.process_time() - cpu))
            if payload is None or not payload["items"]:
                raise SystemExit(f"rater {caller} got nothing at {built.assignments} assignments: too small a study")
            with unit_of_work(engines[size]) as session:
                assert release(session, payload["assignment_id"], caller)
    for engine in engines.values():
        engine.dispose()
    return {size: (statistics.median(w for w, _ in values), statistics.median(c for _, c in values))
            for size, values in times.items()}


def time_lead(hinted_url: str, plain_url: str, upto: int) -> dict[str, list[float]]:
    """`next` of a rater working alone through a study (every other rater far behind), timed at each of her first
    `upto` claims, each rated before the next: with the claim as it runs (its walk starts after her last claim),
    and, on a second study built alike, with her hint forgotten before each claim (a walk from the start, as before
    the hint). The two take turns call by call. Returns wall seconds per call per kind, in order."""
    from empeval.server.annotation import handout

    walks = {"hinted": hinted_url, "from the start": plain_url}
    engines = {walk: make_engine(url) for walk, url in walks.items()}
    raters = {}
    for walk, engine in engines.items():
        with Session(engine) as session:
            study = session.scalar(select(Study.name))
        raters[walk] = (study, invite(engine, f"ahead-{walk}", study)[0].id)
    times: dict[str, list[float]] = {walk: [] for walk in walks}
    for n in range(upto):
        for walk, engine in engines.items():
            study, rater = raters[walk]
            if walk == "from the start":  # her hint only (the other rater's is kept)
                handout._walk_hints.pop((engine.url, rater), None)
            start = time.perf_counter()
            payload = next_assignment_payload(engine, study, rater)
            times[walk].append(time.perf_counter() - start)
            if payload is None:
                raise SystemExit(f"the rater ahead ran out after {n} assignments: give a larger --lead-assignments")
            submit_assignment(engine, payload["assignment_id"], rater, _ratings(payload), study=study)
    for engine in engines.values():
        engine.dispose()
    return times


def full_scans(url: str, built: Built) -> list[str]:
    """The lines of the database's plan of the claim's candidate choice that read a whole table (SQLite: SCAN
    without an index; PostgreSQL: Seq Scan): what `next` must not do at any size."""
    from empeval.server.annotation.hot_sql import first_fitting_sql
    from empeval.server.annotation.kinds import annotation_kind

    engine = make_engine(url)
    sqlite_sql, postgresql_sql = first_fitting_sql(annotation_kind("likert"))
    params = {"study": 1, "annotator": built.callers[0]}
    with engine.connect() as connection:
        if engine.dialect.name == "sqlite":
            plan = [row[-1] for row in connection.execute(text("EXPLAIN QUERY PLAN " + sqlite_sql), params)]
            # (SCAN CONSTANT ROW is the one-row SELECT of the study id, not a table)
            bad = [line for line in plan
                   if line.startswith("SCAN") and "INDEX" not in line and "CONSTANT ROW" not in line]
        else:
            plan = [row[0] for row in connection.execute(text("EXPLAIN " + postgresql_sql), params)]
            bad = [line.strip() for line in plan if "Seq Scan" in line]
    engine.dispose()
    return bad


# --- 3. throughput against gunicorn --------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def _client_process(port: int, tokens: list[str], mode: str, deadline: float, queue: Any,
                    reconnect_every: int = 0) -> None:
    """One load-client process: a thread per token, each with its own keep-alive connection (http.client: the
    lightest client at hand, so that the client costs little CPU), opened anew every `reconnect_every` requests
    (0: never). gunicorn's workers serve a keep-alive connection for as long as it lives, and which worker accepts
    each of the 32 is luck: when most land on one worker, that one process (and its GIL) serves nearly all the
    load and the phase measures one core. Reconnecting spreads them again and again."""
    results: list[dict] = []
    lock = threading.Lock()

    def rater(token: str) -> None:
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
        mine = {"next_ms": [], "submit_ms": [], "requests": 0, "submissions": 0, "acknowledged": 0, "errors": []}

        def call(method: str, path: str, body: bytes | None = None) -> tuple[int, bytes]:
            connection.request(method, path, body=body, headers=headers)
            answer = connection.getresponse()
            return answer.status, answer.read()

        while time.time() < deadline:
            if reconnect_every and mine["requests"] and mine["requests"] % reconnect_every == 0:
                connection.close()  # http.client opens a new connection on the next request
            if mode == "trivial":
                call("GET", "/healthz")
                mine["requests"] += 1
                continue
            t0 = time.perf_counter()
            status, body = call("GET", "/api/annotate/next")
            mine["next_ms"].append((time.perf_counter() - t0) * 1000)
            mine["requests"] += 1
            assignment = json.loads(body).get("assignment") if status == 200 else None
            if assignment is None:
                mine["errors"].append(status if status != 200 else "none left")
                break
            payload = json.dumps(_ratings(assignment)).encode()
            t1 = time.perf_counter()
            status, body = call("POST", f"/api/assignments/{assignment['assignment_id']}/submit", payload)
            mine["submit_ms"].append((time.perf_counter() - t1) * 1000)
            mine["requests"] += 1
            if status == 200:
                mine["submissions"] += 1
                mine["acknowledged"] += json.loads(body)["ratings"]
            else:
                mine["errors"].append(status)
        connection.close()
        with lock:
            results.append(mine)

    threads = [threading.Thread(target=rater, args=(token,)) for token in tokens]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    queue.put(results)


def _server_cpu(pgid: int) -> float:
    """CPU seconds used so far by the processes of the server's process group (gunicorn master and workers)."""
    ticks = os.sysconf("SC_CLK_TCK")
    total = 0
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[2]) == pgid:  # fields after the name: state, ppid, pgrp, ...
            total += int(fields[11]) + int(fields[12])
    return total / ticks


def load_phase(port: int, pgid: int, tokens: list[str], mode: str, seconds: float, processes: int,
               reconnect_every: int = 0) -> dict:
    """Run the load client (`processes` processes sharing the tokens) for `seconds`; merged stats with the
    client's and the server's CPU."""
    context = multiprocessing.get_context("fork")
    queue = context.Queue()
    deadline = time.time() + seconds
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    server_before = _server_cpu(pgid)
    start = time.perf_counter()
    workers = [context.Process(target=_client_process,
                               args=(port, tokens[i::processes], mode, deadline, queue, reconnect_every))
               for i in range(processes)]
    for worker in workers:
        worker.start()
    merged: dict[str, Any] = {"next_ms": [], "submit_ms": [], "requests": 0, "submissions": 0, "acknowledged": 0,
                              "errors": []}
    for _ in workers:
        for mine in queue.get():
            for key, value in mine.items():
                merged[key] += value
    for worker in workers:
        worker.join()
    merged["elapsed"] = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    merged["client_cpu"] = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    merged["server_cpu"] = _server_cpu(pgid) - server_before
    return merged


def _wait_for(port: int) -> None:
    for _ in range(150):
        try:
            connection = http.client.HTTPConnection("127.0.0.1", port, timeout=1)
            connection.request("GET", "/healthz")
            if connection.getresponse().status == 200:
                return
        except OSError:
            time.sleep(0.2)
    raise SystemExit("the server did not start")


def floor(scratch: Path, tokens: list[str], args: argparse.Namespace) -> dict:
    """The same load against benchmarks/floor_app.py (the same routes and JSON, raw sqlite3, no ORM, checks or
    validation) under the same gunicorn settings: the ratio no annotation API on this stack can beat."""
    from benchmarks.floor_app import prepare

    path = scratch / f"floor-{uuid.uuid4().hex}.db"  # a new one per run (part settings runs it again)
    prepare(str(path), args.load_assignments)
    port = free_port()
    command = [sys.executable, "-m", "gunicorn", "--workers", str(args.workers), "--threads", str(args.threads),
               "--worker-class",
               "gthread", "--bind", f"127.0.0.1:{port}", "floor_app:app"]
    return _served_load(command, {"FLOOR_DB": str(path)}, Path(__file__).parent, port, tokens, args)


def schema_floor(url: str, args: argparse.Namespace) -> dict:
    """The same load against benchmarks/schema_floor_app.py (empeval's statements and schema through raw sqlite3,
    no SQLAlchemy, validation or signature check) under the same gunicorn settings, on a new study at `url`: the
    ratio no Python on top of empeval's SQL can beat."""
    built = build_study(url, args.load_assignments, done=0.0, active=0, callers=0)
    engine = make_engine(url)
    invited = [invite(engine, f"load-{i}", built.study) for i in range(args.annotators)]
    path = Path(url.removeprefix("sqlite:///"))
    token_file = path.with_suffix(".tokens.json")
    token_file.write_text(json.dumps({token: [annotator.id, built.study] for annotator, token in invited}))
    port = free_port()
    command = [sys.executable, "-m", "gunicorn", "--workers", str(args.workers), "--threads", str(args.threads),
               "--worker-class", "gthread", "--bind", f"127.0.0.1:{port}", "schema_floor_app:app"]
    env = {"SCHEMA_FLOOR_DB": str(path), "SCHEMA_FLOOR_TOKENS": str(token_file)}
    phases = _served_load(command, env, Path(__file__).parent, port, [token for _, token in invited], args)
    with Session(engine) as session:
        phases["api"]["stored"] = session.scalar(select(func.count(Rating.id)))
    engine.dispose()
    return phases


def _served_load(command: list[str], env: dict[str, str], cwd: Path, port: int, tokens: list[str],
                 args: argparse.Namespace) -> dict:
    """Start `command` (a server on 127.0.0.1:`port`) in its own session, run the trivial then the API load
    phase against it, stop it: {"trivial": ..., "api": ...}."""
    server = subprocess.Popen(command, env={**os.environ, **env}, cwd=cwd, stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        _wait_for(port)
        trivial = load_phase(port, server.pid, tokens, "trivial", args.trivial_seconds, args.client_processes,
                             args.reconnect_every)
        api = load_phase(port, server.pid, tokens, "api", args.seconds, args.client_processes, args.reconnect_every)
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(timeout=30)
    return {"trivial": trivial, "api": api}


# `empeval ...` (argv[2:]) with the store's SQLite connections set to synchronous=argv[1]: the engine reads
# SQLITE_SYNCHRONOUS at each connection, and gunicorn's workers are forks of this process.
SERVE_WITH_SYNCHRONOUS = ("import sys; import empeval.server.store.engine as engine; "
                          "engine.SQLITE_SYNCHRONOUS = sys.argv.pop(1); sys.argv[0] = 'empeval'; "
                          "from empeval.cli import main; main()")


def throughput(url: str, args: argparse.Namespace, *, synchronous: str | None = None) -> dict:
    """Part 3 on a new study at `url`, served by `empeval serve` (its SQLite connections at `synchronous`, default:
    the store's own setting)."""
    built = build_study(url, args.load_assignments, done=0.0, active=0, callers=0)
    engine = make_engine(url)
    tokens = [invite(engine, f"load-{i}", built.study)[1] for i in range(args.annotators)]
    port = free_port()
    empeval = ([sys.executable, "-c", SERVE_WITH_SYNCHRONOUS, synchronous] if synchronous
               else [sys.executable, "-m", "empeval.cli"])
    command = [*empeval, "serve", "--host", "127.0.0.1", "--port", str(port), "--workers", str(args.workers),
               "--threads", str(args.threads)]
    phases = _served_load(command, {"EMPEVAL_DATABASE_URL": url}, REPO, port, tokens, args)
    trivial, api = phases["trivial"], phases["api"]
    with Session(engine) as session:
        api["stored"] = session.scalar(select(func.count(Rating.id)))
    engine.dispose()
    return {"trivial": trivial, "api": api, "tokens": tokens}


# --- 3d. raters who think, a new connection per request --------------------------------------------------------


def _think_request(method: str, path: str, port: int, token: str, body: bytes = b"") -> bytes:
    """One HTTP/1.1 request as a browser that keeps no connection sends it (Connection: close)."""
    head = (f"{method} {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nAuthorization: Bearer {token}\r\n"
            f"Connection: close\r\n")
    if method == "POST":
        head += f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n"
    return (head + "\r\n").encode() + body


def _parse_answer(raw: bytes) -> tuple[int, bytes]:
    """Status and body of a whole HTTP/1.1 answer read to the connection's end (a Content-Length body)."""
    head, _, body = raw.partition(b"\r\n\r\n")
    if not head:
        raise ConnectionError("the server closed the connection without an answer")
    status = int(head.split(b" ", 2)[1])
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            body = body[:int(value)]
    return status, body


async def _think_rater(index: int, port: int, token: str, start: float, ramp_end: float, stop: float,
                       think: tuple[float, float], timeout: float, rng: random.Random, out: dict) -> None:
    """One rater of the think part: from `start` until `stop` she asks for an assignment, thinks U(think) seconds,
    submits it, and asks again, each request over a new connection from her own loopback address (127.x.y.z: one
    address per rater, as raters at home or on phones each come from their own). A request is timed from before
    its connection opens to its answer's last byte; those started at or after `ramp_end` count as steady."""
    import asyncio

    address = f"127.{1 + index // 62500}.{index // 250 % 250}.{1 + index % 250}"

    async def call(kind: str, method: str, path: str, body: bytes = b"") -> tuple[int, bytes] | None:
        began = time.time()
        t0 = time.perf_counter()
        writer = None
        try:
            reader, writer = await asyncio.wait_for(
                asyncio.open_connection("127.0.0.1", port, local_addr=(address, 0)), timeout)
            writer.write(_think_request(method, path, port, token, body))
            raw = await asyncio.wait_for(reader.read(-1), timeout)
            status, answer = _parse_answer(raw)
        except (OSError, TimeoutError, ValueError, IndexError) as exc:
            out["errors"].append(type(exc).__name__)
            return None
        finally:
            if writer is not None:
                writer.close()
        elapsed_ms = (time.perf_counter() - t0) * 1000
        out["requests"] += 1
        if began >= ramp_end:
            out[f"{kind}_ms"].append(elapsed_ms)
            out["steady_requests"] += 1
        if status != 200:
            out["errors"].append(status)
            return None
        return status, answer

    async def until(moment: float) -> bool:
        """Sleep until `moment` (at most until `stop`); whether there is still time for a request."""
        await asyncio.sleep(max(0.0, min(moment, stop) - time.time()))
        return time.time() < stop

    if not await until(start):
        return
    while True:
        answer = await call("next", "GET", "/api/annotate/next")
        assignment = json.loads(answer[1]).get("assignment") if answer else None
        if answer and assignment is None:
            out["errors"].append("none left")
            return
        if not await until(time.time() + rng.uniform(*think)):
            return
        if assignment is None:  # a failed request: she reloads the page after a while, as a rater would
            continue
        done = await call("submit", "POST", f"/api/assignments/{assignment['assignment_id']}/submit",
                          json.dumps(_ratings(assignment)).encode())
        if done:  # else her next `next` resumes the assignment, and she submits it again
            out["submissions"] += 1
            out["acknowledged"] += json.loads(done[1])["ratings"]
        if time.time() >= stop:
            return


def _think_client(ports: list[int], raters: list[tuple[int, str]], start: float, ramp: float, steady: float,
                  think: tuple[float, float], timeout: float, seed: int, queue: Any) -> None:
    """One load-client process of the think part: an asyncio loop with a task per rater (mostly asleep: a few
    thousand cost a few MB), each starting at a uniform moment of the ramp, on the ports in turn."""
    import asyncio

    out: dict[str, Any] = {"next_ms": [], "submit_ms": [], "requests": 0, "steady_requests": 0, "submissions": 0,
                           "acknowledged": 0, "errors": []}
    rng = random.Random(seed)

    async def everyone() -> None:
        await asyncio.gather(*(
            _think_rater(index, ports[index % len(ports)], token, start + rng.uniform(0, ramp), start + ramp,
                         start + ramp + steady, think, timeout, random.Random(rng.random()), out)
            for index, token in raters))

    asyncio.run(everyone())
    queue.put(out)


def think_level(ports: list[int], pgids: list[int], raters: list[tuple[int, str]], args: argparse.Namespace,
                seed: int) -> dict:
    """`len(raters)` raters thinking against the servers on `ports` for a ramp and a steady phase (the client split
    over --client-processes processes): latencies of the steady phase, requests/s, errors, the client's and the
    servers' CPU."""
    context = multiprocessing.get_context("fork")
    queue = context.Queue()
    processes = max(1, min(args.client_processes, len(raters)))
    start = time.time() + 0.5  # every process started before the first rater's moment
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    server_before = sum(_server_cpu(pgid) for pgid in pgids)
    load_before = os.getloadavg()[0]
    workers = [context.Process(target=_think_client,
                               args=(ports, raters[i::processes], start, args.ramp, args.steady, args.think,
                                     args.request_timeout, seed * 1000 + i, queue))
               for i in range(processes)]
    for worker in workers:
        worker.start()
    merged: dict[str, Any] = {"next_ms": [], "submit_ms": [], "requests": 0, "steady_requests": 0, "submissions": 0,
                              "acknowledged": 0, "errors": []}
    for _ in workers:
        for key, value in queue.get().items():
            merged[key] += value
    for worker in workers:
        worker.join()
    elapsed = time.time() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    merged.update(raters=len(raters), elapsed=elapsed, load=max(load_before, os.getloadavg()[0]),
                  client_cpu=(after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime),
                  server_cpu=sum(_server_cpu(pgid) for pgid in pgids) - server_before)
    return merged


def _think_study(url: str, args: argparse.Namespace, raters: int) -> list[str]:
    """A new study at `url` large enough for every level's claims, and `raters` annotators (bulk-written) with an
    invite token each."""
    from empeval.server.annotation.secrets import make_invite, secret_key

    levels = [int(n) for n in args.levels.split(",")]
    # Assignments a rater claims in a level, on average (she claims, thinks, submits, claims...), with a margin; and
    # enough contexts that the one claiming the most (every level, the shortest thoughts) still finds assignments
    # whose contexts she has not seen: four times her contexts (an assignment holds K x SYSTEMS of its items' worth).
    cycles = 1 + (args.ramp + args.steady) / ((args.think[0] + args.think[1]) / 2)
    most = len(levels) * (1 + (args.ramp + args.steady) / args.think[0])
    assignments = max(int(sum(levels) * cycles * 1.3), int(4 * most * K * SYSTEMS))
    built = build_study(url, assignments, done=0.0, active=0, callers=0)
    engine = make_engine(url)
    now = datetime.now(UTC)
    _bulk(engine, "annotator", ["id", "provider", "pseudonym", "display_name", "created_at", "revoked_at"],
          ((a, "bench", f"thinker-{a}", f"thinker-{a}", now, None) for a in range(1, raters + 1)))
    if engine.dialect.name == "postgresql":
        with engine.begin() as connection:
            connection.exec_driver_sql("SELECT setval(pg_get_serial_sequence('annotator', 'id'), "
                                       "(SELECT max(id) FROM annotator))")
    secret = secret_key(engine)
    engine.dispose()
    return [make_invite(secret, annotator_id=a, study=built.study) for a in range(1, raters + 1)]


# `empeval ...` (argv[2:]) whose processes time SQLite's writer gate (server.store.engine._WriterGate, where every
# write transaction of every process takes its turn): writes, seconds waiting for the gate, seconds holding it, and
# the write units their group commits ran (server.store.group_commit: a batch of units is one write), kept per
# process and written every second to argv[1]/gate-PID.json (the processes are forks: each starts its own).
SERVE_WITH_GATE_PROBE = """
import json, os, sys, threading, time
import empeval.server.store.engine as engine
import empeval.server.store.group_commit as group_commit
folder = sys.argv.pop(1)
sys.argv[0] = "empeval"
gate, mine = engine._WriterGate, threading.local()
enter, leave = gate.__enter__, gate.__exit__
totals = {"writes": 0, "wait": 0.0, "hold": 0.0, "units": 0, "batches": 0}
def timed_enter(self):
    began = time.perf_counter()
    enter(self)
    if self.depth == 1:
        mine.acquired = time.perf_counter()
        totals["writes"] += 1
        totals["wait"] += mine.acquired - began
def timed_exit(self, *exc):
    if self.depth == 1:
        totals["hold"] += time.perf_counter() - mine.acquired
    leave(self, *exc)
gate.__enter__, gate.__exit__ = timed_enter, timed_exit
if os.environ.get("EMPEVAL_BENCH_GROUP_COMMIT_UNITS"):  # --group-commit-units: 1 writes as before group commit
    group_commit.MAX_UNITS = int(os.environ["EMPEVAL_BENCH_GROUP_COMMIT_UNITS"])
def dump():
    while True:
        time.sleep(1)
        groups = list(group_commit._groups.values())
        totals.update(units=sum(g.units for g in groups), batches=sum(g.batches for g in groups))
        path = os.path.join(folder, f"gate-{os.getpid()}.json")
        with open(path + ".new", "w") as file:
            json.dump(totals, file)
        os.replace(path + ".new", path)
def start():
    totals.update(writes=0, wait=0.0, hold=0.0, units=0, batches=0)
    threading.Thread(target=dump, daemon=True).start()
os.register_at_fork(after_in_child=start)
from empeval.cli import main
main()
"""


def _gate_totals(folder: Path) -> dict[str, float]:
    """The writer-gate probe's totals so far, summed over the server's processes."""
    totals = {"writes": 0.0, "wait": 0.0, "hold": 0.0, "units": 0.0, "batches": 0.0}
    for path in folder.glob("gate-*.json"):
        try:
            for key, value in json.loads(path.read_text()).items():
                totals[key] += value
        except (OSError, ValueError):
            continue
    return totals


@contextmanager
def served(url: str, servers: int, workers: int, threads: int, probe: Path | None = None,
           group_commit_units: int | None = None) -> Iterator[tuple[list[int], list[int]]]:
    """`servers` `empeval serve` commands (each `workers` processes x `threads` threads) on one store, each on its
    own port and in its own process group, with the writer-gate probe writing into `probe` if given (and with it,
    `group_commit_units` as server.store.group_commit.MAX_UNITS, if given): (ports, process group ids); every one
    stopped at the end."""
    group_commit_env = ({"EMPEVAL_BENCH_GROUP_COMMIT_UNITS": str(group_commit_units)}
                        if probe and group_commit_units else {})
    started: list[subprocess.Popen] = []
    ports = []
    empeval = ([sys.executable, "-c", SERVE_WITH_GATE_PROBE, str(probe)] if probe
               else [sys.executable, "-m", "empeval.cli"])
    try:
        for _ in range(servers):
            ports.append(free_port())
            started.append(subprocess.Popen(
                [*empeval, "serve", "--host", "127.0.0.1", "--port", str(ports[-1]),
                 "--workers", str(workers), "--threads", str(threads)],
                env={**os.environ, "EMPEVAL_DATABASE_URL": url, **group_commit_env}, cwd=REPO,
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True))
        for port in ports:
            _wait_for(port)
        yield ports, [server.pid for server in started]
    finally:
        for server in started:
            os.killpg(server.pid, signal.SIGTERM)
        for server in started:
            server.wait(timeout=60)


def _stats(values: list[float]) -> str:
    return "/".join(f"{percentile(values, q):.0f}" for q in (0.5, 0.95, 0.99))


def think(databases: Stores, store: str, args: argparse.Namespace) -> list[dict]:
    """Part "think" on `store`: each level of --levels in turn against the same server(s) and study (a level's
    raters are the first N, so later levels meet raters with history), one line per level; SQLite is served by one
    `empeval serve` of --workers processes, PostgreSQL by --think-servers serves of one process each (the scale-out
    path). Figures: p99 at the largest level (goal < --think-p99-ms), the most raters held within it, errors and
    ratings acknowledged vs stored (goal: equal)."""
    levels = [int(n) for n in args.levels.split(",")]
    url = databases.new(store, "bench_think")
    started = time.perf_counter()
    tokens = _think_study(url, args, max(levels))
    servers, workers = (1, args.workers) if store == "sqlite" else (args.think_servers, 1)
    print(f"think time U({args.think[0]:g}, {args.think[1]:g}) s, a new connection per request (Connection: close, "
          f"one loopback address per rater), ramp {args.ramp:g} s then steady {args.steady:g} s per level; "
          f"{servers} `empeval serve` x {workers} process(es) x {args.threads} threads on {store}; study and "
          f"{max(levels):,} raters written in {time.perf_counter() - started:.0f} s. The load client "
          f"({args.client_processes} asyncio processes) shares this machine's {os.cpu_count()} CPUs with the server: "
          f"its CPU is printed per level. Latencies (ms) of requests started in the steady phase.", flush=True)
    print(f"  {'raters':>6} {'req/s':>6} {'all p50/95/99':>15} {'next p50/95/99':>15} {'submit p50/95/99':>16} "
          f"{'errors':>6} {'client CPU':>10} {'server CPU':>10} {'ms/req':>6} {'load':>5}", flush=True)
    probe = None
    if args.probe_writer and store == "sqlite":
        probe = Path(url.removeprefix("sqlite:///")).parent / "gate-probe"
        probe.mkdir(exist_ok=True)
        print("  (the writer gate is timed: writes/s, the share of the time one writer holds it, ms waited and held "
              "per write, after each row)", flush=True)
    curve = []
    with served(url, servers, workers, args.threads, probe, args.group_commit_units) as (ports, pgids):
        for n, raters in enumerate(levels):
            gate_before = _gate_totals(probe) if probe else None
            level = think_level(ports, pgids, list(enumerate(tokens[:raters])), args, seed=n + 1)
            if probe and gate_before is not None:
                time.sleep(1.2)  # the probe's next dump
                gate = {key: value - gate_before[key] for key, value in _gate_totals(probe).items()}
                level["gate"] = gate
            steady = level["next_ms"] + level["submit_ms"]
            level["p99"] = percentile(steady, 0.99)
            level["rps"] = level["steady_requests"] / args.steady
            curve.append(level)
            errors = sorted(set(map(str, level["errors"])))
            print(f"  {raters:>6,} {level['rps']:>6.1f} {_stats(steady):>15} {_stats(level['next_ms']):>15} "
                  f"{_stats(level['submit_ms']):>16} {len(level['errors']):>6} "
                  f"{level['client_cpu'] / level['elapsed']:>6.2f} cpu {level['server_cpu'] / level['elapsed']:>6.2f} "
                  f"cpu {level['server_cpu'] * 1000 / max(level['requests'], 1):>6.2f} "
                  f"{level['load']:>5.2f}{' ' + str(errors[:5]) if errors else ''}", flush=True)
            if "gate" in level:
                held, writes = level["gate"], max(level["gate"]["writes"], 1)
                print(f"         writer gate: {held['writes'] / level['elapsed']:.1f} writes/s, held "
                      f"{held['hold'] / level['elapsed']:.0%} of the time, {held['wait'] * 1000 / writes:.1f} ms "
                      f"waited and {held['hold'] * 1000 / writes:.1f} ms held per write; group commit: "
                      f"{held['units']:.0f} units in {held['batches']:.0f} batches", flush=True)
    engine = make_engine(url)
    with Session(engine) as session:
        stored = session.scalar(select(func.count(Rating.id))) or 0
    engine.dispose()
    acknowledged = sum(level["acknowledged"] for level in curve)
    failed = sum(len(level["errors"]) for level in curve)
    label = f"{store}" if store == "sqlite" else f"{store} x {servers} serves"
    largest = curve[-1]
    report(Figure(f"{label}: think-time raters, p99 at {largest['raters']:,} raters", largest["p99"], "ms",
                  goal=below(args.think_p99_ms), fmt=".0f",
                  note=f"{largest['rps']:.1f} req/s, client CPU {largest['client_cpu'] / largest['elapsed']:.2f} "
                       f"cores on the same machine, load {largest['load']:.2f}"))
    held = [level["raters"] for level in curve if level["p99"] < args.think_p99_ms and not level["errors"]]
    report(Figure(f"{label}: think-time raters held at p99 < {args.think_p99_ms:g} ms without errors",
                  max(held, default=0), goal=at_least(max(levels)), fmt=",.0f"))
    report(Figure(f"{label}: think-time server CPU per request", largest["server_cpu"] * 1000 /
                  max(largest["requests"], 1), "ms", fmt=".2f",
                  note=f"at {largest['raters']:,} raters: what one core serves is about 1000 / this requests/s"))
    report(Figure(f"{label}: think-time errors", failed, goal=at_most(0), fmt=".0f",
                  note=f"over {len(levels)} levels"))
    report(Figure(f"{label}: think-time ratings stored - acknowledged", stored - acknowledged, goal=at_most(0),
                  fmt=".0f", note=f"{acknowledged} acknowledged, {stored} stored"))
    for level in curve:
        level["store"] = label
    return curve


def print_curves(curves: dict[str, list[dict]]) -> None:
    """The think part's curves side by side, a row per level: p50/p95/p99 (ms), requests/s and errors per store."""
    if len(curves) < 2:
        return
    print("\nthink-time curves side by side (ms p50/p95/p99, requests/s, errors):")
    print(f"  {'raters':>6} " + " ".join(f"{curve[0]['store']:>34}" for curve in curves.values()))
    for row in zip(*curves.values(), strict=False):
        print(f"  {row[0]['raters']:>6,} " + " ".join(
            f"{_stats(level['next_ms'] + level['submit_ms']):>16} {level['rps']:>8.1f} r/s {len(level['errors']):>4} e"
            for level in row))


# --- main ------------------------------------------------------------------------------------------------------


def _per_second(phase: dict) -> float:
    return phase["requests"] / phase["elapsed"]


def _cpu_ms(phase: dict) -> float:
    """The server's CPU milliseconds per request of the phase."""
    return phase["server_cpu"] / max(phase["requests"], 1) * 1000


def settings_sweep(databases: Stores, scratch: Path, args: argparse.Namespace) -> None:
    """Part "settings": the throughput part (and the floor) again under each gunicorn setting of --settings, each
    on a new study, one line per setting: how the ratio and the server's CPU per request follow workers and
    threads (beside server.web.gunicorn_app.DEFAULT_THREADS). No goal: information."""
    print(f"gunicorn settings, {args.annotators} annotators, {args.seconds:.0f} s each (no goal: information)")
    for setting in args.settings.split(","):
        workers, threads = (int(part) for part in setting.split("x"))
        run = argparse.Namespace(**{**vars(args), "workers": workers, "threads": threads})
        result = throughput(databases.new("sqlite", f"bench_settings_{workers}x{threads}"), run)
        api, trivial = result["api"], result["trivial"]
        line = (f"  {workers} x {threads}: next+submit {_per_second(api):6.1f} req/s, server CPU "
                f"{_cpu_ms(api):.2f} ms/request, p99 "
                f"{percentile(api['next_ms'] + api['submit_ms'], 0.99):6.1f} ms; trivial {_per_second(trivial):6.1f} "
                f"req/s ({_cpu_ms(trivial):.2f} ms/request); ratio "
                f"{_per_second(api) / _per_second(trivial):.2f}")
        if args.floor:
            least = floor(scratch, result["tokens"], run)
            line += (f"; the floor {_per_second(least['api']):6.1f} / {_per_second(least['trivial']):6.1f} = "
                     f"{_per_second(least['api']) / _per_second(least['trivial']):.2f}")
        print(line, flush=True)


def durability(databases: Stores, scratch: Path, args: argparse.Namespace) -> None:
    """Part "durability": the throughput part under synchronous=NORMAL, then under the store's FULL, each on a new
    study: what a durable acknowledgement costs in submissions/s and submit latency (no goal: information)."""
    filesystem = subprocess.run(["df", "--output=fstype", str(scratch)], capture_output=True, text=True).stdout
    print(f"synchronous NORMAL vs FULL (the store's: {SQLITE_SYNCHRONOUS}), {args.annotators} annotators, "
          f"{args.seconds:.0f} s each, scratch on {filesystem.split()[-1] if filesystem.split() else '?'}")
    rates = {}
    for setting in ("NORMAL", "FULL"):
        api = throughput(databases.new("sqlite", f"bench_sync_{setting.lower()}"), args, synchronous=setting)["api"]
        rates[setting] = api["submissions"] / api["elapsed"]
        print(f"  {setting:<6} {rates[setting]:6.1f} submissions/s, next+submit {_per_second(api):6.1f} req/s; "
              f"submit p50 {percentile(api['submit_ms'], 0.5):6.1f} ms, p99 {percentile(api['submit_ms'], 0.99):6.1f} "
              f"ms; ratings acknowledged {api['acknowledged']}, stored {api['stored']}; errors {len(api['errors'])}",
              flush=True)
    report(Figure("sqlite: submissions/s with synchronous=FULL / NORMAL", rates["FULL"] / rates["NORMAL"], fmt=".2f",
                  note=f"{rates['FULL']:.1f} vs {rates['NORMAL']:.1f} submissions/s, {args.annotators} annotators"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--stores", default="sqlite,postgres")
    parser.add_argument("--parts", default="statements,scaling,lead,throughput,settings,durability,think")
    parser.add_argument("--settings", default="2x1,2x2,2x4,3x1",
                        help="gunicorn WORKERSxTHREADS to compare (part settings, SQLite)")
    parser.add_argument("--sizes", default="100,1000,10000,100000", help="assignments per study (part 2)")
    parser.add_argument("--calls", type=int, default=50, help="timed next calls per size (part 2)")
    parser.add_argument("--annotators", type=int, default=32, help="concurrent annotators (part 3)")
    parser.add_argument("--workers", type=int, default=2, help="gunicorn worker processes")
    parser.add_argument("--threads", type=int, default=DEFAULT_THREADS,
                        help="threads per gunicorn worker (default: `empeval serve`'s)")
    parser.add_argument("--client-processes", type=int, default=2, help="load-client processes (part 3)")
    parser.add_argument("--reconnect-every", type=int, default=100,
                        help="requests per keep-alive connection before the client opens another (0: never), so "
                             "that the connections do not stay piled on one gunicorn worker (part 3)")
    parser.add_argument("--lead-assignments", type=int, default=20000,
                        help="assignments of the studies a rater works through alone (part lead)")
    parser.add_argument("--lead-upto", type=int, default=600, help="claims of the rater working alone (part lead)")
    parser.add_argument("--load-assignments", type=int, default=20000, help="assignments of the part 3 study")
    parser.add_argument("--seconds", type=float, default=20.0, help="rating phase (part 3)")
    parser.add_argument("--trivial-seconds", type=float, default=10.0, help="trivial endpoint phase (part 3)")
    parser.add_argument("--floor", action=argparse.BooleanOptionalAction, default=True,
                        help="also load benchmarks/floor_app.py, the least an annotation API can do (SQLite)")
    parser.add_argument("--levels", default="500,1000,2000,3000,4000,5000",
                        help="concurrent raters of each level, in turn (part think)")
    parser.add_argument("--think", default="30,90", help="MIN,MAX seconds a rater thinks, uniform (part think)")
    parser.add_argument("--ramp", type=float, default=30.0,
                        help="seconds over which a level's raters arrive, uniformly (part think)")
    parser.add_argument("--steady", type=float, default=60.0,
                        help="seconds after the ramp whose requests are measured (part think)")
    parser.add_argument("--think-servers", type=int, default=2,
                        help="`empeval serve` commands of one process each on the one PostgreSQL (part think)")
    parser.add_argument("--think-p99-ms", type=float, default=500.0, help="the p99 goal in ms (part think)")
    parser.add_argument("--request-timeout", type=float, default=30.0,
                        help="seconds a think-part request may take before it counts as an error")
    parser.add_argument("--probe-writer", action="store_true",
                        help="time SQLite's writer gate in the server's processes (part think): how busy the one "
                             "writer is, and how long a write waits for it")
    parser.add_argument("--group-commit-units", type=int, default=None,
                        help="with --probe-writer: the most write units a group commit batches in the server "
                             "(server.store.group_commit.MAX_UNITS; 1: a commit per write, as before group commit)")
    parser.add_argument("--nice", type=int, default=0,
                        help="add this to the niceness of the benchmark and of all it starts (a negative value "
                             "needs privilege): on a machine shared with other work, -10 measures the server rather "
                             "than the scheduler's share; printed with the load")
    parser.add_argument("--postgres-url", default=None, help="a PostgreSQL admin URL (default: a throwaway cluster)")
    args = parser.parse_args()
    if args.nice:  # every process started from here inherits it: servers, load client, PostgreSQL
        os.setpriority(os.PRIO_PROCESS, 0, os.getpriority(os.PRIO_PROCESS, 0) + args.nice)
    args.think = tuple(float(s) for s in args.think.split(","))
    if len(args.think) != 2 or not 0 < args.think[0] <= args.think[1]:
        parser.error(f"--think takes MIN,MAX seconds with 0 < MIN <= MAX, not {','.join(map(str, args.think))}")
    stores = args.stores.split(",")
    parts = args.parts.split(",")
    sizes = [int(s) for s in args.sizes.split(",")]

    print(f"load average at start: {' '.join(f'{x:.2f}' for x in os.getloadavg())}; cpus: {os.cpu_count()}; "
          f"niceness {os.getpriority(os.PRIO_PROCESS, 0)}")
    scratch = Path(tempfile.mkdtemp(prefix="empeval-load-"))
    with postgres_admin(args.postgres_url, "postgres" in stores) as admin_url:
        databases = Stores(scratch, admin_url)
        curves: dict[str, list[dict]] = {}
        try:
            for store in stores:
                if store == "postgres" and admin_url is None:
                    continue
                print(f"\n=== {store} ===")
                if "statements" in parts:
                    counts = statement_counts(databases.new(store, "bench_counts"))
                    for call, count in counts.items():
                        report(Figure(f"{store}: statements per {call}", count, goal=at_most(STATEMENT_GOAL),
                                      note="max over 3 and 30 items per assignment"))
                if "scaling" in parts:
                    studies: dict[int, tuple[str, Built]] = {}
                    for size in sizes:
                        url = databases.new(store, f"bench_scale_{size}")
                        started = time.perf_counter()
                        studies[size] = (url, build_study(url, size, done=0.5, active=min(32, size // 10), callers=10))
                        print(f"study of {size:,} assignments built in {time.perf_counter() - started:.0f} s; "
                              f"plan of the candidate choice reads whole tables: "
                              f"{full_scans(url, studies[size][1]) or 'no'}")
                    medians = time_next(studies, args.calls)
                    for size, (wall, cpu) in medians.items():
                        print(f"next at {size:>7,} assignments (half submitted, <= 32 in progress, callers with "
                              f"history): median of {args.calls}: {wall * 1000:6.2f} ms wall, {cpu * 1000:6.2f} ms CPU "
                              f"of this process")
                    for clock, which in (("wall", 0), ("CPU", 1)):
                        if clock == "CPU" and store != "sqlite":
                            continue  # the database's own work is in its server process
                        values = {size: pair[which] for size, pair in medians.items()}
                        ratio = values[sizes[-1]] / values[sizes[0]]
                        spread = max(values.values()) / min(values.values())
                        report(Figure(f"{store}: next ({clock} time), {sizes[-1]:,} / {sizes[0]:,} assignments", ratio,
                                      "x", goal=at_most(SCALING_GOAL), fmt=".2f",
                                      note=f"max/min over all sizes {spread:.2f}x; calls interleaved across sizes"))
                if "lead" in parts:
                    built_urls = []
                    for name in ("bench_lead_hinted", "bench_lead_plain"):
                        built_urls.append(databases.new(store, name))
                        build_study(built_urls[-1], args.lead_assignments, done=0.0, active=0, callers=0)
                    times = time_lead(*built_urls, upto=args.lead_upto)
                    window = min(50, args.lead_upto // 4)
                    for kind, values in times.items():
                        early = statistics.median(values[window:2 * window])
                        late = statistics.median(values[-window:])
                        print(f"next of a rater far ahead ({kind:<14}), median of calls {window}-{2 * window} "
                              f"{early * 1000:6.2f} ms, of the last {window} up to her {args.lead_upto}th claim "
                              f"{late * 1000:6.2f} ms: {late / early:.2f}x")
                    hinted, plain = (statistics.median(times[k][-window:]) for k in ("hinted", "from the start"))
                    report(Figure(f"{store}: next of a rater far ahead at her {args.lead_upto}th claim, walk after her "
                                  "last claim / walk from the start", hinted / plain, "x", fmt=".2f"))
                if "throughput" in parts:
                    result = throughput(databases.new(store, "bench_load"), args)
                    trivial, api = result["trivial"], result["api"]
                    trivial_rps, api_rps = _per_second(trivial), _per_second(api)
                    print(f"{args.annotators} annotators (a new connection every {args.reconnect_every} requests), "
                          f"gunicorn {args.workers} workers x {args.threads} threads, "
                          f"{args.client_processes} client processes, load {os.getloadavg()[0]:.2f}")
                    for name, phase, rps in (("trivial /healthz", trivial, trivial_rps), ("next+submit", api, api_rps)):
                        print(f"  {name:<17} {rps:7.1f} req/s; client CPU {phase['client_cpu'] / phase['elapsed']:.2f} "
                              f"cores ({phase['client_cpu'] / max(phase['requests'], 1) * 1000:.2f} ms/request), "
                              f"server CPU {phase['server_cpu'] / phase['elapsed']:.2f} cores "
                              f"({_cpu_ms(phase):.2f} ms/request)")
                    print(f"  submissions: {api['submissions']} in {api['elapsed']:.1f} s = "
                          f"{api['submissions'] / api['elapsed']:.1f} submissions/s "
                          f"({api['acknowledged'] / api['elapsed']:.0f} ratings/s)")
                    print(f"  next   p50 {percentile(api['next_ms'], 0.5):7.1f} ms, "
                          f"p99 {percentile(api['next_ms'], 0.99):7.1f} ms")
                    print(f"  submit p50 {percentile(api['submit_ms'], 0.5):7.1f} ms, "
                          f"p99 {percentile(api['submit_ms'], 0.99):7.1f} ms")
                    print(f"  ratings acknowledged {api['acknowledged']}, stored {api['stored']}, equal: "
                          f"{api['acknowledged'] == api['stored']}; errors: {len(api['errors'])} "
                          f"{sorted(set(map(str, api['errors'])))}")
                    ratio = api_rps / trivial_rps
                    report(Figure(f"{store}: throughput next+submit / trivial endpoint", ratio,
                                  goal=at_least(THROUGHPUT_GOAL), fmt=".2f",
                                  note=f"{api_rps:.1f} vs {trivial_rps:.1f} req/s, {args.annotators} annotators"))
                    if store == "sqlite" and args.floor:
                        least = floor(scratch, result["tokens"], args)
                        least_trivial, least_api = _per_second(least["trivial"]), _per_second(least["api"])
                        print(f"  the floor (benchmarks/floor_app.py: same routes, JSON and gunicorn settings; raw "
                              f"sqlite3, one claim and one store transaction, no ORM, checks or validation): "
                              f"trivial {least_trivial:.1f} req/s, next+submit {least_api:.1f} req/s "
                              f"({least['api']['submissions'] / least['api']['elapsed']:.1f} submissions/s), "
                              f"server CPU {_cpu_ms(least['api']):.2f} "
                              f"ms/request, ratio {least_api / least_trivial:.2f}; empeval reaches "
                              f"{ratio / (least_api / least_trivial):.2f} of the floor's ratio")
                        report(Figure(f"{store}: the floor's throughput next+submit / trivial (floor_app.py)",
                                      least_api / least_trivial, fmt=".2f"))
                        report(Figure(f"{store}: empeval's throughput ratio / the floor's",
                                      ratio / (least_api / least_trivial), fmt=".2f"))
                        schema = schema_floor(databases.new(store, "bench_schema_floor"), args)
                        print(f"  empeval's SQL at the floor's Python (benchmarks/schema_floor_app.py: its statements "
                              f"and schema through raw sqlite3): trivial {_per_second(schema['trivial']):.1f} req/s, "
                              f"next+submit {_per_second(schema['api']):.1f} req/s, server CPU "
                              f"{_cpu_ms(schema['api']):.2f} "
                              f"ms/request, ratio {_per_second(schema['api']) / _per_second(schema['trivial']):.2f}: "
                              f"the most any code on top of this schema and these statements reaches; ratings "
                              f"acknowledged {schema['api']['acknowledged']}, stored {schema['api']['stored']}; "
                              f"errors {len(schema['api']['errors'])} "
                              f"{sorted(set(map(str, schema['api']['errors'])))}; empeval serves "
                              f"{api_rps / _per_second(schema['api']):.2f} of its requests/s")
                        report(Figure(f"{store}: empeval's SQL at the floor's Python, throughput next+submit / trivial "
                                      "(schema_floor_app.py)",
                                      _per_second(schema["api"]) / _per_second(schema["trivial"]), fmt=".2f"))
                        report(Figure(f"{store}: empeval's requests/s / those of its SQL at the floor's Python",
                                      api_rps / _per_second(schema["api"]), fmt=".2f"))
                if "settings" in parts and store == "sqlite":
                    settings_sweep(databases, scratch, args)
                if "durability" in parts and store == "sqlite":
                    durability(databases, scratch, args)
                if "think" in parts:
                    curves[store] = think(databases, store, args)
            print_curves(curves)
        finally:
            databases.drop_all()
            shutil.rmtree(scratch, ignore_errors=True)  # its SQLite files: hundreds of MB a run
    print(f"\nload average at end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    run_script(__file__, main)
