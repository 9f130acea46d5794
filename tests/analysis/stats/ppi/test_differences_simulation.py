"""Seeded simulations of PPI++ with a judge of differences (analysis.stats.ppi.differences through
analysis.simulate.judges' fast path): 95% intervals cover the true differences, a judge whose differences
correlate 0.7 with the people's narrows them clearly more than a per-item judge of the same quality differenced,
and a judge that knows nothing does not widen them (lambda tuned to about 0).

A few hundred studies per check, against bounds such n can show; benchmarks/paid_ratings.py runs thousands."""

from __future__ import annotations

import numpy as np

from empeval.analysis.simulate.judges import (
    GOOD_JUDGE,
    SimulatedDifferenceJudge,
    analyse_difference_arrays,
    analyse_judged_arrays,
    simulate_judged_study,
)

DESIGN = {"n_contexts": 300, "human_share": 0.2}


def run(difference_judge: SimulatedDifferenceJudge, seeds: range) -> dict[str, np.ndarray]:
    found: dict[str, list] = {"covered": [], "width_ratio": [], "item_width_ratio": [], "lam": [], "correlation": []}
    for seed in seeds:
        study = simulate_judged_study(judge=GOOD_JUDGE, difference_judge=difference_judge, seed=seed, **DESIGN)
        truth = dict(zip(study.arrays["systems"], study.arrays["true_means"], strict=True))
        _, item_pairs = analyse_judged_arrays(study.arrays)
        for row, item_row in zip(analyse_difference_arrays(study.arrays), item_pairs, strict=True):
            found["covered"].append(row["ppi_ci_low"] <= truth[row["system_a"]] - truth[row["system_b"]]
                                    <= row["ppi_ci_high"])
            found["width_ratio"].append(row["width_ratio"])
            found["item_width_ratio"].append(item_row["width_ratio"])
            found["lam"].append(row["lam"])
            found["correlation"].append(row["correlation"])
    return {key: np.asarray(value, dtype=float) for key, value in found.items()}


def test_intervals_cover_the_true_differences():
    for judge, seeds in ((SimulatedDifferenceJudge("pairs", correlation=0.7, scale=0.5), range(150)),
                         (SimulatedDifferenceJudge("biased", correlation=0.5, system_bias={"baseline": 0.5}),
                          range(150, 250))):
        found = run(judge, seeds)
        assert found["covered"].mean() >= 0.93, (judge.name, found["covered"].mean())


def test_a_judge_of_differences_narrows_more_than_item_scores_differenced():
    found = run(SimulatedDifferenceJudge("pairs", correlation=0.7), range(500, 570))
    # Measured: difference correlation 0.70 with the people's differences, width ratio 0.79 (38% fewer human
    # ratings for the same width); GOOD_JUDGE's item scores (correlation about 0.7 with the item labels)
    # differenced: 0.85 (28% fewer).
    assert abs(found["correlation"].mean() - 0.7) < 0.03
    assert found["width_ratio"].mean() < found["item_width_ratio"].mean() - 0.04
    assert 1 - found["width_ratio"].mean() ** 2 > 0.33


def test_a_judge_that_knows_nothing_does_not_widen_the_interval():
    found = run(SimulatedDifferenceJudge("blind", correlation=0.0, scale=3.0), range(700, 770))
    assert np.median(found["lam"]) < 0.05
    assert found["width_ratio"].mean() < 1.01
    assert np.quantile(found["width_ratio"], 0.95) < 1.03
    assert found["covered"].mean() >= 0.90  # 210 intervals: a Monte-Carlo SE of 0.015 (coverage is checked above)
