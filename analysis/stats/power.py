"""Planning a study: how many contexts and ratings per response detect a given difference, and the cost.

The design model (the same as ``empeval.analysis.simulate.likert``): a rating of system s on context c by a rater is
``round(centre + effect_s + context_c + response_cs + bias_rater + noise)`` clipped to the scale, with
context_c ~ N(0, context_sd), response_cs ~ N(0, response_sd), bias ~ N(0, rater_sd), noise ~ N(0, noise_sd).
The analysis is the one the report runs for a pair of systems: a two-sided Wilcoxon signed-rank test on
item-level means (the k ratings of a response averaged), paired by context, zero differences dropped
(Wilcoxon 1945), normal approximation with tie and continuity correction (what ``analysis.stats.significance`` uses
once there are more than 50 non-zero pairs, the smallest design planned here), at level alpha.

Power is estimated by simulating the whole design many times (vectorised over replicates); the analytic
power of a paired t-test on the same design (noncentral t, statsmodels) is given beside it as a check.
Variance components can be estimated from a pilot study (``components_from_pilot``).
"""
from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy import stats
from statsmodels.stats.power import TTestPower


@dataclass(frozen=True)
class Components:
    """Standard deviations of the design model (on the rating scale) and its centre.

    The defaults are typical of ED Likert studies; ``components_from_pilot`` estimates them from a pilot.

    Examples
    --------
    >>> Components(noise_sd=0.9)
    Components(centre=3.4, context_sd=0.4, response_sd=0.5, rater_sd=0.35, noise_sd=0.9, scale=(1, 5))
    """

    centre: float = 3.4
    context_sd: float = 0.4
    response_sd: float = 0.5
    rater_sd: float = 0.35
    noise_sd: float = 0.7
    scale: tuple[int, int] = (1, 5)


