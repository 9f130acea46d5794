"""Anytime-valid confidence sequences for a mean and for paired differences, human-only and model-assisted (PPI++),
valid however often the researcher looks: a study may be watched after every new human-rated context and stopped
as soon as its comparisons are decided, with the error rate still at most alpha.

The sequence is the two-sided asymptotic confidence sequence of Waudby-Smith, Arnold, Wu, Howard and Ramdas
("Time-uniform central limit theory and asymptotic confidence sequences", Annals of Statistics 2024, Theorem 2.2, the
i.i.d. case), whose boundary is Robbins' two-sided normal mixture as Howard, Ramdas, McAuliffe and Sekhon
("Time-uniform, nonparametric, nonasymptotic confidence sequences", Annals of Statistics 2021) state it. After t
observations with running mean m_t and standard deviation s_t,

    m_t +- s_t * B(t) / t,        B(v) = sqrt((v + rho) * log((v + rho) / (rho * alpha^2))),

B being the two-sided normal-mixture boundary at intrinsic time v (t observations of unit variance) and rho the
mixture's precision. rho tunes where the sequence is tightest: the rho minimising B(v*) / v* at a planned sample size
v* is, to the approximation Howard et al. give (and their reference implementation, confseq's best_rho, uses),

    rho = v* / (2 log(1 / alpha) + log(1 + 2 log(1 / alpha))),

Waudby-Smith et al.'s rho^2 = (2 log(1 / alpha) + log(1 + 2 log(1 / alpha))) / t* in their parametrisation (theirs is
1 / sqrt of ours). The width shrinks like sqrt(log t / t), against sqrt(1 / t) for a fixed-n interval: the price of
peeking is a log factor, not the fixed-n interval re-checked at every look, which with enough looks excludes the true
value almost surely (the law of the iterated logarithm).

>>> rho = normal_mixture_rho(100, alpha=0.05)
>>> round(rho, 5), round(float(normal_mixture_boundary(100, rho=rho, alpha=0.05)), 5)
(12.60056, 30.35209)

(the values of Howard et al.'s reference implementation, confseq's tests: best_rho(100, 0.05) and the two-sided
normal_mixture_bound(100, 0.05, v_opt=100)).

Model-assisted sequences (PPI++, Angelopoulos, Duchi and Zrnic 2023) are formed per look. The judge scored every
context of the study at once; people rate a uniform sample of them, one context after another. The judge-only
contexts are dealt out to the looks in their given order, about N / n* to each (n* the planned human-rated contexts,
N the judge-only ones: floor(k N / n*) of them by look k), so look k is a block of c_k contexts: the human-rated one
and its share of the others. The block's rectified value is PPI++'s estimate on that block,

    b_k = Y_k - lambda_k * (f_k - mean of f over the block's c_k contexts),

(``analysis.stats.ppi.estimates.ppi_mean_interval``'s lambda * mean f~ + mean(Y - lambda f) with the block's
contexts), unbiased for E[Y] for any lambda_k fixed before the block. lambda_k is the power-tuned weight from the
blocks before (0 until two contexts were rated before), cov(Y, f) / var(f) clipped to [0, 1]: PPI++'s
cov(Y, f) / ((1 + n / N) var(f)) (``power_tuned_lambda``) for a block, where var(f - block mean) carries the
(1 + n / N) = c / (c - 1) already. The b_k - E[Y] are martingale differences, so the sequence above applies to them
unchanged (Waudby-Smith et al.'s martingale, Lyapunov-type version, with the running variance). At the optimum
var(b) = var(Y) - (N / (n + N)) cov(Y, f)^2 / var(f), the fixed-n PPI++ variance times n. A block without
judge-only contexts (looks beyond n*) is the human label alone.

Paired differences of systems a and b are the same sequences over per-context differences Y_a - Y_b (and f_a - f_b).

Why our own: none of the three libraries the issue names could be used. ``confseq`` (0.0.11, Howard and
Waudby-Smith's) ships only as a source archive whose C++ core needs the Boost headers and CMake at install time: it
does not build on our Python 3.11 venv (CMake: "Could NOT find Boost"), and its Python part has no asymptotic
sequence; its C++ tests' reference values are the ones checked above and in tests/analysis/stats/test_sequential.py.
``expectation`` is not on PyPI. ``savvi`` (0.3.1) installs but covers linear-regression, multinomial and Bernoulli-
process tests (Lindon et al.), not the asymptotic sequence for a mean, and needs cvxpy. The formula is three lines;
the module checks it against a direct numerical evaluation of the mixture (``mixture_log_martingale``).

Limitations: asymptotic, so early looks (a handful of contexts) may undercover; ``prior_variance`` adds one
pseudo-observation of a given variance (the decisions use the scale's largest variance), which keeps the first looks
wide. Ratings that share a rater are treated as independent contexts (as ppi_py does without ``cluster_by``).
"""
from __future__ import annotations

