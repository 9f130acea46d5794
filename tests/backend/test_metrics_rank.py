"""Rank metrics over shared candidate sets: R@k and MRR on hand-computed scores, the draw P@1,100 always made,
the stored candidate-set file (written, reused identically, refused when it does not match), and
`empeval metrics` printing them."""
from __future__ import annotations

import json
import random

import numpy as np
import pytest
import torch
from click.testing import CliRunner

from empeval.cli import cli
from empeval.server.backend.base import ContextTurn, DialogueContext
from empeval.server.backend.contexts import load_contexts
from empeval.server.backend.encoder import THREADS_ENV
from empeval.server.backend.metrics import (
    CandidatesFileError,
    candidate_sets,
    draw_candidates,
    gold_ranks,
    load_candidates,
    match_contexts,
    p_at_1_of_100,
    rank_metrics,
    save_candidates,
    score_shared,
)
from empeval.server.store.engine import unit_of_work


def test_rank_metrics_on_a_hand_computed_example():
    # Gold in column 0. Row ranks: 1 (gold highest), 3 (two above), 2 (one tie counts against), 5 (last of 5).
    scores = np.array([[0.9, 0.1, 0.2, 0.3, 0.0],
                       [0.5, 0.7, 0.6, 0.1, 0.2],
                       [0.4, 0.4, 0.1, 0.2, 0.3],
                       [0.0, 0.1, 0.2, 0.3, 0.4]])
    assert gold_ranks(scores).tolist() == [1, 3, 2, 5]
    figures = rank_metrics(scores, ks=(1, 2, 3))
    assert figures["r@1"] == pytest.approx(1 / 4)
    assert figures["r@2"] == pytest.approx(2 / 4)
    assert figures["r@3"] == pytest.approx(3 / 4)
    assert figures["mrr"] == pytest.approx((1 + 1 / 3 + 1 / 2 + 1 / 5) / 4)


def test_rank_metrics_default_to_r1_r10_r50_and_mrr():
    scores = np.tile(np.arange(100, 0, -1, dtype=float), (2, 1))  # gold highest in both rows
    scores[1, 0] = 49.5  # 50 of the other 99 (99..50) score higher: gold ranked 51st, outside R@50
    assert rank_metrics(scores) == pytest.approx({"r@1": 0.5, "r@10": 0.5, "r@50": 0.5, "mrr": (1 + 1 / 51) / 2})


def _old_draw(n: int, seed: int) -> np.ndarray:
    """The draw `p_at_1_of_100` made before the candidate sets were shared (copied from the old code)."""
    rng = random.Random(seed)
    sets = []
    for i in range(n):
        others = rng.sample(range(n - 1), 99)
        sets.append([i] + [j if j < i else j + 1 for j in others])
    return np.array(sets)


@pytest.mark.parametrize("seed", [0, 7])
def test_candidate_sets_are_the_draw_p_at_1_100_always_made(seed):
    sets = candidate_sets(250, seed=seed)
    assert np.array_equal(sets, _old_draw(250, seed))
    assert (sets[:, 0] == np.arange(250)).all()
    assert all(len(set(row)) == 100 for row in sets.tolist())  # no candidate twice, gold never as a distractor


def test_fewer_contexts_than_candidates_is_refused():
    with pytest.raises(ValueError, match="100 candidates per context need at least 100 contexts"):
        candidate_sets(99)


def _contexts(n: int) -> list[DialogueContext]:
    return [DialogueContext(turns=(ContextTurn("speaker", f"story {i}"),), conv_id=f"hit:{i}", n_turns=1,
                            reference=f"reply {i}", emotion="sad") for i in range(n)]


def test_candidates_are_stored_and_reused_identically(tmp_path):
    contexts = _contexts(120)
    drawn = draw_candidates(contexts, dataset="ed", split="test", seed=3)
    path = save_candidates(drawn, tmp_path / drawn.file_name())
    loaded = load_candidates(path)
    assert loaded.keys == drawn.keys and loaded.references == drawn.references and loaded.seed == 3
    assert np.array_equal(loaded.sets, drawn.sets) and loaded.data_hash == drawn.data_hash
    # The store's contexts in another order come back in the file's order.
    assert [c.key() for c in match_contexts(loaded, contexts[::-1], source=str(path))] == list(drawn.keys)