def simulate_item_means(components: Components, *, n_contexts: int, k: int, effect: float, replicates: int,
                        rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Item-level means of two systems (b better than a by `effect`) under the design model of the module
    docstring: k ratings per response, rounded and clipped to the scale, then averaged.

    Returns
    -------
    a, b : numpy.ndarray
        Shape (replicates, n_contexts) each, paired by context.

    Examples
    --------
    >>> import numpy as np
    >>> a, b = simulate_item_means(Components(), n_contexts=5, k=3, effect=0.3, replicates=2,
    ...                            rng=np.random.default_rng(0))
    >>> a.shape, b.shape
    ((2, 5), (2, 5))
    >>> bool(((a * 3) % 1 == 0).all())  # means of three whole-number scores
    True
    """
    c = components
    lo, hi = c.scale
    shape = (replicates, n_contexts)
    context = rng.normal(0.0, c.context_sd, shape)
    means = []
    for shift in (0.0, effect):
        latent = c.centre + shift + context + rng.normal(0.0, c.response_sd, shape)
        raw = latent[..., None] + rng.normal(0.0, c.rater_sd, shape + (k,)) + rng.normal(0.0, c.noise_sd, shape + (k,))
        means.append(np.clip(np.rint(raw), lo, hi).mean(axis=-1))
    return means[0], means[1]


def wilcoxon_pvalues(a: np.ndarray, b: np.ndarray, *, decimals: int = 9) -> np.ndarray:
    """Two-sided Wilcoxon signed-rank p-values of b - a along the last axis (see the module docstring).

    Returns
    -------
    p : numpy.ndarray
        One p-value per row; 1.0 where the test is undefined (all differences zero).

    Examples
    --------
    >>> import numpy as np
    >>> a = np.array([[3.0, 2.0, 4.0, 3.0, 2.0, 3.0], [3.0, 3.0, 3.0, 3.0, 3.0, 3.0]])
    >>> wilcoxon_pvalues(a, a + [0.5, 1.0, 0.5, 1.5, 1.0, -0.5]).round(3)
    array([0.089, 0.089])
    >>> wilcoxon_pvalues(a, a)
    array([1., 1.])
    """
    d = np.round(b - a, decimals)
    with np.errstate(invalid="ignore", divide="ignore"):
        result = stats.wilcoxon(d, axis=-1, zero_method="wilcox", correction=True, method="approx",
                                nan_policy="propagate")
    return np.nan_to_num(np.asarray(result.pvalue, dtype=float), nan=1.0)


def paired_t_pvalues(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Two-sided paired t-test p-values of b - a along the last axis (scipy's ``ttest_rel``).

    Returns
    -------
    p : numpy.ndarray
        One p-value per row; 1.0 where the test is undefined (no variance in the differences).

    Examples
    --------
    >>> import numpy as np
    >>> a = np.array([[3.0, 2.0, 4.0, 3.0, 2.0, 3.0]])
    >>> paired_t_pvalues(a, a + [0.5, 1.0, 0.5, 1.5, 1.0, -0.5]).round(3)
    array([0.062])
    """
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.nan_to_num(np.asarray(stats.ttest_rel(b, a, axis=-1).pvalue, dtype=float), nan=1.0)


TESTS = {"wilcoxon": wilcoxon_pvalues, "t": paired_t_pvalues}


def simulated_power(components: Components, *, n_contexts: int, k: int, effect: float, alpha: float = 0.05,
                    replicates: int = 400, seed: int = 0, test: str = "wilcoxon") -> float:
    """Share of simulated studies in which `test` ("wilcoxon", the report's test, or "t") finds the
    difference at level alpha (``replicates`` studies of ``simulate_item_means``, seeded).

    Returns
    -------
    power : float
        In [0, 1]; its Monte Carlo standard error is about sqrt(power (1 - power) / replicates).

    Examples
    --------
    >>> simulated_power(Components(), n_contexts=100, k=3, effect=0.3, replicates=200)
    0.855
    """
    rng = np.random.default_rng(seed)
    a, b = simulate_item_means(components, n_contexts=n_contexts, k=k, effect=effect, replicates=replicates, rng=rng)
    return float((TESTS[test](a, b) < alpha).mean())


def difference_moments(components: Components, *, k: int, effect: float, seed: int = 12345,
                       contexts: int = 400_000) -> tuple[float, float]:
    """Mean and SD of the per-context difference of item means under the design, from one large draw.

    Rounding to the scale and clipping at its ends shrink a latent `effect` (0.3 latent is about 0.28
    observed with the default components), so the t-test's effect size must come from this draw.

    Returns
    -------
    mean, sd : float
        Mean and SD (ddof = 1) of the per-context difference b - a.

    Examples
    --------
    >>> mean, sd = difference_moments(Components(), k=3, effect=0.3)
    >>> round(mean, 2), round(sd, 2)
    (0.28, 0.92)
    """
    rng = np.random.default_rng(seed)
    a, b = simulate_item_means(components, n_contexts=contexts, k=k, effect=effect, replicates=1, rng=rng)
    d = b - a
    return float(np.mean(d)), float(np.std(d, ddof=1))


def analytic_t_power(components: Components, *, n_contexts: int, k: int, effect: float, alpha: float = 0.05) -> float:
    """Power of a two-sided paired t-test (one-sample t on differences, noncentral t; statsmodels'
    ``TTestPower``) on the same design, with the effect size d_z from ``difference_moments``.

    Returns
    -------
    power : float
        In [0, 1].

    Examples
    --------
    >>> round(analytic_t_power(Components(), n_contexts=100, k=3, effect=0.3), 3)
    0.845
    """
    mean, sd = difference_moments(components, k=k, effect=effect)
    return float(TTestPower().power(effect_size=mean / sd, nobs=n_contexts, alpha=alpha, alternative="two-sided"))


def analytic_t_contexts(components: Components, *, k: int, effect: float, alpha: float = 0.05,
                        power: float = 0.8) -> float:
    """Contexts a paired t-test needs for `power` on the same design (statsmodels' solve_power).

    Returns
    -------
    contexts : float
        Not rounded: round up for a design.

    Examples
    --------
    >>> round(analytic_t_contexts(Components(), k=3, effect=0.3), 1)
    89.0
    """
    mean, sd = difference_moments(components, k=k, effect=effect)
    return float(TTestPower().solve_power(effect_size=mean / sd, alpha=alpha, power=power, alternative="two-sided"))


def required_contexts(components: Components, *, k: int, effect: float, alpha: float = 0.05, power: float = 0.8,
                      replicates: int = 400, seed: int = 0, upper: int = 5000, test: str = "wilcoxon") -> int:
    """Smallest number of contexts whose simulated power reaches `power` (bisection on a monotone curve;
    the same seed at every n keeps the curve smooth).

    Returns
    -------
    contexts : int
        At least 6; ``upper`` when even that many do not reach `power`.

    Examples
    --------
    >>> required_contexts(Components(), k=3, effect=0.3, replicates=200)
    85
    """
    def enough(n: int) -> bool:
        return simulated_power(components, n_contexts=n, k=k, effect=effect, alpha=alpha, replicates=replicates,
                               seed=seed, test=test) >= power

    low, high = 6, 25
    while not enough(high):
        low, high = high, high * 2
        if high > upper:
            return upper
    while high - low > 1:
        middle = (low + high) // 2
        low, high = (low, middle) if enough(middle) else (middle, high)
    return high


def plan_table(components: Components, *, effect: float, alpha: float = 0.05, power: float = 0.8, ks=(1, 3, 5),
               contexts=(50, 100, 200, 400), systems: int = 2, items_per_assignment: int = 10,
               reward: float | None = None, fee: float = 0.2, replicates: int = 400, seed: int = 0,
               assignments: Callable[[int, int], int] | None = None) -> pd.DataFrame:
    """Power and cost over a grid of designs: one row per (k, contexts).

    Cost = assignments x reward x (1 + fee), rounded to cents. ``assignments(contexts, k)`` says how many
    assignments a design needs (`empeval plan` passes the study design's own count, control slots included);
    without it, contexts x systems x k / items per assignment, rounded up, with no control slot.

    Returns
    -------
    plan : pandas.DataFrame
        One row per k (ratings per response) and number of contexts:

        * ``k``, ``contexts``, ``ratings`` (= contexts x systems x k)
        * ``power_wilcoxon``: ``simulated_power`` of the report's test
        * ``power_t_analytic``: ``analytic_t_power``, as a check
        * ``assignments``: assignments needed
        * ``cost``: in the currency of ``reward``; None without a reward

    Examples
    --------
    >>> plan = plan_table(Components(), effect=0.3, ks=(3,), contexts=(50, 100), replicates=200, reward=1.0)
    >>> print(plan.round(2).to_string(index=False))
     k  contexts  ratings  power_wilcoxon  power_t_analytic  assignments  cost
     3        50      300            0.52              0.55           30  36.0
     3       100      600            0.86              0.84           60  72.0
    """
    rows = []
    for k in ks:
        for n in contexts:
            needed = assignments(n, k) if assignments else int(np.ceil(n * systems * k / items_per_assignment))
            rows.append({
                "k": k, "contexts": n, "ratings": n * systems * k,
                "power_wilcoxon": simulated_power(components, n_contexts=n, k=k, effect=effect, alpha=alpha,
                                                  replicates=replicates, seed=seed),
                "power_t_analytic": analytic_t_power(components, n_contexts=n, k=k, effect=effect, alpha=alpha),
                "assignments": needed,
                "cost": None if reward is None else round(needed * reward * (1 + fee), 2),
            })
    return pd.DataFrame(rows)


def components_from_pilot(ratings: pd.DataFrame, *, criterion: str, scale: tuple[int, int] = (1, 5)) -> Components:
    """Method-of-moments estimates of the design model's SDs from a pilot (tidy table, controls left out).

    Within an item, scores vary by rater bias plus noise; the annotator means of those within-item
    deviations give the bias part. Item means vary by context + response + within/k; the covariance of
    item means of two systems on the same context gives the context part.

    Returns
    -------
    components : Components
        The estimated centre and SDs (each at least 0), with ``scale``.

    Examples
    --------
    A simulated pilot drawn with context_sd 0.4, response_sd 0.4 (shared in part between criteria), rater
    bias 0.3 and noise 0.7 around a centre of 3.2 plus the systems' effects:

    >>> from empeval.analysis import simulate_study, tidy_from_export
    >>> pilot = simulate_study(n_contexts=40, n_random_clickers=0, n_straight_liners=0, seed=1)
    >>> estimate = components_from_pilot(tidy_from_export(pilot.export), criterion="empathy")
    >>> {name: round(value, 2) for name, value in vars(estimate).items() if name != "scale"}
    {'centre': 3.26, 'context_sd': 0.3, 'response_sd': 0.39, 'rater_sd': 0.13, 'noise_sd': 0.69}
    """
    data = ratings[(ratings["criterion"] == criterion) & (~ratings["is_control"].astype(bool))]
    if data.empty:
        raise ValueError(f"the pilot has no non-control ratings on {criterion!r}")
    item_mean = data.groupby("item")["score"].transform("mean")
    deviation = data["score"] - item_mean
    sizes = data.groupby("item")["score"].transform("size")
    degrees = (sizes[sizes > 1] - 1).groupby(data["item"]).first().sum()
    within = float((deviation[sizes > 1] ** 2).sum() / max(1, degrees))
    rater_var = (float(deviation.groupby(data["annotator"]).mean().var(ddof=1)) if data["annotator"].nunique() > 2
                 else 0.0)
    rater_var = min(max(rater_var, 0.0), within)
    means = data.groupby(["context", "system"])["score"].agg(["mean", "size"]).reset_index()
    k_obs = float(means["size"].mean())
    centred = means.assign(mean=means["mean"] - means.groupby("system")["mean"].transform("mean"))
    wide = centred.pivot(index="context", columns="system", values="mean")
    pair_cov = []
    columns = list(wide.columns)
    for i in range(len(columns)):
        for j in range(i + 1, len(columns)):
            both = wide[[columns[i], columns[j]]].dropna()
            if len(both) > 2:
                pair_cov.append(float(np.cov(both.to_numpy().T)[0, 1]))
    context_var = max(float(np.mean(pair_cov)) if pair_cov else 0.0, 0.0)
    between = float(centred["mean"].var(ddof=1))
    response_var = max(between - context_var - within / k_obs, 0.0)
    return Components(centre=float(data["score"].mean()), context_sd=context_var ** 0.5,
                      response_sd=response_var ** 0.5, rater_sd=rater_var ** 0.5,
                      noise_sd=max(within - rater_var, 0.0) ** 0.5, scale=scale)


def power_curves_figure(components: Components, *, effect: float, alpha: float = 0.05, power: float = 0.8,
                        ks=(1, 3, 5), contexts=None, replicates: int = 400, seed: int = 0):
    """Simulated Wilcoxon power (``simulated_power``) against the number of contexts, one line per k, with
    the target `power` as a dashed line.

    Returns
    -------
    figure : matplotlib.figure.Figure
        One axes; no pyplot state is touched.

    Examples
    --------
    >>> figure = power_curves_figure(Components(), effect=0.3, ks=(1, 3), contexts=[25, 50], replicates=50)
    >>> [line.get_label() for line in figure.axes[0].get_lines()][:2]
    ['k = 1 ratings per response', 'k = 3 ratings per response']
    """
    from matplotlib.figure import Figure

    contexts = contexts or list(range(25, 425, 25))
    figure = Figure(figsize=(6.5, 4.0), dpi=110)
    axes = figure.subplots()
    for k in ks:
        powers = [simulated_power(components, n_contexts=n, k=k, effect=effect, alpha=alpha, replicates=replicates,
                                  seed=seed) for n in contexts]
        axes.plot(contexts, powers, marker="o", markersize=3, label=f"k = {k} ratings per response")
    axes.axhline(power, color="grey", linestyle="--", linewidth=1)
    axes.set_xlabel("contexts (each rated for both systems)")
    axes.set_ylabel("power (Wilcoxon, simulated)")
    axes.set_ylim(0, 1.02)
    axes.set_title(f"Detecting a {effect:g}-point difference at alpha = {alpha:g}")
    axes.legend(loc="lower right")
    axes.grid(alpha=0.3)
    figure.tight_layout()
    return figure


# --- Pairwise (A/B) studies: power of the per-context sign test ---------------------------------------------
#
# The report decides an A/B comparison by an exact two-sided sign test over contexts
# (analysis/kinds/pairwise/tables.py): each
# context counts once, for the system with more wins among its k judgments, and contexts with net zero are
# left out. The planning inputs are the per-judgment rates, P(win | not tie) = p and the tie rate t, so that a
# judgment is a win with q_w = (1 - t) p, a loss with q_l = (1 - t)(1 - p), a tie with t.
#
# The k judgments of a context are not independent: every rater compares the same two responses, whose
# quality differs by more or less than the systems' difference (analysis/simulate/pairwise.py draws exactly that).
# In Thurstone's terms (case V), a judgment's perceived difference is delta_c + e, with delta_c ~ N(Delta, s)
# shared by the context and e ~ N(0, 1 - s) the rater's own noise (unit total variance); a tie when it falls
# within +-b. ``context_share`` is s, the share of the variance the context's judgments share. The marginal
# rates fix Delta - b = z(q_w) and -b - Delta = z(q_l) (z the standard normal quantile), whatever s. Given
# delta_c, a context's (wins, losses, ties) is multinomial with q_w(delta) = Phi((delta - b) / sqrt(1 - s)),
# q_l(delta) = Phi((-b - delta) / sqrt(1 - s)); integrating over delta_c (Gauss-Hermite quadrature) gives the
# probabilities pi_w, pi_l, pi_0 that a context is won, lost or even. With s = 0 they are those of k independent
# judgments; with k = 1 they are the marginal rates, whatever s. A larger s makes extra judgments of a context
# worth less: planning with s = 0 for k > 1 overstates the power. In analysis/simulate/pairwise.py's default
# design (s = 0.24), at k = 3, p = 0.61, t = 0.2 and 40 contexts: 0.38 with s = 0, 0.29 with s = 0.24, and
# 0.26 +- 0.03 observed over 300 simulated studies (at k = 1: 0.15 from either, 0.145 +- 0.011 over 1000).
#
# Contexts are independent, so over n contexts the decisive ones number M ~ Binomial(n, 1 - pi_0), and given
# M = m the contexts won are Binomial(m, rho) with rho = pi_w / (pi_w + pi_l). The test rejects at level alpha
# when x <= c_m or x >= m - c_m, c_m the largest c with 2 P(Binomial(m, 1/2) <= c) <= alpha, so the exact power
# is sum_m P(M = m) [P(X <= c_m) + P(X >= m - c_m)] (the conditional-binomial power of the sign test; e.g.
# Lehmann & Romano, Testing Statistical Hypotheses, 3.8). Being a discrete test, its power is a sawtooth in n,
# not monotone: the plan reports the smallest n that reaches the target.

#: The context share implied by analysis.simulate.likert's default components (response_sd 0.4, noise_sd 0.7): the two
#: responses' own effects, variance 2 x 0.98 x 0.4^2, over that plus two perception noises, 2 x 0.7^2.
SIMULATION_CONTEXT_SHARE = round(2 * 0.98 * 0.4 ** 2 / (2 * 0.98 * 0.4 ** 2 + 2 * 0.7 ** 2), 2)


def context_outcome_probabilities(*, p_win: float, tie_rate: float, k: int,
                                  context_share: float = 0.0) -> tuple[float, float, float]:
    """Probabilities that a context with ``k`` judgments (marginally win (1 - t) p, loss (1 - t)(1 - p), tie
    t) has more wins than losses, fewer, or as many, when the judgments of a context share ``context_share``
    of the variance of their perceived difference (0: independent; the Thurstone model of the comment above).

    Returns
    -------
    won, lost, even : float
        Summing to 1.

    Examples
    --------
    With k = 1 they are the judgment rates; with k = 2, independent judgments and no ties, even is 2 p (1 - p);
    judgments that share their context agree more, so fewer contexts come out even:

    >>> [round(v, 4) for v in context_outcome_probabilities(p_win=0.6, tie_rate=0.2, k=1, context_share=0.3)]
    [0.48, 0.32, 0.2]
    >>> [round(v, 4) for v in context_outcome_probabilities(p_win=0.6, tie_rate=0.0, k=2)]
    [0.36, 0.16, 0.48]
    >>> [round(v, 4) for v in context_outcome_probabilities(p_win=0.6, tie_rate=0.0, k=2, context_share=0.5)]
    [0.4391, 0.2391, 0.3217]
    """
    _check_rates(p_win, tie_rate, k)
    if not 0 <= context_share < 1:
        raise ValueError(f"context_share must lie in [0, 1), got {context_share}")
    q_win, q_loss, q_tie = _judgment_rates_by_context(p_win, tie_rate, context_share)
    won = lost = np.zeros_like(q_win)
    for wins in range(k + 1):
        for losses in range(k + 1 - wins):
            if wins == losses:
                continue
            ties = k - wins - losses
            probability = (math.factorial(k) / (math.factorial(wins) * math.factorial(losses) * math.factorial(ties))
                           * q_win ** wins * q_loss ** losses * q_tie ** ties)
            if wins > losses:
                won = won + probability
            else:
                lost = lost + probability
    weights = _QUADRATURE[1] if context_share > 0 else np.ones(1)
    won_total, lost_total = float(np.dot(weights, won)), float(np.dot(weights, lost))
    return won_total, lost_total, max(0.0, 1.0 - won_total - lost_total)


def _judgment_rates_by_context(p_win: float, tie_rate: float, share: float) -> tuple[np.ndarray, ...]:
    """Per quadrature node of delta_c: the win, loss and tie probabilities of one judgment (comment above)."""
    q_win, q_loss = (1 - tie_rate) * p_win, (1 - tie_rate) * (1 - p_win)
    if share == 0:
        return np.array([q_win]), np.array([q_loss]), np.array([tie_rate])
    if not 0 < p_win < 1:
        raise ValueError(f"with context_share > 0, p_win must lie strictly between 0 and 1, got {p_win}")
    z_win, z_loss = stats.norm.ppf(q_win), stats.norm.ppf(q_loss)
    delta, band = (z_win - z_loss) / 2, -(z_win + z_loss) / 2
    shared = delta + np.sqrt(share) * _QUADRATURE[0]
    own = np.sqrt(1 - share)
    wins, losses = stats.norm.cdf((shared - band) / own), stats.norm.cdf((-band - shared) / own)
    return wins, losses, np.clip(1 - wins - losses, 0.0, 1.0)


def _hermite_nodes(count: int) -> tuple[np.ndarray, np.ndarray]:
    """Gauss-Hermite nodes and weights for a standard normal expectation (numpy's hermegauss, normalised)."""
    nodes, weights = np.polynomial.hermite_e.hermegauss(count)
    return nodes, weights / weights.sum()


_QUADRATURE = _hermite_nodes(60)


def sign_test_power(*, p_win: float, tie_rate: float, n_contexts: int, k: int, alpha: float = 0.05,
                    context_share: float = 0.0) -> float:
    """Exact power of the report's per-context sign test (two-sided, level ``alpha``) over ``n_contexts``
    contexts with ``k`` judgments each, sharing ``context_share`` of their variance (the comment above).

    Returns
    -------
    power : float
        In [0, 1]; at most alpha when p_win is 1/2.

    Examples
    --------
    10 contexts, one judgment each, no ties, p = 0.9: the test rejects for 0-1 or 9-10 wins (2 x 11/1024 <=
    0.05), so the power is P(X >= 9) + P(X <= 1) for X ~ Binomial(10, 0.9):

    >>> round(sign_test_power(p_win=0.9, tie_rate=0.0, n_contexts=10, k=1), 4)
    0.7361
    """
    if n_contexts < 1:
        raise ValueError(f"n_contexts must be at least 1, got {n_contexts}")
    if not 0 < alpha < 1:
        raise ValueError(f"alpha must lie strictly between 0 and 1, got {alpha}")
    won, lost, even = context_outcome_probabilities(p_win=p_win, tie_rate=tie_rate, k=k, context_share=context_share)
    reject = _rejection_given_decisive(won, lost, n_contexts, alpha)
    return float(np.dot(stats.binom.pmf(np.arange(n_contexts + 1), n_contexts, 1.0 - even), reject))


def sign_test_contexts(*, p_win: float, tie_rate: float, k: int, alpha: float = 0.05, power: float = 0.8,
                       context_share: float = 0.0, upper: int = 5000) -> int:
    """Smallest number of contexts whose exact sign-test power (``sign_test_power``) reaches ``power``.

    Returns
    -------
    contexts : int
        ``upper`` when even that many do not reach it.

    Examples
    --------
    >>> sign_test_contexts(p_win=0.9, tie_rate=0.0, k=1)
    12
    >>> sign_test_contexts(p_win=0.65, tie_rate=0.2, k=1), sign_test_contexts(p_win=0.65, tie_rate=0.2, k=3)
    (114, 50)
    >>> sign_test_contexts(p_win=0.65, tie_rate=0.2, k=3, context_share=0.24)
    66
    """
    won, lost, even = context_outcome_probabilities(p_win=p_win, tie_rate=tie_rate, k=k, context_share=context_share)
    reject = _rejection_given_decisive(won, lost, upper, alpha)
    m = np.arange(upper + 1)
    for n in range(1, upper + 1):
        if np.dot(stats.binom.pmf(m[:n + 1], n, 1.0 - even), reject[:n + 1]) >= power:
            return n
    return upper


def simulated_sign_test_power(*, p_win: float, tie_rate: float, n_contexts: int, k: int, alpha: float = 0.05,
                              context_share: float = 0.0, replicates: int = 2000, seed: int = 0) -> float:
    """Share of simulated A/B comparisons in which the per-context sign test (net wins, even contexts left
    out, scipy's ``binomtest``) rejects: a check of ``sign_test_power`` by brute force. Judgments are drawn
    as in the comment above: independently with the marginal rates when ``context_share`` is 0, else as
    perceived differences delta_c + e with delta_c drawn once per context.

    Returns
    -------
    power : float
        Its Monte Carlo standard error is about sqrt(power (1 - power) / replicates).

    Examples
    --------
    >>> simulated_sign_test_power(p_win=0.9, tie_rate=0.0, n_contexts=10, k=1, replicates=500)
    0.754
    """
    _check_rates(p_win, tie_rate, k)
    rng = np.random.default_rng(seed)
    q_win, q_loss = (1 - tie_rate) * p_win, (1 - tie_rate) * (1 - p_win)
    if context_share == 0:
        draws = rng.multinomial(k, [q_win, q_loss, tie_rate], size=(replicates, n_contexts))
        net = draws[..., 0] - draws[..., 1]
    else:
        z_win, z_loss = stats.norm.ppf(q_win), stats.norm.ppf(q_loss)
        delta, band = (z_win - z_loss) / 2, -(z_win + z_loss) / 2
        shared = rng.normal(delta, np.sqrt(context_share), size=(replicates, n_contexts, 1))
        perceived = shared + rng.normal(0.0, np.sqrt(1 - context_share), size=(replicates, n_contexts, k))
        net = (perceived > band).sum(axis=-1) - (perceived < -band).sum(axis=-1)
    won, lost = (net > 0).sum(axis=1), (net < 0).sum(axis=1)
    outcomes, counts = np.unique(np.stack([won, lost], axis=1), axis=0, return_counts=True)
    rejected = sum(int(count) for (w, lo), count in zip(outcomes, counts, strict=True)
                   if w + lo > 0 and stats.binomtest(int(w), int(w + lo), 0.5).pvalue <= alpha)
    return rejected / replicates


def pairwise_plan_table(*, p_win: float, tie_rate: float, alpha: float = 0.05, context_share: float = 0.0,
                        ks=(1, 3, 5), contexts=(50, 100, 200, 400), pairs: int = 1, pairs_per_assignment: int = 10,
                        reward: float | None = None, fee: float = 0.2,
                        assignments: Callable[[int, int], int] | None = None) -> pd.DataFrame:
    """Exact sign-test power and cost of pairwise designs: one row per (k, contexts).

    Cost = assignments x reward x (1 + fee), rounded to cents. ``assignments(contexts, k)`` says how many
    assignments a design needs (`empeval plan --pairwise` passes the study design's own count, control slots
    included); without it, contexts x pairs x k / pairs per assignment, rounded up, with no control slot.

    Returns
    -------
    plan : pandas.DataFrame
        * ``k`` (judgments per context and pair), ``contexts``, ``judgments`` (= contexts x pairs x k)
        * ``power``: ``sign_test_power`` of one pair
        * ``assignments``, ``cost`` (None without a reward)

    Examples
    --------
    >>> plan = pairwise_plan_table(p_win=0.65, tie_rate=0.2, ks=(1, 3), contexts=(50, 100), pairs=2, reward=1.0)
    >>> print(plan.round(3).to_string(index=False))
     k  contexts  judgments  power  assignments  cost
     1        50        100  0.421           10  12.0
     1       100        200  0.739           20  24.0
     3        50        300  0.806           30  36.0
     3       100        600  0.984           60  72.0
    """
    rows = []
    for k in ks:
        for n in contexts:
            needed = assignments(n, k) if assignments else int(np.ceil(n * pairs * k / pairs_per_assignment))
            rows.append({"k": k, "contexts": n, "judgments": n * pairs * k,
                         "power": sign_test_power(p_win=p_win, tie_rate=tie_rate, n_contexts=n, k=k, alpha=alpha,
                                                  context_share=context_share),
                         "assignments": needed,
                         "cost": None if reward is None else round(needed * reward * (1 + fee), 2)})
    return pd.DataFrame(rows)


def _rejection_given_decisive(won: float, lost: float, m_max: int, alpha: float) -> np.ndarray:
    """P(the sign test rejects | m decisive contexts) for m = 0..m_max: P(X <= c_m) + P(X >= m - c_m) with
    X ~ Binomial(m, won / (won + lost)) (the comment above)."""
    m = np.arange(m_max + 1)
    critical = _sign_test_critical(m, alpha)
    rho = won / (won + lost) if won + lost > 0 else 0.5
    return np.where(critical >= 0, stats.binom.cdf(critical, m, rho) + stats.binom.sf(m - critical - 1, m, rho), 0.0)


def _sign_test_critical(m: np.ndarray, alpha: float) -> np.ndarray:
    """Largest c with 2 P(Binomial(m, 1/2) <= c) <= alpha, per m (-1 when no c qualifies)."""
    c = stats.binom.ppf(alpha / 2, m, 0.5).astype(int)
    c = np.where(stats.binom.cdf(c, m, 0.5) <= alpha / 2 + 1e-12, c, c - 1)
    return np.where(c >= 0, c, -1)


def _check_rates(p_win: float, tie_rate: float, k: int) -> None:
    if not 0 <= p_win <= 1:
        raise ValueError(f"p_win (P(win | not tie)) must lie in [0, 1], got {p_win}")
    if not 0 <= tie_rate < 1:
        raise ValueError(f"tie_rate must lie in [0, 1), got {tie_rate}")
    if k < 1:
        raise ValueError(f"k (judgments per context and pair) must be at least 1, got {k}")


def net_preference_moments(*, p_win: float, tie_rate: float, k: int, context_share: float = 0.0) -> tuple[float, float]:
    """Mean and standard deviation of a context's net preference for the better system, (wins - losses) / k over
    its k judgments, under the judgment model of ``context_outcome_probabilities`` (the label an A/B study's
    decisions and model-assisted estimates average).

    Given the context's rates (q_win, q_loss), the label has mean q_win - q_loss and variance
    (q_win + q_loss - (q_win - q_loss)^2) / k; over contexts (Gauss-Hermite quadrature over the shared part) the
    mean is the average of the means and the variance the average variance plus the variance of the means.

    Returns
    -------
    mean, sd : float

    Examples
    --------
    >>> [round(v, 4) for v in net_preference_moments(p_win=0.6, tie_rate=0.2, k=1)]
    [0.16, 0.88]
    >>> [round(v, 4) for v in net_preference_moments(p_win=0.6, tie_rate=0.2, k=3, context_share=0.3)]
    [0.16, 0.612]
    """
    _check_rates(p_win, tie_rate, k)
    if not 0 <= context_share < 1:
        raise ValueError(f"context_share must lie in [0, 1), got {context_share}")
    q_win, q_loss, _ = _judgment_rates_by_context(p_win, tie_rate, context_share)
    weights = _QUADRATURE[1] if context_share > 0 else np.ones(1)
    means = q_win - q_loss
    within = (q_win + q_loss - means**2) / k
    mean = float(np.dot(weights, means))
    variance = float(np.dot(weights, within) + np.dot(weights, (means - mean) ** 2))
    return mean, math.sqrt(max(variance, 0.0))


def net_preference_contexts(*, p_win: float, tie_rate: float, k: int, alpha: float = 0.05, power: float = 0.8,
                            context_share: float = 0.0, judge_correlation: float = 0.0,
                            human_share: float = 1.0) -> int:
    """Contexts people must judge for a two-sided z-test of A's mean net preference (``net_preference_moments``) to
    reach ``power`` at ``alpha``: n = ((z_{1-alpha/2} + z_power) sd / mean)^2, human-only; with a judge of
    differences whose verdict correlates ``judge_correlation`` (rho) with a context's net preference and compares
    the pairs of every context while people judge ``human_share`` (s) of them, PPI++'s optimal variance is
    sd^2 (1 - rho^2 (1 - s)) / n (Angelopoulos, Duchi and Zrnic 2023: N / (n + N) = 1 - s), so n shrinks by that
    factor. The study then holds n / s contexts.

    Returns
    -------
    contexts : int
        The contexts people judge (rounded up; at least 2).

    Examples
    --------
    >>> net_preference_contexts(p_win=0.65, tie_rate=0.2, k=3)
    34
    >>> net_preference_contexts(p_win=0.65, tie_rate=0.2, k=3, judge_correlation=0.7, human_share=0.25)
    22
    """
    if not -1 <= judge_correlation <= 1:
        raise ValueError(f"judge_correlation must lie in [-1, 1], got {judge_correlation}")
    if not 0 < human_share <= 1:
        raise ValueError(f"human_share must lie in (0, 1], got {human_share}")
    mean, sd = net_preference_moments(p_win=p_win, tie_rate=tie_rate, k=k, context_share=context_share)
    if mean == 0:
        raise ValueError("with p_win 0.5 the systems are equal: no number of contexts detects a difference")
    z = stats.norm.ppf(1 - alpha / 2) + stats.norm.ppf(power)
    n = (z * sd / mean) ** 2 * (1 - judge_correlation**2 * (1 - human_share))
    return max(2, math.ceil(n))
