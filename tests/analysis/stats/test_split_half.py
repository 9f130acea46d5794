"""Split-half reliability (analysis.stats.split_half): the Spearman-Brown prophecy at textbook points, halves that
agree perfectly or not at all, units with one judgment left out, the split itself (halves of floor and ceil of n,
drawn afresh per split) and the refusals."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from empeval.analysis.stats.split_half import spearman_brown, split_half


def test_split_half_leaves_out_units_with_one_judgment_and_is_undefined_below_three_responses():
    rows = [{"unit": 1, "judgment": "j1", "response": "r1", "value": 1.0}]
    result = split_half(pd.DataFrame(rows))
    assert (result["responses"], result["units"]) == (0, 0) and np.isnan(result["spearman"])
    with pytest.raises(ValueError, match="split_half needs column\\(s\\) value"):
        split_half(pd.DataFrame(rows).drop(columns="value"))


def test_spearman_brown_matches_the_prophecy_formula_at_known_points():
    """Spearman (1910) / Brown (1910): doubling a test of reliability 0.5 gives 2/3, 0.8 gives 8/9; tripling 0.25
    gives 0.5."""
    assert spearman_brown(0.5) == pytest.approx(2 / 3) and spearman_brown(0.8) == pytest.approx(8 / 9)
    assert spearman_brown(0.25, factor=3) == pytest.approx(0.5) and spearman_brown(0.0) == 0.0




def test_each_unit_is_split_into_halves_of_floor_and_ceil_of_its_judgments():
    """Three judgments of one response per unit, worth the unit's level plus 0, 3 or 6: one half holds one of them,
    the other two, so the halves' scores differ within a unit (no split gives two identical halves) while the
    levels, ten times larger, make them agree across units."""
    rows = [{"unit": u, "judgment": f"{u}-{j}", "response": u, "value": float(3 * j + 10 * (u % 7))}
            for u in range(60) for j in range(3)]
    result = split_half(pd.DataFrame(rows), n_splits=30, seed=1)
    assert (result["responses"], result["units"], result["judgments"], result["splits"]) == (60, 60, 180, 30)
    assert 0.8 < result["spearman"] < 1 and result["spearman_brown"] > result["spearman"]


def test_the_same_seed_gives_the_same_reliability_and_n_splits_must_be_positive():
    rng = np.random.default_rng(3)
    rows = [{"unit": u, "judgment": f"{u}-{j}", "response": u, "value": u / 10 + rng.normal()}
            for u in range(50) for j in range(4)]
    table = pd.DataFrame(rows)
    assert split_half(table, seed=5, n_splits=10) == split_half(table, seed=5, n_splits=10)
    with pytest.raises(ValueError, match="n_splits must be at least 1, got 0"):
        split_half(table, n_splits=0)
