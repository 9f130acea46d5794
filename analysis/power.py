"""Planning a study: how many contexts and ratings per response detect a given difference, and the cost.

The design model (the same as ``analysis.simulate``): a rating of system s on context c by a rater is
``round(centre + effect_s + context_c + response_cs + bias_rater + noise)`` clipped to the scale, with
context_c ~ N(0, context_sd), response_cs ~ N(0, response_sd), bias ~ N(0, rater_sd), noise ~ N(0, noise_sd).
The analysis is the one the report runs for a pair of systems: a two-sided Wilcoxon signed-rank test on
item-level means (the k ratings of a response averaged), paired by context, zero differences dropped
(Wilcoxon 1945), normal approximation with tie and continuity correction (what ``analysis.compare`` uses
once there are more than 50 non-zero pairs, the smallest design planned here), at level alpha.

Power is estimated by simulating the whole design many times (vectorised over replicates); the analytic
power of a paired t-test on the same design (noncentral t, statsmodels) is given beside it as a check.
Variance components can be estimated from a pilot study (``components_from_pilot``).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy import stats
from statsmodels.stats.power import TTestPower


@dataclass(frozen=True)
class Components:
    """Standard deviations of the design model (on the rating scale) and its centre."""

    centre: float = 3.4
    context_sd: float = 0.4
    response_sd: float = 0.5
    rater_sd: float = 0.35
    noise_sd: float = 0.7
    scale: tuple[int, int] = (1, 5)


def simulate_item_means(components: Components, *, n_contexts: int, k: int, effect: float, replicates: int,
                        rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Item-level means of two systems (b better than a by `effect`), shape (replicates, n_contexts) each."""
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
    """Two-sided Wilcoxon signed-rank p-values of b - a along the last axis (see the module docstring)."""
    d = np.round(b - a, decimals)
    with np.errstate(invalid="ignore", divide="ignore"):
        result = stats.wilcoxon(d, axis=-1, zero_method="wilcox", correction=True, method="approx",
                                nan_policy="propagate")
    return np.nan_to_num(np.asarray(result.pvalue, dtype=float), nan=1.0)


def paired_t_pvalues(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Two-sided paired t-test p-values of b - a along the last axis."""
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.nan_to_num(np.asarray(stats.ttest_rel(b, a, axis=-1).pvalue, dtype=float), nan=1.0)


TESTS = {"wilcoxon": wilcoxon_pvalues, "t": paired_t_pvalues}


def simulated_power(components: Components, *, n_contexts: int, k: int, effect: float, alpha: float = 0.05,
                    replicates: int = 400, seed: int = 0, test: str = "wilcoxon") -> float:
    """Share of simulated studies in which `test` ("wilcoxon", the report's test, or "t") finds the
    difference at level alpha."""
    rng = np.random.default_rng(seed)
    a, b = simulate_item_means(components, n_contexts=n_contexts, k=k, effect=effect, replicates=replicates, rng=rng)
    return float((TESTS[test](a, b) < alpha).mean())


def difference_moments(components: Components, *, k: int, effect: float, seed: int = 12345,
                       contexts: int = 400_000) -> tuple[float, float]:
    """Mean and SD of the per-context difference of item means under the design, from one large draw.

    Rounding to the scale and clipping at its ends shrink a latent `effect` (0.3 latent is about 0.28
    observed with the default components), so the t-test's effect size must come from this draw.
    """
    rng = np.random.default_rng(seed)
    a, b = simulate_item_means(components, n_contexts=contexts, k=k, effect=effect, replicates=1, rng=rng)
    d = b - a
    return float(np.mean(d)), float(np.std(d, ddof=1))


def analytic_t_power(components: Components, *, n_contexts: int, k: int, effect: float, alpha: float = 0.05) -> float:
    """Power of a two-sided paired t-test (one-sample t on differences, noncentral t) on the same design."""
    mean, sd = difference_moments(components, k=k, effect=effect)
    return float(TTestPower().power(effect_size=mean / sd, nobs=n_contexts, alpha=alpha, alternative="two-sided"))


def analytic_t_contexts(components: Components, *, k: int, effect: float, alpha: float = 0.05,
                        power: float = 0.8) -> float:
    """Contexts a paired t-test needs for `power` on the same design (statsmodels' solve_power)."""
    mean, sd = difference_moments(components, k=k, effect=effect)
    return float(TTestPower().solve_power(effect_size=mean / sd, alpha=alpha, power=power, alternative="two-sided"))


def required_contexts(components: Components, *, k: int, effect: float, alpha: float = 0.05, power: float = 0.8,
                      replicates: int = 400, seed: int = 0, upper: int = 5000, test: str = "wilcoxon") -> int:
    """Smallest number of contexts whose simulated power reaches `power` (bisection on a monotone curve;
    the same seed at every n keeps the curve smooth)."""
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
               reward: float | None = None, fee: float = 0.2, replicates: int = 400, seed: int = 0) -> pd.DataFrame:
    """Power and cost over a grid of designs: one row per (k, contexts).

    Cost = assignments x reward x (1 + fee), with assignments = contexts x systems x k / items per assignment
    (rounded up); controls are not counted.
    """
    rows = []
    for k in ks:
        for n in contexts:
            assignments = int(np.ceil(n * systems * k / items_per_assignment))
            rows.append({
                "k": k, "contexts": n, "ratings": n * systems * k,
                "power_wilcoxon": simulated_power(components, n_contexts=n, k=k, effect=effect, alpha=alpha,
                                                  replicates=replicates, seed=seed),
                "power_t_analytic": analytic_t_power(components, n_contexts=n, k=k, effect=effect, alpha=alpha),
                "assignments": assignments,
                "cost": None if reward is None else round(assignments * reward * (1 + fee), 2),
            })
    return pd.DataFrame(rows)


def components_from_pilot(ratings: pd.DataFrame, *, criterion: str, scale: tuple[int, int] = (1, 5)) -> Components:
    """Method-of-moments estimates of the design model's SDs from a pilot (tidy table, controls left out).

    Within an item, scores vary by rater bias plus noise; the annotator means of those within-item
    deviations give the bias part. Item means vary by context + response + within/k; the covariance of
    item means of two systems on the same context gives the context part.
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
    """A matplotlib Figure: simulated Wilcoxon power against the number of contexts, one line per k."""
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
