"""The encoder's torch threads (server/backend/encoder_threads.py): measured in CPU time, once per machine, kept in the
cache folder, overridden by configuration, and never measured while a request waits.

The measurement itself is replaced by a counter where a test is about when it runs (a real probe costs seconds of
CPU); one test runs the real measurement on a stand-in workload that sleeps, to pin that waiting is not counted.
"""

from __future__ import annotations

import json
import time

import pytest
import torch

from empeval.server.annotation.secrets import admin_token, secret_key
from empeval.server.backend import encoder_threads
from empeval.server.backend.base import ContextTurn, DialogueContext
from empeval.server.backend.encoder import (
    SMALL_CALL,
    THREADS_ENV,
    EncoderSettings,
    SentenceEncoder,
    length_groups,
)
from empeval.server.backend.live import LiveReplies
from empeval.server.backend.resources import BackendResources
from empeval.server.backend.retrieval import RetrievalModel
from empeval.server.web.app import create_app

RAW = {"turns": [{"role": "speaker", "text": "I got the job I wanted!"}], "emotion": "proud"}


class Probes:
    """Stands in for `measure_cpu`: counts the measurements and reports `cpu_ms_per_text` (2 threads within the
    margin unless told otherwise)."""

    def __init__(self, cpu_ms_per_text: dict[int, float] | None = None):
        self.calls = 0
        self.cpu = cpu_ms_per_text or {1: 10.0, 2: 11.0}

    def __call__(self, encode_with, options, *, texts, rounds=2):
        self.calls += 1
        assert list(options) == [1, 2]
        return dict(self.cpu)


@pytest.fixture()
def probes(monkeypatch) -> Probes:
    """Auto threads on a machine of two usable CPUs, with the measurement counted instead of run."""
    monkeypatch.delenv(THREADS_ENV, raising=False)
    monkeypatch.setattr(encoder_threads, "usable_cpus", lambda: 2)
    monkeypatch.setattr(encoder_threads, "_load", lambda: (0.5, 0.5, 0.5))  # a quiet machine unless a test says
    counter = Probes()
    monkeypatch.setattr(encoder_threads, "measure_cpu", counter)
    return counter


def auto_encoder(cache_dir, **settings) -> SentenceEncoder:
    return SentenceEncoder(cache_dir=cache_dir, show_progress=False,
                           settings=EncoderSettings(precision="fp32", **settings))


def test_several_threads_are_kept_only_within_the_cpu_margin_of_one():
    assert encoder_threads.pick_threads({1: 10.0, 2: 12.0}) == 2
    assert encoder_threads.pick_threads({1: 10.0, 2: 13.0}) == 1
    assert encoder_threads.pick_threads({1: 10.0, 4: 30.0}) == 1
    assert encoder_threads.pick_threads({1: 10.0}) == 1


def test_the_probe_counts_cpu_time_not_time_spent_waiting_for_a_busy_core():
    """Two threads that wait 60 ms for a core another process holds (sleep: wall time, no CPU) but do the same
    work as one: the wall clock would call them 4 times slower; CPU time sees the same cost and keeps them."""

    def encode_with(threads: int) -> None:
        started = time.thread_time()
        while time.thread_time() - started < 0.02:  # 20 ms of work
            pass
        if threads > 1:
            time.sleep(0.06)

    cpu = encoder_threads.measure_cpu(encode_with, [1, 2], texts=4)
    assert set(cpu) == {1, 2} and min(cpu.values()) >= 4.0  # 20 ms over 4 texts, at least
    assert cpu[2] < encoder_threads.CPU_MARGIN * cpu[1]
    assert encoder_threads.pick_threads(cpu) == 2


