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
from empeval.analysis.stats.bradley_terry import (
    davidson_identifiable,
    fit_bradley_terry,
    fit_davidson,
    identifiable,
    ranking,
)

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
    # Under Davidson's model a system that never loses but ties has a finite strength (nu is pinned by the pair
    # that won both ways); with no tie of its own it has none.
    assert np.isfinite(fit_davidson(wins, np.ones((3, 3)) - np.eye(3))[0]).all()
    only_others_tie = np.array([[0, 0, 0], [0, 0, 1], [0, 1, 0]])
    assert np.isnan(fit_davidson(wins, only_others_tie)[0]).all()


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


def _davidson_nll(wins, ties, theta, nu):
    """Davidson's negative log-likelihood, written from the model's three probabilities (module docstring)."""
    total = 0.0
    n = len(theta)
    for i in range(n):
        for j in range(n):
            d = np.exp(theta[i]) + np.exp(theta[j]) + nu * np.exp((theta[i] + theta[j]) / 2)
            total -= wins[i, j] * (theta[i] - np.log(d))
            if i < j:
                total -= ties[i, j] * (np.log(nu) + (theta[i] + theta[j]) / 2 - np.log(d))
    return total


def test_a_system_that_never_wins_but_ties_gets_a_finite_davidson_strength_when_other_pairs_pin_nu():
    """Davidson's likelihood counts ties: the third system never wins, but its ties with the other two bound its
    strength from below once nu is fixed by the first pair's wins both ways and ties. The fit is the maximum of
    the likelihood (scipy's Nelder-Mead from elsewhere finds no better point) and ranks it last."""
    from scipy import optimize

    wins = np.array([[0, 4, 3], [2, 0, 2], [0, 0, 0]], dtype=float)
    ties = np.array([[0, 2, 2], [2, 0, 1], [2, 1, 0]], dtype=float)
    assert not identifiable(wins) and davidson_identifiable(wins, ties)
    theta, nu = fit_davidson(wins, ties)
    assert np.isfinite(theta).all() and np.isfinite(nu) and nu > 0
    assert theta[2] == theta.min()
    best = _davidson_nll(wins, ties, theta, nu)
    other = optimize.minimize(lambda x: _davidson_nll(wins, ties, np.array([0.0, x[0], x[1]]), np.exp(x[2])),
                              x0=[1.0, -3.0, 1.0], method="Nelder-Mead",
                              options={"xatol": 1e-10, "fatol": 1e-12, "maxiter": 20_000})
    assert best <= other.fun + 1e-8


def test_two_systems_where_one_never_wins_but_ties_have_no_finite_davidson_estimate():
    """W = 5, L = 0, T = 3: the closed form theta_1 - theta_2 = log(W / L), nu = T / sqrt(W L) is infinite. Along
    the direction (gap +1, log nu +1/2) the likelihood keeps rising, so no maximum exists: the fit says NaN."""
    wins, ties = np.array([[0, 5], [0, 0]], dtype=float), np.array([[0, 3], [3, 0]], dtype=float)
    assert not davidson_identifiable(wins, ties)
    theta, nu = fit_davidson(wins, ties)
    assert np.isnan(theta).all() and np.isnan(nu)
    along = [_davidson_nll(wins, ties, np.array([t / 2, -t / 2]), np.exp(t / 2)) for t in (1.0, 4.0, 16.0)]
    assert along[0] > along[1] > along[2]


def _has_recession_direction(wins, ties) -> bool:
    """An independent statement of davidson_identifiable's condition, as a linear programme (scipy's linprog):
    is there a direction (d, e), d_0 = 0, not zero, with d_i - d_j >= 0 and >= 2e for each win of i over j and
    |d_i - d_j| <= 2e for each tie (e >= 0 when there are ties)?"""
    from scipy.optimize import linprog

    n = wins.shape[0]
    rows = []
    for i in range(n):
        for j in range(n):
            if wins[i, j] > 0:
                rows.append(np.eye(n + 1)[j] - np.eye(n + 1)[i])  # d_j - d_i <= 0
                rows.append(2 * np.eye(n + 1)[n] - np.eye(n + 1)[i] + np.eye(n + 1)[j])  # 2e - (d_i - d_j) <= 0
            if i != j and ties[i, j] > 0:
                rows.append(np.eye(n + 1)[i] - np.eye(n + 1)[j] - 2 * np.eye(n + 1)[n])  # d_i - d_j - 2e <= 0
    bounds = [(0, 0)] + [(-1, 1)] * (n - 1) + [(0, 1)]
    for k in range(1, n + 1):
        for sign in (1, -1):
            objective = np.zeros(n + 1)
            objective[k] = -sign
            found = linprog(objective, A_ub=np.array(rows), b_ub=np.zeros(len(rows)), bounds=bounds,
                            method="highs")
            if found.status == 0 and -found.fun > 1e-9:
                return True
    return False


@settings(max_examples=150, deadline=None)
@given(st.integers(2, 4).flatmap(lambda n: st.tuples(
    st.lists(st.integers(0, 2), min_size=n * n, max_size=n * n),
    st.lists(st.integers(0, 2), min_size=n * n, max_size=n * n))))
def test_davidsons_existence_condition_agrees_with_a_linear_programme(cells):
    wins_cells, tie_cells = cells
    n = int(round(len(wins_cells) ** 0.5))
    wins = np.array(wins_cells, dtype=float).reshape(n, n)
    ties = np.triu(np.array(tie_cells, dtype=float).reshape(n, n), k=1)
    ties = ties + ties.T
    np.fill_diagonal(wins, 0)
    if ties.sum() == 0:
        return  # no tie: Bradley-Terry's condition, tested above
    assert davidson_identifiable(wins, ties) == (not _has_recession_direction(wins, ties))
    theta, nu = fit_davidson(wins, ties)
    assert np.isfinite(theta).all() == davidson_identifiable(wins, ties)


def test_the_davidson_fit_takes_its_own_newton_path_not_scipys_fallback(monkeypatch):
    """_newton converges on ordinary data; the trust-region fallback (slower, and silent) is not needed: with it
    made to fail, the fits of a simulated study's counts still come out."""
    import empeval.analysis.stats.bradley_terry as bt

    def no_fallback(*args, **kwargs):
        raise AssertionError("scipy's fallback was used: Newton did not converge")

    monkeypatch.setattr(bt.optimize, "minimize", no_fallback)
    rng = np.random.default_rng(4)
    for _ in range(20):
        wins = rng.integers(1, 12, size=(4, 4)).astype(float)
        np.fill_diagonal(wins, 0)
        ties = np.triu(rng.integers(0, 6, size=(4, 4)), k=1).astype(float)
        ties = ties + ties.T
        theta, nu = bt.fit_davidson(wins, ties)
        assert np.isfinite(theta).all() and nu > 0
