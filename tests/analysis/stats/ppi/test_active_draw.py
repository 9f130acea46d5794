"""The draw's probabilities (analysis.stats.ppi.active_draw): they sum to the expected budget, stay within their
bounds and follow the square root of the uncertainty; bad inputs are refused with a reason; the uncertainty comes
from two judges' disagreement or a learned judge's folds, and is uniform (said so) without either. The estimators
that weight by these probabilities are tested in test_active.py."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from empeval.analysis.stats.ppi.active_draw import context_uncertainty, sampling_probabilities


def test_probabilities_sum_to_the_budget_stay_in_bounds_and_follow_the_square_root():
    rng = np.random.default_rng(0)
    u = rng.exponential(1.0, 300) ** 3
    for tau, pi_min in ((0.5, 0.0), (0.0, 0.05), (0.2, 0.1), (1.0, 0.0)):
        pi = sampling_probabilities(u, 60, tau=tau, pi_min=pi_min)
        assert pi.sum() == pytest.approx(60)
        assert pi.max() <= 1 + 1e-12 and pi.min() >= tau * 60 / 300 + (1 - tau) * pi_min - 1e-12
    pi = sampling_probabilities(u, 60, tau=0.0)
    inside = (pi > 1e-9) & (pi < 1 - 1e-9)
    assert np.allclose(pi[inside] / np.sqrt(u[inside]), (pi[inside] / np.sqrt(u[inside]))[0])
    assert np.allclose(sampling_probabilities(u, 60, tau=1.0), 0.2)


@pytest.mark.parametrize("call, message", [
    (lambda: sampling_probabilities([1, 2, 3], 3), "strictly between 0 and the 3 contexts"),
    (lambda: sampling_probabilities([1, -2, 3], 1), "finite and non-negative"),
    (lambda: sampling_probabilities([1, 2, 3], 1, tau=1.5), "tau"),
    (lambda: sampling_probabilities([1, 2, 3], 1, pi_min=0.5), "pi_min"),
])
def test_bad_probabilities_inputs_are_refused_with_a_reason(call, message):
    with pytest.raises(ValueError, match=message):
        call()


def test_uncertainty_from_two_judges_and_from_a_learned_judges_folds():
    rows = []
    for context in range(1, 41):
        for judge, noise in (("a", 0.0), ("b", 0.1 if context <= 20 else 2.0)):
            rows.append({"judge": judge, "context_id": context, "system": "gold", "criterion": "empathy",
                         "judge_score": 3 + np.sin(context) + noise * np.cos(7 * context)})
    table = context_uncertainty(pd.DataFrame(rows))
    assert table.attrs["informative"] and "judges a, b" in table.attrs["basis"]
    low, high = table["uncertainty"][:20].mean(), table["uncertainty"][20:].mean()
    assert high > 4 * low
    learned = pd.DataFrame({"context_id": [1, 2, 3], "system": "gold", "criterion": "empathy",
                            "judge_score": [3.0, 4.0, 5.0], "fold_score_0": [3.0, 3.0, 4.0],
                            "fold_score_1": [3.0, 5.0, 6.0]})
    table = context_uncertainty(learned)
    assert "learned judge" in table.attrs["basis"] and table["uncertainty"].tolist() == pytest.approx([0, 2, 2])
    alone = context_uncertainty(learned.drop(columns=["fold_score_0", "fold_score_1"]))
    assert not alone.attrs["informative"] and "uniform" in alone.attrs["basis"]
