"""`learned-difference-judge`: ridge regression from the difference of two responses' MiniLM embeddings to the
difference of their labels, cross-fitted over contexts. Pinned: no pair is scored by a model trained on its
context's ratings (every model records the contexts it trained on and scored), the verdicts land in
judge_pair_score in the pair's stored order with their folds, swapping a pair negates the model's score, and a
rerun scores nothing again. Real SQLite store, the real (cached) encoder, analysis.stats.ppi.crossfit's fitting."""
from __future__ import annotations

import json

import numpy as np
import pytest
from sqlalchemy import select

from empeval.analysis.stats.ppi.crossfit import cross_fit_difference_judge
from empeval.server.backend.judges.learned_difference_judge import LearnedDifferenceJudge
from empeval.server.backend.judges.pair_run import judge_study_pairs
from empeval.server.backend.judges.pair_scores import judge_pair_scores
from empeval.server.backend.judges.study_items import load_judged_study
from empeval.server.backend.resources import BackendResources
from empeval.server.errors import BadInput
from empeval.server.store import unit_of_work
from empeval.server.store.model_assisted_tables import JudgePairScore
from empeval.server.store.models import Response
from tests.annotation.conftest import add_responses, make_study
from tests.backend.test_judge_learned import quality, rated_contexts
from tests.backend.test_judge_store import SYSTEMS, TEXTS, add_ratings
from tests.conftest import sample_store_copy


class FitLog:
    """Instruments cross_fit_difference_judge: each model records the contexts of the rows it was fitted on and
    of the rows it scored (rows matched to pairs through the feature matrix, up to sign)."""

    def __init__(self):
        self.models: list[dict] = []

    def cross_fit(self, pairs, features, human_ratings, **options):
        context_of: dict[bytes, set] = {}
        for row, context_id in zip(features, pairs["context_id"], strict=True):
            for signed in (row, -row):
                context_of.setdefault(np.asarray(signed, dtype=float).tobytes(), set()).add(int(context_id))
        log = self

        class RecordingRidge:
            def __init__(self):
                from sklearn.linear_model import Ridge

                self.ridge, self.record = Ridge(alpha=1.0, fit_intercept=False), {"trained": set(), "scored": []}
                log.models.append(self.record)

            def contexts(self, X):
                return [context_of[np.asarray(row, dtype=float).tobytes()] for row in X]

            def fit(self, X, y):
                self.record["trained"] = set().union(*self.contexts(X))
                self.ridge.fit(X, y)
                self.coef = self.ridge.coef_
                return self

            def predict(self, X):
                scores = self.ridge.predict(X)
                self.record["scored"] += list(zip(self.contexts(X), scores, strict=True))
                return scores

        return cross_fit_difference_judge(pairs, features, human_ratings, make_model=RecordingRidge, **options)


@pytest.fixture
def store(tmp_path):
    """judged_store's study, each response naming its context, so that no two pairs share features (the fit log
    tells the contexts apart by them)."""
    engine = sample_store_copy(f"sqlite:///{tmp_path / 'learned-pairs.db'}")
    add_responses(engine, SYSTEMS, 40, text=lambda system, context_id: f"{TEXTS[system]} (about {context_id})")
    make_study(engine, name="pilot", count=12, k=2, per_assignment=6, systems=SYSTEMS, controls=[])
    yield engine
    engine.dispose()


def test_no_pair_is_scored_by_a_model_trained_on_its_contexts_ratings(store, cache_dir):
    rated = rated_contexts(store, 8)
    add_ratings(store, "pilot", contexts=rated, score=quality)
    log = FitLog()
    study = load_judged_study(store, "pilot", criteria=["empathy"], cross_fit_differences=log.cross_fit)
    judge = LearnedDifferenceJudge("learned-pairs", {"n_folds": 4, "seed": 1},
                                   BackendResources(engine=store, cache_dir=cache_dir, show_progress=False))
    report = judge_study_pairs(store, judge, study)
    assert (report.pairs, report.scored, report.failed) == (36, 36, 0)
    assert len(log.models) == 4
    for model in log.models:
        assert model["trained"] and model["trained"] <= set(rated)
        for contexts, _ in model["scored"]:
            assert not contexts & model["trained"], "a model scored a pair of a context it was trained on"
    with unit_of_work(store) as session:
        rows = session.execute(select(JudgePairScore, Response.context_id)
                               .join(Response, Response.id == JudgePairScore.response_a_id)).all()
    for row, context_id in rows:
        assert row.response_a_id < row.response_b_id and row.judge_kind == "learned-difference-judge"
        raw = json.loads(row.raw_output)
        if context_id in rated:
            assert raw["fold"] in range(4) and context_id not in log.models[raw["fold"]]["trained"]
        else:
            assert raw["fold"] == -1 and row.score == pytest.approx(np.mean(raw["fold_scores"]))
    table = judge_pair_scores(store, "pilot", "learned-pairs")
    warm_terse = table.loc[(table["system_a"] == "sys-warm") & (table["system_b"] == "sys-terse"), "judge_diff"]
    terse_warm = table.loc[(table["system_a"] == "sys-terse") & (table["system_b"] == "sys-warm"), "judge_diff"]
    # Rated 5 against 1: the judge learned that warm beats terse, whichever the stored order.
    assert np.concatenate([warm_terse.to_numpy(), -terse_warm.to_numpy()]).mean() > 1
    again = judge_study_pairs(store, judge, study)
    assert (again.scored, again.skipped) == (0, 36)


def test_swapping_a_pair_negates_the_models_score():
    rng = np.random.default_rng(2)
    pairs = {"context_id": np.arange(30), "system_a": "a", "system_b": "b"}
    import pandas as pd

    features = rng.normal(size=(30, 4))
    ratings = pd.DataFrame({"context_id": np.repeat(np.arange(20), 2), "system": ["a", "b"] * 20,
                            "criterion": "empathy", "annotator": "ann",
                            "score": rng.integers(1, 6, 40).astype(float)})
    forward = cross_fit_difference_judge(pd.DataFrame(pairs), features, ratings, n_folds=4)
    swapped = cross_fit_difference_judge(pd.DataFrame({**pairs, "system_a": "b", "system_b": "a"}), -features,
                                         ratings, n_folds=4)
    np.testing.assert_allclose(swapped["judge_diff"], -forward["judge_diff"], atol=1e-9)


def test_a_study_without_ratings_is_refused_naming_the_criterion(store, cache_dir):
    study = load_judged_study(store, "pilot", criteria=["empathy"], cross_fit_differences=cross_fit_difference_judge)
    judge = LearnedDifferenceJudge("learned-pairs", {},
                                   BackendResources(engine=store, cache_dir=cache_dir, show_progress=False))
    with pytest.raises(BadInput, match="has none yet on empathy: collect ratings first"):
        judge_study_pairs(store, judge, study)
