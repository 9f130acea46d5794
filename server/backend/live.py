"""Live replies: a system's next utterance in a chat, for many chats at once, with a bounded wait per turn.

The chat study kind (`kind = "chat"`: a rater talks with a system live) asks a dialogue system served by the backend
for its reply while the rater waits. `LiveReplies` answers those requests for one `Registry` (one per process, as
the web app keeps one registry per app):

- **Micro-batching per system.** Requests for the same system are gathered by that system's dispatcher thread for
  at most `window_ms` after the first one arrived (or until `max_batch` are waiting) and answered by one
  `respond_batch` call. A batch amortises a model's per-call overhead (Python and tokenizer calls, a remote
  endpoint's round trip, one matrix product against the candidate index instead of one each) but pads every context
  to the batch's longest. `benchmarks/chat_load.py` measures both: on a 2-core CPU without bf16 the MiniLM encoder's
  arithmetic dominates, and its CPU per context did not fall with batch size (batches of 2 to 15 cost 1.0-1.2x one
  at a time), hence a small default `max_batch` (see DEFAULT_MAX_BATCH). What the service does save there under load
  is running at most `batches_per_system` model calls of a system at once, where one call per request runs as many
  as there are requests: at 32 and 128 concurrent callers, one call per turn cost 1.1-2x the CPU per turn of the
  service. Below load the price is at most `window_ms` of added latency per turn; `window_ms=0` batches only what is
  already queued.
- **Batches run on a few threads of their system.** Each system has one dispatcher thread and
  `batches_per_system` batch threads (default 2), so a batch that hangs blocks only its own system, and the next
  batch of that system can still start on another of its threads. When every batch thread of a system is stuck,
  further requests for it wait in its queue and fail at their timeout; a request whose caller gave up is dropped
  before it reaches the model. Other systems have their own threads and are never delayed by it. Threads are
  started at a system's first request: at most (1 + batches_per_system) per system asked for; a study has a
  handful of systems. Python cannot stop a thread: a model call that never returns keeps its thread (a daemon
  thread, so it does not keep the process alive), which is why the threads are bounded per system.
- **Remote systems are not batched.** An `http` system's work is done elsewhere: its `respond_batch` sends one
  request after another (unless its `concurrency` is raised), so batching would only queue a turn behind others'
  and two calls at once would serve two chats at a time. Its turns go one per call, up to REMOTE_LIMITS'
  calls at once (threads waiting on sockets); the remote server bounds the work. For live use give it a `timeout`
  below the study's turn timeout and `retries = 0`: the caller's own retries apply. Any system's limits can be set
  by name (`limits`).
- **A bounded wait per turn.** The caller waits at most `timeout` seconds per attempt and makes at most
  `retries + 1` attempts, so `reply` returns within about (retries + 1) x timeout whatever the model does. A
  timed-out attempt, an exception raised by the model and an error outcome of kind 'upstream' (a remote model's
  failure) are retried; an error outcome of kind 'unsupported' (this system cannot answer this context) is not,
  since asking again gives the same answer. There is no pause between attempts: a timed-out attempt has already
  waited, and an `http` system backs off inside its own retries.
- **Failures are replies too.** `reply` never raises for a model's failure or a timeout: it returns a `LiveReply`
  with `failed` True and a message that says which system failed, how (timeout after N s, the model's error) and
  after how many attempts. An unknown system is a configuration error and raises KeyError.

Thread-safe; no global state: each `LiveReplies` owns its threads, and `close()` (or leaving its `with` block)
stops them.
"""
from __future__ import annotations

import queue
import threading
import time
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any

from empeval.server.backend.base import UPSTREAM, DialogueContext, Outcome, ResponseModel
from empeval.server.backend.registry import Registry

DEFAULT_WINDOW_MS = 5.0
# Small: padding every context to the batch's longest grows with the batch, and measured (benchmarks/chat_load.py,
# part "backend") the MiniLM encoder saved no CPU per context at any batch size on a 2-core CPU without bf16. It must
# also stay below retrieval's CACHED_QUERY_BATCH (16), from which `retrieval` keeps a batch's query embeddings in a
# file of the embedding cache: live turns never repeat, so a file per batch would only fill it. Raise it for a
# system whose per-call overhead is large (a GPU model, a remote endpoint that takes batches).
DEFAULT_MAX_BATCH = 4
DEFAULT_BATCHES_PER_SYSTEM = 2
CLOSED = "the live reply service was closed"  # the failure of the turns still waiting when it closes
# How long close() waits for each thread; a thread stuck in a model call is left behind (it is a daemon).
CLOSE_JOIN_SECONDS = 5.0


