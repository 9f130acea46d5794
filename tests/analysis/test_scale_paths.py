"""The report's large-study code paths give what the plain ones give: the sort-free rank-biserial bootstrap, halo
and consensus without a loop per annotator (block-drawn weights and blocked weighted sums: stats/test_bootstrap.py)."""
from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from empeval.analysis.kinds.likert import quality
from empeval.analysis.stats import significance as compare


def _rank_biserial_of_each_resample(d: np.ndarray, drawn: np.ndarray) -> np.ndarray:
    """Rank every resample with scipy, zeros dropped: the definition the sort-free version must meet."""
    out = []
    for row in d[drawn]:
        nonzero = row[row != 0]
        ranks = stats.rankdata(np.abs(nonzero))
        total = ranks.sum()
        out.append((ranks[nonzero > 0].sum() - ranks[nonzero < 0].sum()) / total if total else np.nan)
    return np.array(out)


@pytest.mark.parametrize("block", [1, 7, 2**22], ids=["one-draw-blocks", "small-blocks", "one-block"])
def test_sort_free_rank_biserial_bootstrap_equals_ranking_every_resample(monkeypatch, block):
    monkeypatch.setattr(compare, "_BOOT_BLOCK", block)
    # Item-mean differences on a third-point grid: many ties and zeros, as in a real study.
    d = np.round(np.random.default_rng(1).integers(-5, 6, 23) / 3, 9)
    d[:3] = 0.0
    fast = compare._bootstrap_rank_biserial(d, n_boot=60, rng=np.random.default_rng(9))
    drawn = np.random.default_rng(9).integers(0, d.size, size=(60, d.size))
    np.testing.assert_allclose(fast, _rank_biserial_of_each_resample(d, drawn), rtol=1e-14, atol=1e-15)


def test_sort_free_rank_biserial_is_nan_for_a_resample_of_zeros_only_and_says_nothing():
    d = np.array([0.0, 0.0, 0.0, 1.0])
    rng = np.random.default_rng(0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # 0/0 in a resample of zeros is expected, not worth a warning
        fast = compare._bootstrap_rank_biserial(d, n_boot=200, rng=rng)
    drawn = np.random.default_rng(0).integers(0, 4, size=(200, 4))
    only_zeros = (d[drawn] == 0).all(axis=1)
    assert only_zeros.any() and np.isnan(fast[only_zeros]).all()
    assert (fast[~only_zeros] == 1.0).all()


def _ratings_with_gaps(seed: int = 0) -> pd.DataFrame:
    """Annotators rating one, two or three criteria, items missing a criterion, a constant rater, controls."""
    rng = np.random.default_rng(seed)
    rows = []
    for a in range(40):
        criteria = ["empathy", "fluency", "relevance"][: 1 + a % 3]
        for i in rng.choice(30, int(rng.integers(3, 20)), replace=False):
            level = rng.integers(1, 6)
            for criterion in criteria:
                if rng.random() < 0.05:
                    continue
                score = 3 if a == 5 else int(np.clip(level + rng.integers(-1, 2), 1, 5))
                rows.append({"annotator": f"w{a:02d}", "item": f"i{i:02d}", "criterion": criterion, "score": score,
                             "is_control": bool(rng.random() < 0.1)})
    return pd.DataFrame(rows)


def test_halo_equals_spearman_per_annotator():
    ratings = _ratings_with_gaps()
    real = ratings.loc[~ratings["is_control"]]
    expected = {}
    for annotator, part in real.groupby("annotator"):
        wide = part.pivot_table(index="item", columns="criterion", values="score").dropna()
        value = np.nan
        if wide.shape[0] >= 5 and wide.shape[1] >= 2 and (wide.std() > 0).all():
            correlation = wide.corr(method="spearman").to_numpy()
            value = correlation[np.triu_indices_from(correlation, k=1)].mean()
        expected[annotator] = value
    table = quality.halo(ratings).set_index("annotator")["halo"]
    assert list(table.index) == sorted(expected)
    assert table.notna().sum() >= 10 and table.isna().sum() >= 10  # both branches exercised
    np.testing.assert_allclose(table.to_numpy(), [expected[a] for a in table.index], rtol=1e-12, equal_nan=True)


def test_consensus_correlation_equals_the_per_annotator_formula():
    ratings = _ratings_with_gaps(seed=3)
    # min_items at an annotator's own count, so that the boundary (at least min_items) is exercised.
    counts = quality.consensus_agreement(ratings, min_items=0, exclude_from_consensus={"w01"})["n_consensus_items"]
    min_items = int(counts.median())
    table = quality.consensus_agreement(ratings, min_items=min_items, exclude_from_consensus={"w01"})
    table = table.set_index("annotator")
    real = ratings.loc[~ratings["is_control"]]
    pool: dict[tuple[str, str], dict[str, float]] = {}
    for r in real.loc[real["annotator"] != "w01"].itertuples():
        pool.setdefault((r.item, r.criterion), {})[r.annotator] = r.score
    checked = 0
    for annotator, part in real.groupby("annotator"):
        others = [[s for who, s in pool.get((r.item, r.criterion), {}).items() if who != annotator]
                  for r in part.itertuples()]
        keep = np.array([len(o) > 0 for o in others])
        if not keep.any():
            assert annotator not in table.index
            continue
        part = part.loc[keep].assign(consensus=[np.mean(o) for o in others if len(o)])
        own = part["score"] - part.groupby("criterion")["score"].transform("mean")
        cons = part["consensus"] - part.groupby("criterion")["consensus"].transform("mean")
        with np.errstate(invalid="ignore"):  # 0/0 for a constant rater: NaN, as the report gives
            r = own @ cons / np.sqrt((own @ own) * (cons @ cons)) if part["item"].nunique() >= min_items else np.nan
        assert table.loc[annotator, "consensus_r"] == pytest.approx(r, rel=1e-12, nan_ok=True)
        assert table.loc[annotator, "consensus_mae"] == pytest.approx((part["score"] - part["consensus"]).abs().mean())
        checked += np.isfinite(r)
    assert checked >= 5


def test_no_bootstrap_leaves_the_rank_biserial_interval_nan_and_the_tests_as_they_were():
    d_a = np.array([3.0, 4.0, 2.5, 5.0, 4.5, 3.5, 4.0, 2.0])
    d_b = np.array([2.0, 4.5, 2.0, 3.0, 4.0, 3.0, 3.0, 2.5])
    full = compare.paired_tests(d_a, d_b, n_boot=300)
    tests_only = compare.paired_tests(d_a, d_b, n_boot=0)
    assert np.isfinite(full["rb_ci_low"]) and np.isnan(tests_only["rb_ci_low"]) and np.isnan(tests_only["rb_ci_high"])
    for key in ("w_plus", "p_wilcoxon", "t", "p_t", "d_z", "dz_ci_low", "rank_biserial"):
        assert tests_only[key] == full[key]


def test_one_resample_is_still_a_bootstrap():
    result = compare.paired_tests([3.0, 4.0, 2.5, 5.0, 4.5], [2.0, 4.5, 2.0, 3.0, 4.0], n_boot=1)
    assert np.isfinite(result["rb_ci_low"]) and result["rb_ci_low"] == result["rb_ci_high"]
