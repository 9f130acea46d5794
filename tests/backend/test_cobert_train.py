"""Training the CoBERT-style selector on the bundled sample and on the persona fixture (real MiniLM, real SQLite
store): the loss falls, an interrupted run resumes, a finished one is a no-op, the key follows data, encoder and
parameters, and the trained `cobert` system reranks the bi-encoder's candidates.

The bounded sample run: the first 128 train pairs of the bundled sample (its train split minus the 10% of
dialogues held out for model selection, since the sample has no valid split), 3 epochs of B=16, i.e. 24 steps,
interrupted after 10 and resumed; model selection on 100 held-out contexts (P@1,100). The fine-tuned bi-encoder
it starts from is stood in for by the packaged all-MiniLM-L6-v2 saved as a finished `retrieval-ft` run (training
that is the other command's test)."""
from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest
import torch

from empeval.server.backend.base import DialogueContext
from empeval.server.backend.checkpoints import MODEL_DIR, is_finished, run_dir, write_manifest
from empeval.server.backend.cobert import CoBERT, CoBERTModel, base_encoder_path, load_sentence_transformer
from empeval.server.backend.contexts import load_contexts
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

pytestmark = pytest.mark.slow

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "persona_pec.jsonl"
ED = "empatheticdialogues"
STAND_IN_KEY = "5a11e0000000"
CONFIG = CoBERTTrainConfig(batch_size=16, epochs=3, lr=1e-4, eval_every=1000, eval_contexts=100, warmup_steps=2)


def stand_in_retrieval_ft(cache_dir: Path) -> None:
    run = run_dir(cache_dir, "retrieval-ft", STAND_IN_KEY)
    load_sentence_transformer(base_encoder_path()).save(str(run / MODEL_DIR))
    write_manifest(run, {"kind": "retrieval-ft", "key": STAND_IN_KEY, "note": "test stand-in: base weights"})


@pytest.fixture(scope="module")
def trained(sample_engine, tmp_path_factory):
    cache_dir = tmp_path_factory.mktemp("cobert-cache")
    stand_in_retrieval_ft(cache_dir)
    data = store_data(sample_engine, dataset=ED, config=CONFIG)
    data = dataclasses.replace(data, train=data.train[:128])
    lines: list[str] = []
    first = train_cobert(data, cache_dir=cache_dir, config=CONFIG, show_progress=False, log=lines.append,
                         interrupt_after=10)
    second = train_cobert(data, cache_dir=cache_dir, config=CONFIG, show_progress=False, log=lines.append)
    return cache_dir, data, first, second, lines


def test_an_interrupted_run_resumes_where_it_stopped_and_finishes(trained):
    cache_dir, data, first, second, lines = trained
    assert first.manifest is None and first.run == second.run
    assert any("interrupted at step 10" in line for line in lines)
    assert any("resuming cobert run" in line and "at step 10 of 24" in line for line in lines)
    assert second.manifest["steps"] == 24 and second.manifest["stopped_by"] == "steps"
    assert is_finished(second.run)
    assert second.manifest["base_model"] == f"retrieval-ft@{STAND_IN_KEY}"
    again = train_cobert(data, cache_dir=cache_dir, config=CONFIG, show_progress=False, log=lines.append)
    assert again.already_finished and "already finished" in lines[-1]


def test_the_loss_falls_over_the_epochs(trained):
    losses = trained[3].manifest["loss_first"][:8] + trained[3].manifest["loss_last"][-8:]
    first_epoch, last_epoch = sum(losses[:8]) / 8, sum(losses[-8:]) / 8
    assert last_epoch < 0.8 * first_epoch, (first_epoch, last_epoch)


def test_model_selection_keeps_the_best_evaluation(trained):
    manifest = trained[3].manifest
    figures = [entry["valid_p_at_1"] for entry in manifest["valid_history"]]
    assert manifest["eval_candidates"] == 100 and manifest["eval_contexts"] == 100
    assert manifest["valid_p_at_1_best"] == max(figures)
    assert "held-out 10%" in manifest["valid_source"]


