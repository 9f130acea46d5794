"""Item-level bootstrap helpers (analysis.stats.bootstrap): resample weights that are multinomial draw counts
(rows summing to n, seeded, drawn in blocks as one call would draw them, cached read-only), weighted sums and
pooled weights equal to the plain float products, and the percentile interval. Textbook checks: a resample
leaves out a share (1 - 1/n)^n of the units, and the bootstrap standard error of a mean is the plug-in
sqrt(sum (x - mean)^2) / n (Efron & Tibshirani 1993, ch. 6)."""
from __future__ import annotations

import numpy as np
import pytest

from empeval.analysis.stats import bootstrap
from empeval.analysis.stats.bootstrap import percentile_interval, pooled_weights, resample_weights, weighted_sums
from tests.analysis.conftest import SLEEP_GROUP_1, SLEEP_GROUP_2


@pytest.fixture
def empty_cache(monkeypatch):
    """A cache of drawn weights of this test's own, so that what other tests drew is neither seen nor evicted."""
    monkeypatch.setattr(bootstrap, "_DRAWN", {})
    return bootstrap._DRAWN


# --- resample_weights -------------------------------------------------------------------------------------------


@pytest.mark.parametrize("n_units", [1, 2, 7, 300])
def test_every_resample_draws_each_of_n_units_and_only_those(empty_cache, n_units):
    weights = resample_weights(n_units, n_boot=50, seed=3)
    assert weights.shape == (50, n_units) and weights.dtype == np.uint8
    assert (weights.sum(axis=1, dtype=np.int64) == n_units).all()


def test_the_same_integer_seed_draws_the_same_resamples_and_another_seed_others(empty_cache):
    first = resample_weights(25, n_boot=40, seed=8).copy()
    empty_cache.clear()  # drawn afresh, not handed back from the cache
    assert np.array_equal(resample_weights(25, n_boot=40, seed=8), first)
    assert not np.array_equal(resample_weights(25, n_boot=40, seed=9), first)


def test_resample_weights_are_drawn_once_and_shared_read_only(empty_cache):
    first = resample_weights(37, n_boot=50, seed=11)
    again = resample_weights(37, n_boot=50, seed=11)
    assert again is first and not first.flags.writeable
    with pytest.raises(ValueError, match="read-only"):
        first[0, 0] = 9
    fresh = np.random.default_rng(11).multinomial(37, np.full(37, 1 / 37), size=50)
    assert np.array_equal(first, fresh)


def test_weights_from_a_generator_are_neither_cached_nor_read_only(empty_cache):
    rng = np.random.default_rng(4)
    first, second = resample_weights(30, n_boot=20, seed=rng), resample_weights(30, n_boot=20, seed=rng)
    assert first.flags.writeable and second.flags.writeable and empty_cache == {}
    assert not np.array_equal(first, second)  # the generator moved on
    restarted = np.random.default_rng(4)
    assert np.array_equal(resample_weights(30, n_boot=20, seed=restarted), first)


def test_the_cache_keeps_the_newest_draws_within_its_budget(empty_cache, monkeypatch):
    monkeypatch.setattr(bootstrap, "_CACHE_BYTES", 10 * 20)  # room for one 10 x 20 uint8 array
    old = resample_weights(20, n_boot=10, seed=1)
    new = resample_weights(20, n_boot=10, seed=2)
    assert list(empty_cache) == [(20, 10, 2)] and empty_cache[(20, 10, 2)] is new
    again = resample_weights(20, n_boot=10, seed=1)
    assert again is not old and np.array_equal(again, old)  # drawn again, the same counts
    big = resample_weights(20, n_boot=11, seed=3)  # over the budget on its own: returned, never cached
    assert (20, 11, 3) not in empty_cache and big.flags.writeable


def test_weights_drawn_in_row_blocks_are_the_multinomial_counts_of_one_call(empty_cache, monkeypatch):
    monkeypatch.setattr(bootstrap, "_BLOCK", 40)  # 40 // 13 = 3 rows per block, the last one short
    weights = resample_weights(13, n_boot=20, seed=5)
    one_call = np.random.default_rng(5).multinomial(13, np.full(13, 1 / 13), size=20)
    assert weights.dtype == np.uint8
    assert np.array_equal(weights, one_call)


