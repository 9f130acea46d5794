"""Item-level bootstrap helpers shared by agreement and system comparison.

A resample of items is represented by a weight per item: how many times the item was drawn (a multinomial
count). Every statistic in this package that is bootstrapped is written as a function of per-item
quantities combined with these weights, so B resamples cost one matrix product instead of B recomputations.
"""

from __future__ import annotations

import numpy as np


def resample_weights(n_units: int, *, n_boot: int, seed: int | np.random.Generator | None = 0) -> np.ndarray:
    """Bootstrap resamples of ``n_units`` units as multinomial draw counts (Efron & Tibshirani 1993, ch. 6).

    Returns
    -------
    weights : numpy.ndarray
        Shape (n_boot, n_units), float: row b says how often each unit was drawn, with replacement, in
        resample b.

    Examples
    --------
    Each row sums to the number of units; a statistic over all resamples is one matrix product:

    >>> import numpy as np
    >>> resample_weights(4, n_boot=3, seed=0)
    array([[1., 0., 0., 3.],
           [0., 2., 2., 0.],
           [1., 1., 1., 1.]])
    >>> scores = np.array([3.0, 4.0, 4.5, 2.0])
    >>> (resample_weights(4, n_boot=2000, seed=0) @ scores / 4).shape
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
    weights = rng.multinomial(n_units, np.full(n_units, 1.0 / n_units), size=n_boot).astype(float)
    if key is not None and weights.nbytes <= _CACHE_BYTES:
        # A report asks for the same (n, B, seed) dozens of times (every system of every criterion, with and
        # without flagged raters): draw once, share read-only, keep the newest within the budget.
        weights.flags.writeable = False
        _DRAWN[key] = weights
        while sum(w.nbytes for w in _DRAWN.values()) > _CACHE_BYTES:
            del _DRAWN[next(iter(_DRAWN))]
    return weights


#: Resample weights already drawn, by (n_units, n_boot, integer seed); at most _CACHE_BYTES of them.
_DRAWN: dict[tuple[int, int, int], np.ndarray] = {}
_CACHE_BYTES = 512 * 2**20


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
