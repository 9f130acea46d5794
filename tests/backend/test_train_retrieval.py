"""`empeval train retrieval` and the `retrieval-ft` system: cache keys, missing data and checkpoints, a tiny real
training run, resuming it, and serving what it trained.

The tiny run (real all-MiniLM-L6-v2, real sentence-transformers trainer, real checkpoints): the handful store's 18
train pairs (8 sample dialogues), 6 steps of 8 (three epochs over them, two batches of 8 each), lr 2e-4, texts cut
at 32 word pieces; model selection P@1,10 on its 20 valid contexts at steps 1, 3 and 6. Its budget stops it after
the first step; run again, it resumes there and finishes. Whether such a run lowers the loss of the pairs it saw is
asked here; whether a longer run beats the zero-shot encoder on test contexts is a benchmark figure
(benchmarks/sample_quality.py: 20 steps of 32 on the whole sample, P@1,100 on its 668 test contexts), not a test.
"""
from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from empeval.cli import cli
from empeval.server.backend.checkpoints import (
    MissingCheckpoint,
    cache_key,
    checkpoint_key,
    find_checkpoint,
    run_dir,
    write_manifest,
)
from empeval.server.backend.contexts import load_contexts
from empeval.server.backend.encoder import resolve_precision
from empeval.server.backend.registry import ConfigError, Registry
from empeval.server.backend.resources import BackendResources
from empeval.server.errors import BadInput
from empeval.server.store import make_engine
from empeval.server.store.engine import unit_of_work
from empeval.server.store.migrate import upgrade
from empeval.training.config import RetrievalTrainingConfig
from empeval.training.retrieval import (
    TrainingDataMissing,
    base_model_path,
    train_retrieval,
    training_data,
)

from .conftest import TEST_ENCODER

# bf16 autocast where the CPU has bf16 instructions (the production default, twice as fast there); fp32 where it
# would be emulated (six times slower than fp32 on the AVX2-only EPYC this suite also runs on, measured).
NATIVE_BF16 = resolve_precision("auto") == "bf16"
TINY = RetrievalTrainingConfig(batch_size=8, max_steps=6, learning_rate=2e-4, max_seq_length=32, eval_steps=3,
                               eval_contexts=20, eval_candidates=10, bf16=NATIVE_BF16)
# One torch thread: under make test's two xdist workers on two cores, two threads per trainer wait on each other's
# busy core (measured: a bounded run's setup took 376 s with 2 threads beside the other worker, 39 s alone).
TEST_THREADS = 1


def test_the_cache_key_changes_with_data_base_model_and_every_parameter():
    parameters = {"batch_size": 64, "learning_rate": 5e-5}
    key = cache_key("data-a", "all-MiniLM-L6-v2@53aa51172d14", parameters)
    assert len(key) == 12 and key == cache_key("data-a", "all-MiniLM-L6-v2@53aa51172d14", dict(parameters))
    assert key != cache_key("data-b", "all-MiniLM-L6-v2@53aa51172d14", parameters)
    assert key != cache_key("data-a", "all-MiniLM-L6-v2@000000000000", parameters)
    assert key != cache_key("data-a", "all-MiniLM-L6-v2@53aa51172d14", {**parameters, "learning_rate": 1e-4})
    assert key != cache_key("data-a", "all-MiniLM-L6-v2@53aa51172d14", {**parameters, "seed": 1})


def test_a_missing_checkpoint_names_the_train_command(tmp_path):
    with pytest.raises(MissingCheckpoint, match=r"no fine-tuned retrieval-ft checkpoint under .*: run "
                                                r"`empeval train retrieval` first"):
        find_checkpoint(tmp_path, "retrieval-ft")
    # An unfinished run (no manifest yet) is not a checkpoint either.
    (run_dir(tmp_path, "retrieval-ft", "abcdef012345") / "model").mkdir(parents=True)
    with pytest.raises(MissingCheckpoint, match="empeval train retrieval"):
        find_checkpoint(tmp_path, "retrieval-ft")
    with pytest.raises(MissingCheckpoint, match="unfinished run"):
        find_checkpoint(tmp_path, "retrieval-ft", "abcdef012345")
    write_manifest(run_dir(tmp_path, "retrieval-ft", "abcdef012345"), {"complete": True})
    found = find_checkpoint(tmp_path, "retrieval-ft")
    assert found.name == "model" and checkpoint_key(found) == "abcdef012345"