def test_a_choice_is_measured_once_per_machine_and_reused_by_later_processes(tmp_path, probes):
    first = auto_encoder(tmp_path)
    assert (first.threads, first.thread_source) == (None, "not measured yet")
    assert first.choose_threads() == 2 and first.thread_source == "measured" and probes.calls == 1
    [stored] = (tmp_path / encoder_threads.FOLDER).glob("*.json")
    record = json.loads(stored.read_text())
    assert record["threads"] == 2 and record["cpu_ms_per_text"] == {"1": 10.0, "2": 11.0}
    assert record["machine"]["usable_cpus"] == 2 and record["machine"]["precision"] == "fp32"

    later = auto_encoder(tmp_path)  # another process on the same machine and cache folder
    assert (later.threads, later.thread_source) == (2, "cached")
    assert later.choose_threads() == 2 and probes.calls == 1  # read, not measured again

    elsewhere = auto_encoder(tmp_path / "other-cache")
    assert elsewhere.threads is None
    bf16 = SentenceEncoder(cache_dir=tmp_path, show_progress=False, settings=EncoderSettings(precision="bf16"))
    assert bf16.threads is None  # another precision runs other kernels: its own choice


def test_a_machine_where_one_thread_is_cheaper_keeps_one(tmp_path, probes):
    probes.cpu = {1: 10.0, 2: 17.0}  # what this 2-core machine measured under load
    assert auto_encoder(tmp_path).choose_threads() == 1
    assert (auto_encoder(tmp_path).threads, probes.calls) == (1, 1)


def test_an_unreadable_choice_is_measured_again(tmp_path, probes):
    path = encoder_threads.choice_path(tmp_path, "fp32")
    path.parent.mkdir(parents=True)
    path.write_text("{not json")
    encoder = auto_encoder(tmp_path)
    assert encoder.threads is None
    assert encoder.choose_threads() == 2 and probes.calls == 1


def test_configured_threads_override_the_cached_choice_and_are_never_measured(tmp_path, probes, monkeypatch):
    auto_encoder(tmp_path).choose_threads()  # this machine's choice: 2
    monkeypatch.setenv(THREADS_ENV, "1")
    configured = BackendResources(cache_dir=tmp_path).encoder()
    assert (configured.threads, configured.thread_source) == (1, "configured")
    assert configured.choose_threads() == 1
    assert [configured.threads_for(count) for count in (1, SMALL_CALL, 10_000)] == [1, 1, 1]
    three = auto_encoder(tmp_path, threads=3)
    assert three.choose_threads() == 3 and [three.threads_for(count) for count in (1, 10_000)] == [3, 3]
    assert probes.calls == 1


def test_auto_runs_small_calls_on_one_thread_and_large_ones_on_the_machines_choice(tmp_path, probes):
    encoder = auto_encoder(tmp_path)
    assert [encoder.threads_for(count) for count in (1, 4, SMALL_CALL - 1, SMALL_CALL)] == [1, 1, 1, 1]  # unmeasured
    encoder.choose_threads()
    assert [encoder.threads_for(count) for count in (1, 4, SMALL_CALL - 1, SMALL_CALL, 10_000)] == [1, 1, 1, 2, 2]


@pytest.mark.slow
def test_the_model_runs_with_the_threads_chosen_for_the_call(tmp_path, probes):
    auto_encoder(tmp_path).choose_threads()
    encoder = auto_encoder(tmp_path, batch_size=4)
    seen: list[int] = []
    hook = encoder.model.register_forward_pre_hook(lambda module, args: seen.append(torch.get_num_threads()))
    before = torch.get_num_threads()
    try:
        encoder.encode(["I lost my keys again."])
        small = set(seen)
        seen.clear()
        encoder.encode([f"My neighbour's dog barked all night, for the {n}th time." for n in range(SMALL_CALL)])
    finally:
        hook.remove()
    assert small == {1} and set(seen) == {2}
    assert torch.get_num_threads() == before


def test_length_groups_split_where_padding_costs_more_than_a_pass():
    assert length_groups([40, 40, 40, 40], max_size=64, pass_cost=32) == [range(0, 4)]
    # Padding 3 short texts to 120 tokens costs 3 x 110 tokens, far more than a second pass.
    assert length_groups([120, 10, 10, 10], max_size=64, pass_cost=32) == [range(0, 1), range(1, 4)]
    assert length_groups([50, 48, 45, 44], max_size=2, pass_cost=32) == [range(0, 2), range(2, 4)]  # not one of 4
    assert length_groups([7], max_size=64) == [range(0, 1)]
    assert length_groups([], max_size=64) == []


