"""`learned-judge`: ridge regression from MiniLM embeddings of (context, response) to the study's own human
scores, cross-fitted over contexts. The promise pinned here: no item is scored by a model that was trained on
its context's ratings (the fitting is instrumented: every model records the contexts it trained on and the
contexts it scored), all items of a context share a fold, and new ratings give a new judge version. Real
SQLite store, the real (cached) encoder, analysis.stats.ppi.crossfit's own cross-fitting."""
from __future__ import annotations

import json

import numpy as np
import pytest
from sqlalchemy import select

from empeval.analysis.stats.ppi.crossfit import cross_fit_judge
from empeval.server.backend.judges.learned_judge import LearnedJudge
from empeval.server.backend.judges.run import judge_study
from empeval.server.backend.judges.study_items import load_judged_study
from empeval.server.backend.resources import BackendResources
from empeval.server.errors import BadInput
from empeval.server.store import unit_of_work
from empeval.server.store.kinds.likert import StudyItem
from empeval.server.store.models import JudgeScore, Response
from tests.backend.test_judge_store import add_ratings, judged_store


class FitLog:
    """Instruments cross_fit_judge: each model it builds records the contexts of the rows it was fitted on and of
    the rows it scored, with the scores it gave (rows are matched to items through the feature matrix)."""

    def __init__(self):
        self.models: list[dict] = []

    def cross_fit(self, items, features, human_ratings, **options):
        context_of: dict[bytes, set] = {}
        for row, context_id in zip(features, items["context_id"], strict=True):
            context_of.setdefault(np.asarray(row, dtype=float).tobytes(), set()).add(int(context_id))
        log = self

        class RecordingRidge:
            def __init__(self):
                from sklearn.linear_model import Ridge

                self.ridge, self.record = Ridge(alpha=1.0), {"trained": set(), "scored": []}
                log.models.append(self.record)

            def contexts(self, X):
                return [context_of[np.asarray(row, dtype=float).tobytes()] for row in X]

            def fit(self, X, y):
                self.record["trained"] = set().union(*self.contexts(X))
                self.ridge.fit(X, y)
                return self

            def predict(self, X):
                scores = self.ridge.predict(X)
                self.record["scored"] += list(zip(self.contexts(X), scores, strict=True))
                return scores

        return cross_fit_judge(items, features, human_ratings, make_model=RecordingRidge, **options)


@pytest.fixture
def store(tmp_path):
    engine = judged_store(tmp_path / "learned.db", contexts=12)
    yield engine
    engine.dispose()


def rated_contexts(engine, n):
    """The first `n` of the study's contexts."""
    with unit_of_work(engine) as session:
        return sorted(set(session.scalars(select(Response.context_id)
                                          .join(StudyItem, StudyItem.response_id == Response.id))))[:n]


def quality(system, context_id, rater):
    return {"sys-terse": 1, "sys-plain": 3, "sys-warm": 5}[system] - (rater == 1 and context_id % 2)


def test_no_item_is_scored_by_a_model_trained_on_its_contexts_ratings(store, cache_dir):
    rated = rated_contexts(store, 8)
    add_ratings(store, "pilot", contexts=rated, score=quality)
    log = FitLog()
    study = load_judged_study(store, "pilot", criteria=["empathy"], cross_fit=log.cross_fit)
    judge = LearnedJudge("learned", {"n_folds": 4, "seed": 1},
                         BackendResources(engine=store, cache_dir=cache_dir, show_progress=False))
    report = judge_study(store, judge, study)
    assert (report.scored, report.failed) == (36, 0)
    assert len(log.models) == 4
    for model in log.models:
        assert model["trained"] and model["trained"] <= set(rated)
        for contexts, _ in model["scored"]:
            assert not contexts & model["trained"], "a model scored an item of a context it was trained on"
    with unit_of_work(store) as session:
        rows = session.execute(select(JudgeScore, Response.context_id)
                               .join(Response, Response.id == JudgeScore.response_id)).all()
    folds: dict[int, set[int]] = {}
    for row, context_id in rows:
        raw = json.loads(row.raw_output)
        folds.setdefault(context_id, set()).add(raw["fold"])
        if context_id in rated:  # an out-of-fold score: no per-fold scores, the fold's model only
            assert raw["fold"] in range(4) and all(s is None for s in raw["fold_scores"])
            model = log.models[raw["fold"]]
            assert context_id not in model["trained"]
            assert any(context_id in c and abs(s - row.score) < 1e-9 for c, s in model["scored"])
        else:  # unrated: every fold model's score, and their mean as the score
            assert raw["fold"] == -1 and len(raw["fold_scores"]) == 4
            assert row.score == pytest.approx(np.mean(raw["fold_scores"]))
    assert all(len(f) == 1 for f in folds.values()), "the items of one context sit in different folds"
    assert len({f for c in rated for f in folds[c]}) == 4
    # The judge learned something: the warm system (rated 5) outscores the terse one (rated 1) on average.
    scores = load_scores(store)
    assert scores["sys-warm"] > scores["sys-terse"]