def test_the_fine_tuned_system_never_falls_back_to_the_zero_shot_encoder(sample_engine, tmp_path):
    registry = Registry.from_config(None, BackendResources(engine=sample_engine, cache_dir=tmp_path,
                                                           show_progress=False))
    with pytest.raises(ConfigError, match=r"retrieval-ft.*run `empeval train retrieval` first"):
        registry.get("retrieval-ft")


def test_generate_names_the_train_command_and_all_skips_the_untrained_system(fresh_engine, tmp_path):
    url = fresh_engine.url.render_as_string(hide_password=False)
    config = tmp_path / "systems.toml"
    config.write_text('[systems.gold]\nkind = "gold"\n\n[systems.retrieval-ft]\nkind = "retrieval-ft"\n')
    common = ["--config", str(config), "--cache-dir", str(tmp_path / "cache"), "--limit", "2"]
    named = CliRunner().invoke(cli, ["--database-url", url, "generate", "--systems", "retrieval-ft", *common])
    assert named.exit_code == 2 and "empeval train retrieval" in named.output, named.output
    everything = CliRunner().invoke(cli, ["--database-url", url, "generate", "--systems", "all", *common])
    assert everything.exit_code == 0, everything.output
    assert "'retrieval-ft' is not trained, skipped" in everything.output
    assert "empeval train retrieval" in everything.output
    assert "gold" in everything.output


def test_training_without_train_data_names_the_import_command(tmp_path):
    engine = make_engine(f"sqlite:///{tmp_path / 'empty.db'}")
    upgrade(engine)
    with pytest.raises(TrainingDataMissing, match=r"no train contexts of dataset 'empatheticdialogues'.*"
                                                  r"empeval data import-ed"):
        train_retrieval(engine, dataset="empatheticdialogues", cache_dir=tmp_path, config=TINY, echo=lambda _: None)
    assert not (tmp_path / "trained").exists()  # nothing half-written


def test_bad_parameters_are_refused_by_name():
    with pytest.raises(BadInput, match=r"batch_size must be at least 2.*eval_contexts must be at least 100 \(P@1,100"):
        RetrievalTrainingConfig(batch_size=1, eval_contexts=10)
    with pytest.raises(BadInput, match=r"eval_candidates must be at least 2"):
        RetrievalTrainingConfig(eval_candidates=1)
    with pytest.raises(BadInput, match=r"eval_contexts must be at least 10 \(P@1,10\), got 9"):
        RetrievalTrainingConfig(eval_contexts=9, eval_candidates=10)


def test_the_sample_holds_out_a_tenth_of_its_train_dialogues_for_model_selection(sample_engine):
    """The bundled sample has no valid split: model selection takes 100 contexts of the held-out 10% of its train
    dialogues, none of which is trained on (only the data is read here; no model runs)."""
    config = RetrievalTrainingConfig(eval_contexts=100)
    data = training_data(sample_engine, "empatheticdialogues", config)
    assert data.eval_source == "train holdout" and len(data.eval_queries) == 100
    assert not set(zip(data.eval_queries, data.eval_references, strict=True)) & set(
        zip(data.queries, data.replies, strict=True))
    assert 2_800 < len(data.queries) < 3_200  # about 90% of the sample's 3,335 train pairs
    with pytest.raises(TrainingDataMissing, match="P@1,100 model selection needs 100"):
        training_data(sample_engine, "empatheticdialogues", RetrievalTrainingConfig(holdout_share=0.01))