@pytest.mark.slow
def test_no_probe_runs_on_a_request_path(tiny_engine, tmp_path, probes):
    """A fresh cache folder (no choice yet): the first requests build the candidate index (86 texts, a large
    call), answer one context and a batch, and a live chat reply; none measures, and large calls run one thread.
    Once the work is prepared ahead (prepare(): the probe, once), a new app reads the choice."""
    def researcher():
        app = create_app({"DATABASE_URL": tiny_engine.url.render_as_string(hide_password=False),
                          "BACKEND_CACHE_DIR": str(tmp_path), "TESTING": True})
        client = app.test_client()
        client.environ_base["HTTP_AUTHORIZATION"] = f"Bearer {admin_token(secret_key(tiny_engine))}"
        return app, client

    app, client = researcher()
    assert client.post("/api/respond", json={"system": "retrieval", "context": RAW}).status_code == 200
    batch = {"system": "retrieval", "contexts": [{"context": RAW}] * SMALL_CALL}
    assert client.post("/api/respond/batch", json=batch).status_code == 200
    registry = app.extensions["empeval.backend"]
    with LiveReplies(registry) as live:
        turn = DialogueContext(turns=(ContextTurn("speaker", "My sister is getting married next week!"),))
        assert not live.reply("retrieval", turn, timeout=60, retries=0).failed
    encoder = registry.resources.encoder()
    assert probes.calls == 0
    assert (encoder.threads, encoder.thread_source, encoder.threads_for(10_000)) == (None, "not measured yet", 1)

    RetrievalModel("retrieval", {}, registry.resources).prepare()  # ahead of requests, as `empeval generate` does
    assert probes.calls == 1
    app, client = researcher()
    assert client.post("/api/respond", json={"system": "retrieval", "context": RAW}).status_code == 200
    encoder = app.extensions["empeval.backend"].resources.encoder()
    assert (encoder.threads, encoder.thread_source, probes.calls) == (2, "cached", 1)


def test_a_single_thread_kept_while_the_machine_was_busy_is_measured_again_once_it_is_quiet(tmp_path, probes,
                                                                                          monkeypatch):
    """Measured at load 3 on 2 CPUs, two threads spun for cores and cost 4 times one thread's CPU: 1 kept. Read back
    at load 3, the choice stands; where work is prepared on the quiet machine, it is measured again (2 kept)."""
    monkeypatch.setattr(encoder_threads, "_load", lambda: (3.0, 3.0, 3.0))
    probes.cpu = {1: 6.5, 2: 26.2}
    assert auto_encoder(tmp_path).choose_threads() == 1 and probes.calls == 1
    busy = auto_encoder(tmp_path)
    assert busy.choose_threads() == 1 and probes.calls == 1  # still busy: the choice stands, not measured again

    monkeypatch.setattr(encoder_threads, "_load", lambda: (0.4, 1.0, 2.0))
    probes.cpu = {1: 10.0, 2: 11.0}
    quiet = auto_encoder(tmp_path)
    assert (quiet.threads, quiet.thread_source) == (1, "cached")  # reading it measures nothing (request paths)
    assert probes.calls == 1
    assert quiet.choose_threads() == 2 and probes.calls == 2 and quiet.thread_source == "measured"
    assert (auto_encoder(tmp_path).threads, auto_encoder(tmp_path).choose_threads(), probes.calls) == (2, 2, 2)


def test_a_single_thread_kept_on_a_quiet_machine_is_not_measured_again(tmp_path, probes):
    probes.cpu = {1: 10.0, 2: 17.0}  # measured quiet (the fixture's load 0.5): one thread was cheaper
    assert auto_encoder(tmp_path).choose_threads() == 1
    assert auto_encoder(tmp_path).choose_threads() == 1 and probes.calls == 1
