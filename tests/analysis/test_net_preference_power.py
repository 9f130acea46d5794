"""The model-assisted A/B plan (analysis.stats.power.net_preference_contexts) against simulated studies: A/B labels
drawn as the sign-test plan draws its judgments (a context's k judgments share part of their variance), a judge of
differences with the planned correlation to a context's net preference, and the fixed-n PPI++ interval of the A/B
report (analysis.stats.ppi.differences.ppi_difference_interval); at the planned contexts the simulated power is the
planned power, human-only and at human shares 0.5 and 0.25."""
from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from empeval.analysis.stats.power import net_preference_contexts, net_preference_moments
from empeval.analysis.stats.ppi.differences import ppi_difference_interval

P_WIN, TIE_RATE, K, CONTEXT_SHARE, RHO = 0.65, 0.2, 3, 0.24, 0.7


def net_preferences(rng, n: int) -> np.ndarray:
    """n contexts' net preferences for the better system: (wins - losses) / k of k Thurstone judgments."""
    q_win, q_loss = (1 - TIE_RATE) * P_WIN, (1 - TIE_RATE) * (1 - P_WIN)
    z_win, z_loss = stats.norm.ppf(q_win), stats.norm.ppf(q_loss)
    delta, band = (z_win - z_loss) / 2, -(z_win + z_loss) / 2
    perceived = (rng.normal(delta, np.sqrt(CONTEXT_SHARE), size=(n, 1))
                 + rng.normal(0, np.sqrt(1 - CONTEXT_SHARE), size=(n, K)))
    return ((perceived > band).sum(axis=1) - (perceived < -band).sum(axis=1)) / K


def test_the_moments_are_those_of_simulated_labels():
    mean, sd = net_preference_moments(p_win=P_WIN, tie_rate=TIE_RATE, k=K, context_share=CONTEXT_SHARE)
    labels = net_preferences(np.random.default_rng(1), 400_000)
    assert abs(labels.mean() - mean) < 0.005 and abs(labels.std() - sd) < 0.005


@pytest.mark.parametrize("human_share", [1.0, 0.5, 0.25])
def test_the_planned_contexts_reach_the_planned_power(human_share):
    mean, sd = net_preference_moments(p_win=P_WIN, tie_rate=TIE_RATE, k=K, context_share=CONTEXT_SHARE)
    rho = RHO if human_share < 1 else 0.0
    n = net_preference_contexts(p_win=P_WIN, tie_rate=TIE_RATE, k=K, context_share=CONTEXT_SHARE,
                                judge_correlation=rho, human_share=human_share)
    judge_only = round(n * (1 - human_share) / human_share)
    rng = np.random.default_rng(7)
    replications, rejected = 500, 0
    for _ in range(replications):
        labels = net_preferences(rng, n + judge_only)
        if judge_only == 0:
            rejected += abs(labels.mean()) / (labels.std(ddof=1) / np.sqrt(n)) > stats.norm.ppf(0.975)
            continue
        judge = rho * (labels - mean) / sd + np.sqrt(1 - rho**2) * rng.normal(size=labels.size)
        result = ppi_difference_interval(labels[:n], judge[:n], judge[n:])
        rejected += result["ppi_ci_low"] > 0 or result["ppi_ci_high"] < 0
    assert abs(rejected / replications - 0.8) < 0.06  # two Monte-Carlo SE are 0.036