def test_a_candidate_file_that_does_not_match_the_store_is_refused(tmp_path):
    contexts = _contexts(120)
    path = save_candidates(draw_candidates(contexts, dataset="ed", split="test"), tmp_path / "c.json")
    changed = list(contexts)
    changed[5] = DialogueContext(turns=contexts[5].turns, conv_id="hit:5", n_turns=1, reference="another reply")
    with pytest.raises(CandidatesFileError, match=r"c.json: context 5 \(hit:5#1\) has another reference"):
        match_contexts(load_candidates(path), changed, source=str(path))
    with pytest.raises(CandidatesFileError, match=r"context 119 \(hit:119#1\) is not among the 119"):
        match_contexts(load_candidates(path), contexts[:119], source=str(path))
    raw = json.loads(path.read_text())
    raw["sets"][4][0] = 3
    path.write_text(json.dumps(raw))
    with pytest.raises(CandidatesFileError, match=r"set 4 \(context hit:4#1\) must start with its own row"):
        load_candidates(path)
    path.write_text("{not json")
    with pytest.raises(CandidatesFileError, match="c.json: not JSON"):
        load_candidates(path)


@pytest.mark.slow
def test_r1_over_the_shared_sets_is_the_old_p_at_1_100(tiny_registry, tiny_engine):
    """R@1 through score_shared equals P@1,100 computed the old way (old draw, old strict comparison), on the tiny
    store's 102 test contexts with the real MiniLM (the whole sample's 668: benchmarks/sample_quality.py)."""
    with unit_of_work(tiny_engine) as session:
        contexts = load_contexts(session, split="test")
    model = tiny_registry.get("retrieval")
    sets = _old_draw(len(contexts), 0)
    references = torch.from_numpy(model.encoder.encode_cached([c.reference for c in contexts], label="references"))
    emotions = np.array([c.emotion or "" for c in contexts], dtype=str)
    hits = 0
    for start in range(0, len(contexts), 256):
        rows = sets[start:start + 256]
        scores = model.score(contexts[start:start + 256], references[torch.from_numpy(rows)], emotions[rows])
        hits += int((scores[:, 0] > scores[:, 1:].max(dim=1).values).sum())
    shared = draw_candidates(contexts, dataset="ed", split="test", seed=0)
    figures = rank_metrics(score_shared(model, contexts, shared))
    assert len(contexts) == 102 and hits > 0
    assert figures["r@1"] == hits / len(contexts) == p_at_1_of_100(model, contexts, seed=0)[0]
    assert figures["r@1"] < figures["r@10"] < figures["r@50"] <= 1 and figures["r@1"] < figures["mrr"] < 1


@pytest.mark.slow
def test_metrics_command_prints_rank_metrics_and_reuses_its_stored_candidates(tiny_engine, cache_dir, tmp_path,
                                                                               monkeypatch):
    monkeypatch.setenv(THREADS_ENV, "1")  # as conftest.TEST_ENCODER: no thread probe
    url = tiny_engine.url.render_as_string(hide_password=False)
    candidates = tmp_path / "candidates.json"
    arguments = ["--database-url", url, "metrics", "--systems", "retrieval", "--cache-dir", str(cache_dir),
                 "--candidates", str(candidates)]
    first = CliRunner().invoke(cli, arguments)
    assert first.exit_code == 0, first.output
    assert candidates.exists() and "stored in" in first.output
    lines = first.output.splitlines()
    header = next(i for i, line in enumerate(lines) if line.split()[1:] == ["n", "R@1", "R@10", "R@50", "MRR"])
    line = next(line for line in lines[header:] if line.startswith("retrieval "))
    assert f"{float(line.split()[2]):.2f}" in next(row for row in lines[:header] if row.startswith("retrieval "))
    r1, r10, r50, mrr = (float(x) for x in line.split()[2:])
    assert 10 < r1 < r10 < r50 <= 100 and r1 < mrr < r10  # chance: R@1 1, R@10 10
    second = CliRunner().invoke(cli, arguments)
    assert second.exit_code == 0 and "reused from" in second.output
    assert line in second.output.splitlines()
