"""Planning a pairwise study (analysis.stats.power's sign-test power and `empeval plan --pairwise`): the exact
formula against brute-force simulation and against enumeration of scipy's own test."""
from __future__ import annotations

import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from empeval.analysis.stats.power import (
    SIMULATION_CONTEXT_SHARE,
    context_outcome_probabilities,
    sign_test_contexts,
    sign_test_power,
    simulated_sign_test_power,
)


@pytest.mark.parametrize(("p_win", "tie_rate", "n", "k"), [(0.65, 0.2, 60, 3), (0.6, 0.3, 80, 1), (0.7, 0.1, 25, 5),
                                                          (0.55, 0.4, 150, 2)])
def test_the_exact_power_matches_a_simulation_of_the_per_context_sign_test(p_win, tie_rate, n, k):
    exact = sign_test_power(p_win=p_win, tie_rate=tie_rate, n_contexts=n, k=k)
    simulated = simulated_sign_test_power(p_win=p_win, tie_rate=tie_rate, n_contexts=n, k=k, replicates=2500,
                                          seed=n + k)
    se = (exact * (1 - exact) / 2500) ** 0.5
    assert abs(exact - simulated) < 4 * se + 1e-3, (exact, simulated)


@settings(max_examples=25, deadline=None)
@given(st.integers(1, 40), st.floats(0.5, 0.95))
def test_with_one_judgment_and_no_ties_the_power_is_the_binomial_tests_rejection_mass(n, p_win):
    """Enumerate scipy's two-sided binomtest at each outcome and add up the probability where it rejects."""
    expected = sum(stats.binom.pmf(x, n, p_win) for x in range(n + 1)
                   if stats.binomtest(x, n, 0.5).pvalue <= 0.05)
    assert sign_test_power(p_win=p_win, tie_rate=0.0, n_contexts=n, k=1) == pytest.approx(expected, abs=1e-9)


@settings(max_examples=25, deadline=None)
@given(st.integers(1, 120), st.floats(0.0, 0.8), st.integers(1, 5))
def test_without_a_difference_the_power_is_at_most_alpha(n, tie_rate, k):
    assert sign_test_power(p_win=0.5, tie_rate=tie_rate, n_contexts=n, k=k) <= 0.05 + 1e-12


def test_context_outcomes_for_two_judgments_match_hand_counts():
    """k = 2: won = q_w^2 + 2 q_w t, lost = q_l^2 + 2 q_l t, even = t^2 + 2 q_w q_l."""
    q_w, q_l, t = 0.8 * 0.6, 0.8 * 0.4, 0.2
    won, lost, even = context_outcome_probabilities(p_win=0.6, tie_rate=0.2, k=2)
    assert won == pytest.approx(q_w ** 2 + 2 * q_w * t)
    assert lost == pytest.approx(q_l ** 2 + 2 * q_l * t)
    assert even == pytest.approx(t ** 2 + 2 * q_w * q_l)


def test_the_contexts_needed_are_the_first_to_reach_the_power():
    needed = sign_test_contexts(p_win=0.65, tie_rate=0.2, k=3, power=0.8)
    assert sign_test_power(p_win=0.65, tie_rate=0.2, n_contexts=needed, k=3) >= 0.8
    assert all(sign_test_power(p_win=0.65, tie_rate=0.2, n_contexts=n, k=3) < 0.8 for n in range(1, needed))
    assert sign_test_contexts(p_win=0.65, tie_rate=0.2, k=1) > needed  # more judgments per context help


def test_bad_rates_are_refused_naming_them():
    with pytest.raises(ValueError, match="p_win"):
        sign_test_power(p_win=1.2, tie_rate=0.1, n_contexts=10, k=1)
    with pytest.raises(ValueError, match="tie_rate"):
        sign_test_power(p_win=0.6, tie_rate=1.0, n_contexts=10, k=1)
    with pytest.raises(ValueError, match="k "):
        context_outcome_probabilities(p_win=0.6, tie_rate=0.1, k=0)


