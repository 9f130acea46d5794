"""Training the CoBERT-style selector on a handful of ED pairs and on the persona fixture (real MiniLM, real SQLite
store): the loss falls, an interrupted run resumes, a finished one is a no-op, the key follows data, encoder and
parameters, and the trained `cobert` system reranks the bi-encoder's candidates.

The tiny run: the handful store's 18 train pairs (tests/backend/conftest.py), 4 epochs of B=8 (16 of the 18 pairs
each epoch), i.e. 8 steps, interrupted after 3 and resumed; model selection P@1,10 on 20 contexts of the store's
valid split. The fine-tuned bi-encoder it starts from is stood in for by the packaged all-MiniLM-L6-v2 copied as a
finished `retrieval-ft` run (training that is the other command's test). Whether a longer run reranks at least as
well as the bi-encoder on test contexts is a benchmark figure (benchmarks/sample_quality.py), not a test."""
from __future__ import annotations

import dataclasses
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch

from empeval.server.backend.base import DialogueContext
from empeval.server.backend.checkpoints import MODEL_DIR, is_finished, run_dir, write_manifest
from empeval.server.backend.cobert import CoBERT, CoBERTModel, base_encoder_path
from empeval.server.backend.contexts import load_contexts
from empeval.server.backend.encoder import resolve_precision
from empeval.server.backend.resources import BackendResources
from empeval.server.backend.retrieval import history_text
from empeval.server.backend.retrieval_ft import fine_tuned_encoder
from empeval.server.datasets.persona_jsonl import load_persona_jsonl
from empeval.server.store.engine import unit_of_work
from empeval.training.cobert import (
    CoBERTTrainConfig,
    persona_data,
    resolve_encoder,
    run_key,
    store_data,
    train_cobert,
)

from .conftest import TEST_ENCODER

pytestmark = pytest.mark.slow

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "persona_pec.jsonl"
ED = "empatheticdialogues"
STAND_IN_KEY = "5a11e0000000"
# bf16 autocast only where the CPU has bf16 instructions (emulated elsewhere, and several times slower than fp32).
CONFIG = CoBERTTrainConfig(batch_size=8, epochs=4, lr=1e-4, eval_every=1000, eval_contexts=20, eval_candidates=10,
                           warmup_steps=2, bf16=resolve_precision("auto") == "bf16")
STEPS = 8  # 18 pairs give 2 batches of 8 per epoch


def stand_in_retrieval_ft(cache_dir: Path) -> None:
    """The packaged model's folder (a sentence-transformers folder already), copied as a finished `retrieval-ft`
    run."""
    run = run_dir(cache_dir, "retrieval-ft", STAND_IN_KEY)
    shutil.copytree(base_encoder_path(), run / MODEL_DIR)
    write_manifest(run, {"kind": "retrieval-ft", "key": STAND_IN_KEY, "note": "test stand-in: base weights"})


@pytest.fixture(scope="module")
def trained(handful_engine, tmp_path_factory):
    cache_dir = tmp_path_factory.mktemp("cobert-cache")
    stand_in_retrieval_ft(cache_dir)
    data = store_data(handful_engine, dataset=ED, config=CONFIG)
    lines: list[str] = []
    first = train_cobert(data, cache_dir=cache_dir, config=CONFIG, show_progress=False, log=lines.append,
                         interrupt_after=3)
    second = train_cobert(data, cache_dir=cache_dir, config=CONFIG, show_progress=False, log=lines.append)
    return cache_dir, data, first, second, lines


def test_an_interrupted_run_resumes_where_it_stopped_and_finishes(trained):
    cache_dir, data, first, second, lines = trained
    assert first.manifest is None and first.run == second.run
    assert any("interrupted at step 3" in line for line in lines)
    assert any("resuming cobert run" in line and f"at step 3 of {STEPS}" in line for line in lines)
    assert second.manifest["steps"] == STEPS and second.manifest["stopped_by"] == "steps"
    assert len(second.manifest["loss_first"]) == STEPS  # the resumed run kept the first session's losses
    assert is_finished(second.run)
    assert second.manifest["base_model"] == f"retrieval-ft@{STAND_IN_KEY}"
    again = train_cobert(data, cache_dir=cache_dir, config=CONFIG, show_progress=False, log=lines.append)
    assert again.already_finished and "already finished" in lines[-1]


def test_the_loss_falls_over_the_epochs(trained):
    """Four passes over the same 16 pairs: the last epoch's two steps score their gold replies far better."""
    losses = trained[3].manifest["loss_first"]
    first_epoch, last_epoch = sum(losses[:2]) / 2, sum(losses[-2:]) / 2
    assert last_epoch < 0.8 * first_epoch, (first_epoch, last_epoch)


