"""LiveReplies (server/backend/live.py): micro-batched chat replies with a bounded wait per turn, on real threads.

The models are small ResponseModel subclasses defined here (the service itself is not mocked); one test runs the
real control-generic system from the default systems file. Waits are bounded (events with timeouts), never sleeps
that hope for an order.
"""
from __future__ import annotations

import ast
import importlib.util
import json
import threading
import time
from collections.abc import Sequence
from pathlib import Path

import pytest

from empeval.server.backend.base import (
    UPSTREAM,
    ContextTurn,
    DialogueContext,
    Outcome,
    Reply,
    ResponseModel,
    ResponseUnavailable,
)
from empeval.server.backend.controls import GENERIC_REPLIES
from empeval.server.backend.http_model import HttpModel
from empeval.server.backend.live import DEFAULT_MAX_BATCH, REMOTE_LIMITS, LiveReplies, SystemLimits
from empeval.server.backend.registry import Registry, SystemSpec
from empeval.server.backend.resources import BackendResources
from tests.backend.stub_http import JsonStubHandler, stub_server

# Long enough for any bounded wait on a loaded 2-core machine, short against the test's timeout.
PATIENCE = 10.0


def said(text: str) -> DialogueContext:
    return DialogueContext(turns=(ContextTurn("speaker", text),), emotion="proud", situation="a situation")


class Echo(ResponseModel):
    """Answers "echo: <the last turn>", recording the size of every batch; each batch takes `seconds`."""

    kind = "test-echo"

    def __init__(self, name: str, seconds: float = 0.0):
        super().__init__(name)
        self.seconds = seconds
        self.batch_sizes: list[int] = []
        self.lock = threading.Lock()

    def data_version(self) -> str:
        return "echo-1"

    def respond_batch(self, contexts: Sequence[DialogueContext]) -> list[Outcome]:
        with self.lock:
            self.batch_sizes.append(len(contexts))
        time.sleep(self.seconds)  # the model's work, not a wait for an order
        return [Outcome(c.key(), f"echo: {c.turns[-1].text}", self.provenance(1.5, {"batch": len(contexts)}), 1.5)
                for c in contexts]


class Hung(ResponseModel):
    """Never answers until `release` is set (a model stuck on a dead socket); `entered` is set at each call."""

    kind = "test-hung"

    def __init__(self, name: str):
        super().__init__(name)
        self.entered = threading.Event()
        self.release = threading.Event()
        self.calls = 0

    def data_version(self) -> str:
        return "hung-1"

    def respond_one(self, context: DialogueContext) -> Reply:
        self.calls += 1
        self.entered.set()
        self.release.wait(PATIENCE)
        return Reply("too late")


class Refusing(ResponseModel):
    """Cannot answer any context (an error outcome of kind 'unsupported')."""

    kind = "test-refusing"

    def data_version(self) -> str:
        return "refusing-1"

    def respond_one(self, context: DialogueContext) -> Reply:
        raise ResponseUnavailable("this system only answers stored contexts")


class Crashing(ResponseModel):
    """respond_batch raises (a bug or a broken resource), counting its calls."""

    kind = "test-crashing"

    def __init__(self, name: str):
        super().__init__(name)
        self.calls = 0

    def data_version(self) -> str:
        return "crashing-1"

    def respond_batch(self, contexts: Sequence[DialogueContext]) -> list[Outcome]:
        self.calls += 1
        raise RuntimeError("boom: the candidate index is corrupt")


class Flaky(ResponseModel):
    """A remote model whose first `failures` calls fail upstream (HTTP 502), then answer."""

    kind = "test-flaky"

    def __init__(self, name: str, failures: int):
        super().__init__(name)
        self.failures = failures
        self.calls = 0

    def data_version(self) -> str:
        return "flaky-1"

    def respond_one(self, context: DialogueContext) -> Reply:
        self.calls += 1
        if self.calls <= self.failures:
            raise ResponseUnavailable("http://model.test: HTTP 502: bad gateway", kind=UPSTREAM)
        return Reply("I am so glad to hear that!")


class Systems(Registry):
    """A registry of ready-made models (the systems defined above)."""

    def __init__(self, *models: ResponseModel):
        super().__init__([SystemSpec(m.name, m.kind) for m in models], BackendResources(show_progress=False))
        self.models = {m.name: m for m in models}

    def get(self, name: str) -> ResponseModel:
        if name not in self.models:
            raise KeyError(f"unknown system {name!r}; configured: {', '.join(self.models)}")
        return self.models[name]


