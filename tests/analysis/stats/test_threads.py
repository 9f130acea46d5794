"""The BLAS thread guard (analysis.stats.threads): inside ``single_threaded_blas`` every BLAS library numpy and
scipy loaded runs one thread; on leaving the block, normally or by an exception, each gets back the threads it
had. The tests first give BLAS two threads, so that one thread inside the block is the guard's doing."""
from __future__ import annotations

import numpy as np
import pytest
import scipy.linalg  # noqa: F401  (loads scipy's own BLAS, so that the guard is seen to limit it too)
from threadpoolctl import threadpool_info, threadpool_limits

from empeval.analysis.stats.threads import single_threaded_blas


def _blas_threads() -> dict[str, int]:
    """Threads of each BLAS library loaded in this process, by file."""
    return {pool["filepath"]: pool["num_threads"] for pool in threadpool_info() if pool["user_api"] == "blas"}


@pytest.fixture
def two_blas_threads():
    """BLAS on two threads for the test (restored after it): a value the guard must change and then restore."""
    if not _blas_threads():
        pytest.skip("no BLAS library threadpoolctl can see")
    with threadpool_limits(limits=2, user_api="blas"):
        before = _blas_threads()
        if set(before.values()) != {2}:
            pytest.skip(f"BLAS would not take two threads here: {before}")
        yield before


def test_blas_runs_one_thread_inside_the_block_and_gets_its_threads_back_after(two_blas_threads):
    with single_threaded_blas():
        inside = _blas_threads()
        product = np.ones((64, 64)) @ np.ones((64, 64))  # BLAS still works, on one thread
    assert inside == dict.fromkeys(two_blas_threads, 1)
    assert product[0, 0] == 64.0
    assert _blas_threads() == two_blas_threads


def test_the_threads_come_back_when_the_block_raises(two_blas_threads):
    with pytest.raises(RuntimeError, match="inside"), single_threaded_blas():
        assert set(_blas_threads().values()) == {1}
        raise RuntimeError("inside")
    assert _blas_threads() == two_blas_threads


def test_blocks_nest_and_each_restores_what_it_found(two_blas_threads):
    with single_threaded_blas():
        with single_threaded_blas():
            assert set(_blas_threads().values()) == {1}
        assert set(_blas_threads().values()) == {1}
    assert _blas_threads() == two_blas_threads


def test_only_blas_is_limited():
    """OpenMP (loaded with scikit-learn, which installs threadpoolctl) keeps its two threads inside the block."""
    pytest.importorskip("sklearn.linear_model")
    if not any(pool["user_api"] == "openmp" for pool in threadpool_info()):
        pytest.skip("scikit-learn loaded no OpenMP library")
    with threadpool_limits(limits=2, user_api="openmp"), single_threaded_blas():
        openmp = {pool["num_threads"] for pool in threadpool_info() if pool["user_api"] == "openmp"}
        blas = {pool["num_threads"] for pool in threadpool_info() if pool["user_api"] == "blas"}
    assert openmp == {2} and blas == {1}