@dataclass(frozen=True)
class SystemLimits:
    """How one system's turns are served: at most `max_batch` contexts per `respond_batch` call, at most
    `concurrent_batches` calls at once (its batch threads)."""

    max_batch: int = DEFAULT_MAX_BATCH
    concurrent_batches: int = DEFAULT_BATCHES_PER_SYSTEM

    def __post_init__(self) -> None:
        if self.max_batch < 1 or self.concurrent_batches < 1:
            raise ValueError(f"max_batch ({self.max_batch}) and concurrent_batches ({self.concurrent_batches}) must "
                             f"be at least 1")


# System kinds whose model runs elsewhere (server.backend.registry.KINDS), and how their turns are served: one per
# call, many calls at once (see the module docstring); 10 is the connection pool of the `requests` session an `http`
# system keeps (requests.adapters.DEFAULT_POOLSIZE): more calls at once would open connections it cannot keep.
REMOTE_KINDS = frozenset({"http"})
REMOTE_LIMITS = SystemLimits(max_batch=1, concurrent_batches=10)


@dataclass(frozen=True)
class LiveReply:
    """What a system answered to one turn: `text` on success, else `error` (a message for the researcher).

    `provenance`: system, kind, version, parameters, the model's own `latency_ms` (None when it never answered) and
    what the system adds (e.g. the retrieved candidate), plus `attempts`. `latency_ms`: end to end, from the call
    of `reply` to its return, queueing and retries included."""

    system: str
    text: str | None
    error: str | None
    provenance: dict[str, Any]
    latency_ms: float
    attempts: int

    @property
    def failed(self) -> bool:
        return self.text is None


# The states of one attempt. QUEUED -> RUNNING -> DONE, or QUEUED/RUNNING -> ABANDONED when its caller stopped
# waiting (a late answer is then dropped), or QUEUED -> DONE with a failure when the service closes.
QUEUED, RUNNING, DONE, ABANDONED = "queued", "running", "done", "abandoned"


@dataclass(eq=False)
class _Attempt:
    """One attempt at one turn, waiting in its system's queue or batch."""

    context: DialogueContext
    enqueued: float = field(default_factory=time.monotonic)
    state: str = QUEUED
    outcome: Outcome | None = None
    failure: str | None = None  # the model raised, or the service closed
    done: threading.Event = field(default_factory=threading.Event)