from enum import StrEnum

import numpy as np
import pandas as pd

SEQUENCE_COLUMNS = ("n", "estimate", "sd", "lam", "radius", "low", "high")


class Decision(StrEnum):
    """What a comparison's interval for the difference a - b says (``decide``)."""

    UNDECIDED = "undecided"
    A_BETTER = "A better"
    B_BETTER = "B better"
    EQUIVALENT = "equivalent within margin"


def normal_mixture_rho(planned_n: float, alpha: float = 0.05) -> float:
    """The normal mixture's precision rho that makes the two-sided boundary tightest (B(v) / v smallest) at the
    planned sample size ``planned_n`` (intrinsic time, in observations of unit variance), Howard et al. 2021's
    eq. (15): v* / (2 log(1 / alpha) + log(1 + 2 log(1 / alpha))).

    Examples
    --------
    >>> round(normal_mixture_rho(100, 0.05), 5)
    12.60056
    """
    _check_alpha(alpha)
    if not planned_n > 0:
        raise ValueError(f"planned_n must be positive, got {planned_n!r}")
    log_inverse = 2 * np.log(1 / alpha)
    return float(planned_n / (log_inverse + np.log(1 + log_inverse)))


def normal_mixture_boundary(intrinsic_time, *, rho: float, alpha: float = 0.05):
    """Robbins' two-sided normal-mixture boundary B(v) = sqrt((v + rho) log((v + rho) / (rho alpha^2))): with
    probability at least 1 - alpha, |S_v| < B(v) at every v for a sum S of unit-variance (sub-)Gaussian increments
    (Howard et al. 2021, eq. (14)). A float for a number, an array for an array.

    Examples
    --------
    >>> round(float(normal_mixture_boundary(100, rho=12.60056, alpha=0.05)), 4)
    30.3521
    """
    _check_alpha(alpha)
    if not rho > 0:
        raise ValueError(f"rho must be positive, got {rho!r}")
    v = np.asarray(intrinsic_time, dtype=float)
    bound = np.sqrt((v + rho) * np.log((v + rho) / (rho * alpha**2)))
    return float(bound) if bound.ndim == 0 else bound


def mixture_log_martingale(s: float, v: float, *, rho: float) -> float:
    """log of the normal-mixture martingale by numerical integration: the integral over lambda of
    exp(lambda s - lambda^2 v / 2) against N(0, 1 / rho), whose closed form is
    (1/2) log(rho / (v + rho)) + s^2 / (2 (v + rho)); the boundary B(v) is where it reaches log(1 / alpha).
    For checking the closed forms.

    Examples
    --------
    >>> round(mixture_log_martingale(10.0, 100.0, rho=12.60056), 7)  # confseq's reference value: -0.6510052
    -0.6510052
    """
    # Imported here, its one use: `serve` imports this module at start (Decision, through the kinds' decision looks),
    # and scipy.stats cost that start about 1.5 s of its 4.3 s.
    from scipy import integrate, stats

    scale = 1 / np.sqrt(rho)
    centre = s / (v + rho)
    width = 12 / np.sqrt(v + rho)

    def integrand(lam: float) -> float:
        return float(np.exp(lam * s - lam**2 * v / 2 - centre * s / 2) * stats.norm.pdf(lam, scale=scale))

    value, _ = integrate.quad(integrand, centre - width, centre + width, epsabs=0, epsrel=1e-10, limit=200)
    return float(np.log(value) + centre * s / 2)