def concurrently(count: int, call) -> list:
    """call(i) for i in range(count) on `count` threads released together; their results in order of i."""
    results: list = [None] * count
    errors: list[BaseException] = []
    start = threading.Barrier(count)

    def run(i: int) -> None:
        try:
            start.wait(PATIENCE)
            results[i] = call(i)
        except BaseException as error:  # noqa: BLE001 — re-raised in the test's thread below
            errors.append(error)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(PATIENCE)
    assert not errors, errors
    assert not any(thread.is_alive() for thread in threads)
    return results


def live_threads() -> set[str]:
    return {thread.name for thread in threading.enumerate() if thread.name.startswith("live-")}


def test_concurrent_turns_for_one_system_are_answered_in_fewer_batches():
    model = Echo("echo", seconds=0.02)
    with LiveReplies(Systems(model), window_ms=50, max_batch=16) as live:
        replies = concurrently(8, lambda i: live.reply("echo", said(f"turn {i}"), timeout=PATIENCE, retries=0))
        stats = live.stats("echo")
    assert not any(reply.failed for reply in replies)
    assert sum(model.batch_sizes) == 8
    assert len(model.batch_sizes) < 8
    assert stats["batches"] == len(model.batch_sizes) and sum(k * v for k, v in stats["batch_sizes"].items()) == 8


def test_each_caller_gets_the_reply_to_its_own_context():
    model = Echo("echo", seconds=0.005)
    with LiveReplies(Systems(model), window_ms=10, max_batch=4) as live:
        replies = concurrently(24, lambda i: live.reply("echo", said(f"I passed exam {i}"), timeout=PATIENCE,
                                                        retries=0))
    assert [reply.text for reply in replies] == [f"echo: I passed exam {i}" for i in range(24)]
    assert max(model.batch_sizes) <= 4
    first = replies[0]
    assert first.provenance["system"] == "echo" and first.provenance["kind"] == "test-echo"
    assert first.provenance["version"] == model.version and first.provenance["latency_ms"] == 1.5
    assert first.provenance["attempts"] == 1 and first.attempts == 1 and first.error is None
    assert first.latency_ms > 0


def test_a_model_slower_than_the_timeout_fails_after_its_retries_in_bounded_time():
    model = Hung("stuck")
    live = LiveReplies(Systems(model), window_ms=1)
    try:
        start = time.perf_counter()
        reply = live.reply("stuck", said("hello?"), timeout=0.2, retries=2)
        elapsed = time.perf_counter() - start
        stats = live.stats("stuck")
    finally:
        model.release.set()
        assert live.close() == []
    assert reply.failed and reply.text is None and reply.attempts == 3
    assert reply.error == ("system 'stuck' gave no reply after 3 attempts: attempt 1: no answer within 0.2 s; "
                           "attempt 2: no answer within 0.2 s; attempt 3: no answer within 0.2 s")
    assert reply.provenance["system"] == "stuck" and reply.provenance["attempts"] == 3
    assert reply.provenance["latency_ms"] is None
    assert 0.6 <= elapsed < 0.6 + 1.0
    # Two batch threads took the first two attempts and hung (on a loaded machine the second thread may not have
    # reached the model within its 0.2 s); the third waited for a thread and was never run: never more than two.
    assert 1 <= model.calls <= 2 and stats["timeouts"] == 3 and stats["failures"] == 1


def test_an_error_outcome_fails_at_once_with_the_systems_message():
    with LiveReplies(Systems(Refusing("picky"))) as live:
        reply = live.reply("picky", said("hi"), timeout=PATIENCE, retries=3)
    assert reply.failed and reply.attempts == 1
    assert reply.error == ("system 'picky' gave no reply after 1 attempt: attempt 1: the system cannot answer this "
                           "context (unsupported): this system only answers stored contexts; not retried")
    assert reply.provenance["system"] == "picky" and reply.provenance["attempts"] == 1


