"""What analysis.stats.bradley_terry promises beyond the closed forms of test_bradley_terry.py: identifiability on
long cycles and single systems, starting points that change nothing, Davidson without ties, the ranking's
counts by hand, its columns, and its bootstrap options."""
from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest

from empeval.analysis.kinds.pairwise.schema import judgment_rows
from empeval.analysis.stats.bradley_terry import fit_bradley_terry, fit_davidson, identifiable, ranking

RANKING_COLUMNS = ["criterion", "system", "rank", "strength", "ci_low", "ci_high", "wins", "losses", "ties", "model",
                   "tie_parameter", "resamples"]


def _cycle(n: int) -> np.ndarray:
    wins = np.zeros((n, n))
    for i in range(n):
        wins[i, (i + 1) % n] = 1.0
    return wins


@pytest.mark.parametrize("n", [2, 3, 5, 7, 8, 9, 16, 17])
def test_a_single_cycle_through_every_system_is_identifiable_and_a_broken_one_is_not(n):
    """i beats i + 1 once, the last beats the first: every system reaches every other, over up to n - 1 links."""
    wins = _cycle(n)
    assert identifiable(wins)
    wins[n - 1, 0] = 0.0
    assert not identifiable(wins)


def test_one_system_or_none_is_not_identifiable():
    assert not identifiable(np.zeros((1, 1)))
    assert not identifiable(np.zeros((0, 0)))
    assert identifiable(np.array([[0, 0.5], [0.25, 0]]))  # fractional bootstrap counts are wins too


def test_a_starting_point_does_not_change_the_bradley_terry_estimate():
    wins = np.array([[0, 7, 3], [2, 0, 5], [4, 1, 0]], dtype=float)
    plain = fit_bradley_terry(wins)
    assert fit_bradley_terry(wins, start=np.array([2.0, -1.0, 0.5])) == pytest.approx(plain, abs=1e-7)
    assert fit_bradley_terry(wins, start=np.array([np.nan, 0.0, 0.0])) == pytest.approx(plain, abs=1e-7)
    assert plain.sum() == pytest.approx(0.0, abs=1e-12)


def test_davidson_without_ties_is_bradley_terry_with_no_tie_parameter():
    wins = np.array([[0, 7, 3], [2, 0, 5], [4, 1, 0]], dtype=float)
    theta, nu = fit_davidson(wins, np.zeros((3, 3)))
    assert nu == 0.0 and theta == pytest.approx(fit_bradley_terry(wins), abs=1e-9)


def test_a_starting_point_does_not_change_the_davidson_estimate():
    wins = np.array([[0, 7, 3], [2, 0, 5], [4, 1, 0]], dtype=float)
    ties = np.array([[0, 2, 1], [2, 0, 3], [1, 3, 0]], dtype=float)
    theta, nu = fit_davidson(wins, ties)
    assert theta.sum() == pytest.approx(0.0, abs=1e-12) and nu > 0
    for start in [(np.array([1.0, -2.0, 0.3]), 2.0), (np.array([0.0, 0.0, 0.0]), 0.0),
                  (np.array([np.nan, 0.0, 0.0]), 1.0), (np.array([5.0, -5.0, 0.0]), 0.01)]:
        again, nu_again = fit_davidson(wins, ties, start=start)
        assert again == pytest.approx(theta, abs=1e-7) and nu_again == pytest.approx(nu, rel=1e-7)


def test_davidson_reads_ties_from_the_upper_triangle():
    wins = np.array([[0, 6], [2, 0]], dtype=float)
    theta, nu = fit_davidson(wins, np.array([[0, 4], [0, 0]], dtype=float))
    assert nu == pytest.approx(4 / np.sqrt(12), rel=1e-6)


def _judgments() -> pd.DataFrame:
    """gold beats moel 3-1 with 2 ties; moel beats base 2-1; base and gold 2-2; one tie of
    moel and base. Hand counts: gold 5 wins, 3 losses, 2 ties; moel 3, 4, 3; base 3, 4, 1."""
    specs = ([(c, "gold", "moel", "left") for c in range(3)] + [(3, "gold", "moel", "right")]
             + [(c, "moel", "gold", "tie") for c in (4, 5)]
             + [(c, "moel", "base", "left") for c in (6, 7)] + [(8, "moel", "base", "right")]
             + [(9, "base", "moel", "tie")]
             + [(c, "base", "gold", "right") for c in (10, 11)] + [(12, "base", "gold", "left")]
             + [(13, "base", "gold", "left")])
    controls = judgment_rows([(14, "control-generic", "gold", "left")], is_control=True, control_target="empathy")
    return pd.DataFrame([row for i, spec in enumerate(specs) for row in judgment_rows([spec], annotator=f"a{i}")]
                        + controls)