def confidence_sequence(
    values, *, planned_n: float, alpha: float = 0.05, prior_variance: float | None = None
) -> pd.DataFrame:
    """The asymptotic confidence sequence for the mean of ``values`` (in the order they arrived), one row per look:
    after each value. Its intervals hold the mean at every look at once with probability about 1 - alpha. See the
    module docstring for the formula; rho is tuned at ``planned_n``; ``prior_variance`` adds one pseudo-observation
    of that variance to the running variance (None: the plain sample variance, infinite before two values).

    Returns
    -------
    sequence : pandas.DataFrame
        ``n`` (values so far), ``estimate`` (their mean), ``sd`` (the standard deviation used), ``lam`` (0 here),
        ``radius``, ``low``, ``high``.

    Examples
    --------
    >>> sequence = confidence_sequence([4.0, 3.0, 5.0, 4.0, 4.5, 3.5], planned_n=100)
    >>> print(sequence[["n", "estimate", "low", "high"]].round(2).tail(3).to_string(index=False))
     n  estimate  low  high
     4       4.0 2.20  5.80
     5       4.1 2.70  5.50
     6       4.0 2.83  5.17
    """
    x = _finite(values, "values")
    n = np.arange(1, x.size + 1)
    estimate = np.cumsum(x) / n
    sd = _running_sd(x, estimate, prior_variance)
    return _sequence(n, estimate, sd, np.zeros(x.size), planned_n=planned_n, alpha=alpha)


def paired_confidence_sequence(
    values_a, values_b, *, planned_n: float, alpha: float = 0.05, prior_variance: float | None = None
) -> pd.DataFrame:
    """``confidence_sequence`` of the per-context differences a - b (aligned, in arrival order).

    Examples
    --------
    >>> sequence = paired_confidence_sequence([4, 5, 4, 5, 5], [3, 3, 4, 4, 3], planned_n=50)
    >>> round(float(sequence["estimate"].iloc[-1]), 2), bool(sequence["low"].iloc[-1] < 1.2 < sequence["high"].iloc[-1])
    (1.2, True)
    """
    a, b = _finite(values_a, "values_a"), _finite(values_b, "values_b")
    if a.shape != b.shape:
        raise ValueError(f"values_a and values_b must be aligned (one per context), got {a.size} and {b.size}")
    return confidence_sequence(a - b, planned_n=planned_n, alpha=alpha, prior_variance=prior_variance)


def ppi_confidence_sequence(
    labels,
    judged_rated,
    judged_unrated,
    *,
    planned_n: float,
    alpha: float = 0.05,
    prior_variance: float | None = None,
) -> pd.DataFrame:
    """The model-assisted (PPI++) confidence sequence for the mean label: ``labels`` and ``judged_rated`` aligned,
    one per human-rated context in the order they were rated; ``judged_unrated`` the judge's scores on the contexts
    people did not rate (in any order that does not depend on the labels). ``planned_n`` is the number of contexts
    people are planned to rate: it deals the judge-only contexts out to the looks and tunes rho. Each look adds the
    block value b_k of the module docstring; the sequence is ``confidence_sequence``'s over them.

    Returns
    -------
    sequence : pandas.DataFrame
        As ``confidence_sequence``; ``lam`` is the weight of the look's block.

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> quality = rng.normal(3.5, 0.6, 600)
    >>> judge = 0.5 + 0.8 * quality + rng.normal(0, 0.2, 600)
    >>> labels = quality[:200] + rng.normal(0, 0.4, 200)
    >>> ppi = ppi_confidence_sequence(labels, judge[:200], judge[200:], planned_n=200).iloc[-1]
    >>> human = confidence_sequence(labels, planned_n=200).iloc[-1]
    >>> round(float(ppi["estimate"]), 2), round(float(human["estimate"]), 2), round(float(ppi["lam"]), 2)
    (3.52, 3.53, 1.0)
    >>> round(float(ppi["radius"] / human["radius"]), 2)
    0.79
    """
    y, f = _finite(labels, "labels"), _finite(judged_rated, "judged_rated")
    f_unrated = _finite(judged_unrated, "judged_unrated")
    if y.shape != f.shape:
        raise ValueError(f"labels and judged_rated must be aligned (one per human-rated context), got {y.size} and "
                         f"{f.size}")
    if not planned_n >= 1:
        raise ValueError(f"planned_n must be at least 1 (the contexts people are planned to rate), got {planned_n!r}")
    n = np.arange(1, y.size + 1)
    dealt = np.minimum(np.floor(n * f_unrated.size / planned_n), f_unrated.size).astype(int)
    unrated_sums = np.concatenate([[0.0], np.cumsum(f_unrated)])
    block_size = 1 + np.diff(np.concatenate([[0], dealt]))
    block_mean = (f + np.diff(unrated_sums[np.concatenate([[0], dealt])])) / block_size
    lam = _predictable_lambda(y, f)
    values = y - lam * (f - block_mean)
    estimate = np.cumsum(values) / n
    sd = _running_sd(values, estimate, prior_variance)
    return _sequence(n, estimate, sd, lam, planned_n=planned_n, alpha=alpha)


