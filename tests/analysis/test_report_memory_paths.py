"""The Likert report's memory-saving paths give what the plain ones give: resample weights shared within one
analysis and forgotten after it (``bootstrap.draws_forgotten_after``) equal weights drawn afresh every time, and
the analyses that copy only the columns they read equal them run on a table of exactly those columns. The memory
itself is measured by benchmarks/report_scale.py, not here."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from empeval.analysis import simulate_study, tidy_from_export
from empeval.analysis.kinds.likert.report import analyse
from empeval.analysis.stats import bootstrap
from empeval.analysis.stats.agreement import agreement_table
from empeval.analysis.stats.bootstrap import draws_forgotten_after, resample_weights
from empeval.analysis.stats.significance import item_means, system_means


@pytest.fixture
def empty_cache(monkeypatch):
    """A cache of drawn weights of this test's own, so that what other tests drew is neither seen nor evicted."""
    monkeypatch.setattr(bootstrap, "_DRAWN", {})
    return bootstrap._DRAWN


@pytest.fixture(scope="module")
def ratings() -> pd.DataFrame:
    # Spammers among the raters: items with 1 to 3 ratings, so agreement draws three numbers of items.
    return tidy_from_export(simulate_study(n_contexts=12, seed=3).export)


def test_draws_are_shared_inside_a_scope_and_forgotten_when_it_ends(empty_cache):
    with draws_forgotten_after():
        first = resample_weights(40, n_boot=30, seed=5)
        assert resample_weights(40, n_boot=30, seed=5) is first
        assert list(empty_cache) == [(40, 30, 5)]
    assert empty_cache == {}
    again = resample_weights(40, n_boot=30, seed=5)
    assert again is not first and np.array_equal(again, first)


def test_an_inner_scope_hands_its_draws_to_the_one_around_it(empty_cache):
    with draws_forgotten_after():
        with draws_forgotten_after():
            inner = resample_weights(12, n_boot=10, seed=2)
        assert resample_weights(12, n_boot=10, seed=2) is inner  # kept while the outer scope lasts
    assert empty_cache == {}


def test_draws_cached_before_a_scope_outlive_it_and_a_failing_scope_still_forgets(empty_cache):
    before = resample_weights(9, n_boot=8, seed=1)
    with pytest.raises(RuntimeError, match="stop"), draws_forgotten_after():
        assert resample_weights(9, n_boot=8, seed=1) is before
        resample_weights(10, n_boot=8, seed=1)
        raise RuntimeError("stop")
    assert list(empty_cache) == [(9, 8, 1)]


def test_system_means_and_agreement_forget_their_draws_and_equal_the_uncached_computation(empty_cache, monkeypatch,
                                                                                           ratings):
    shared_means = system_means(ratings, n_boot=150, seed=4)
    shared_agreement = agreement_table(ratings, n_boot=150, seed=4, by_system=True)
    assert empty_cache == {}
    monkeypatch.setattr(bootstrap, "_CACHE_BYTES", 0)  # nothing cached: every resample drawn afresh
    pd.testing.assert_frame_equal(system_means(ratings, n_boot=150, seed=4), shared_means, check_exact=True)
    pd.testing.assert_frame_equal(agreement_table(ratings, n_boot=150, seed=4, by_system=True), shared_agreement,
                                  check_exact=True)


def test_the_analyses_read_only_their_columns_and_give_what_a_table_of_those_columns_gives(ratings):
    """The analyses copy the columns they read, not the whole table: the other columns change nothing."""
    needed = ["item", "context", "system", "annotator", "criterion", "score", "is_control"]
    narrow = ratings[needed]
    pd.testing.assert_frame_equal(item_means(ratings), item_means(narrow), check_exact=True)
    pd.testing.assert_frame_equal(item_means(ratings, include_controls=True),
                                  item_means(narrow, include_controls=True), check_exact=True)
    pd.testing.assert_frame_equal(system_means(ratings, n_boot=100), system_means(narrow, n_boot=100),
                                  check_exact=True)
    pd.testing.assert_frame_equal(agreement_table(ratings, n_boot=100, include_controls=True),
                                  agreement_table(narrow, n_boot=100, include_controls=True), check_exact=True)


def test_the_report_analysis_keeps_no_draws_and_a_second_one_draws_the_same_tables(empty_cache, ratings):
    options = {"study_meta": None, "exclude_flagged": True, "correction": "holm", "family": "criterion",
               "alpha": 0.05, "n_boot": 120, "ci_level": 0.95, "scale": (1, 5), "quality_thresholds": None,
               "random_effects": ("annotator", "item"), "seed": 0, "include_late": True, "judge": None}
    first = analyse(ratings, **options)
    assert empty_cache == {}
    assert first.flagged and first.both is not None  # the second pass, with the flagged raters, ran too
    second = analyse(ratings, **options)
    for name in ("means", "pairs", "friedman", "agreement", "rater_check"):
        pd.testing.assert_frame_equal(getattr(second, name), getattr(first, name), check_exact=True)
    for name, table in first.both.items():
        pd.testing.assert_frame_equal(second.both[name], table, check_exact=True)
