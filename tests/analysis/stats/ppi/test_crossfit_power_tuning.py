"""Power-tuned cross-PPI (analysis.stats.ppi.crossfit): a learned judge that knows nothing no longer widens the
interval beyond the human-only one (it did at full weight: the walkthrough's effective n of 18-21 against 24
human-rated contexts), a judge that tracks the labels still narrows it, the tuned intervals cover the truth at
the nominal rate, and the judged report names any estimate whose model-assisted interval is wider."""
from __future__ import annotations

import numpy as np
import pandas as pd

from empeval.analysis.report.judged import JudgedTables, wider_than_human_only
from empeval.analysis.stats.ppi.crossfit import _crossppi

N_HUMAN, N_UNRATED, K = 24, 200, 5


def _sample(rng, signal: float):
    """Labels of N_HUMAN rated contexts and a K-fold judge's scores on them and on N_UNRATED others; the judge
    tracks the contexts' quality with weight `signal` (0: knows nothing)."""
    quality = rng.normal(3.5, 0.6, N_HUMAN + N_UNRATED)
    labels = quality[:N_HUMAN] + rng.normal(0, 0.4, N_HUMAN)
    scores = signal * quality[:, None] + (1 - signal) * 3.5 + rng.normal(0, 0.5, (N_HUMAN + N_UNRATED, K))
    return labels, scores[:N_HUMAN, 0], scores[N_HUMAN:], 3.5


def test_a_judge_that_knows_nothing_gets_no_weight_and_no_wider_interval():
    ratios_tuned, ratios_full = [], []
    for seed in range(40):
        y, f, f_unrated, _ = _sample(np.random.default_rng(seed), signal=0.0)
        tuned, full = _crossppi(y, f, f_unrated, 0.95), _crossppi(y, f, f_unrated, 0.95, tuned=False)
        ratios_tuned.append(tuned["width_ratio"])
        ratios_full.append(full["width_ratio"])
        assert full["lam"] == 1.0
    assert np.median(ratios_full) > 1.1  # full weight on noise: wider than human-only, as the walkthrough saw
    assert np.median(ratios_tuned) < 1.02 and max(ratios_tuned) < 1.1


def test_a_judge_that_tracks_the_labels_still_narrows_the_interval():
    results = [_crossppi(*_sample(np.random.default_rng(seed), signal=1.0)[:3], 0.95) for seed in range(40)]
    assert np.median([r["lam"] for r in results]) > 0.4
    assert np.median([r["width_ratio"] for r in results]) < 0.9


def test_tuned_intervals_cover_the_mean_at_the_nominal_rate():
    covered = 0
    reps = 600
    for seed in range(reps):
        y, f, f_unrated, truth = _sample(np.random.default_rng(1000 + seed), signal=0.7)
        result = _crossppi(y, f, f_unrated, 0.95)
        covered += result["crossppi_ci_low"] <= truth <= result["crossppi_ci_high"]
    # 0.95 less three Monte-Carlo SEs (n = 24 per study: the CLT interval runs a little short at that size)
    assert covered / reps >= 0.95 - 3 * np.sqrt(0.95 * 0.05 / reps) - 0.02


def test_the_report_names_the_estimates_whose_model_assisted_interval_is_wider():
    means = pd.DataFrame({"criterion": ["empathy", "empathy"], "system": ["gold", "moel"],
                          "width_ratio": [0.8, 1.2]})
    pairs = pd.DataFrame({"criterion": ["empathy"], "system_a": ["gold"], "system_b": ["moel"],
                          "width_ratio": [1.05]})
    tables = JudgedTables(judge="learned", version="v", estimator="crossppi", means=means, pairs=pairs,
                          agreement=pd.DataFrame(), calibration=pd.DataFrame(), failures=pd.DataFrame(), n_dropped=0,
                          allow_missing=False, criteria=["empathy"], not_judged=[])
    sentence = wider_than_human_only(tables)
    assert "empathy moel" in sentence and "empathy gold − moel" in sentence and "empathy gold," not in sentence
    assert "report the human-only estimate" in sentence
    assert wider_than_human_only(JudgedTables(**{**tables.__dict__, "means": means.iloc[:1], "pairs": None})) == ""
