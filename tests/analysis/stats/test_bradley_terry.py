"""Bradley-Terry and Davidson rankings (analysis.stats.bradley_terry) against values derived without the library:
closed forms for two systems, and the likelihood equations for more."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from empeval.analysis.kinds.pairwise.schema import judgment_rows
from empeval.analysis.simulate.pairwise import simulate_pairwise_study
from empeval.analysis.stats.bradley_terry import fit_bradley_terry, fit_davidson, identifiable, ranking

counts = st.integers(1, 60)


@settings(max_examples=40, deadline=None)
@given(counts, counts)
def test_two_system_bradley_terry_is_the_log_odds_of_wins(wins, losses):
    """The likelihood W log p + L log(1 - p) with p = pi_1 / (pi_1 + pi_2) is maximal at p = W / (W + L), so
    log(pi_1 / pi_2) = log(W / L)."""
    theta = fit_bradley_terry(np.array([[0, wins], [losses, 0]]))
    assert theta[0] - theta[1] == pytest.approx(np.log(wins / losses), abs=1e-7)
    assert theta.sum() == pytest.approx(0.0, abs=1e-9)


@settings(max_examples=40, deadline=None)
@given(counts, counts, counts)
def test_two_system_davidson_matches_its_closed_form(wins, losses, ties):
    """Davidson (1970) for two systems: with x = sqrt(pi_1 / pi_2),
    P(win) = x / (x + 1/x + nu), P(loss) = (1/x) / (...), P(tie) = nu / (...).
    Two free parameters (x, nu) for a three-cell multinomial: the model is saturated, so the MLE reproduces
    the observed shares, W : L : T = x : 1/x : nu. From W / L = x^2: theta_1 - theta_2 = log x^2 = log(W / L).
    From T / W = nu / x: nu = T x / W = T sqrt(W / L) / W = T / sqrt(W L)."""
    theta, nu = fit_davidson(np.array([[0, wins], [losses, 0]]), np.array([[0, ties], [ties, 0]]))
    assert theta[0] - theta[1] == pytest.approx(np.log(wins / losses), abs=1e-6)
    assert nu == pytest.approx(ties / np.sqrt(wins * losses), rel=1e-6)


def _random_tournament(seed: int, n: int = 4) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    wins = rng.integers(1, 30, (n, n)).astype(float)
    np.fill_diagonal(wins, 0)
    ties = np.triu(rng.integers(0, 15, (n, n)), 1).astype(float)
    return wins, ties + ties.T


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_bradley_terry_with_more_systems_solves_zermelos_likelihood_equations(seed):
    """At the MLE every system's expected wins equal its observed wins (Zermelo 1929):
    sum_j n_ij pi_i / (pi_i + pi_j) = W_i."""
    wins, _ = _random_tournament(seed)
    pi = np.exp(fit_bradley_terry(wins))
    games = wins + wins.T
    expected = (games * pi[:, None] / (pi[:, None] + pi[None, :])).sum(axis=1)
    assert expected == pytest.approx(wins.sum(axis=1), rel=1e-6)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_davidson_with_more_systems_solves_its_likelihood_equations(seed):
    """Davidson's score equations: W_i + T_i / 2 = sum_j n_ij (P(i wins) + P(tie) / 2) for every i, and the
    observed ties equal the expected ties."""
    wins, ties = _random_tournament(seed)
    theta, nu = fit_davidson(wins, ties)
    pi = np.exp(theta)
    root = np.sqrt(pi[:, None] * pi[None, :])
    denominator = pi[:, None] + pi[None, :] + nu * root
    games = wins + wins.T + ties
    p_win, p_tie = pi[:, None] / denominator, nu * root / denominator
    np.fill_diagonal(p_tie, 0)
    np.fill_diagonal(p_win, 0)
    assert (games * (p_win + p_tie / 2)).sum(axis=1) == pytest.approx(wins.sum(axis=1) + ties.sum(axis=1) / 2,
                                                                      rel=1e-6)
    assert (games * p_tie).sum() / 2 == pytest.approx(ties.sum() / 2, rel=1e-6)


def test_a_system_that_never_loses_has_no_finite_strength():
    wins = np.array([[0, 5, 3], [0, 0, 2], [0, 1, 0]])
    assert not identifiable(wins)
    assert np.isnan(fit_bradley_terry(wins)).all()
    assert np.isnan(fit_davidson(wins, np.ones((3, 3)) - np.eye(3))[0]).all()


def test_the_ranking_recovers_the_planted_order_with_intervals_around_the_estimates():
    study = simulate_pairwise_study(n_contexts=40, k=2, criteria=("empathy", "fluency"), seed=4)
    ranked = ranking(study.judgments, n_boot=200)
    for criterion, part in ranked.groupby("criterion"):
        assert part["system"].tolist() == study.true_ranking(str(criterion))
        assert part["rank"].tolist() == [1, 2, 3]
        assert ((part["ci_low"] <= part["strength"]) & (part["strength"] <= part["ci_high"])).all()
        assert part["strength"].sum() == pytest.approx(0.0, abs=1e-9)
        assert (part["model"] == "davidson").all() and (part["tie_parameter"] > 0).all()
        assert (part["resamples"] == 200).all()


def test_without_ties_or_on_request_the_ranking_is_plain_bradley_terry():
    specs = [(c, "gold", "moel", "left" if c % 3 else "right") for c in range(12)]
    specs += [(c, "moel", "base", "left" if c % 4 else "right") for c in range(12)]
    specs += [(c, "gold", "base", "left" if c % 5 else "right") for c in range(12)]
    rows = [row for i, spec in enumerate(specs) for row in judgment_rows([spec], annotator=f"a{i}")]
    ranked = ranking(pd.DataFrame(rows), n_boot=50)
    assert (ranked["model"] == "bradley_terry").all() and ranked["tie_parameter"].isna().all()
    assert ranked["system"].tolist() == ["gold", "moel", "base"]
    study = simulate_pairwise_study(n_contexts=10, k=1, criteria=("empathy",), seed=1)
    assert set(ranking(study.judgments, model="bradley_terry", n_boot=20)["model"]) == {"bradley_terry"}
    with pytest.raises(ValueError, match="model must be one of"):
        ranking(study.judgments, model="elo")


def test_an_unrankable_criterion_has_no_ranks():
    rows = judgment_rows([(c, "gold", "moel", "left") for c in range(4)] + [(9, "moel", "base", "left")])
    ranked = ranking(pd.DataFrame(rows), n_boot=20)
    assert ranked["strength"].isna().all() and ranked["rank"].isna().all()


@settings(max_examples=60, deadline=None)
@given(st.integers(2, 7).flatmap(lambda n: st.lists(st.booleans(), min_size=n * n, max_size=n * n)
                                 .map(lambda cells: np.array(cells).reshape(n, n))))
def test_identifiability_is_strong_connectivity_of_the_wins_graph(beaten):
    from scipy.sparse.csgraph import connected_components

    wins = beaten.astype(float)
    np.fill_diagonal(wins, 0)
    components, _ = connected_components(wins > 0, directed=True, connection="strong")
    assert identifiable(wins) == (components == 1)