class _SystemWorker:
    """One system's queue, dispatcher thread and batch threads."""

    def __init__(self, model: ResponseModel, *, window_ms: float, limits: SystemLimits):
        self.model = model
        self.name = model.name
        self.window = window_ms / 1000
        self.max_batch = limits.max_batch
        batch_threads = limits.concurrent_batches
        self.lock = threading.Lock()  # guards the attempts' states, `closed` and the counters
        self.closed = False
        self.requests: queue.SimpleQueue[_Attempt | None] = queue.SimpleQueue()
        self.batches: queue.SimpleQueue[list[_Attempt] | None] = queue.SimpleQueue()
        # A batch thread free to take a batch: the dispatcher gathers the next batch only once one is, so that
        # requests keep gathering while every batch thread is busy.
        self.free = threading.Semaphore(batch_threads)
        self.description: dict[str, Any] | None = None  # describe() of the model, once a batch thread read it
        self.counts: Counter[str] = Counter()
        self.batch_sizes: Counter[int] = Counter()
        self.threads = [threading.Thread(target=self._dispatch, name=f"live-{self.name}-dispatch", daemon=True)]
        self.threads += [threading.Thread(target=self._run_batches, name=f"live-{self.name}-batch-{i}", daemon=True)
                         for i in range(batch_threads)]
        for thread in self.threads:
            thread.start()

    # --- the caller's side ---------------------------------------------------------------------------------------

    def submit(self, context: DialogueContext) -> _Attempt:
        attempt = _Attempt(context)
        with self.lock:
            if self.closed:
                raise RuntimeError(f"the live reply service is closed; system {self.name!r} takes no more turns")
            self.counts["attempts"] += 1
            self.requests.put(attempt)
        return attempt

    def settle(self, attempt: _Attempt, timeout: float) -> bool:
        """Wait for `attempt` at most `timeout` seconds: True when it finished, else it is abandoned (its batch
        skips it, or drops its late answer) and False."""
        if attempt.done.wait(timeout):
            return True
        with self.lock:
            if attempt.state == DONE:  # finished between the wait's end and the lock
                return True
            attempt.state = ABANDONED
            self.counts["timeouts"] += 1
        return False

    # --- the dispatcher thread -----------------------------------------------------------------------------------

    def _dispatch(self) -> None:
        while True:
            self.free.acquire()
            first = self.requests.get()
            if first is None or self.closed:
                self._fail([first] if first else [], CLOSED)
                return
            batch = [first]
            # Gather for at most the window from the first one's arrival: when it waited for a free batch thread,
            # the window has passed and only what is already queued joins it.
            deadline = first.enqueued + self.window
            while len(batch) < self.max_batch:
                remaining = deadline - time.monotonic()
                try:
                    attempt = self.requests.get(timeout=remaining) if remaining > 0 else self.requests.get_nowait()
                except queue.Empty:
                    break
                if attempt is None:  # close() while gathering
                    self._fail(batch, CLOSED)
                    return
                batch.append(attempt)
            self.batches.put(batch)

    # --- the batch threads ---------------------------------------------------------------------------------------

    def _run_batches(self) -> None:
        while True:
            batch = self.batches.get()
            if batch is None:
                return
            try:
                if self.closed:
                    self._fail(batch, CLOSED)
                else:
                    self._run(batch)
            finally:
                self.free.release()
            if self.closed:  # a batch that outlived close() (its sentinel was drained meanwhile): stop here
                return

    def _run(self, batch: list[_Attempt]) -> None:
        with self.lock:
            live = [attempt for attempt in batch if attempt.state == QUEUED]
            for attempt in live:
                attempt.state = RUNNING
            self.counts["dropped"] += len(batch) - len(live)  # their callers stopped waiting before the model ran
            if live:
                self.counts["batches"] += 1
                self.batch_sizes[len(live)] += 1
        if not live:
            return
        outcomes: list[Outcome] | None = None
        try:
            if self.description is None:
                self.description = describe(self.model)
            outcomes = list(self.model.respond_batch([attempt.context for attempt in live]))
            failure = (None if len(outcomes) == len(live) else
                       f"respond_batch returned {len(outcomes)} outcomes for {len(live)} contexts")
        except Exception as error:  # noqa: BLE001 — a model's crash is that turn's failure, reported to the caller
            failure = f"the model raised {error.__class__.__name__}: {str(error)[:300]}"
        with self.lock:
            for index, attempt in enumerate(live):
                if attempt.state != RUNNING:  # abandoned while the model ran: its caller has moved on
                    continue
                if failure is None and outcomes is not None:
                    attempt.outcome = outcomes[index]
                else:
                    attempt.failure = failure
                attempt.state = DONE
                attempt.done.set()

    def _fail(self, attempts: list[_Attempt], message: str) -> None:
        with self.lock:
            for attempt in attempts:
                if attempt.state in (QUEUED, RUNNING):
                    attempt.failure, attempt.state = message, DONE
                    attempt.done.set()

    # --- closing ---------------------------------------------------------------------------------------------------

    def close(self, join_seconds: float) -> list[str]:
        """Stop the threads; fail what still waits. The names of the threads still running after `join_seconds`
        each (those stuck in a model call)."""
        with self.lock:
            self.closed = True
        self.requests.put(None)
        self.free.release()  # a dispatcher waiting for a free batch thread wakes and sees `closed`
        for _ in self.threads[1:]:
            self.batches.put(None)
        stuck = []
        for thread in self.threads:
            thread.join(join_seconds)
            if thread.is_alive():
                stuck.append(thread.name)
        leftovers: list[_Attempt] = []
        for source in (self.requests, self.batches):
            while True:
                try:
                    item = source.get_nowait()
                except queue.Empty:
                    break
                if isinstance(item, list):
                    leftovers += item
                elif item is not None:
                    leftovers.append(item)
        self._fail(leftovers, CLOSED)
        return stuck


def describe(model: ResponseModel) -> dict[str, Any]:
    """The model's system, kind, version and parameters (what a failed turn's provenance can say about it); the
    version is left out when computing it fails (e.g. retrieval with no data in the store)."""
    try:
        described = model.describe()
    except Exception as error:  # noqa: BLE001 — the batch that follows reports the same failure to the caller
        return {"system": model.name, "kind": model.kind, "version": None, "version_error": str(error)[:200]}
    return {"system": described["name"], "kind": described["kind"], "version": described["version"],
            "parameters": described["parameters"]}