def test_model_selection_keeps_the_best_evaluation(trained):
    manifest = trained[3].manifest
    figures = [entry["valid_p_at_1"] for entry in manifest["valid_history"]]
    assert manifest["eval_candidates"] == 10 and manifest["eval_contexts"] == 20
    assert manifest["valid_p_at_1_best"] == max(figures)
    assert manifest["valid_source"] == f"store:{ED}:valid" and manifest["train_examples"] == 18


def test_the_key_follows_data_encoder_and_parameters_only(trained):
    _, data, _, second, _ = trained
    encoder = f"retrieval-ft@{STAND_IN_KEY}"
    assert run_key(data, encoder, CONFIG) == second.key
    fewer = dataclasses.replace(data, train=data.train[:-1])
    assert run_key(fewer, encoder, CONFIG) != second.key
    assert run_key(data, "retrieval-ft@000000000000", CONFIG) != second.key
    assert run_key(data, encoder, dataclasses.replace(CONFIG, batch_size=4)) != second.key


def test_ed_without_a_valid_split_holds_out_a_tenth_of_its_train_dialogues(sample_engine):
    """The bundled sample has no valid split: a seeded 10% of its train dialogues is held out (only data is read)."""
    data = store_data(sample_engine, dataset=ED, config=CoBERTTrainConfig())
    assert "held-out 10%" in data.valid_source
    assert not {e.group for e in data.valid} & {e.group for e in data.train}
    assert 0.08 < len(data.valid) / (len(data.valid) + len(data.train)) < 0.12


def handful_test_contexts(engine) -> list[DialogueContext]:
    with unit_of_work(engine) as session:
        return load_contexts(session, dataset=ED, split="test")


RERANK_K = 4


def test_the_system_reranks_only_the_bi_encoders_top_k_of_each_candidate_set(trained, handful_engine):
    """Scored as `empeval metrics` scores it (each of the handful store's 16 test contexts against its gold reply and
    9 seeded other test references): CoBERT's scores for the bi-encoder's top 4, the bi-encoder's order below them.
    How it compares with the bi-encoder alone needs a longer run and more contexts: benchmarks/sample_quality.py."""
    from empeval.server.backend.metrics import candidate_sets, rank_metrics

    cache_dir = trained[0]
    resources = BackendResources(engine=handful_engine, cache_dir=cache_dir, show_progress=False,
                                 encoder_settings=TEST_ENCODER)
    system = CoBERTModel("cobert", {"rerank_k": RERANK_K}, resources)
    contexts = handful_test_contexts(handful_engine)
    sets = candidate_sets(len(contexts), n_candidates=10, seed=0)
    references = [c.reference for c in contexts]
    emotions = np.array([c.emotion or "" for c in contexts], dtype=str)
    reranked = system.score_candidate_sets(contexts, references, emotions, sets)
    # The bi-encoder alone, as the `retrieval-ft` system scores (its SentenceEncoder over the stand-in checkpoint).
    encoder = fine_tuned_encoder(resources, STAND_IN_KEY)
    queries = torch.from_numpy(encoder.encode([history_text(c) for c in contexts]))
    embedded = torch.from_numpy(encoder.encode(references))
    bi = torch.einsum("nd,nkd->nk", queries, embedded[torch.from_numpy(sets)]).numpy()
    # Outside the top 4, the bi-encoder's order is kept, below every reranked candidate.
    order = np.argsort(-bi, axis=1, kind="stable")  # best first, as the system takes its top 4
    top, outside = order[:, :RERANK_K], order[:, RERANK_K:][:, ::-1]
    assert (np.take_along_axis(reranked, outside, 1) < -1e5).all()
    assert (np.take_along_axis(reranked, top, 1) > -1e5).all()
    assert (np.diff(np.take_along_axis(reranked, outside, 1), axis=1) >= -1e-3).all()
    # The top 4 get the trained selector's own scores: what CoBERT gives those candidates scored alone (in the same
    # order, so that the same texts are encoded in the same batches).
    texts = [[references[j] for j in sets[row, top[row]]] for row in range(len(contexts))]
    alone = system.selector.score_candidates([history_text(c) for c in contexts], texts).numpy()
    np.testing.assert_allclose(np.take_along_axis(reranked, top, 1), alone, atol=1e-3)
    cobert, bi_encoder = rank_metrics(reranked, ks=(RERANK_K, 10)), rank_metrics(bi, ks=(RERANK_K, 10))
    assert cobert[f"r@{RERANK_K}"] == bi_encoder[f"r@{RERANK_K}"]  # reranking the top 4 moves nothing past 4