class _PilingGenerator(np.random.Generator):
    """Draws like a Generator for the first block, then puts every draw of a resample on the first unit."""

    blocks = 0

    def multinomial(self, n, pvals, size=None):
        self.blocks += 1
        counts = super().multinomial(n, pvals, size=size)
        if self.blocks > 1:
            counts[:] = 0
            counts[:, 0] = n
        return counts


def test_a_count_above_255_widens_the_weights_instead_of_wrapping_around(empty_cache, monkeypatch):
    monkeypatch.setattr(bootstrap, "_BLOCK", 300 * 2)  # two rows per block
    weights = resample_weights(300, n_boot=5, seed=_PilingGenerator(np.random.PCG64(0)))
    assert np.issubdtype(weights.dtype, np.integer) and weights.dtype.itemsize > 1
    plain = np.random.default_rng(np.random.PCG64(0)).multinomial(300, np.full(300, 1 / 300), size=2)
    assert np.array_equal(weights[:2], plain)  # the rows drawn before the widening are kept
    assert (weights[2:, 0] == 300).all() and (weights[2:, 1:] == 0).all()


@pytest.mark.parametrize(("n_units", "n_boot", "message"), [(0, 10, "empty set of items"),
                                                            (5, 0, "n_boot must be at least 1, got 0")])
def test_resample_weights_refuses_no_units_and_no_resamples(n_units, n_boot, message):
    with pytest.raises(ValueError, match=message):
        resample_weights(n_units, n_boot=n_boot, seed=0)


def test_a_resample_leaves_out_the_textbook_share_of_units(empty_cache):
    """Each unit is missing from a resample with probability (1 - 1/n)^n (0.349 for n = 10; 1/e as n grows): the
    reason the bootstrap sample holds about 63.2% of the distinct units."""
    n = 10
    weights = resample_weights(n, n_boot=20_000, seed=0)
    assert (weights == 0).mean() == pytest.approx((1 - 1 / n) ** n, abs=0.004)
    assert weights.mean() == pytest.approx(1.0)  # every count has mean 1: rows sum to n exactly


def test_the_bootstrap_standard_error_of_a_mean_is_the_plug_in_formula(empty_cache):
    """Efron & Tibshirani (1993), ch. 6: the ideal bootstrap SE of the mean of x_1..x_n is
    sqrt(sum (x_i - mean)^2) / n, the t-test's s / sqrt(n) times sqrt((n - 1) / n). On the sleep data's paired
    differences (Student 1908; R's paired t-test gives t = 4.0621 on 1.58 / 0.3890) that is 0.3690."""
    d = SLEEP_GROUP_2 - SLEEP_GROUP_1
    ideal = np.sqrt(((d - d.mean()) ** 2).sum()) / d.size
    assert ideal == pytest.approx(0.3690, abs=1e-4)
    means = weighted_sums(resample_weights(d.size, n_boot=40_000, seed=2), d) / d.size
    assert means.mean() == pytest.approx(d.mean(), abs=0.01)
    assert means.std() == pytest.approx(ideal, rel=0.02)


# --- weighted_sums ----------------------------------------------------------------------------------------------


def test_weighted_sums_in_blocks_equal_the_float_product(monkeypatch):
    rng = np.random.default_rng(0)
    weights = rng.integers(0, 4, size=(11, 7)).astype(np.uint8)
    values = rng.normal(size=(7, 3))
    monkeypatch.setattr(bootstrap, "_BLOCK", 15)  # two rows per block
    np.testing.assert_allclose(weighted_sums(weights, values), weights.astype(float) @ values, rtol=1e-15)
    np.testing.assert_allclose(weighted_sums(weights, values[:, 0]), weights.astype(float) @ values[:, 0],
                               rtol=1e-15)


