"""The mixed model's entry points run with single-threaded BLAS whoever calls them (issue 31: called directly,
outside write_report's block, the crossed model ran 20-50x slower): inside fit_crossed, mixed_model_pairs and
rater_aware_check, every BLAS library has one thread, even under an outer limit of two; outside, the caller's
setting is back."""
from __future__ import annotations

import numpy as np
import pytest
from threadpoolctl import threadpool_info, threadpool_limits

import empeval.analysis.stats.crossed as crossed
from empeval.analysis import simulate_study, tidy_from_export
from empeval.analysis.stats.rater_aware import mixed_model_pairs, rater_aware_check


def _blas_threads() -> list[int]:
    return [pool["num_threads"] for pool in threadpool_info() if pool["user_api"] == "blas"]


@pytest.fixture
def seen(monkeypatch):
    """The BLAS thread counts inside the crossed model's moment step, each time it runs."""
    counts: list[list[int]] = []
    inner = crossed._moment_components

    def recording(*args, **kwargs):
        counts.append(_blas_threads())
        return inner(*args, **kwargs)

    monkeypatch.setattr(crossed, "_moment_components", recording)
    return counts


def test_every_entry_point_of_the_mixed_model_runs_with_one_blas_thread(seen):
    if not _blas_threads():
        pytest.skip("numpy reports no BLAS library to limit")
    ratings = tidy_from_export(simulate_study(n_contexts=8, seed=2).export)
    rng = np.random.default_rng(0)
    with threadpool_limits(limits=2, user_api="blas"):
        assert set(_blas_threads()) == {2}
        crossed.fit_crossed(rng.normal(size=40), np.ones((40, 1)),
                            {"annotator": np.repeat(np.arange(8), 5), "item": np.tile(np.arange(5), 8)},
                            reml_max_levels=0)
        mixed_model_pairs(ratings, criterion="empathy")
        rater_aware_check(ratings, n_boot=20)
        assert set(_blas_threads()) == {2}  # the caller's setting is back
    assert len(seen) >= 3
    assert all(set(counts) == {1} for counts in seen), seen