def load_scores(engine):
    from empeval.server.backend.judges.scores import judge_scores

    table = judge_scores(engine, "pilot", "learned")
    return table.groupby("system")["judge_score"].mean().to_dict()


def test_new_ratings_give_a_new_version_and_a_rerun_scores_every_item_again(store, cache_dir):
    rated = rated_contexts(store, 8)
    add_ratings(store, "pilot", contexts=rated[:6], score=quality)
    resources = BackendResources(engine=store, cache_dir=cache_dir, show_progress=False)
    study = load_judged_study(store, "pilot", criteria=["empathy"], cross_fit=cross_fit_judge)
    first = judge_study(store, LearnedJudge("learned", {"n_folds": 3}, resources), study)
    same = judge_study(store, LearnedJudge("learned", {"n_folds": 3}, resources), study)
    assert first.scored == 36 and (same.scored, same.skipped) == (0, 36) and same.version == first.version
    add_ratings(store, "pilot", contexts=rated[6:], score=quality)
    grown = load_judged_study(store, "pilot", criteria=["empathy"], cross_fit=cross_fit_judge)
    again = judge_study(store, LearnedJudge("learned", {"n_folds": 3}, resources), grown)
    assert again.version != first.version and again.scored == 36


def test_a_criterion_without_human_ratings_is_refused_naming_it(store, cache_dir):
    add_ratings(store, "pilot", contexts=rated_contexts(store, 8), criteria=("empathy",), score=quality)
    study = load_judged_study(store, "pilot", criteria=["empathy", "fluency"], cross_fit=cross_fit_judge)
    judge = LearnedJudge("learned", {}, BackendResources(engine=store, cache_dir=cache_dir, show_progress=False))
    with pytest.raises(BadInput, match="has none yet on fluency"):
        judge_study(store, judge, study)


def test_too_few_rated_contexts_for_the_folds_is_refused_with_what_to_do(store, cache_dir):
    add_ratings(store, "pilot", contexts=rated_contexts(store, 3), score=quality)
    study = load_judged_study(store, "pilot", criteria=["empathy"], cross_fit=cross_fit_judge)
    judge = LearnedJudge("learned", {"n_folds": 5},
                         BackendResources(engine=store, cache_dir=cache_dir, show_progress=False))
    with pytest.raises(BadInput, match="3 human-rated contexts cannot be split into n_folds=5 folds"):
        judge_study(store, judge, study)


def test_bad_fold_settings_are_config_errors():
    with pytest.raises(ValueError, match="n_folds must be a whole number of at least 2"):
        LearnedJudge("learned", {"n_folds": 1}, object())
    with pytest.raises(ValueError, match="seed must be a whole number"):
        LearnedJudge("learned", {"seed": "x"}, object())




def test_stored_learned_scores_read_with_their_folds_feed_cross_prediction_powered_means(store, cache_dir):
    from empeval.analysis.stats.ppi.crossfit import crossppi_system_means
    from empeval.analysis.stats.ppi.tables import item_labels
    from empeval.server.backend.judges.length_judge import LengthJudge
    from empeval.server.backend.judges.scores import judge_scores

    add_ratings(store, "pilot", contexts=rated_contexts(store, 8), score=quality)
    study = load_judged_study(store, "pilot", criteria=["empathy"], cross_fit=cross_fit_judge)
    judge_study(store, LearnedJudge("learned", {"n_folds": 4},
                                    BackendResources(engine=store, cache_dir=cache_dir, show_progress=False)), study)
    table = judge_scores(store, "pilot", "learned", folds=True)
    assert list(table.columns[:6]) == ["context_id", "system", "criterion", "judge_score", "error", "fold"]
    assert [c for c in table.columns if c.startswith("fold_score_")] == [f"fold_score_{k}" for k in range(4)]
    assert table.loc[table["fold"] >= 0, "fold_score_0"].isna().all()
    assert table.loc[table["fold"] == -1, "fold_score_3"].notna().all()
    labels = item_labels(study.human_ratings)[["criterion", "system", "context_id", "label"]]
    means = crossppi_system_means(table.merge(labels, on=["criterion", "system", "context_id"], how="left"))
    assert sorted(means["system"]) == ["sys-plain", "sys-terse", "sys-warm"] and (means["n_human"] == 8).all()
    assert means["crossppi_ci_low"].le(means["crossppi_mean"]).all()
    judge_study(store, LengthJudge("length"), study)
    with pytest.raises(BadInput, match="only a learned judge has folds"):
        judge_scores(store, "pilot", "length", folds=True)