def test_runs_trained_before_eval_candidates_existed_keep_their_key():
    """`eval_candidates` (the tests' tiny model selection) at its default of 100 leaves the cache key as it was."""
    default = RetrievalTrainingConfig()
    assert "eval_candidates" not in default.key_parameters()
    # The key the code before `eval_candidates` gave these parameters (computed from that commit's config).
    assert cache_key("d", "b", default.key_parameters()) == "31fffa7c5317"
    assert cache_key("d", "b", RetrievalTrainingConfig(eval_candidates=50).key_parameters()) != "31fffa7c5317"


@pytest.fixture(scope="module")
def tiny_run(handful_engine, tmp_path_factory):
    """The tiny run of the module docstring, stopped by its time budget after its first step and resumed to the end."""
    cache = tmp_path_factory.mktemp("trained")
    lines: list[str] = []

    def train(**budget):
        return train_retrieval(handful_engine, dataset="empatheticdialogues", cache_dir=cache, config=TINY,
                               threads=TEST_THREADS, show_progress=False, echo=lines.append, **budget)

    # A budget already spent when the first step ends: that step is evaluated, saved, and the run stops.
    first = train(max_minutes=1e-6)
    first_manifest = json.loads((first.run / "manifest.json").read_text())
    servable_after_the_stop = find_checkpoint(cache, "retrieval-ft").parent
    second = train()
    return cache, first, first_manifest, servable_after_the_stop, second, lines, train


def _mean_loss(model_path, queries, replies) -> float:
    """MultipleNegativesRankingLoss of a model over fixed batches of TINY.batch_size pairs (no training)."""
    import torch
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer.losses import MultipleNegativesRankingLoss

    model = SentenceTransformer(str(model_path), device="cpu")
    model.max_seq_length = TINY.max_seq_length
    loss = MultipleNegativesRankingLoss(model)
    size = TINY.batch_size
    values = []
    with torch.no_grad():
        for start in range(0, len(queries) - size + 1, size):
            features = [model.tokenize(queries[start:start + size]), model.tokenize(replies[start:start + size])]
            values.append(float(loss(features, None)))
    return sum(values) / len(values)


@pytest.mark.slow
def test_a_run_stopped_by_its_time_budget_resumes_where_it_stopped(tiny_run):
    _, first, first_manifest, servable, second, lines, _ = tiny_run
    assert first.status == "stopped at the time budget" and first_manifest["global_step"] == 1
    assert not first_manifest["complete"] and "again" in first.describe()
    assert servable == first.run  # the best model so far is servable while the run is unfinished
    assert second.run == first.run and second.status == "trained" and second.manifest["global_step"] == 6
    assert second.manifest["complete"] and second.manifest["max_steps"] == 6
    assert any("resuming from the last checkpoint" in line for line in lines)
    # The resumed run continued step 1's history rather than starting over: step 1 is logged once.
    assert [step for step, _ in second.manifest["losses"]] == [1, 2, 3, 4, 5, 6]
    assert [step for step, _ in second.manifest["evaluations"]] == [1, 3, 6]
    assert second.manifest["eval_source"] == "valid" and second.manifest["eval_contexts"] == 20
    assert second.manifest["eval_candidates"] == 10 and "P@1,10 on 20 valid contexts" in second.describe()
    assert second.manifest["train_pairs"] == 18


@pytest.mark.slow
def test_a_tiny_run_overfits_its_handful_of_pairs(tiny_run, handful_engine):
    """Six steps over the same 18 pairs (three epochs) lower their loss: the last checkpoint against the base model,
    on the first 16 of them in two fixed batches of 8."""
    _, _, _, _, second, _, _ = tiny_run
    data = training_data(handful_engine, "empatheticdialogues", TINY)
    before = _mean_loss(base_model_path(), data.queries, data.replies)
    after = _mean_loss(second.run / "trainer" / "checkpoint-6", data.queries, data.replies)
    print(f"MNRL loss on 16 train pairs in batches of {TINY.batch_size}: {before:.3f} before, {after:.3f} after")
    assert after < before - 0.2