def test_the_cobert_system_answers_from_the_bi_encoders_top_candidates(trained, handful_engine):
    cache_dir, _, _, second, _ = trained
    resources = BackendResources(engine=handful_engine, cache_dir=cache_dir, show_progress=False,
                                 encoder_settings=TEST_ENCODER)
    system = CoBERTModel("cobert", {"rerank_k": 5}, resources)
    contexts = handful_test_contexts(handful_engine)[:4]
    outcomes = system.respond_batch(contexts)
    pool = system.pool
    for outcome in outcomes:
        assert outcome.ok and outcome.text in pool.texts
        provenance = outcome.provenance
        assert provenance["checkpoint"] == second.key and provenance["encoder_checkpoint"] == STAND_IN_KEY
        assert 1 <= provenance["first_stage_rank"] <= 5 and provenance["reranked"] == 5
        assert second.key in provenance["version"] and STAND_IN_KEY in provenance["version"]


def test_training_on_the_persona_fixture_uses_the_personas(tmp_path):
    config = CoBERTTrainConfig(batch_size=4, epochs=3, eval_every=1000, eval_contexts=10, head_lr=1e-2,
                               bf16=CONFIG.bf16)
    data = persona_data(load_persona_jsonl(FIXTURE), source="fixture", config=config)
    assert data.has_personas and len(data.valid) == 2 and len(data.train) == 10
    result = train_cobert(data, cache_dir=tmp_path, encoder="base", config=config, show_progress=False,
                          log=lambda line: None)
    manifest = result.manifest
    assert manifest["has_personas"] and manifest["steps"] == 6 and manifest["eval_candidates"] == 2
    # The last state trained the persona term (the kept model may be the start, if no evaluation beat it).
    state = torch.load(result.run / "resume" / "state.pt", weights_only=False)["model"]
    assert float(state["persona_mix"]) != 0.0
    assert CoBERT.load(result.run / MODEL_DIR).config.max_persona_tokens == config.max_persona_tokens


def test_training_without_a_fine_tuned_encoder_names_empeval_train_retrieval(tmp_path, sample_engine):
    from empeval.server.backend.checkpoints import MissingCheckpoint

    data = persona_data(load_persona_jsonl(FIXTURE), source="fixture", config=CONFIG)
    with pytest.raises(MissingCheckpoint, match="empeval train retrieval"):
        train_cobert(data, cache_dir=tmp_path, config=CONFIG, show_progress=False)
    assert not (tmp_path / "trained").exists() or not any((tmp_path / "trained").glob("cobert-*"))
    assert resolve_encoder(tmp_path, "base")[0] == base_encoder_path()


def cli_with_train_cobert():
    """The root group's error handling around `train cobert`, as entry.cli registers it under `train`."""
    import click

    from empeval.cli.common import CliContext, EmpevalGroup
    from empeval.cli.train_cobert import cobert

    @click.group(cls=EmpevalGroup)
    @click.option("--database-url", default=None)
    @click.pass_context
    def root(ctx, database_url):
        ctx.obj = CliContext(database_url=database_url)

    @root.group()
    def train():
        pass

    train.add_command(cobert)
    return root


def test_the_command_trains_on_a_persona_corpus_and_stops_at_a_malformed_line(tmp_path):
    from click.testing import CliRunner

    root = cli_with_train_cobert()
    url = f"sqlite:///{tmp_path / 'store.db'}"
    bad = tmp_path / "bad.jsonl"
    bad.write_text(FIXTURE.read_text(encoding="utf-8") + '{"context": ["hi"]}\n', encoding="utf-8")
    refused = CliRunner().invoke(root, ["--database-url", url, "train", "cobert", "--persona-corpus", str(bad),
                                        "--encoder", "base", "--cache-dir", str(tmp_path / "cache")])
    assert refused.exit_code == 2 and f"{bad}:13: missing fields" in refused.output
    assert not (tmp_path / "cache").exists()  # nothing started
    empty_store = CliRunner().invoke(root, ["--database-url", url, "train", "cobert", "--encoder", "base",
                                            "--cache-dir", str(tmp_path / "cache")])
    assert empty_store.exit_code == 2 and "empeval data import-ed" in empty_store.output
    trained = CliRunner().invoke(root, ["--database-url", url, "train", "cobert", "--persona-corpus", str(FIXTURE),
                                        "--encoder", "base", "--batch-size", "4", "--max-steps", "2",
                                        "--cache-dir", str(tmp_path / "cache")])
    assert trained.exit_code == 0, trained.output
    assert "checkpoint " in trained.output and "valid P@1,2" in trained.output and "(2 steps)" in trained.output