def test_the_ranking_counts_each_systems_judgments_by_hand_and_leaves_controls_out():
    ranked = ranking(_judgments(), n_boot=40)
    assert list(ranked.columns) == RANKING_COLUMNS
    counts = ranked.set_index("system")[["wins", "losses", "ties"]]
    assert counts.loc["gold"].tolist() == [5, 3, 2]
    assert counts.loc["moel"].tolist() == [3, 4, 3]
    assert counts.loc["base"].tolist() == [3, 4, 1]
    assert ranked["system"].tolist() == ["gold", "moel", "base"] and ranked["rank"].tolist() == [1, 2, 3]
    theta, nu = fit_davidson(*_matrices())
    by_system = ranked.set_index("system")
    assert by_system.loc[["base", "gold", "moel"], "strength"].to_numpy() == pytest.approx(theta, abs=1e-9)
    assert ranked["tie_parameter"].to_numpy() == pytest.approx([nu] * 3) and (ranked["model"] == "davidson").all()


def _matrices() -> tuple[np.ndarray, np.ndarray]:
    # systems in sorted order: base, gold, moel
    wins = np.array([[0, 2, 1], [2, 0, 3], [2, 1, 0]], dtype=float)
    ties = np.array([[0, 0, 1], [0, 0, 2], [1, 2, 0]], dtype=float)
    return wins, ties


def test_bradley_terry_on_request_drops_the_ties():
    ranked = ranking(_judgments(), model="bradley_terry", n_boot=20).set_index("system")
    wins, _ = _matrices()
    assert ranked.loc[["base", "gold", "moel"], "strength"].to_numpy() == pytest.approx(fit_bradley_terry(wins),
                                                                                        abs=1e-7)
    assert ranked["tie_parameter"].isna().all() and (ranked["model"] == "bradley_terry").all()
    assert ranked.loc["gold", "ties"] == 2  # the counts still show the ties


def test_davidson_on_request_without_ties_says_davidson_with_a_zero_tie_parameter():
    rows = [row for i, spec in enumerate([(0, "gold", "moel", "left"), (1, "gold", "moel", "right"),
                                          (2, "gold", "moel", "left")])
            for row in judgment_rows([spec], annotator=f"a{i}")]
    ranked = ranking(pd.DataFrame(rows), model="davidson", n_boot=10)
    assert (ranked["model"] == "davidson").all() and (ranked["tie_parameter"] == 0.0).all()
    assert ranked.set_index("system").loc["gold", "strength"] == pytest.approx(np.log(2) / 2, abs=1e-7)


def test_the_bootstrap_follows_its_level_seed_and_count():
    judgments = _judgments()
    wide = ranking(judgments, n_boot=60, seed=1).set_index("system")
    narrow = ranking(judgments, n_boot=60, seed=1, ci_level=0.5).set_index("system")
    assert (narrow["ci_low"] >= wide["ci_low"]).all() and (narrow["ci_high"] <= wide["ci_high"]).all()
    assert ((narrow["ci_high"] - narrow["ci_low"]) < (wide["ci_high"] - wide["ci_low"])).all()
    again = ranking(judgments, n_boot=60, seed=1).set_index("system")
    pd.testing.assert_frame_equal(wide, again)
    other = ranking(judgments, n_boot=60, seed=2).set_index("system")
    assert not np.allclose(other["ci_low"], wide["ci_low"])
    assert (wide["resamples"] <= 60).all() and (wide["resamples"] > 0).all()


def test_an_unrankable_system_has_no_rank_and_the_ranking_of_no_judgments_has_its_columns():
    rows = judgment_rows([(c, "gold", "moel", "left") for c in range(3)])
    ranked = ranking(pd.DataFrame(rows), n_boot=10)
    assert ranked["rank"].isna().all() and ranked["resamples"].tolist() == [0, 0]
    assert ranked["rank"].dtype == "Int64"
    empty = ranking(pd.DataFrame(judgment_rows([(1, "control-generic", "gold", "left")], is_control=True,
                                               control_target="empathy")), n_boot=10)
    assert empty.empty and list(empty.columns) == RANKING_COLUMNS


def test_when_newton_does_not_converge_the_trust_region_finds_the_same_davidson_estimate(monkeypatch):
    import empeval.analysis.stats.bradley_terry as bradley_terry

    wins = np.array([[0, 7, 3], [2, 0, 5], [4, 1, 0]], dtype=float)
    ties = np.array([[0, 2, 1], [2, 0, 3], [1, 3, 0]], dtype=float)
    theta, nu = fit_davidson(wins, ties)
    monkeypatch.setattr(bradley_terry, "_newton", lambda *args, **kwargs: None)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the trust region uses the Hessian it is given: nothing to warn about
        fallback, nu_fallback = bradley_terry.fit_davidson(wins, ties)
    assert fallback == pytest.approx(theta, abs=1e-8) and nu_fallback == pytest.approx(nu, rel=1e-8)


def test_the_criteria_come_in_sorted_order_whatever_the_order_of_the_rows():
    specs = [(0, "gold", "moel", "left"), (1, "moel", "gold", "left"), (2, "gold", "moel", "tie")]
    rows = [row for i, spec in enumerate(specs)
            for row in judgment_rows([spec], annotator=f"a{i}", criteria=("fluency", "empathy"))]
    assert ranking(pd.DataFrame(rows), n_boot=10)["criterion"].tolist() == ["empathy"] * 2 + ["fluency"] * 2