def test_a_model_that_raises_fails_after_its_retries_with_the_error():
    model = Crashing("broken")
    with LiveReplies(Systems(model)) as live:
        reply = live.reply("broken", said("hi"), timeout=PATIENCE, retries=1)
    assert reply.failed and reply.attempts == 2 and model.calls == 2
    assert reply.error is not None
    assert reply.error.startswith("system 'broken' gave no reply after 2 attempts: attempt 1: the model raised "
                                  "RuntimeError: boom: the candidate index is corrupt; attempt 2:")


def test_an_upstream_failure_is_retried_then_succeeds():
    model = Flaky("remote", failures=1)
    with LiveReplies(Systems(model)) as live:
        reply = live.reply("remote", said("I got the job!"), timeout=PATIENCE, retries=1)
        again = Flaky("remote2", failures=5)
    assert not reply.failed and reply.text == "I am so glad to hear that!"
    assert reply.attempts == 2 and reply.provenance["attempts"] == 2 and model.calls == 2
    with LiveReplies(Systems(again)) as live:
        gave_up = live.reply("remote2", said("I got the job!"), timeout=PATIENCE, retries=1)
    assert gave_up.failed and again.calls == 2
    assert gave_up.error == ("system 'remote2' gave no reply after 2 attempts: attempt 1: the remote model failed: "
                             "http://model.test: HTTP 502: bad gateway; attempt 2: the remote model failed: "
                             "http://model.test: HTTP 502: bad gateway")


def test_a_hung_system_does_not_delay_another_systems_replies():
    stuck, quick = Hung("stuck"), Echo("quick")
    live = LiveReplies(Systems(stuck, quick), window_ms=1)
    waiting: list = []
    caller = threading.Thread(target=lambda: waiting.append(
        live.reply("stuck", said("anyone?"), timeout=PATIENCE, retries=0)))
    try:
        caller.start()
        assert stuck.entered.wait(PATIENCE)
        start = time.perf_counter()
        replies = [live.reply("quick", said(f"hello {i}"), timeout=2, retries=0) for i in range(5)]
        elapsed = time.perf_counter() - start
    finally:
        stuck.release.set()
        caller.join(PATIENCE)
        stuck_threads = live.close()
    assert [reply.text for reply in replies] == [f"echo: hello {i}" for i in range(5)]
    assert elapsed < 1.0
    assert waiting[0].text == "too late" and stuck_threads == []


def test_close_stops_the_threads_and_refuses_further_turns():
    before = live_threads()
    live = LiveReplies(Systems(Echo("a"), Echo("b")), batches_per_system=3)
    for name in ("a", "b"):
        assert not live.reply(name, said("hi"), timeout=PATIENCE, retries=0).failed
    assert len(live_threads() - before) == 2 * (1 + 3)
    assert live.close() == []
    assert live_threads() == before
    with pytest.raises(RuntimeError, match="closed"):
        live.reply("a", said("hi"), timeout=1, retries=0)
    assert live.close() == []  # idempotent


def test_a_turn_waiting_when_the_service_closes_fails_at_once():
    stuck = Hung("stuck")
    live = LiveReplies(Systems(stuck), batches_per_system=1, window_ms=0)
    first: list = []
    second: list = []
    threads = [threading.Thread(target=lambda: first.append(live.reply("stuck", said("1"), timeout=PATIENCE,
                                                                       retries=0)))]
    try:
        threads[0].start()
        assert stuck.entered.wait(PATIENCE)  # its only batch thread is busy: the next turn queues
        threads.append(threading.Thread(target=lambda: second.append(live.reply("stuck", said("2"), timeout=PATIENCE,
                                                                                retries=0))))
        threads[1].start()
        deadline = time.monotonic() + PATIENCE
        while live.stats("stuck")["attempts"] < 2 and time.monotonic() < deadline:
            time.sleep(0.005)  # polling, bounded
        start = time.perf_counter()
        stuck_threads = live.close(join_seconds=0.2)
        threads[1].join(PATIENCE)
        closing = time.perf_counter() - start
    finally:
        stuck.release.set()
        for thread in threads:
            thread.join(PATIENCE)
    assert second[0].failed and "closed" in second[0].error
    assert closing < 2.0
    assert stuck_threads == ["live-stuck-batch-0"]  # in the model's call when closed; it ends when the model returns
    assert first[0].text == "too late"
    deadline = time.monotonic() + PATIENCE
    while "live-stuck-batch-0" in live_threads() and time.monotonic() < deadline:
        time.sleep(0.005)  # polling, bounded: the thread ends once its model call returns
    assert "live-stuck-batch-0" not in live_threads()