def ppi_paired_confidence_sequence(
    labels_a,
    labels_b,
    judged_rated_a,
    judged_rated_b,
    judged_unrated_a,
    judged_unrated_b,
    *,
    planned_n: float,
    alpha: float = 0.05,
    prior_variance: float | None = None,
) -> pd.DataFrame:
    """``ppi_confidence_sequence`` of per-context differences: labels Y_a - Y_b and judge differences f_a - f_b on
    the contexts people rated for both (aligned, in the order rated), judge differences on the others.

    Examples
    --------
    >>> sequence = ppi_paired_confidence_sequence([4, 5, 4, 5], [3, 3, 4, 4], [4, 4, 4, 5], [3, 3, 3, 4],
    ...                                           [4, 5, 4], [3, 4, 4], planned_n=50)
    >>> list(sequence.columns) == list(SEQUENCE_COLUMNS), len(sequence)
    (True, 4)
    """
    pairs = [(labels_a, labels_b, "labels"), (judged_rated_a, judged_rated_b, "judged_rated"),
             (judged_unrated_a, judged_unrated_b, "judged_unrated")]
    differences = []
    for side_a, side_b, what in pairs:
        a, b = _finite(side_a, f"{what}_a"), _finite(side_b, f"{what}_b")
        if a.shape != b.shape:
            raise ValueError(f"{what}_a and {what}_b must be aligned (one per context), got {a.size} and {b.size}")
        differences.append(a - b)
    return ppi_confidence_sequence(*differences, planned_n=planned_n, alpha=alpha, prior_variance=prior_variance)


def ipw_ppi_confidence_sequence(
    labels,
    judged_rated,
    probabilities,
    judged_all,
    *,
    expected_rated: float,
    planned_n: float,
    alpha: float = 0.05,
    prior_variance: float | None = None,
) -> pd.DataFrame:
    """The model-assisted confidence sequence for the mean label over all N contexts of an actively sampled study
    (``analysis.stats.ppi.active``): each context was drawn for human rating with its own probability pi_i, so the
    rated contexts are not a uniform sample and the plain sequences above would estimate the mean of the contexts
    the judges found hard, not of the study. ``labels``, ``judged_rated`` and ``probabilities`` are aligned, one
    per human-rated context in the order they were rated; ``judged_all`` holds the judge's score of every context
    of the study (rated or not); ``expected_rated`` is B = sum_i pi_i over all of them (the draw's expected size).

    Each look's value is the inverse-probability weighted PPI++ term of active inference (Zrnic and Candès, ICML
    2024),

        v_k = lambda_k * mean(judged_all) + (B / N) * (Y_k - lambda_k f_k) / pi_k,

    whose mean over the drawn contexts estimates the study's mean label for any lambda_k fixed before look k
    (sum over the draw of (Y - lambda f) / pi is unbiased for the sum over every context, and the draw holds B of
    them on average); lambda_k is the predictable weight of ``ppi_confidence_sequence``. With all judge scores 0
    (lambda 0) it is the human-only Horvitz-Thompson sequence; with pi_i = B / N for every context, PPI++ with the
    judge's mean over the whole study. The looks are the drawn contexts in an order that does not depend on their
    labels (the hand-out's); the sequence is ``confidence_sequence``'s over the v_k.

    Returns
    -------
    sequence : pandas.DataFrame
        As ``confidence_sequence``; ``lam`` is each look's weight.

    Examples
    --------
    >>> rng = np.random.default_rng(3)
    >>> quality = rng.normal(3.5, 0.6, 2000)
    >>> judge = quality + rng.normal(0, 0.3, 2000)
    >>> pi = np.clip(0.05 + 0.2 * np.abs(judge - 3.5), 0.05, 0.6)  # harder contexts drawn more often
    >>> drawn = rng.random(2000) < pi
    >>> labels = quality[drawn] + rng.normal(0, 0.4, drawn.sum())
    >>> last = ipw_ppi_confidence_sequence(labels, judge[drawn], pi[drawn], judge, expected_rated=pi.sum(),
    ...                                    planned_n=pi.sum()).iloc[-1]
    >>> bool(last["low"] < quality.mean() < last["high"]), round(float(last["estimate"]), 2)
    (True, 3.5)
    """
    y, f = _finite(labels, "labels"), _finite(judged_rated, "judged_rated")
    pi, f_all = _finite(probabilities, "probabilities"), _finite(judged_all, "judged_all")
    if not (y.shape == f.shape == pi.shape):
        raise ValueError(f"labels, judged_rated and probabilities must be aligned (one per human-rated context), got "
                         f"{y.size}, {f.size} and {pi.size}")
    if not ((pi > 0) & (pi <= 1)).all():
        raise ValueError("probabilities must lie in (0, 1]: a rated context was drawn with a positive probability")
    if f_all.size < max(y.size, 1):
        raise ValueError(f"judged_all must hold the judge's score of every context of the study, got {f_all.size} for "
                         f"{y.size} rated contexts")
    if not 0 < expected_rated <= f_all.size:
        raise ValueError(f"expected_rated must lie in (0, {f_all.size}] (the sum of every context's probability), got "
                         f"{expected_rated!r}")
    if not planned_n >= 1:
        raise ValueError(f"planned_n must be at least 1 (the contexts people are planned to rate), got {planned_n!r}")
    n = np.arange(1, y.size + 1)
    lam = _predictable_lambda(y, f)
    values = lam * f_all.mean() + (expected_rated / f_all.size) * (y - lam * f) / pi
    estimate = np.cumsum(values) / n
    sd = _running_sd(values, estimate, prior_variance)
    return _sequence(n, estimate, sd, lam, planned_n=planned_n, alpha=alpha)