@pytest.mark.slow
def test_model_selection_keeps_the_best_evaluations_weights(tiny_run):
    """`model/` is the checkpoint of the best valid P@1,10 (the earliest of equals), not merely the last one."""
    from safetensors.torch import load_file

    _, _, _, _, second, _, _ = tiny_run
    manifest = second.manifest
    figures = dict(manifest["evaluations"])
    assert manifest["best_metric"] == max(figures.values())
    assert manifest["best_step"] == min(step for step, value in figures.items() if value == manifest["best_metric"])
    kept = load_file(second.run / "model" / "model.safetensors")
    best = load_file(second.run / "trainer" / f"checkpoint-{manifest['best_step']}" / "model.safetensors")
    assert kept.keys() == best.keys() and all(kept[name].equal(best[name]) for name in kept)


@pytest.mark.slow
def test_the_served_system_answers_from_the_trained_checkpoint(tiny_run, handful_engine):
    import numpy as np
    from sentence_transformers import SentenceTransformer

    cache, _, _, _, second, _, train = tiny_run
    registry = Registry.from_config(None, BackendResources(engine=handful_engine, cache_dir=cache,
                                                           show_progress=False, encoder_settings=TEST_ENCODER))
    fine_tuned, zero_shot = registry.get("retrieval-ft"), registry.get("retrieval")
    # The system's version carries the checkpoint key, so its responses and embeddings never mix with retrieval's.
    assert second.key in fine_tuned.version and second.key not in zero_shot.version
    with unit_of_work(handful_engine) as session:
        contexts = load_contexts(session, split="test")
    outcomes = fine_tuned.respond_batch(contexts)
    assert all(o.ok and o.text in fine_tuned.pool.texts for o in outcomes)
    assert all(o.provenance["version"] == fine_tuned.version for o in outcomes)
    # It encodes with the kept model's weights, not the base model's.
    texts = [contexts[0].reference, "I passed my driving test today!"]
    kept = SentenceTransformer(str(second.run / "model"), device="cpu").encode(texts, normalize_embeddings=True)
    served = fine_tuned.encoder.encode(texts)
    base = zero_shot.encoder.encode(texts)
    assert (served * kept).sum(axis=1).min() > 0.99
    assert not np.allclose(served, base, atol=1e-3)
    again = train()
    assert again.status == "already trained" and "nothing to do" in again.describe()


def test_the_demo_rates_retrieval_ft_only_when_a_checkpoint_exists(tmp_path):
    from empeval.demo import DEMO_STUDY, with_fine_tuned_retrieval
    from empeval.tasks.study_file import load_study_file

    spec = load_study_file(DEMO_STUDY)
    said: list[str] = []
    assert with_fine_tuned_retrieval(spec, tmp_path, said.append) == spec
    assert "retrieval-ft" not in spec.systems and "`empeval train retrieval`" in said[0]
    run = run_dir(tmp_path, "retrieval-ft", "0123456789ab")
    (run / "model").mkdir(parents=True)
    write_manifest(run, {"complete": True})
    with_ft = with_fine_tuned_retrieval(spec, tmp_path, said.append)
    assert with_ft.systems == (*spec.systems, "retrieval-ft") and "0123456789ab" in said[1]


def test_the_train_command_exits_2_naming_the_import_command_on_an_empty_store(tmp_path):
    url = f"sqlite:///{tmp_path / 'empty.db'}"
    result = CliRunner().invoke(cli, ["--database-url", url, "train", "retrieval", "--cache-dir", str(tmp_path)])
    assert result.exit_code == 2, result.output
    assert "no train contexts" in result.output and "empeval data import-ed" in result.output
    assert "Traceback" not in result.output
