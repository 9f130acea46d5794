"""A two-phase active draw's anytime-valid intervals (analysis.stats.sequential.two_phase_interval): the burn-in's
sequence and phase 2's inverse-probability weighted one, each at alpha / 2, intersected. On seeded simulated studies
whose phase 2 favours the contexts with noisier labels, the intervals cover the study mean at every look across both
phases at least 1 - alpha of the time (up to Monte Carlo error), and narrow what the burn-in alone gives."""
from __future__ import annotations

import numpy as np
import pytest

from empeval.analysis.stats.sequential import confidence_sequence, ipw_ppi_confidence_sequence, two_phase_interval

ALPHA, N, P1, PHASE_TWO_BUDGET, WARM_UP = 0.05, 400, 0.1, 60.0, 10


def one_study(rng: np.random.Generator) -> tuple[bool, float, float, float]:
    """Whether some look after the warm-up missed the study mean, the last look's width with both phases and with
    the burn-in alone, and phase 2's last estimate of the study mean less the truth."""
    noisy = rng.random(N) < 0.2
    labels = rng.normal(np.where(noisy, 1.0, 0.2), np.where(noisy, 1.5, 0.3))  # phase 2 favours the higher ones
    truth = labels.mean()
    burnt = rng.random(N) < P1
    rest = np.flatnonzero(~burnt)
    weight = np.where(noisy[rest], 1.5, 0.3)
    q = np.clip(PHASE_TWO_BUDGET * weight / weight.sum(), 0.02, 1.0)
    drawn = rest[rng.random(rest.size) < q]
    q_drawn = q[np.searchsorted(rest, drawn)]
    order_one, order_two = rng.permutation(np.flatnonzero(burnt)), rng.permutation(drawn.size)
    first = confidence_sequence(labels[order_one], planned_n=P1 * N, alpha=ALPHA / 2, prior_variance=4.0)
    second = ipw_ppi_confidence_sequence(labels[drawn][order_two], np.zeros(drawn.size), q_drawn[order_two],
                                         np.zeros(rest.size), expected_rated=float(q.sum()),
                                         planned_n=float(q.sum()), alpha=ALPHA / 2, prior_variance=4.0)
    looks = [(row.estimate, row.low, row.high) for row in first.itertuples()][WARM_UP:]
    last_one = tuple(first.iloc[-1][["estimate", "low", "high"]])
    for row in second.itertuples():
        looks.append(two_phase_interval(last_one, (row.estimate, row.low, row.high),
                                        known_sum=float(labels[burnt].sum()), n_total=N, n_rest=rest.size))
    missed = any(not low <= truth <= high for _, low, high in looks)
    error = (labels[burnt].sum() + rest.size * second.iloc[-1]["estimate"]) / N - truth
    return missed, looks[-1][2] - looks[-1][1], last_one[2] - last_one[1], error


def test_two_phase_intervals_cover_the_study_mean_at_every_look_and_narrow_the_burn_ins():
    rng = np.random.default_rng(2812)
    runs = [one_study(rng) for _ in range(300)]
    missed = np.mean([m for m, *_ in runs])
    # time-uniform: at most alpha + 3 Monte Carlo SEs over 300 studies (0.088)
    assert missed <= ALPHA + 3 * np.sqrt(ALPHA * (1 - ALPHA) / len(runs)), missed
    ratio = np.mean([both / alone for _, both, alone, _ in runs])
    assert ratio < 0.8, ratio
    # phase 2 is weighted by its probabilities: its estimate is unbiased (the plain mean of its labels is not: it
    # favours the contexts with the larger labels)
    errors = np.array([error for *_, error in runs])
    assert abs(errors.mean()) < 3 * errors.std() / np.sqrt(errors.size), errors.mean()


def test_the_interval_is_the_burn_ins_until_phase_two_has_a_label_and_checks_its_counts():
    assert two_phase_interval((0.1, -0.2, 0.4), None, known_sum=1.0, n_total=10, n_rest=8) == (0.1, -0.2, 0.4)
    with pytest.raises(ValueError, match="need 0 < n_rest <= n_total"):
        two_phase_interval((0.1, -0.2, 0.4), (0.0, -1.0, 1.0), known_sum=1.0, n_total=10, n_rest=0)