def two_phase_interval(burn_in: tuple[float, float, float], phase_two: tuple[float, float, float] | None, *,
                       known_sum: float, n_total: int, n_rest: int) -> tuple[float, float, float]:
    """A two-phase active draw's anytime-valid interval for the study's mean label at one look (estimate, low,
    high), from two sequences each run at alpha / 2 (chosen when the burn-in is drawn, so fixed in advance):

    * ``burn_in``: the burn-in's sequence for the study mean (its contexts are a uniform sample of the study:
      ``confidence_sequence`` and its paired and PPI++ forms), its last look;
    * ``phase_two``: the phase-2 sequence for the mean label over the ``n_rest`` contexts the burn-in did not draw
      (``ipw_ppi_confidence_sequence`` with each one's phase-2 probability q_i: given the burn-in, phase 2 is a
      Poisson draw of those contexts), its last look; None before phase 2 has a label.

    Once phase 2 is drawn the burn-in's labels are all in (the draw waits for them), so the study mean is
    (``known_sum`` + ``n_rest`` x m_rest) / ``n_total``, ``known_sum`` the sum of the labels of the contexts the
    burn-in drew: phase 2's interval for m_rest maps to one for the study mean. Each sequence misses the study mean
    at some look with probability at most alpha / 2, so their intersection misses with at most alpha (a union
    bound) and may be looked at after every label, across both phases. An empty intersection (only when one of the
    two missed) gives the narrower of the two; the estimate is the narrower one's, kept inside the intersection.

    Examples
    --------
    >>> two_phase_interval((0.4, 0.1, 0.7), None, known_sum=6.0, n_total=40, n_rest=30)
    (0.4, 0.1, 0.7)
    >>> two_phase_interval((0.4, 0.1, 0.7), (0.5, 0.3, 0.7), known_sum=6.0, n_total=40, n_rest=30)
    (0.525, 0.375, 0.675)
    >>> two_phase_interval((0.4, 0.1, 0.7), (0.1, -0.5, 0.7), known_sum=6.0, n_total=40, n_rest=30)
    (0.4, 0.1, 0.675)
    """
    if phase_two is None:
        return burn_in
    if not (n_total > 0 and 0 < n_rest <= n_total):
        raise ValueError(f"need 0 < n_rest <= n_total, got n_rest {n_rest} and n_total {n_total}")
    mapped = ((known_sum + n_rest * phase_two[0]) / n_total, (known_sum + n_rest * phase_two[1]) / n_total,
              (known_sum + n_rest * phase_two[2]) / n_total)
    narrower = min((burn_in, mapped), key=lambda interval: interval[2] - interval[1])
    low, high = max(burn_in[1], mapped[1]), min(burn_in[2], mapped[2])
    if not low <= high:
        return narrower
    return min(max(narrower[0], low), high), low, high


