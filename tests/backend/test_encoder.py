"""The sentence encoder's precision, threads and cache, on the real packaged MiniLM (no mocks). The tests that run
the model are marked slow (seconds each, more where bf16 is emulated), so that `make test-fast` keeps the rest."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from empeval.server.backend import encoder as encoder_module
from empeval.server.backend.contexts import load_contexts, load_listener_turns
from empeval.server.backend.encoder import (
    BATCH_SIZE_ENV,
    PRECISION_ENV,
    THREADS_ENV,
    EncoderConfigError,
    EncoderSettings,
    SentenceEncoder,
    cpu_flags,
    resolve_precision,
)
from empeval.server.backend.resources import BackendResources
from empeval.server.backend.retrieval import RetrievalModel, history_text
from empeval.server.errors import BadInput
from empeval.server.store.engine import unit_of_work

from .conftest import REPO

AMX = frozenset({"avx512f", "amx_tile", "amx_bf16"})
AVX512_BF16 = frozenset({"avx512f", "avx512_bf16"})
AVX2_ONLY = frozenset({"avx", "avx2", "fma"})


@pytest.fixture(scope="module")
def encoders(tmp_path_factory) -> dict[str, SentenceEncoder]:
    """One bf16 and one fp32 encoder on one cache folder, one thread each (no probe), small batches."""
    cache = tmp_path_factory.mktemp("encoder-cache")
    return {precision: SentenceEncoder(cache_dir=cache, show_progress=False,
                                       settings=EncoderSettings(precision=precision, threads=1, batch_size=16))
            for precision in ("bf16", "fp32")}


@pytest.fixture(scope="module")
def sample_texts(tiny_engine) -> tuple[list[str], list[str]]:
    """(queries, candidates): the tiny store's first 16 test contexts as retrieval encodes them, 48 of its train
    listener turns. Few, because bf16 is emulated on a CPU without bf16 instructions (these 64 texts take about 6 s
    there, five times fp32); benchmarks/backend.py measures the whole sample and full ED."""
    with unit_of_work(tiny_engine) as session:
        queries = [history_text(c) for c in load_contexts(session, split="test", limit=16)]
        candidates = [row[1] for row in load_listener_turns(session, dataset="empatheticdialogues", split="train")]
    return queries, candidates[:48]


def test_auto_precision_is_bf16_only_where_the_cpu_has_bf16_instructions():
    assert resolve_precision("auto", AMX) == "bf16"
    assert resolve_precision("auto", AVX512_BF16) == "bf16"
    assert resolve_precision("auto", AVX2_ONLY) == "fp32"
    assert resolve_precision("auto", frozenset()) == "fp32"


def test_an_explicit_precision_overrides_what_the_cpu_suggests():
    assert resolve_precision("fp32", AMX) == "fp32"
    assert resolve_precision("bf16", AVX2_ONLY) == "bf16"  # slow there, but what was asked for
    with pytest.raises(EncoderConfigError, match="'fp16' is not one of auto, bf16, fp32"):
        resolve_precision("fp16", AMX)


def test_cpu_flags_are_read_from_the_flags_line(tmp_path):
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text("processor\t: 0\nmodel name\t: Some CPU\nflags\t\t: fpu avx2 amx_bf16 amx_tile\n\n"
                       "processor\t: 1\nflags\t\t: fpu\n")
    assert cpu_flags(cpuinfo) == {"fpu", "avx2", "amx_bf16", "amx_tile"}
    assert cpu_flags(tmp_path / "missing") == frozenset()


def test_settings_come_from_the_environment_with_auto_defaults():
    assert EncoderSettings.from_environment({}) == EncoderSettings("auto", None, 64)
    assert EncoderSettings.from_environment({PRECISION_ENV: "", THREADS_ENV: " ", BATCH_SIZE_ENV: ""}) == \
        EncoderSettings("auto", None, 64)
    configured = EncoderSettings.from_environment({PRECISION_ENV: "FP32", THREADS_ENV: "3", BATCH_SIZE_ENV: "128"})
    assert configured == EncoderSettings("fp32", 3, 128)
    assert EncoderSettings.from_environment({THREADS_ENV: "auto"}).threads is None


@pytest.mark.parametrize(("variable", "value", "message"), [
    (PRECISION_ENV, "half", "EMPEVAL_ENCODER_PRECISION='half': expected one of auto, bf16, fp32"),
    (THREADS_ENV, "0", "EMPEVAL_ENCODER_THREADS='0': expected a positive integer or auto"),
    (THREADS_ENV, "two", "EMPEVAL_ENCODER_THREADS='two': expected a positive integer or auto"),
    (BATCH_SIZE_ENV, "-8", "EMPEVAL_ENCODER_BATCH_SIZE='-8': expected a positive integer"),
])
def test_bad_settings_name_the_variable_and_the_value(variable, value, message):
    with pytest.raises(EncoderConfigError) as raised:
        EncoderSettings.from_environment({variable: value})
    assert str(raised.value) == message
    assert isinstance(raised.value, BadInput) and raised.value.exit_code == 2


def test_bad_settings_in_code_are_refused_too():
    with pytest.raises(EncoderConfigError, match="threads must be a positive integer"):
        EncoderSettings(threads=0)
    with pytest.raises(EncoderConfigError, match="batch size must be a positive integer"):
        EncoderSettings(batch_size=0)


def test_backend_resources_read_the_settings_from_the_environment(tmp_path, monkeypatch):
    monkeypatch.setenv(PRECISION_ENV, "fp32")
    monkeypatch.setenv(THREADS_ENV, "1")
    monkeypatch.setenv(BATCH_SIZE_ENV, "8")
    encoder = BackendResources(cache_dir=tmp_path).encoder()
    assert (encoder.precision, encoder.threads, encoder.batch_size) == ("fp32", 1, 8)
    given = BackendResources(cache_dir=tmp_path, encoder_settings=EncoderSettings("bf16", 2, 4)).encoder()
    assert (given.precision, given.threads, given.batch_size) == ("bf16", 2, 4)


def test_the_precision_is_part_of_the_model_id_and_the_cache_key(encoders):
    bf16, fp32 = encoders["bf16"], encoders["fp32"]
    assert bf16.model_id == f"{fp32.model_id}+bf16"
    texts = ["I passed my driving test today!", "My dog died last week."]
    assert bf16.cache_path(texts, label="x") != fp32.cache_path(texts, label="x")
    assert "-bf16-" in bf16.cache_path(texts, label="x").name and "-fp32-" in fp32.cache_path(texts, label="x").name


@pytest.mark.slow
def test_cached_embeddings_of_one_precision_are_never_served_for_the_other(encoders):
    bf16, fp32 = encoders["bf16"], encoders["fp32"]
    texts = ["I finally got the job I wanted.", "Someone broke into my car last night.", "I miss my grandmother."]
    from_bf16 = bf16.encode_cached(texts, label="separate")
    from_fp32 = fp32.encode_cached(texts, label="separate")
    assert not np.array_equal(from_bf16, from_fp32)  # bf16 really ran in bf16
    np.testing.assert_array_equal(from_fp32, fp32.encode(texts))
    np.testing.assert_array_equal(bf16.encode_cached(texts, label="separate"), from_bf16)  # read back, same file
    assert len(list((bf16.cache_dir / "embeddings").glob("separate-*.npy"))) == 2


@pytest.mark.slow
def test_bf16_embeddings_agree_with_fp32_on_a_real_sample(encoders, sample_texts):
    queries, candidates = sample_texts
    embeddings = {precision: (encoder.encode(queries), encoder.encode(candidates))
                  for precision, encoder in encoders.items()}
    (q16, c16), (q32, c32) = embeddings["bf16"], embeddings["fp32"]
    for low, full in ((q16, q32), (c16, c32)):
        assert low.dtype == np.float32
        np.testing.assert_allclose(np.linalg.norm(low, axis=1), 1.0, atol=1e-5)
        assert (low * full).sum(axis=1).min() > 0.999  # measured 0.9999 on full ED
    same_nearest = np.mean((q16 @ c16.T).argmax(axis=1) == (q32 @ c32.T).argmax(axis=1))
    assert same_nearest >= 0.9  # 99% on the full ED test set against 40,254 candidates


@pytest.mark.slow
def test_rows_come_back_in_the_callers_order_with_repeated_texts_encoded_once(encoders):
    fp32 = encoders["fp32"]
    texts = ["Short.", "A much longer sentence about the exam that I am really nervous about.", "Short.", "Medium one."]
    encoded = []  # the texts of each forward pass
    hook = fp32.model.register_forward_pre_hook(lambda module, args: encoded.append(len(args[0]["input_ids"])))
    try:
        together = fp32.encode(texts)
    finally:
        hook.remove()
    alone = np.stack([fp32.encode([text])[0] for text in texts])
    np.testing.assert_allclose(together, alone, atol=1e-5)  # each row is its own text's embedding
    np.testing.assert_array_equal(together[0], together[2])
    assert sum(encoded) == 3  # three distinct texts, in as many passes as their lengths make cheapest


@pytest.mark.slow
def test_encoding_runs_with_the_configured_threads_and_precision_and_restores_torch_threads(encoders, tmp_path):
    seen: list[tuple[int, bool]] = []
    two = SentenceEncoder(cache_dir=tmp_path, show_progress=False, settings=EncoderSettings("bf16", 2, 16))
    for encoder in (encoders["bf16"], encoders["fp32"], two):
        hook = encoder.model.register_forward_pre_hook(
            lambda module, args: seen.append((torch.get_num_threads(), torch.is_autocast_enabled("cpu"))))
        before = torch.get_num_threads()
        try:
            encoder.encode(["How are you feeling today?"])
        finally:
            hook.remove()
        assert torch.get_num_threads() == before
    assert seen == [(1, True), (1, False), (2, True)]


def test_retrieval_versions_differ_by_precision(tiny_engine, tmp_path):
    versions = {}
    for precision in ("bf16", "fp32"):
        resources = BackendResources(engine=tiny_engine, cache_dir=tmp_path, show_progress=False,
                                     encoder_settings=EncoderSettings(precision, 1, 16))
        versions[precision] = RetrievalModel("retrieval", {}, resources).data_version()
    assert versions["bf16"] != versions["fp32"] and "+bf16-cands" in versions["bf16"]


def test_the_encoder_settings_are_documented():
    readme = (REPO / "README.md").read_text()
    metrics = (REPO / "server" / "backend" / "METRICS.md").read_text()
    for variable in (PRECISION_ENV, THREADS_ENV, BATCH_SIZE_ENV):
        assert variable in readme, f"README.md does not document {variable}"
        assert variable in (encoder_module.__doc__ or ""), f"encoder.py's docstring does not document {variable}"
    measurements = (REPO / "docs" / "measurements.md").read_text()
    assert "benchmarks/backend.py" in measurements and "benchmarks/backend.py" in metrics


@pytest.mark.slow
def test_processes_on_a_cold_cache_encode_the_same_texts_once_and_load_each_others_file(tmp_path, sample_texts):
    """Two `serve` workers starting on a cold cache both want the candidates' embeddings: one encodes, the other
    waits on the lock beside the file and loads it. Two separate processes, each counting its own model runs."""
    import subprocess
    import sys
    import textwrap

    texts = tmp_path / "texts.txt"
    texts.write_text("\n".join(sample_texts[1][:24]), encoding="utf-8")
    script = textwrap.dedent(f"""
        import sys
        import time
        from pathlib import Path
        from empeval.server.backend.encoder import EncoderSettings, SentenceEncoder
        encoder = SentenceEncoder(cache_dir=Path(sys.argv[1]), show_progress=False,
                                  settings=EncoderSettings(precision="fp32", threads=1, batch_size=8))
        runs = []
        real = encoder.encode
        # a slow model: without the lock both processes would find no file and both encode
        encoder.encode = lambda *a, **k: runs.append(1) or time.sleep(2) or real(*a, **k)
        lines = Path({str(texts)!r}).read_text(encoding="utf-8").splitlines()
        array = encoder.encode_cached(lines, label="candidates")
        print(len(runs), array.shape[0], float(array.sum()))
    """)
    started = [subprocess.Popen([sys.executable, "-c", script, str(tmp_path / "cache")], stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True) for _ in range(2)]
    outputs = [process.communicate(timeout=300) for process in started]
    assert all(process.returncode == 0 for process in started), [err[-1500:] for _, err in outputs]
    runs, rows, sums = zip(*(out.split() for out, _ in outputs), strict=True)
    assert sorted(runs) == ["0", "1"]  # one process ran the model, the other loaded its file
    assert rows == ("24", "24") and sums[0] == sums[1]
    assert len(list((tmp_path / "cache" / "embeddings").glob("candidates-*.npy"))) == 1