def test_weighted_sums_of_large_counts_do_not_overflow_the_small_integers():
    """uint8 counts of 255 times uint8 values of 255, and int64 counts in the millions: the sums are the float
    products, not integer arithmetic that wraps around."""
    weights = np.full((3, 4), 255, dtype=np.uint8)
    values = np.full(4, 255, dtype=np.uint8)
    assert weighted_sums(weights, values).tolist() == [4 * 255.0 * 255] * 3
    big = np.array([[3_000_000, 0, 1], [0, 2**40, 7]], dtype=np.int64)
    values = np.array([0.5, 3.0, -2.0])
    got = weighted_sums(big, values)
    assert got.dtype == np.float64
    np.testing.assert_array_equal(got, big.astype(float) @ values)
    assert got.tolist() == [1_500_000 - 2.0, 3.0 * 2**40 - 14.0]


def test_weighted_sums_take_float_weights_and_a_single_resample():
    weights = np.array([[0.5, 1.5, 1.0]])
    values = np.array([[1.0, 2.0], [4.0, 0.0], [-1.0, 3.0]])
    np.testing.assert_array_equal(weighted_sums(weights, values), [[5.5, 4.0]])
    np.testing.assert_array_equal(weighted_sums(np.array([2, 0, 1], dtype=np.uint8), values), [[1.0, 7.0]])


# --- pooled_weights ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("block", [2**22, 9], ids=["one-block", "blocks-of-one-row"])
def test_pooled_weights_sum_the_weights_of_the_units_sharing_a_label(monkeypatch, block):
    monkeypatch.setattr(bootstrap, "_BLOCK", block)  # 9 // 9 units = one row per block
    labels = np.array([2, 0, 1, 0, 2, 2, 3, 1, 0])
    weights = resample_weights(labels.size, n_boot=30, seed=6)
    pooled = pooled_weights(weights, labels)
    assert pooled.shape == (30, 4) and pooled.dtype == np.float64
    by_loop = np.column_stack([weights[:, labels == g].sum(axis=1) for g in range(4)])
    np.testing.assert_array_equal(pooled, by_loop)


def test_a_statistic_of_per_label_terms_bootstraps_the_same_over_labels_as_over_units():
    labels = np.array([1, 1, 0, 2, 0, 1, 2, 2, 2, 0, 1])
    term_of_label = np.array([0.25, -1.0, 3.5])
    weights = resample_weights(labels.size, n_boot=200, seed=12)
    over_units = weighted_sums(weights, term_of_label[labels])
    np.testing.assert_allclose(pooled_weights(weights, labels) @ term_of_label, over_units, rtol=1e-14)


# --- percentile_interval ----------------------------------------------------------------------------------------


def test_the_percentile_interval_is_the_pair_of_quantiles():
    """101 samples 0..100: the 5% and 95% quantiles are 5 and 95, the 2.5% and 97.5% ones 2.5 and 97.5."""
    samples = np.arange(101.0)[::-1]  # order does not matter
    assert percentile_interval(samples, level=0.9) == pytest.approx((5.0, 95.0, 101), abs=1e-12)
    assert percentile_interval(samples) == pytest.approx((2.5, 97.5, 101), abs=1e-12)


def test_the_percentile_interval_drops_undefined_resamples_and_counts_those_kept():
    samples = np.arange(101.0)
    with_gaps = np.insert(samples, [0, 10, 50, 101], np.nan)
    assert percentile_interval(with_gaps, level=0.9) == percentile_interval(samples, level=0.9)
    assert percentile_interval(with_gaps, level=0.9)[2] == 101
    low, high, kept = percentile_interval([np.nan, np.nan])
    assert np.isnan(low) and np.isnan(high) and kept == 0


@pytest.mark.parametrize("level", [0, 1, -0.5, 1.5, 95])
def test_the_percentile_interval_refuses_a_level_outside_zero_one(level):
    with pytest.raises(ValueError, match=f"strictly between 0 and 1, got {level}"):
        percentile_interval([1.0, 2.0, 3.0], level=level)
