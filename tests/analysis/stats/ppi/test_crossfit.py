"""Cross-fitting (analysis.stats.ppi.crossfit): no item is scored by a model trained on its own ratings, or on
any rating of its context; cross-PPI equals ppi_py's."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from ppi_py import crossppi_mean_ci

from empeval.analysis.stats.ppi.crossfit import cross_fit_judge, crossppi_paired_differences, crossppi_system_means

N_CONTEXTS, N_RATED = 90, 30


class RecordingModel:
    """A model that remembers the contexts it was trained on (feature 0 holds the context number) and
    predicts its own serial number, so every score says which model gave it."""

    made: list[RecordingModel] = []

    def __init__(self) -> None:
        self.serial = len(RecordingModel.made)
        self.trained_on: set[int] = set()
        RecordingModel.made.append(self)

    def fit(self, X, y):
        self.trained_on = {int(value) for value in X[:, 0]}
        return self

    def predict(self, X):
        return np.full(len(X), float(self.serial))


@pytest.fixture()
def design():
    rng = np.random.default_rng(2)
    items = pd.DataFrame([{"context_id": f"c{c:03d}", "system": system}
                          for c in range(N_CONTEXTS) for system in ("gold", "base")])
    number = items["context_id"].str[1:].astype(int).to_numpy()
    signal = rng.normal(size=(len(items), 2))
    features = np.column_stack([number, signal])
    quality = 3.3 + 0.5 * (items["system"] == "gold").to_numpy() + signal @ [0.6, -0.4]
    rated = number < N_RATED
    noisy = np.repeat(quality[rated], 2) + rng.normal(0, 0.5, 2 * rated.sum())
    ratings = pd.DataFrame({"context_id": items["context_id"][rated].repeat(2),
                            "system": items["system"][rated].repeat(2), "criterion": "empathy",
                            "annotator": ["a", "b"] * int(rated.sum()), "score": np.clip(np.rint(noisy), 1, 5)})
    return items, features, ratings


def test_no_item_is_scored_by_a_model_that_saw_its_context(design):
    items, features, ratings = design
    RecordingModel.made = []
    scores = cross_fit_judge(items, features, ratings, n_folds=5, make_model=RecordingModel, seed=4)
    models = RecordingModel.made
    assert len(models) == 5
    number = scores["context_id"].str[1:].astype(int)
    rated = scores["label"].notna()
    assert rated.sum() == 2 * N_RATED and set(number[rated]) == set(range(N_RATED))
    for row in scores.loc[rated].itertuples():
        model = models[int(row.judge_score)]
        assert int(row.context_id[1:]) not in model.trained_on
        assert row.fold == model.serial
    # Every model trained on all the rated contexts outside its fold, and on no unrated one.
    folds = scores.loc[rated].groupby("fold")["context_id"].apply(lambda c: {int(x[1:]) for x in c})
    for model in models:
        assert model.trained_on == set(range(N_RATED)) - folds[model.serial]
    # A context's items share a fold (gold and base never split across folds).
    assert (scores.loc[rated].groupby("context_id")["fold"].nunique() == 1).all()
    # Unrated items: one score per fold model, averaged.
    unrated = scores.loc[~rated]
    assert (unrated["fold"] == -1).all()
    assert (unrated[[f"fold_score_{k}" for k in range(5)]].to_numpy() == np.arange(5.0)).all()
    assert (unrated["judge_score"] == 2.0).all()
    assert scores.loc[rated, [f"fold_score_{k}" for k in range(5)]].isna().all().all()


def test_crossppi_means_equal_ppi_py_s(design):
    items, features, ratings = design
    scores = cross_fit_judge(items, features, ratings, n_folds=3, seed=1)
    means = crossppi_system_means(scores, power_tuning=False).set_index("system")
    for system in ("base", "gold"):
        part = scores.loc[scores["system"] == system]
        rated = part["label"].notna()
        y, f = part.loc[rated, "label"].to_numpy(), part.loc[rated, "judge_score"].to_numpy()
        f_unrated = part.loc[~rated, ["fold_score_0", "fold_score_1", "fold_score_2"]].to_numpy()
        low, high = crossppi_mean_ci(y, f, f_unrated, alpha=0.05)
        assert (means.loc[system, "crossppi_ci_low"], means.loc[system, "crossppi_ci_high"]) == pytest.approx(
            (float(np.squeeze(low)), float(np.squeeze(high))), abs=1e-12)
        assert means.loc[system, "crossppi_mean"] == pytest.approx(f_unrated.mean() + (y - f).mean())
        assert means.loc[system, "n_human"] == N_RATED and means.loc[system, "n_judge_only"] == N_CONTEXTS - N_RATED
    # The ridge judge learns the signal: cross-PPI is narrower than human-only on the same labels.
    assert (means["width_ratio"] < 0.9).all()


def test_cross_fitting_refuses_what_it_cannot_do(design):
    items, features, ratings = design
    with pytest.raises(ValueError, match="n_folds must be a whole number of at least 2"):
        cross_fit_judge(items, features, ratings, n_folds=1)
    with pytest.raises(ValueError, match="features must have one row per item"):
        cross_fit_judge(items, features[:-1], ratings)
    with pytest.raises(ValueError, match="cannot be split into n_folds=40 folds"):
        cross_fit_judge(items, features, ratings, n_folds=40)
    with pytest.raises(ValueError, match="every rated item needs features"):
        cross_fit_judge(items.iloc[2:], features[2:], ratings)


def test_crossppi_differences_equal_ppi_py_s_on_per_context_differences(design):
    items, features, ratings = design
    scores = cross_fit_judge(items, features, ratings, n_folds=3, seed=1)
    pairs = crossppi_paired_differences(scores, power_tuning=False)
    assert list(zip(pairs["system_a"], pairs["system_b"], strict=True)) == [("base", "gold")]
    row = pairs.iloc[0]
    base = scores.loc[scores["system"] == "base"].set_index("context_id")
    gold = scores.loc[scores["system"] == "gold"].set_index("context_id")
    difference = base[["label", "judge_score", "fold_score_0", "fold_score_1", "fold_score_2"]] - gold[
        ["label", "judge_score", "fold_score_0", "fold_score_1", "fold_score_2"]]
    rated = difference["label"].notna()
    folds = ["fold_score_0", "fold_score_1", "fold_score_2"]
    low, high = crossppi_mean_ci(difference.loc[rated, "label"].to_numpy(),
                                 difference.loc[rated, "judge_score"].to_numpy(),
                                 difference.loc[~rated, folds].to_numpy(), alpha=0.05)
    assert (row["crossppi_ci_low"], row["crossppi_ci_high"]) == pytest.approx(
        (float(np.squeeze(low)), float(np.squeeze(high))), abs=1e-12)
    assert row["human_diff"] == pytest.approx(difference.loc[rated, "label"].mean())
    assert row["n_human"] == N_RATED and row["p_adj"] == row["p_crossppi"]  # one pair: Holm changes nothing
    assert row["significant"] == (row["crossppi_ci_high"] < 0 or row["crossppi_ci_low"] > 0)
