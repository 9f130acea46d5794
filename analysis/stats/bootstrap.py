"""Item-level bootstrap helpers shared by agreement and system comparison.

A resample of items is represented by a weight per item: how many times the item was drawn (a multinomial
count). Every statistic in this package that is bootstrapped is written as a function of per-item
quantities combined with these weights, so B resamples cost one matrix product instead of B recomputations.
The counts are kept as small integers (one byte each where they fit: a count is about Poisson(1)), and
``weighted_sums`` turns them into floats a block of resamples at a time: B = 1,000 resamples of 100,000
items are then 100 MB, not 800 MB.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

import numpy as np


def resample_weights(n_units: int, *, n_boot: int, seed: int | np.random.Generator | None = 0) -> np.ndarray:
    """Bootstrap resamples of ``n_units`` units as multinomial draw counts (Efron & Tibshirani 1993, ch. 6).

    Returns
    -------
    weights : numpy.ndarray
        Shape (n_boot, n_units), unsigned integers (uint8 unless a count exceeds 255): row b says how often
        each unit was drawn, with replacement, in resample b. Combine them with ``weighted_sums``.

    Examples
    --------
    Each row sums to the number of units; a statistic over all resamples is one matrix product:

    >>> import numpy as np
    >>> resample_weights(4, n_boot=3, seed=0)
    array([[1, 0, 0, 3],
           [0, 2, 2, 0],
           [1, 1, 1, 1]], dtype=uint8)
    >>> scores = np.array([3.0, 4.0, 4.5, 2.0])
    >>> (weighted_sums(resample_weights(4, n_boot=2000, seed=0), scores) / 4).shape
    (2000,)
    """
    if n_units < 1:
        raise ValueError("cannot bootstrap an empty set of items")
    if n_boot < 1:
        raise ValueError(f"n_boot must be at least 1, got {n_boot}")
    key = (n_units, n_boot, seed) if isinstance(seed, (int, np.integer)) else None
    if key is not None and key in _DRAWN:
        return _DRAWN[key]
    rng = np.random.default_rng(seed)
    uniform = np.full(n_units, 1.0 / n_units)
    # numpy draws a multinomial row by row, so drawing blocks of rows gives the very same counts as one call,
    # without the (n_boot, n_units) int64 array one call would build first.
    weights = np.empty((n_boot, n_units), dtype=np.uint8)
    rows = max(1, _BLOCK // n_units)
    for start in range(0, n_boot, rows):
        block = rng.multinomial(n_units, uniform, size=min(rows, n_boot - start))
        if block.max() > np.iinfo(weights.dtype).max:  # never seen at B <= 10^5; kept exact all the same
            weights = weights.astype(np.int64)
        weights[start:start + block.shape[0]] = block
    if key is not None and weights.nbytes <= _CACHE_BYTES:
        # A report asks for the same (n, B, seed) dozens of times (every system of every criterion, every
        # coefficient of an agreement table): draw once, share read-only, keep the newest within the budget, and
        # forget them when the analysis that asked ends if it asked within ``draws_forgotten_after``.
        weights.flags.writeable = False
        _DRAWN[key] = weights
        scopes = getattr(_LOCAL, "scopes", None)
        if scopes:
            scopes[-1].add(key)
        while sum(w.nbytes for w in _DRAWN.values()) > _CACHE_BYTES:
            del _DRAWN[next(iter(_DRAWN))]
    return weights


def weighted_sums(weights: np.ndarray, values: np.ndarray) -> np.ndarray:
    """``weights @ values`` in floating point, the integer weights of ``resample_weights`` converted a block of
    resamples at a time (converting all at once would build an (n_boot, n_units) float array: 800 MB for
    B = 1,000 and 100,000 items).

    Returns
    -------
    sums : numpy.ndarray
        Shape (n_boot, *values.shape[1:]): for each resample, the weighted sum of ``values`` over units.

    Examples
    --------
    >>> import numpy as np
    >>> weighted_sums(np.array([[1, 0, 2], [3, 0, 0]], dtype=np.uint8), np.array([1.0, 10.0, 0.5]))
    array([2., 3.])
    """
    values = np.asarray(values, dtype=float)
    weights = np.atleast_2d(weights)
    if weights.dtype == np.float64:
        return weights @ values
    sums = np.empty((weights.shape[0], *values.shape[1:]))
    rows = max(1, _BLOCK // max(weights.shape[1], 1))
    for start in range(0, weights.shape[0], rows):
        sums[start:start + rows] = weights[start:start + rows].astype(float) @ values
    return sums


#: Resample weights already drawn, by (n_units, n_boot, integer seed); at most _CACHE_BYTES of them.
_DRAWN: dict[tuple[int, int, int], np.ndarray] = {}
_CACHE_BYTES = 512 * 2**20
#: Weights drawn or converted to floats per block: bounds the memory of the big temporaries.
_BLOCK = 2**22
#: Per thread, the keys of _DRAWN each open ``draws_forgotten_after`` scope added, innermost last.
_LOCAL = threading.local()


@contextmanager
def draws_forgotten_after() -> Iterator[None]:
    """A scope whose resample weights are shared inside it and forgotten when it ends: ``resample_weights`` caches
    as ever, but what it cached within the outermost such scope is dropped on leaving it (an inner scope hands
    its draws to the one around it). One analysis asks for the same (n, B, seed) many times (every criterion of
    an agreement table) and the next one for others (the report's other pass, with the flagged raters, has other
    numbers of items): kept, the draws of a 1M-rating report held 380 MB to its end.

    Returns
    -------
    scope : contextlib.AbstractContextManager
        Use it in a ``with`` statement; it yields None.

    Examples
    --------
    >>> with draws_forgotten_after():
    ...     first = resample_weights(5, n_boot=3, seed=11)
    ...     first is resample_weights(5, n_boot=3, seed=11)
    True
    >>> first is resample_weights(5, n_boot=3, seed=11)  # drawn again, the same counts
    False
    """
    scopes = _LOCAL.__dict__.setdefault("scopes", [])
    scopes.append(set())
    try:
        yield
    finally:
        added = scopes.pop()
        if scopes:
            scopes[-1] |= added
        else:
            for key in added:
                _DRAWN.pop(key, None)


def pooled_weights(weights: np.ndarray, labels: np.ndarray) -> np.ndarray:
    """Resample weights summed over the units that share a label: column g of the result is the total weight
    of the units labelled g (labels 0..G-1, each used).

    A statistic that is a weighted sum of per-unit terms, where units with one label have one term (e.g. the
    agreement coefficients, whose terms depend only on a unit's counts of each score), can then be
    bootstrapped over the G labels instead of the units: 50 or so count patterns instead of 100,000 items.

    Returns
    -------
    pooled : numpy.ndarray
        Shape (n_boot, G), float.

    Examples
    --------
    >>> import numpy as np
    >>> pooled_weights(np.array([[1, 0, 2], [3, 0, 0]], dtype=np.uint8), np.array([1, 0, 1]))
    array([[0., 3.],
           [0., 3.]])
    """
    weights = np.atleast_2d(weights)
    labels = np.asarray(labels).reshape(-1)
    order = np.argsort(labels, kind="stable")
    ordered = labels[order]
    starts = np.flatnonzero(np.r_[True, ordered[1:] != ordered[:-1]])
    pooled = np.empty((weights.shape[0], starts.size))
    rows = max(1, _BLOCK // max(weights.shape[1], 1))
    for start in range(0, weights.shape[0], rows):
        pooled[start:start + rows] = np.add.reduceat(weights[start:start + rows][:, order], starts, axis=1,
                                                     dtype=float)
    return pooled


def percentile_interval(samples: np.ndarray, *, level: float = 0.95) -> tuple[float, float, int]:
    """Percentile bootstrap interval of the defined (non-NaN) ``samples``.

    Resamples in which the statistic is undefined (e.g. a resample with no variation) are dropped; the count
    of those kept is returned so that the caller can report it.

    Returns
    -------
    low, high : float
        The ``(1 - level) / 2`` and ``(1 + level) / 2`` quantiles of the defined samples (NaN when none is).
    n_defined : int
        How many samples were defined.

    Examples
    --------
    >>> percentile_interval([1.0, float("nan"), 2.0, 3.0], level=0.5)
    (1.5, 2.5, 3)
    """
    if not 0 < level < 1:
        raise ValueError(f"confidence level must lie strictly between 0 and 1, got {level}")
    samples = np.asarray(samples, dtype=float)
    defined = samples[np.isfinite(samples)]
    if defined.size == 0:
        return float("nan"), float("nan"), 0
    tail = (1.0 - level) / 2.0
    low, high = np.quantile(defined, [tail, 1.0 - tail])
    return float(low), float(high), int(defined.size)