def decide(low: float, high: float, *, margin: float | None = None) -> Decision:
    """The state of a comparison whose interval for a - b is [low, high]: "A better" when it lies above 0, "B better"
    below 0, "equivalent within margin" when it lies inside [-margin, margin] (needs a margin), else "undecided".

    Examples
    --------
    >>> decide(0.1, 0.4), decide(-0.5, -0.2), decide(-0.1, 0.15, margin=0.25), decide(-0.1, 0.3, margin=0.25)
    (<Decision.A_BETTER: 'A better'>, <Decision.B_BETTER: 'B better'>, \
<Decision.EQUIVALENT: 'equivalent within margin'>, <Decision.UNDECIDED: 'undecided'>)
    """
    if not (np.isfinite(low) and np.isfinite(high)):
        return Decision.UNDECIDED
    if low > 0:
        return Decision.A_BETTER
    if high < 0:
        return Decision.B_BETTER
    if margin is not None and -margin <= low and high <= margin:
        return Decision.EQUIVALENT
    return Decision.UNDECIDED


def _sequence(n, estimate, sd, lam, *, planned_n: float, alpha: float) -> pd.DataFrame:
    rho = normal_mixture_rho(planned_n, alpha)
    radius = sd * normal_mixture_boundary(n, rho=rho, alpha=alpha) / n
    return pd.DataFrame({"n": n, "estimate": estimate, "sd": sd, "lam": lam, "radius": radius,
                         "low": estimate - radius, "high": estimate + radius}, columns=list(SEQUENCE_COLUMNS))


def _predictable_lambda(y: np.ndarray, f: np.ndarray) -> np.ndarray:
    """lambda_k = cov(Y, f) / var(f) over the human-rated contexts before k (both with 1 / (k - 1)), clipped to
    [0, 1]; 0 before two contexts or when the judge's scores so far do not vary."""
    before = np.arange(y.size, dtype=float)  # contexts before k
    with np.errstate(invalid="ignore", divide="ignore"):
        sum_y, sum_f = np.concatenate([[0.0], np.cumsum(y)[:-1]]), np.concatenate([[0.0], np.cumsum(f)[:-1]])
        sum_yf = np.concatenate([[0.0], np.cumsum(y * f)[:-1]])
        sum_ff = np.concatenate([[0.0], np.cumsum(f * f)[:-1]])
        covariance = sum_yf / before - sum_y * sum_f / before**2
        variance = sum_ff / before - (sum_f / before) ** 2
        lam = np.clip(covariance / variance, 0.0, 1.0)
    return np.where((before >= 2) & (variance > 1e-12), lam, 0.0)


def _running_sd(x: np.ndarray, running_mean: np.ndarray, prior_variance: float | None) -> np.ndarray:
    """The standard deviation after each value: the sample variance (1 / t, as Waudby-Smith et al.), with one
    pseudo-observation of ``prior_variance`` when given; infinite while undefined (fewer than two values, no
    prior)."""
    n = np.arange(1, x.size + 1)
    squares = np.cumsum(x**2) / n - running_mean**2
    squares = np.maximum(squares, 0.0)
    if prior_variance is not None:
        if not prior_variance > 0:
            raise ValueError(f"prior_variance must be a positive variance, got {prior_variance!r}")
        return np.sqrt((n * squares + prior_variance) / (n + 1))
    return np.where(n >= 2, np.sqrt(squares), np.inf)


def _finite(values, what: str) -> np.ndarray:
    array = np.asarray(values, dtype=float)
    if array.ndim != 1:
        raise ValueError(f"{what} must be 1-d, one value per context")
    if not np.isfinite(array).all():
        raise ValueError(f"{what} must be finite")
    return array


def _check_alpha(alpha: float) -> None:
    if not 0 < alpha < 1:
        raise ValueError(f"alpha must be strictly between 0 and 1, got {alpha!r}")