REMOTE_CALLERS = 8


class GatheringRemoteModel(JsonStubHandler):
    """A remote model (the `json` protocol) that answers a request only once REMOTE_CALLERS requests are in flight
    together (or after 8 s: on a loaded machine the callers' threads can start seconds apart), recording the most it
    had in flight at once."""

    in_flight = 0
    most = 0
    together = threading.Condition()

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self.server.calls.append((self.path, body, dict(self.headers)))
        cls = GatheringRemoteModel
        with cls.together:
            cls.in_flight += 1
            cls.most = max(cls.most, cls.in_flight)
            cls.together.notify_all()
            cls.together.wait_for(lambda: cls.most >= REMOTE_CALLERS, timeout=8.0)
            cls.in_flight -= 1
        self.send_json(200, {"response": f"remote: {body['context'][-1]['text']}"})


def test_a_remote_systems_turns_are_sent_at_once_not_batched_behind_each_other():
    GatheringRemoteModel.in_flight = GatheringRemoteModel.most = 0
    with stub_server(GatheringRemoteModel) as httpd:
        remote = HttpModel("llm", {"url": f"http://127.0.0.1:{httpd.server_port}/json", "timeout": 15, "retries": 0})
        with LiveReplies(Systems(remote)) as live:
            assert live.limits_of(remote) == REMOTE_LIMITS
            replies = concurrently(REMOTE_CALLERS, lambda i: live.reply("llm", said(f"news {i}"), timeout=20,
                                                                        retries=0))
            stats = live.stats("llm")
    assert [reply.text for reply in replies] == [f"remote: news {i}" for i in range(REMOTE_CALLERS)]
    assert stats["batch_sizes"] == {1: REMOTE_CALLERS}
    # Batched as a local system, two batches would each send their requests one after another: two in flight.
    assert GatheringRemoteModel.most == REMOTE_CALLERS


def test_a_systems_own_limits_are_set_by_name():
    model = Echo("echo", seconds=0.01)
    with LiveReplies(Systems(model), window_ms=20, limits={"echo": SystemLimits(max_batch=1,
                                                                                concurrent_batches=1)}) as live:
        replies = concurrently(6, lambda i: live.reply("echo", said(f"turn {i}"), timeout=PATIENCE, retries=0))
    assert not any(reply.failed for reply in replies) and model.batch_sizes == [1] * 6
    with pytest.raises(ValueError, match="at least 1"):
        SystemLimits(max_batch=0)


def test_an_unknown_system_is_a_configuration_error():
    with LiveReplies(Systems(Echo("echo"))) as live, pytest.raises(KeyError, match="unknown system 'nope'"):
        live.reply("nope", said("hi"), timeout=1, retries=0)


def test_the_real_generic_control_answers_live_with_provenance():
    registry = Registry.from_config(None, BackendResources(show_progress=False))
    with LiveReplies(registry) as live:
        replies = concurrently(6, lambda i: live.reply("control-generic", said(f"my dog {i} is ill"), timeout=PATIENCE,
                                                       retries=0))
    for reply in replies:
        assert not reply.failed and reply.text in GENERIC_REPLIES
        provenance = reply.provenance
        assert provenance["system"] == "control-generic" and provenance["kind"] == "control-generic"
        assert provenance["version"] == registry.get("control-generic").version
        assert provenance["parameters"] == {"seed": 0} and provenance["control_target"] == "empathy"
        assert provenance["attempts"] == 1 and provenance["latency_ms"] >= 0
    # Deterministic per context, as the offline control is.
    assert replies[0].text == registry.get("control-generic").respond_one(said("my dog 0 is ill")).text


def test_a_full_default_batch_stays_below_the_size_retrieval_keeps_on_disk():
    # Live turns never repeat: a cached file per batch would only fill the embedding cache. Read from the source,
    # so that this test does not import torch.
    source = Path(importlib.util.find_spec("empeval.server.backend.retrieval").origin).read_text(encoding="utf-8")
    cached = next(node.value.value for node in ast.parse(source).body
                  if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", None) == "CACHED_QUERY_BATCH")
    assert DEFAULT_MAX_BATCH < cached