def test_plan_pairwise_prints_power_and_the_contexts_each_k_needs():
    from empeval.cli import cli

    result = CliRunner().invoke(cli, ["plan", "--pairwise", "--p-win", "0.65", "--tie-rate", "0.2", "--ks", "1,3",
                                      "--contexts", "50,100", "--pairs", "2", "--reward", "1"])
    assert result.exit_code == 0, result.output
    share = SIMULATION_CONTEXT_SHARE  # the command's default
    power = sign_test_power(p_win=0.65, tie_rate=0.2, n_contexts=100, k=3, context_share=share)
    assert f"{power:.3f}" in result.output
    for k in (1, 3):
        needed = sign_test_contexts(p_win=0.65, tie_rate=0.2, k=k, context_share=share)
        assert f"k = {k}: {needed} contexts; {needed * 2 * k} judgments" in result.output
    assert "plot:" not in result.output
    independent = CliRunner().invoke(cli, ["plan", "--pairwise", "--context-share", "0", "--ks", "3"])
    assert f"k = 3: {sign_test_contexts(p_win=0.65, tie_rate=0.2, k=3)} contexts" in independent.output


@pytest.mark.parametrize(("option", "value"), [("--p-win", "1.5"), ("--tie-rate", "1"), ("--pairs", "0"),
                                               ("--context-share", "1")])
def test_plan_pairwise_refuses_bad_input_naming_the_option(option, value):
    from empeval.cli import cli

    result = CliRunner().invoke(cli, ["plan", "--pairwise", option, value])
    assert result.exit_code == 2 and option in result.output


def test_judgments_sharing_their_context_agree_as_a_bivariate_normal_says():
    """k = 2, no ties, share s: the two perceived differences are unit normals with mean z(p) and correlation
    s, so P(context won) = P(both > 0), an orthant probability of the bivariate normal (scipy)."""
    for share in (0.2, 0.5, 0.8):
        z = stats.norm.ppf(0.6)
        both = stats.multivariate_normal(mean=[0, 0], cov=[[1, share], [share, 1]])
        won, lost, _ = context_outcome_probabilities(p_win=0.6, tie_rate=0.0, k=2, context_share=share)
        assert won == pytest.approx(both.cdf([z, z]), abs=1e-6)
        assert lost == pytest.approx(both.cdf([-z, -z]), abs=1e-6)


@settings(max_examples=25, deadline=None)
@given(st.floats(0.05, 0.95), st.floats(0.0, 0.6), st.floats(0.0, 0.9))
def test_one_judgment_per_context_has_the_marginal_rates_whatever_the_share(p_win, tie_rate, share):
    won, lost, even = context_outcome_probabilities(p_win=p_win, tie_rate=tie_rate, k=1, context_share=share)
    assert (won, lost, even) == pytest.approx(((1 - tie_rate) * p_win, (1 - tie_rate) * (1 - p_win), tie_rate),
                                              abs=1e-6)


def test_with_a_shared_context_the_exact_power_matches_a_simulation_of_the_latent_model():
    for k, share, n in ((3, 0.24, 60), (5, 0.5, 40)):
        exact = sign_test_power(p_win=0.62, tie_rate=0.2, n_contexts=n, k=k, context_share=share)
        simulated = simulated_sign_test_power(p_win=0.62, tie_rate=0.2, n_contexts=n, k=k, context_share=share,
                                              replicates=2500, seed=k)
        se = (exact * (1 - exact) / 2500) ** 0.5
        assert abs(exact - simulated) < 4 * se + 1e-3, (k, share, exact, simulated)
    # The more a context's judgments share, the less its extra judgments are worth.
    powers = [sign_test_power(p_win=0.62, tie_rate=0.2, n_contexts=60, k=3, context_share=s) for s in (0, 0.3, 0.6)]
    assert powers[0] > powers[1] > powers[2]
