"""`empeval train retrieval` and the `retrieval-ft` system: cache keys, missing data and checkpoints, a bounded
real training run on the bundled sample, and resuming.

The bounded run: 20 steps of 32 (sample train, 3,000 pairs after holding out 10% of the 1,600 train dialogues
for model selection; lr 5e-5; texts cut at 64 word pieces; valid P@1,100 on 100 held-out contexts at steps 10
and 20), then P@1,100 of `retrieval-ft` and of the zero-shot `retrieval` on the sample's 668 test contexts,
same candidate sets. Measured: 35.48 against 32.34 (+3.1 points); the test asks for at least +1.5. The MNRL loss
on 8 fixed batches of train pairs falls from 4.05 to 3.81. The run took 265 s at load average 4 to 9 on the
shared 2-core machine (the whole module, slow tests included: 6 min).
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
from empeval.server.backend.metrics import p_at_1_of_100
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

BOUNDED = RetrievalTrainingConfig(batch_size=32, max_steps=20, max_seq_length=64, eval_steps=10, eval_contexts=100)
# One torch thread: under make test's two xdist workers on two cores, two threads per trainer wait on each other's
# busy core (measured: the bounded run's setup took 376 s with 2 threads beside the other worker, 39 s alone).
TEST_THREADS = 1
MARGIN = 0.015  # P@1,100 points (as a share) the fine-tuned encoder must gain over the zero-shot one


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
        train_retrieval(engine, dataset="empatheticdialogues", cache_dir=tmp_path, config=BOUNDED, echo=lambda _: None)
    assert not (tmp_path / "trained").exists()  # nothing half-written


def test_bad_parameters_are_refused_by_name():
    with pytest.raises(BadInput, match="batch_size must be at least 2.*eval_contexts must be at least 100"):
        RetrievalTrainingConfig(batch_size=1, eval_contexts=10)


@pytest.fixture(scope="module")
def bounded_run(sample_engine, tmp_path_factory):
    """The bounded training run of the module docstring, trained once for the tests that read it."""
    cache = tmp_path_factory.mktemp("trained")
    result = train_retrieval(sample_engine, dataset="empatheticdialogues", cache_dir=cache, config=BOUNDED,
                             threads=TEST_THREADS, show_progress=False, echo=lambda _: None)
    return cache, result


def _mean_loss(model_path, queries, replies) -> float:
    """MultipleNegativesRankingLoss of a model over fixed batches of 32 pairs (no training)."""
    import torch
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer.losses import MultipleNegativesRankingLoss

    model = SentenceTransformer(str(model_path), device="cpu")
    model.max_seq_length = BOUNDED.max_seq_length
    loss = MultipleNegativesRankingLoss(model)
    values = []
    with torch.no_grad():
        for start in range(0, len(queries), 32):
            features = [model.tokenize(queries[start:start + 32]), model.tokenize(replies[start:start + 32])]
            values.append(float(loss(features, None)))
    return sum(values) / len(values)


@pytest.mark.slow
def test_a_bounded_run_lowers_the_loss(bounded_run, sample_engine):
    _, result = bounded_run
    manifest = result.manifest
    assert result.status == "trained" and manifest["global_step"] == 20 and manifest["complete"]
    assert manifest["eval_source"] == "train holdout" and manifest["eval_contexts"] == 100
    assert [step for step, _ in manifest["losses"]] == list(range(1, 21))
    assert [step for step, _ in manifest["evaluations"]] == [10, 20] and manifest["best_step"] in (10, 20)
    # Step losses of batches of 32 are too noisy to compare; the same 8 batches of train pairs before and after are not.
    data = training_data(sample_engine, "empatheticdialogues", BOUNDED)
    queries, replies = data.queries[:256], data.replies[:256]
    before = _mean_loss(base_model_path(), queries, replies)
    after = _mean_loss(result.run / "model", queries, replies)
    print(f"MNRL loss on 8 fixed batches of 32 train pairs: {before:.3f} before, {after:.3f} after")
    assert after < before - 0.05


@pytest.mark.slow
def test_a_bounded_run_beats_the_zero_shot_encoder_on_the_sample_test_set(bounded_run, sample_engine):
    cache, result = bounded_run
    resources = BackendResources(engine=sample_engine, cache_dir=cache, show_progress=False)
    registry = Registry.from_config(None, resources)
    with unit_of_work(sample_engine) as session:
        contexts = load_contexts(session, split="test")
    fine_tuned, n = p_at_1_of_100(registry.get("retrieval-ft"), contexts, seed=0)
    zero_shot, _ = p_at_1_of_100(registry.get("retrieval"), contexts, seed=0)
    print(f"sample test P@1,100 over {n} contexts: zero-shot {zero_shot:.4f}, fine-tuned {fine_tuned:.4f}")
    assert fine_tuned >= zero_shot + MARGIN
    # The system's version carries the checkpoint key, so its responses and embeddings never mix with retrieval's.
    assert result.key in registry.get("retrieval-ft").version
    assert result.key not in registry.get("retrieval").version
    again = train_retrieval(sample_engine, dataset="empatheticdialogues", cache_dir=cache, config=BOUNDED,
                            threads=TEST_THREADS, show_progress=False, echo=lambda _: None)
    assert again.status == "already trained" and "nothing to do" in again.describe()


@pytest.mark.slow
def test_a_run_stopped_by_its_time_budget_resumes_where_it_stopped(sample_engine, tmp_path):
    config = RetrievalTrainingConfig(batch_size=8, max_steps=6, max_seq_length=32, eval_steps=3, eval_contexts=100)
    lines: list[str] = []
    # A budget already spent when the first step ends: that step is evaluated, saved, and the run stops.
    first = train_retrieval(sample_engine, dataset="empatheticdialogues", cache_dir=tmp_path, config=config,
                            threads=TEST_THREADS, max_minutes=1e-6, show_progress=False, echo=lines.append)
    assert first.status == "stopped at the time budget" and first.manifest["global_step"] == 1
    assert not first.manifest["complete"] and "again" in first.describe()
    assert find_checkpoint(tmp_path, "retrieval-ft").parent == first.run  # the best so far is servable
    second = train_retrieval(sample_engine, dataset="empatheticdialogues", cache_dir=tmp_path, config=config,
                             threads=TEST_THREADS, show_progress=False, echo=lines.append)
    assert second.run == first.run and second.status == "trained" and second.manifest["global_step"] == 6
    assert any("resuming from the last checkpoint" in line for line in lines)
    # The resumed run continued step 1's history rather than starting over: step 1 is logged once.
    assert [step for step, _ in second.manifest["losses"]] == [1, 2, 3, 4, 5, 6]
    assert [step for step, _ in second.manifest["evaluations"]] == [1, 3, 6]
    assert json.loads((first.run / "manifest.json").read_text())["complete"] is True


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