def test_the_key_follows_data_encoder_and_parameters_only(trained):
    _, data, _, second, _ = trained
    encoder = f"retrieval-ft@{STAND_IN_KEY}"
    assert run_key(data, encoder, CONFIG) == second.key
    fewer = dataclasses.replace(data, train=data.train[:127])
    assert run_key(fewer, encoder, CONFIG) != second.key
    assert run_key(data, "retrieval-ft@000000000000", CONFIG) != second.key
    assert run_key(data, encoder, dataclasses.replace(CONFIG, batch_size=8)) != second.key


def sample_test_contexts(engine) -> list[DialogueContext]:
    with unit_of_work(engine) as session:
        return load_contexts(session, dataset=ED, split="test")


def test_the_trained_selector_reranks_the_bi_encoder_at_least_as_well_on_the_sample_test(trained, sample_engine):
    """P@1,100 over the sample's first 300 test contexts (gold + 99 seeded other test references each), as
    `empeval metrics` scores it: the bi-encoder's top 20 of the 100 reranked by CoBERT, against the bi-encoder
    alone. After 24 steps on 128 pairs the selector is not expected to win; it must not lose more than 2 points."""
    from empeval.server.backend.metrics import candidate_sets, rank_metrics

    cache_dir = trained[0]
    resources = BackendResources(engine=sample_engine, cache_dir=cache_dir, show_progress=False)
    system = CoBERTModel("cobert", {}, resources)
    contexts = sample_test_contexts(sample_engine)[:300]
    sets = candidate_sets(len(contexts), n_candidates=100, seed=0)
    references = [c.reference for c in contexts]
    emotions = np.array([c.emotion or "" for c in contexts], dtype=str)
    reranked = system.score_candidate_sets(contexts, references, emotions, sets)
    # The bi-encoder alone, as the `retrieval-ft` system scores (its SentenceEncoder over the stand-in checkpoint).
    encoder = fine_tuned_encoder(resources, STAND_IN_KEY)
    queries = torch.from_numpy(encoder.encode([history_text(c) for c in contexts]))
    embedded = torch.from_numpy(encoder.encode(references))
    bi = torch.einsum("nd,nkd->nk", queries, embedded[torch.from_numpy(sets)]).numpy()
    # Outside the top 20, the bi-encoder's order is kept, below every reranked candidate.
    outside = bi.argsort(axis=1)[:, :80]
    assert (np.take_along_axis(reranked, outside, 1) < -1e5).all()
    assert (np.diff(np.take_along_axis(reranked, outside, 1), axis=1) >= -1e-3).all()
    cobert, bi_encoder = rank_metrics(reranked), rank_metrics(bi)
    print(f"sample test, 300 contexts: bi-encoder {bi_encoder}, cobert top-20 rerank {cobert}")
    assert cobert["r@1"] >= bi_encoder["r@1"] - 0.02
    assert cobert["r@50"] == pytest.approx(bi_encoder["r@50"])  # reranking the top 20 moves nothing past 20


def test_the_cobert_system_answers_from_the_bi_encoders_top_candidates(trained, sample_engine):
    cache_dir, _, _, second, _ = trained
    resources = BackendResources(engine=sample_engine, cache_dir=cache_dir, show_progress=False)
    system = CoBERTModel("cobert", {"rerank_k": 5}, resources)
    contexts = sample_test_contexts(sample_engine)[:4]
    outcomes = system.respond_batch(contexts)
    pool = system.pool
    for outcome in outcomes:
        assert outcome.ok and outcome.text in pool.texts
        provenance = outcome.provenance
        assert provenance["checkpoint"] == second.key and provenance["encoder_checkpoint"] == STAND_IN_KEY
        assert 1 <= provenance["first_stage_rank"] <= 5 and provenance["reranked"] == 5
        assert second.key in provenance["version"] and STAND_IN_KEY in provenance["version"]


def test_training_on_the_persona_fixture_uses_the_personas(tmp_path):
    config = CoBERTTrainConfig(batch_size=4, epochs=3, eval_every=1000, eval_contexts=10, head_lr=1e-2)
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