class LiveReplies:
    """The systems of one `Registry`, answering chat turns live (see the module docstring for the design).

    `window_ms`: how long a system's dispatcher gathers requests after the first before answering them in one
    batch; `max_batch`: the most contexts in one batch; `batches_per_system`: the batches of one system that may
    run at once (its threads; more than one, so one hung batch does not stop its system at once). Those two are
    every local system's limits; remote systems (REMOTE_KINDS) get REMOTE_LIMITS; `limits` sets a system's own, by
    name.

        with LiveReplies(registry) as live:
            turn = live.reply("retrieval", context, timeout=20, retries=1)
            turn.text if not turn.failed else turn.error
    """

    def __init__(self, registry: Registry, *, window_ms: float = DEFAULT_WINDOW_MS,
                 max_batch: int = DEFAULT_MAX_BATCH, batches_per_system: int = DEFAULT_BATCHES_PER_SYSTEM,
                 limits: Mapping[str, SystemLimits] | None = None):
        if window_ms < 0:
            raise ValueError(f"window_ms must be at least 0, not {window_ms}")
        self.registry = registry
        self.window_ms = window_ms
        self.local_limits = SystemLimits(max_batch, batches_per_system)  # validates both
        self.limits = dict(limits or {})
        self._lock = threading.Lock()
        self._workers: dict[str, _SystemWorker] = {}
        self._closed = False

    def _worker(self, system: str) -> _SystemWorker:
        with self._lock:
            worker = self._workers.get(system)
        if worker is not None:
            return worker
        # Outside our lock (the registry has its own), so that building one system never holds up another's turns.
        model = self.registry.get(system)  # KeyError for an unknown system, ConfigError for a broken one
        with self._lock:
            if self._closed:
                raise RuntimeError("the live reply service is closed")
            worker = self._workers.get(system)
            if worker is None:
                worker = _SystemWorker(model, window_ms=self.window_ms, limits=self.limits_of(model))
                self._workers[system] = worker
            return worker

    def limits_of(self, model: ResponseModel) -> SystemLimits:
        """The limits `model`'s turns are served under: its own by name, else by where it runs."""
        if model.name in self.limits:
            return self.limits[model.name]
        return REMOTE_LIMITS if model.kind in REMOTE_KINDS else self.local_limits

    def reply(self, system: str, context: DialogueContext, *, timeout: float, retries: int) -> LiveReply:
        """`system`'s reply to `context`, waiting at most `timeout` seconds per attempt, at most `retries + 1`
        attempts. Never raises for the model's failure or a timeout (see `LiveReply.failed`); KeyError for a
        system the registry does not know."""
        if timeout <= 0 or retries < 0:
            raise ValueError(f"timeout must be positive and retries at least 0 (got {timeout}, {retries})")
        worker = self._worker(system)
        start = time.perf_counter()
        reasons: list[str] = []
        attempts = 0
        for attempts in range(1, retries + 2):
            attempt = worker.submit(context)
            if not worker.settle(attempt, timeout):
                reasons.append(f"no answer within {timeout:g} s")
                continue
            outcome = attempt.outcome
            if outcome is None:
                reasons.append(attempt.failure or "no outcome")
                if attempt.failure == CLOSED:
                    break
                continue
            if outcome.ok:
                latency = (time.perf_counter() - start) * 1000
                return LiveReply(system, outcome.text, None, {**outcome.provenance, "attempts": attempts}, latency,
                                 attempts)
            if outcome.error_kind == UPSTREAM:
                reasons.append(f"the remote model failed: {outcome.error}")
                continue
            reasons.append(f"the system cannot answer this context ({outcome.error_kind or 'error'}): "
                           f"{outcome.error}; not retried")
            return self._failure(worker, reasons, attempts, start, outcome)
        return self._failure(worker, reasons, attempts, start, None)

    @staticmethod
    def _failure(worker: _SystemWorker, reasons: list[str], attempts: int, start: float,
                 outcome: Outcome | None) -> LiveReply:
        if outcome is not None:
            provenance = {**outcome.provenance, "attempts": attempts}
        else:
            provenance = {**(worker.description or {"system": worker.name, "kind": worker.model.kind}),
                          "latency_ms": None, "attempts": attempts}
        with worker.lock:
            worker.counts["failures"] += 1
        steps = "; ".join(f"attempt {n}: {reason}" for n, reason in enumerate(reasons, start=1))
        message = f"system {worker.name!r} gave no reply after {attempts} attempt{'s' * (attempts != 1)}: {steps}"
        return LiveReply(worker.name, None, message, provenance, (time.perf_counter() - start) * 1000, attempts)

    def stats(self, system: str) -> dict[str, Any]:
        """What `system`'s worker has done so far: attempts, batches, `batch_sizes` ({size: batches}), timeouts,
        dropped (abandoned before the model ran) and failures (turns that failed after all attempts)."""
        with self._lock:
            worker = self._workers.get(system)
        if worker is None:
            return {"attempts": 0, "batches": 0, "batch_sizes": {}, "timeouts": 0, "dropped": 0, "failures": 0}
        with worker.lock:
            return {**{key: worker.counts[key] for key in ("attempts", "batches", "timeouts", "dropped", "failures")},
                    "batch_sizes": dict(sorted(worker.batch_sizes.items()))}

    def close(self, join_seconds: float = CLOSE_JOIN_SECONDS) -> list[str]:
        """Stop every system's threads and fail the turns still waiting. Returns the names of the threads still
        stuck in a model call after `join_seconds` each (empty when all stopped). Idempotent."""
        with self._lock:
            self._closed = True
            workers, self._workers = list(self._workers.values()), {}
        stuck = []
        for worker in workers:
            stuck += worker.close(join_seconds)
        return stuck

    def __enter__(self) -> LiveReplies:
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 traceback: TracebackType | None) -> None:
        self.close()
