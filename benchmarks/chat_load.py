"""Live chat turns under load: simulated chats against a served system, and micro-batching beside a call per turn.

Issue 27: concurrent simulated chats against a real server, and the backend's micro-batching
(server/backend/live.py) beside one model call per turn, measured in the same run.

1. part "served": `empeval serve` (its default server, or gunicorn with --server gunicorn; each WORKERSxTHREADS of
   --settings; no per-address connection cap, since every simulated rater comes from 127.0.0.1) on 127.0.0.1 over a
   SQLite store holding ED (the bundled sample, or --ed-folder) and, per concurrency level and mode, a chat study
   against `retrieval` (no controls, min_reply_seconds = 0, 4 to 8 utterances). 32 and 128 (--chats) simulated
   raters at once, each --rounds chats in a row: claim (GET /api/annotate/next), send ED test speaker utterances as
   her turns (POST .../conversations/<position>/turns {"index", "text"}) until the conversation must end, end it,
   submit ratings and turn annotations. Prints p50/p95/p99 turn latency, turns/s (the phase's wall time, claims,
   ends and submits included), the server's CPU per turn, the failed turns and errors, and whether every reply the
   server acknowledged is in the store. A warm-up study (one chat per server thread) loads the model in every
   worker before the timed phases. Each level runs in two modes (--modes):
   - "closed": closed loop, no think time: a rater sends her next turn the moment the reply arrives. On 2 cores
     this is CPU-bound by construction (a turn's latency is about the chats at once times the CPU per turn over
     the cores), so it measures throughput and the CPU per turn more than what a rater would see.
   - "think": a rater types each utterance: before each of her turns she waits a time drawn from --think
     (uniform, seconds; default U(5,15), mean 10 s), as a person reads the reply and types; her connection is
     opened again after it, as a browser's is once the server closed it idle. Why U(5,15) is pessimistic: ED
     speaker utterances are 19.5 words long on average (the bundled test sample's 750), which takes about 29 s to
     type at 40 words per minute, a typical typing speed, plus a few seconds to read the reply; 10 s on average is
     a rater typing about 3 times faster than that, so the turns arrive about 3 times as often as real raters
     would send them. Ratings are submitted without a pause (a real rater's rating time would only thin the load
     further).
2. part "backend": the same system in this process, on ED test contexts. First the per-call latency of one call
   at a time (the floor of a turn's latency) and the CPU per context of `respond_batch` at each of --batch-sizes,
   alternating, beside one context per call (what a batch saves, or costs: padding to its longest context). Then,
   at the same concurrency as part 1, for --seconds each, `LiveReplies.reply` (micro-batched with its defaults, or
   --max-batch) beside each caller calling `respond_batch([context])` itself (one call per turn: what a route would
   do without the service), alternating; turns/s, latency percentiles, CPU per turn (this process) and the batch
   sizes. Ratios micro-batched / one call per turn. On a machine busier than its cores, one call per turn runs as
   many threads as callers and so takes a larger share of the CPU than the service's two batch threads: read CPU
   per turn there rather than turns/s.

Goals (issue 27): p95 turn latency below 500 ms at 32 chats (GOAL_P95_MS, shown in both modes: the closed loop is
CPU-bound by construction, the think mode is what raters meet) and no acknowledged reply missing from the store; the
other figures are information (benchmarks/figures.py prints them with "no goal").

    .venv/bin/python -m benchmarks chat_load                                    # both parts, 32 and 128 chats
    .venv/bin/python -m benchmarks chat_load --parts served --modes think --think 20,40   # slower typists
    .venv/bin/python -m benchmarks chat_load --parts backend --seconds 5        # the backend only (no server)

The embedding cache is $EMPEVAL_CACHE_DIR (or ~/.cache/empeval), shared with the server, so the candidate index is
encoded once and loaded afterwards. The server and its store are removed at the end, also after a failure.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import random
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")

REPO = Path(__file__).resolve().parents[1]
if not __package__:  # run as a file (python benchmarks/NAME.py): the benchmarks package is in the repository root
    sys.path.insert(0, str(REPO))

from sqlalchemy import select  # noqa: E402
from sqlalchemy import text as sql  # noqa: E402

from benchmarks.annotation_load import _server_cpu, _wait_for, free_port, percentile  # noqa: E402
from benchmarks.figures import Figure, at_most, below  # noqa: E402
from benchmarks.session import report, run_script  # noqa: E402
from empeval.server.annotation.annotators import invite  # noqa: E402
from empeval.server.backend.contexts import load_contexts  # noqa: E402
from empeval.server.backend.live import LiveReplies  # noqa: E402
from empeval.server.backend.registry import Registry  # noqa: E402
from empeval.server.backend.resources import BackendResources, default_cache_dir  # noqa: E402
from empeval.server.datasets.ed_csv import parse_ed_csv  # noqa: E402
from empeval.server.datasets.importer import import_dialogues  # noqa: E402
from empeval.server.store import make_engine, unit_of_work, upgrade  # noqa: E402
from empeval.server.store.models import Dialogue, Turn  # noqa: E402
from empeval.server.web.gunicorn_app import DEFAULT_THREADS  # noqa: E402

SAMPLE = REPO / "server" / "data" / "ed_sample"
SYSTEM = "retrieval"
PARTS = ("served", "backend")
MODES = ("closed", "think")
GOAL_CHATS, GOAL_P95_MS = 32, 500.0  # issue 27: p95 turn latency below 500 ms at 32 chats
DEFAULT_THINK = (5.0, 15.0)  # seconds, uniform: see the module docstring
MIN_UTTERANCES, MAX_UTTERANCES = 4, 8
TURN_TIMEOUT_SECONDS, TURN_RETRIES = 20, 1


def load() -> str:
    return f"load {os.getloadavg()[0]:.2f}"


def latency_line(latencies_ms: Sequence[float]) -> str:
    return (f"p50 {percentile(list(latencies_ms), 0.5):7.1f} ms, p95 {percentile(list(latencies_ms), 0.95):7.1f} ms, "
            f"p99 {percentile(list(latencies_ms), 0.99):7.1f} ms")


# --- the store ---------------------------------------------------------------------------------------------------


def build_store(url: str, ed_folder: Path) -> None:
    """ED train (the retrieval candidates) and test (the prompts and the raters' utterances) in a new store."""
    engine = make_engine(url)
    upgrade(engine)
    dialogues = parse_ed_csv(ed_folder / "train.csv", "train") + parse_ed_csv(ed_folder / "test.csv", "test")
    import_dialogues(engine, dialogues, dataset="empatheticdialogues", source="benchmark", license="CC BY-NC 4.0")
    engine.dispose()


def speaker_lines(url: str) -> tuple[dict[str, list[str]], list[str]]:
    """The ED test dialogues' speaker utterances, by situation (what a rater given that prompt would say), and all."""
    engine = make_engine(url)
    with unit_of_work(engine) as session:
        rows = session.execute(select(Dialogue.situation, Turn.text)
                               .join(Turn, Turn.dialogue_id == Dialogue.id)
                               .where(Dialogue.split == "test", Turn.role == "speaker")
                               .order_by(Dialogue.id, Turn.idx)).all()
    engine.dispose()
    by_situation: dict[str, list[str]] = {}
    for situation, text in rows:
        by_situation.setdefault(situation or "", []).append(text)
    return by_situation, [text for _, text in rows]


def create_chat_study(url: str, scratch: Path, name: str, sessions: int) -> None:
    """A chat study of `sessions` sessions, each one conversation with `retrieval`, through `empeval study create`."""
    study_file = scratch / f"{name}.toml"
    study_file.write_text(f'''name = "{name}"
kind = "chat"
seed = 1

[systems]
names = ["{SYSTEM}"]
controls = []

[contexts]
split = "test"
count = {sessions}

[chat]
conversations_per_system = {sessions}
sessions_per_rater = 1
min_utterances = {MIN_UTTERANCES}
max_utterances = {MAX_UTTERANCES}
max_chars = 500
turn_timeout_seconds = {TURN_TIMEOUT_SECONDS}
turn_retries = {TURN_RETRIES}
min_reply_seconds = 0
''', encoding="utf-8")
    done = subprocess.run([sys.executable, "-m", "empeval.cli", "--database-url", url, "study", "create",
                           str(study_file)], capture_output=True, text=True, cwd=REPO, check=False)
    if done.returncode != 0:
        raise SystemExit(f"empeval study create {study_file.name} failed ({done.returncode}):\n"
                         f"{done.stdout}{done.stderr}")


def invite_raters(url: str, study: str, count: int) -> list[str]:
    engine = make_engine(url)
    tokens = [invite(engine, f"{study}-rater-{i}", study)[1] for i in range(count)]
    engine.dispose()
    return tokens


# --- part "served": simulated chats over HTTP --------------------------------------------------------------------


class Chats:
    """What the simulated raters of one phase saw, merged across their threads."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.turn_ms: list[float] = []
        self.failed_turns: list[str] = []
        # (assignment, position, index, text) of every reply the server acknowledged with 200
        self.acknowledged: set[tuple[int, int, int, str]] = set()
        self.errors: Counter[str] = Counter()
        self.chats = 0
        self.submitted = 0

    def error(self, what: str) -> None:
        with self.lock:
            self.errors[what] += 1


def one_chat(port: int, token: str, lines: dict[str, list[str]], every_line: list[str], rng: random.Random,
             chats: Chats, think: tuple[float, float] | None = None) -> None:
    """One simulated rater's session: claim it, talk in each of its conversations until it must end (her turns are
    the prompt's own ED speaker utterances, then others'), end each, submit ratings and turn annotations. With
    `think` (low, high seconds), she waits a uniform draw from it before each of her turns (reading, typing)."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=TURN_TIMEOUT_SECONDS * (TURN_RETRIES + 1) + 60)
    headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json", "X-Requested-With": "fetch"}

    def call(method: str, path: str, body: dict | None = None) -> tuple[int, Any]:
        connection.request(method, path, body=None if body is None else json.dumps(body).encode(), headers=headers)
        answer = connection.getresponse()
        raw = answer.read()
        try:
            return answer.status, json.loads(raw) if raw else None
        except ValueError:
            return answer.status, raw[:200]

    try:
        status, body = call("GET", "/api/annotate/next")
        payload = body.get("assignment") if status == 200 and isinstance(body, dict) else None
        if payload is None:
            chats.error(f"next: {status} {str(body)[:120]}")
            return
        assignment = payload["assignment_id"]
        criteria = [criterion["key"] for criterion in payload["criteria"]]
        answers = []
        for item in payload["items"]:
            prompt = item.get("prompt") or {}
            own = lines.get(prompt.get("situation") or "", [])
            texts = own + [rng.choice(every_line) for _ in range(MAX_UTTERANCES)]
            base = f"/api/assignments/{assignment}/conversations/{item['position']}"
            system_turns: list[int] = []
            failed = False
            for index in range(0, MAX_UTTERANCES, 2):
                if think:
                    connection.close()  # the idle keep-alive connection is gone by then; the next call opens one
                    time.sleep(rng.uniform(*think))
                started = time.perf_counter()
                status, reply = call("POST", f"{base}/turns", {"index": index, "text": texts[index // 2][:500]})
                elapsed = (time.perf_counter() - started) * 1000
                if status != 200 or not isinstance(reply, dict):
                    chats.error(f"turn: {status} {str(reply)[:120]}")
                    failed = True
                    break
                with chats.lock:
                    chats.turn_ms.append(elapsed)
                if reply.get("failed"):
                    with chats.lock:
                        chats.failed_turns.append(str(reply.get("message"))[:200])
                    failed = True
                    break
                system_turns.append(reply["index"])
                with chats.lock:
                    chats.acknowledged.add((assignment, item["position"], reply["index"], reply["text"]))
                if reply.get("must_end"):
                    break
            if failed:
                answers.append({"item_id": item["item_id"], "ratings": {}, "seconds": 1.0})
                continue
            status, ended = call("POST", f"{base}/end", {})
            if status != 200:
                chats.error(f"end: {status} {str(ended)[:120]}")
            answers.append({"item_id": item["item_id"], "ratings": dict.fromkeys(criteria, 4),
                            "turns": {str(index): ["none"] for index in system_turns}, "seconds": 30.0})
        status, receipt = call("POST", f"/api/assignments/{assignment}/submit",
                               {"submission_id": uuid.uuid4().hex, "conversations": answers})
        with chats.lock:
            chats.chats += 1
            chats.submitted += status == 200
        if status != 200:
            chats.error(f"submit: {status} {str(receipt)[:120]}")
    except (OSError, http.client.HTTPException) as error:
        chats.error(f"connection: {error.__class__.__name__}: {error}")
    finally:
        connection.close()


def chat_phase(port: int, server_pid: int, tokens: list[str], concurrency: int, lines: dict[str, list[str]],
               every_line: list[str], think: tuple[float, float] | None = None) -> dict[str, Any]:
    """`concurrency` raters at once, each taking tokens from the shared list until none is left (thinking before
    each turn with `think`, see one_chat)."""
    chats = Chats()
    remaining = list(tokens)
    take = threading.Lock()
    start_together = threading.Barrier(concurrency + 1)

    def rater(seat: int) -> None:
        rng = random.Random(seat)
        start_together.wait()
        while True:
            with take:
                if not remaining:
                    return
                token = remaining.pop()
            one_chat(port, token, lines, every_line, rng, chats, think)

    threads = [threading.Thread(target=rater, args=(seat,), name=f"chat-rater-{seat}") for seat in range(concurrency)]
    for thread in threads:
        thread.start()
    cpu_before, server_before = time.process_time(), _server_cpu(server_pid)
    start_together.wait()
    started = time.perf_counter()
    for thread in threads:
        thread.join()
    elapsed = time.perf_counter() - started
    return {"chats": chats, "elapsed": elapsed, "client_cpu": time.process_time() - cpu_before,
            "server_cpu": _server_cpu(server_pid) - server_before}


def stored_replies(url: str, assignments: set[int]) -> set[tuple[int, int, int, str]]:
    """(assignment, position, index, text) of the system turns stored for `assignments`."""
    if not assignments:
        return set()
    engine = make_engine(url)
    with engine.connect() as connection:
        rows = connection.execute(sql(
            "SELECT turn.assignment_id, placed.position, turn.idx, turn.text FROM chat_turn AS turn "
            "JOIN assignment_conversation AS placed ON placed.assignment_id = turn.assignment_id "
            "AND placed.conversation_id = turn.conversation_id "
            f"WHERE turn.speaker = 'system' AND turn.assignment_id IN ({', '.join(map(str, sorted(assignments)))})"
        )).all()
    engine.dispose()
    return {(row[0], row[1], row[2], row[3]) for row in rows}


def serve_command(port: int, workers: int, threads: int, server: str) -> list[str]:
    """`empeval serve` on 127.0.0.1:`port`: `server` "default" (what serve runs unless told) or "gunicorn"; no cap on
    the connections of one address where serve has one (the simulated raters share 127.0.0.1)."""
    command = [sys.executable, "-m", "empeval.cli", "serve", "--host", "127.0.0.1", "--port", str(port), "--workers",
               str(workers), "--threads", str(threads)]
    usage = subprocess.run([*command[:4], "serve", "--help"], capture_output=True, text=True, cwd=REPO,
                           check=False).stdout
    if "--max-per-address" in usage:
        command += ["--max-per-address", "0"]
    if server == "gunicorn":
        if "--gunicorn" not in usage:
            raise SystemExit("--server gunicorn: this `empeval serve` has no --gunicorn option (it serves gunicorn "
                             "already: use --server default)")
        command.append("--gunicorn")
    return command


def mode_label(mode: str, think: tuple[float, float]) -> str:
    return "closed loop" if mode == "closed" else f"think U({think[0]:g},{think[1]:g}) s"


def served(url: str, scratch: Path, levels: list[int], rounds: int, setting: str, prompts: int,
           lines: dict[str, list[str]], every_line: list[str], modes: Sequence[str] = ("closed",),
           think: tuple[float, float] = DEFAULT_THINK, server_kind: str = "default") -> None:
    workers, threads = (int(part) for part in setting.split("x"))
    phases = [(mode, level) for mode in modes for level in levels]
    studies = {(mode, level): f"chat-load-{setting}-{mode}-{level}" for mode, level in phases}
    warmup = f"chat-load-{setting}-warmup"
    sessions_of = {warmup: workers * threads * 2, **{studies[phase]: phase[1] * rounds for phase in phases}}
    for study, sessions in sessions_of.items():
        if sessions > prompts:
            raise SystemExit(f"{study} needs {sessions} prompts, the store's test split has {prompts}: lower "
                             f"--rounds or --chats, or give --ed-folder (the full ED test split)")
        create_chat_study(url, scratch, study, sessions)
    tokens = {study: invite_raters(url, study, sessions) for study, sessions in sessions_of.items()}
    port = free_port()
    command = serve_command(port, workers, threads, server_kind)
    server = subprocess.Popen(command, env={**os.environ, "EMPEVAL_DATABASE_URL": url}, cwd=REPO,
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True)
    try:
        _wait_for(port)
        started = time.perf_counter()
        warm = chat_phase(port, server.pid, tokens[warmup], workers * threads, lines, every_line)
        print(f"served, `{' '.join(command[3:])}`: warm-up of {warm['chats'].chats} chats "
              f"(builds the model in each worker, loads the cached index) {time.perf_counter() - started:.1f} s; "
              f"errors {dict(warm['chats'].errors) or 'none'}", flush=True)
        for mode, level in phases:
            phase = chat_phase(port, server.pid, tokens[studies[mode, level]], level, lines, every_line,
                               think if mode == "think" else None)
            chats: Chats = phase["chats"]
            turns = len(chats.turn_ms)
            rate = turns / phase["elapsed"]
            cpu_ms = phase["server_cpu"] / max(turns, 1) * 1000
            lost = chats.acknowledged - stored_replies(url, {reply[0] for reply in chats.acknowledged})
            print(f"  {level:>4} chats at once, {mode_label(mode, think)} ({rounds} each, {chats.chats} chats, "
                  f"{chats.submitted} submitted): {turns} turns in {phase['elapsed']:.1f} s = {rate:.1f} turns/s; "
                  f"turn {latency_line(chats.turn_ms)}; "
                  f"server CPU {phase['server_cpu'] / phase['elapsed']:.2f} cores ({cpu_ms:.1f} ms/turn, claims, ends "
                  f"and submits included); client CPU {phase['client_cpu'] / phase['elapsed']:.2f} cores; failed "
                  f"turns {len(chats.failed_turns)}{' ' + repr(chats.failed_turns[:2]) if chats.failed_turns else ''}"
                  f"; acknowledged replies {len(chats.acknowledged)}, not stored {len(lost)}"
                  f"; errors {dict(chats.errors) or 'none'}  [{load()}]", flush=True)
            name = f"served {workers}x{threads}, {level} chats"
            if mode != "closed":  # closed-loop figures keep the names of earlier runs
                name += f", {mode_label(mode, think)}"
            for q in (0.5, 0.95, 0.99):
                goal = below(GOAL_P95_MS) if q == 0.95 and level == GOAL_CHATS else None
                report(Figure(f"{name}: turn latency p{round(q * 100)}", percentile(chats.turn_ms, q), "ms", goal=goal,
                              fmt=".1f", note="closed loop: CPU-bound by construction" if goal and mode == "closed"
                              else ""))
            report(Figure(f"{name}: turns per second", rate, "turns/s", fmt=".1f"))
            report(Figure(f"{name}: server CPU per turn", cpu_ms, "ms", fmt=".1f",
                          note="claims, ends and submits of the phase included"))
            report(Figure(f"{name}: failed turns and errors", len(chats.failed_turns) + sum(chats.errors.values())))
            report(Figure(f"{name}: acknowledged replies not stored", len(lost), goal=at_most(0),
                          note=f"of {len(chats.acknowledged)} acknowledged"))
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, signal.SIGKILL)
            server.wait(timeout=30)
        log = server.stderr.read().decode(errors="replace") if server.stderr else ""
        tracebacks = log.count("Traceback")
        if tracebacks:
            print(f"  the server logged {tracebacks} tracebacks; the last lines:\n{log[-2000:]}")


# --- part "backend": micro-batched vs one call per turn, in this process -----------------------------------------


def backend_load(call: Callable[[Any], bool], contexts: list, concurrency: int, seconds: float) -> dict[str, Any]:
    """`concurrency` callers, each calling `call(context)` on random contexts for `seconds`: latencies, turns, CPU."""
    latencies: list[list[float]] = [[] for _ in range(concurrency)]
    failures = [0] * concurrency
    start_together = threading.Barrier(concurrency + 1)
    deadline = [0.0]

    def caller(seat: int) -> None:
        rng = random.Random(seat)
        start_together.wait()
        while time.perf_counter() < deadline[0]:
            context = rng.choice(contexts)
            started = time.perf_counter()
            ok = call(context)
            latencies[seat].append((time.perf_counter() - started) * 1000)
            failures[seat] += not ok

    threads = [threading.Thread(target=caller, args=(seat,)) for seat in range(concurrency)]
    for thread in threads:
        thread.start()
    cpu_before = time.process_time()
    deadline[0] = time.perf_counter() + seconds
    start_together.wait()
    started = time.perf_counter()
    for thread in threads:
        thread.join()
    elapsed = time.perf_counter() - started
    merged = [value for values in latencies for value in values]
    return {"latency_ms": merged, "turns": len(merged), "elapsed": elapsed, "failures": sum(failures),
            "cpu": time.process_time() - cpu_before}


def batch_sweep(model, contexts: list, sizes: list[int], rounds: int) -> None:
    """CPU per context of `respond_batch` in batches of each size, the sizes taking turns on the same contexts (the
    largest size's worth per round): whether a batch amortises the encoder's per-call overhead or costs more in
    padding every context to the batch's longest."""
    rng = random.Random(1)
    per_context: dict[int, list[float]] = {size: [] for size in sizes}
    for _ in range(rounds):
        # The same contexts for every size in a round (batches of up to `size` of them), so that only the batching
        # differs, not the texts' lengths.
        chosen = rng.sample(contexts, max(sizes))
        for size in sizes:
            cpu_before = time.process_time()
            for start in range(0, len(chosen), size):
                model.respond_batch(chosen[start:start + size])
            per_context[size].append((time.process_time() - cpu_before) / len(chosen) * 1000)
    medians = {size: statistics.median(values) for size, values in per_context.items()}
    print("  CPU per context of respond_batch by batch size (the same contexts, median of "
          f"{rounds} rounds): " + ", ".join(f"{size}: {ms:.1f} ms" for size, ms in medians.items()), flush=True)
    for size in sizes[1:]:
        report(Figure(f"backend: CPU per context, batches of {size} / one at a time", medians[size] / medians[sizes[0]],
                      "x", fmt=".2f", note=f"{medians[size]:.1f} vs {medians[sizes[0]]:.1f} ms"))


def backend(url: str, cache_dir: Path, levels: list[int], seconds: float, rounds: int, batch_sizes: list[int],
            sweep_rounds: int, max_batch: int | None) -> None:
    engine = make_engine(url)
    with unit_of_work(engine) as session:
        contexts = load_contexts(session, split="test")
    resources = BackendResources(engine=engine, cache_dir=cache_dir, show_progress=False)
    registry = Registry.from_config(None, resources)
    model = registry.get(SYSTEM)
    started = time.perf_counter()
    model.prepare()
    model.respond_batch(contexts[:8])  # loads the weights; the encoder's first call
    print(f"backend: {SYSTEM}, {len(model.pool.texts):,} candidates, {len(contexts):,} ED test contexts; model and "
          f"index ready in {time.perf_counter() - started:.1f} s; encoder {model.encoder.precision}, torch threads "
          f"{model.encoder.threads_for(1)} per turn, {model.encoder.threads_for(10_000)} for large calls "
          f"({model.encoder.thread_source})  [{load()}]", flush=True)

    # The floor: one call at a time, nothing else running.
    rng = random.Random(0)
    single: list[float] = []
    cpu_before = time.process_time()
    for _ in range(200):
        context = rng.choice(contexts)
        call_started = time.perf_counter()
        model.respond_batch([context])
        single.append((time.perf_counter() - call_started) * 1000)
    single_cpu = (time.process_time() - cpu_before) / len(single) * 1000
    print(f"  one call at a time, idle: {latency_line(single)}; CPU {single_cpu:.2f} ms/call", flush=True)
    report(Figure("backend: one respond_batch([context]) at a time, latency p50", statistics.median(single), "ms",
                  fmt=".2f", note=f"CPU {single_cpu:.2f} ms/call"))

    batch_sweep(model, contexts, batch_sizes, sweep_rounds)

    def unbatched(context) -> bool:
        return model.respond_batch([context])[0].ok

    with LiveReplies(registry, **({"max_batch": max_batch} if max_batch else {})) as live:
        def batched(context) -> bool:
            return not live.reply(SYSTEM, context, timeout=TURN_TIMEOUT_SECONDS, retries=TURN_RETRIES).failed

        for level in levels:
            results: dict[str, list[dict[str, Any]]] = {"micro-batched": [], "one call per turn": []}
            sizes_before = Counter(live.stats(SYSTEM)["batch_sizes"])
            for _ in range(rounds):  # alternating, so that the machine's load weighs on both alike
                results["micro-batched"].append(backend_load(batched, contexts, level, seconds))
                results["one call per turn"].append(backend_load(unbatched, contexts, level, seconds))
            sizes = Counter(live.stats(SYSTEM)["batch_sizes"])
            sizes.subtract(sizes_before)
            summary = {}
            for mode, runs in results.items():
                turns = sum(run["turns"] for run in runs)
                elapsed = sum(run["elapsed"] for run in runs)
                latency = [value for run in runs for value in run["latency_ms"]]
                cpu_ms = sum(run["cpu"] for run in runs) / max(turns, 1) * 1000
                summary[mode] = {"rate": turns / elapsed, "cpu_ms": cpu_ms, "latency": latency,
                                 "failures": sum(run["failures"] for run in runs)}
                print(f"  {level:>4} callers, {mode:<17}: {turns / elapsed:7.1f} turns/s, {latency_line(latency)}, "
                      f"CPU {cpu_ms:.2f} ms/turn, failures {summary[mode]['failures']}  [{load()}]", flush=True)
            batches = sum(count for count in sizes.values() if count > 0)
            mean_batch = sum(size * count for size, count in sizes.items() if count > 0) / max(batches, 1)
            print(f"       batches of the micro-batched runs: {batches}, mean size {mean_batch:.1f}, sizes "
                  f"{dict(sorted((s, c) for s, c in sizes.items() if c > 0))}", flush=True)
            ours, theirs = summary["micro-batched"], summary["one call per turn"]
            name = f"backend, {level} callers"
            for q in (0.5, 0.95, 0.99):
                report(Figure(f"{name}, micro-batched: latency p{round(q * 100)}", percentile(ours["latency"], q), "ms",
                              fmt=".1f", note=f"one call per turn: {percentile(theirs['latency'], q):.1f} ms"))
            report(Figure(f"{name}: turns/s, micro-batched / one call per turn", ours["rate"] / theirs["rate"], "x",
                          fmt=".2f", note=f"{ours['rate']:.1f} vs {theirs['rate']:.1f} turns/s; mean batch "
                                          f"{mean_batch:.1f}"))
            report(Figure(f"{name}: CPU per turn, micro-batched / one call per turn", ours["cpu_ms"] / theirs["cpu_ms"],
                          "x", fmt=".2f", note=f"{ours['cpu_ms']:.2f} vs {theirs['cpu_ms']:.2f} ms/turn"))
            report(Figure(f"{name}: p95 latency, micro-batched / one call per turn",
                          percentile(ours["latency"], 0.95) / percentile(theirs["latency"], 0.95), "x", fmt=".2f"))
    engine.dispose()


# --- main --------------------------------------------------------------------------------------------------------


def chat_kind_ready() -> str | None:
    """Why the served part cannot run (the chat kind or its routes are missing), or None."""
    import importlib.util

    for module in ("empeval.tasks.kinds.chat", "empeval.server.web.chat_api"):
        if importlib.util.find_spec(module) is None:
            return f"{module} does not exist yet"
    return None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--parts", default=",".join(PARTS), help=f"comma-separated, of {', '.join(PARTS)}")
    parser.add_argument("--chats", default="32,128", help="concurrent chats (callers in part backend)")
    parser.add_argument("--modes", default=",".join(MODES),
                        help="part served: closed (no think time) and/or think (a rater types each turn, --think)")
    parser.add_argument("--think", default=",".join(f"{x:g}" for x in DEFAULT_THINK), metavar="LOW,HIGH",
                        help="seconds a rater takes to read the reply and type her next turn in mode think, drawn "
                             "uniformly (default 5,15: about 3 times a typical typist's pace for ED's 19.5-word "
                             "utterances, so pessimistic)")
    parser.add_argument("--rounds", type=int, default=2,
                        help="chats in a row per simulated rater (served); alternating runs per mode (backend)")
    parser.add_argument("--settings", default=f"2x{DEFAULT_THREADS}",
                        help="server WORKERSxTHREADS to serve under, comma-separated (part served)")
    parser.add_argument("--server", choices=("default", "gunicorn"), default="default",
                        help="part served: `empeval serve`'s own server, or gunicorn (serve --gunicorn, where serve "
                             "has that option)")
    parser.add_argument("--seconds", type=float, default=8.0, help="each backend run (part backend)")
    parser.add_argument("--batch-sizes", default="1,2,4,8,15",
                        help="batch sizes whose CPU per context part backend compares (the first is the reference)")
    parser.add_argument("--sweep-rounds", type=int, default=30, help="rounds of the batch-size comparison")
    parser.add_argument("--max-batch", type=int, default=None,
                        help="LiveReplies' max_batch in part backend (default: its own default)")
    parser.add_argument("--ed-folder", type=Path, default=SAMPLE,
                        help="ED train.csv and test.csv (default the bundled sample; the full data's candidate index "
                             "takes minutes to encode the first time)")
    parser.add_argument("--cache-dir", type=Path, default=None,
                        help="embedding cache (default $EMPEVAL_CACHE_DIR or ~/.cache/empeval)")
    args = parser.parse_args()
    parts = [part for part in args.parts.split(",") if part]
    if unknown := sorted(set(parts) - set(PARTS)):
        parser.error(f"--parts: unknown {', '.join(unknown)}; choose from {', '.join(PARTS)}")
    levels = [int(level) for level in args.chats.split(",")]
    modes = [mode for mode in args.modes.split(",") if mode]
    if unknown := sorted(set(modes) - set(MODES)):
        parser.error(f"--modes: unknown {', '.join(unknown)}; choose from {', '.join(MODES)}")
    try:
        low, high = (float(x) for x in args.think.split(","))
    except ValueError:
        parser.error(f"--think {args.think!r}: give LOW,HIGH seconds, e.g. 5,15")
    if not 0 <= low <= high:
        parser.error(f"--think {args.think!r}: need 0 <= LOW <= HIGH")
    cache_dir = args.cache_dir or default_cache_dir()
    os.environ["EMPEVAL_CACHE_DIR"] = str(cache_dir)  # the server's backend uses the same cache

    scratch = Path(tempfile.mkdtemp(prefix="empeval-chat-load-"))
    try:
        url = f"sqlite:///{scratch / 'chat.db'}"
        started = time.perf_counter()
        build_store(url, args.ed_folder)
        lines, every_line = speaker_lines(url)
        print(f"store: ED from {args.ed_folder} in {time.perf_counter() - started:.1f} s; {len(lines):,} test "
              f"dialogues' speaker utterances; cache {cache_dir}; usable CPUs {len(os.sched_getaffinity(0))}  "
              f"[{load()}]", flush=True)
        if "served" in parts:
            missing = chat_kind_ready()
            if missing:
                print(f"served: skipped, the chat study kind is not ready ({missing})")
            else:
                for setting in args.settings.split(","):
                    served(url, scratch, levels, args.rounds, setting, len(lines), lines, every_line, modes,
                           (low, high), args.server)
        if "backend" in parts:
            backend(url, cache_dir, levels, args.seconds, args.rounds,
                    [int(size) for size in args.batch_sizes.split(",")], args.sweep_rounds, args.max_batch)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    run_script(__file__, main)
