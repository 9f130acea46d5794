"""Simulated decisions: how many paid human ratings a strategy needs until every pre-registered comparison of a
study is decided, with its type-I error and coverage (issue 28's benchmark, benchmarks/paid_ratings.py).

The study: ``len(system_means)`` systems, every pair of them a pre-registered comparison on one criterion, decided
as "A better" (the interval above 0), "B better" (below 0) or "equivalent" (inside [-margin, margin]), each
interval at level 1 - alpha / n_pairs (Bonferroni, so that the family's error is at most alpha whatever the
stopping). A pool of ``pool`` contexts, each with one response per system, is scored by a judge before anyone is
paid; people rate drawn contexts (every system's response on a drawn context, ``raters_per_item`` ratings each, so a
drawn context costs n_systems x k paid ratings).

The rating model: the expected label of system s on context c is ``mu_s + u_c + v_cs`` (u cancels in a paired
difference; v is centred per system over the pool, so the pool's mean difference is exactly mu_a - mu_b, the truth
every strategy estimates); a rating adds the rater's bias (a pool of ``n_raters``, drawn per rating) and noise, and
a label is the mean of k ratings (continuous: the rounding of a Likert scale changes the variances, not how the
strategies compare). The judge scores ``f_cs = mu_s + u_c + v_cs + e_cs`` with heteroscedastic error,
e_cs ~ N(0, s^2 w_c), w_c ~ Exponential(1) per context, s chosen so that the judge's difference f_a - f_b
correlates ``difference_correlation`` with the human difference y_a - y_b; the judges' uncertainty about a context
(what active sampling sees, e.g. two judges' disagreement) is w_c times log-normal noise (sd 0.5).

The strategies (``STRATEGIES``), each a stream of labelled contexts drawn with replacement from the pool with
probabilities q_c (uniform 1 / N, or active), giving per labelled draw j and pair (a, b) the value
x_j = lam * mean_pool(g) + (d_j - lam * g_j) / (N q_j), d the human difference, g the judge's difference,
lam = 0 for human-only and PPI++'s power-tuned cov / var otherwise (Angelopoulos, Duchi and Zrnic 2023; with
the inverse-probability weights of active inference, Zrnic and Candès 2024):

- ``human fixed``: the planner's n (the fewest labelled contexts for which every comparison is decided with
  probability ``power`` by the normal approximation, from the design's true variances), one fixed-n interval;
- ``human sequential``: an asymptotic confidence sequence looked at every ``look_every`` labelled contexts, stopped
  when every comparison is decided (or at ``max_factor`` x the human planner's n);
- ``PPI uniform`` / ``PPI active``: the fixed design with the judge, the planner's n computed for its variance;
  active draws follow empeval's own rule (``analysis.stats.ppi.active.sampling_probabilities``: the square root of
  the judges' uncertainty, mixed 50/50 with uniform), as ``empeval study sample`` draws, here with replacement and
  one lambda (the report's estimator is ``ACTIVE_AS_DRAWN``'s);
- ``PPI active sequential``: those draws, the confidence sequence, stopping when decided;
- ``PPI active, calibrated``: draws on the pilot's prediction of each context's squared residual (intercept +
  slope x uncertainty: the people's own noise is in the residual too, which the judges' uncertainty does not see),
  mixed 20% with uniform; not what empeval draws today, the size of what a residual model would add;
- ``PPI active, raw uncertainty``: the square root of the raw uncertainty mixed only 20% with uniform, to show why
  the mixing matters;
- ``PPI active, residual burn-in`` (``RESIDUAL_BURN_IN``, not in ``STRATEGIES``: the benchmark and `empeval plan`
  ask for it): the two-phase design ``empeval study sample`` draws (``analysis.stats.ppi.active_phases``), on the
  pool itself rather than as a stream: a uniform Poisson burn-in of ``burn_in`` x the planner's n, a fold-wise
  residual model of |d - lam g| on the features every context has (the judges' uncertainty, the judge's mean |g|
  over the pairs, the responses' length), the rest drawn by its probabilities mixed with uniform as the rule
  chooses, and ``analysis.stats.ppi.active.ipw_ppi_mean_interval`` per pair with each context's overall probability. The
  planner's n comes from the mean squared standard error of a few pilot studies at uniform PPI's n. Beside it, drawn
  and estimated the same way, its like-for-like references ``PPI uniform, Poisson`` and ``PPI active, oracle
  residual`` (probabilities proportional to the true sqrt E[(d - lam g)^2 | w_c], ``DecisionDesign.
  residual_variance``: the ceiling of any residual model on this generator);
- ``PPI active, as drawn`` (``ACTIVE_AS_DRAWN``, with the Poisson designs): empeval's single active draw and the
  report's estimator exactly: Poisson sampling with ``sampling_probabilities`` of the judges' uncertainty for the
  planner's n, ``ipw_ppi_mean_interval`` with lambda and c tuned per stratum of the probability
  (``probability_strata``), as every Poisson design here is estimated.

The generator's assumption about what features show (stated, not measured): the judge's error variance w_c is
partly visible in the judges' disagreement (w_c times log-normal noise, above), in the size of the judge's own
differences (|g| grows with the error), and in the responses' length, ``length_signal`` being the correlation of
the length feature with the standardised log w_c (0.3 by default: longer responses are somewhat harder to judge).
The people's noise is homoscedastic: nothing predicts it, so a residual model can only learn the judge's part.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from scipy import stats

from empeval.analysis.stats.ppi.active import ipw_ppi_mean_interval, probability_strata
from empeval.analysis.stats.ppi.active_draw import sampling_probabilities
from empeval.analysis.stats.ppi.active_phases import (
    DEFAULT_BURN_IN,
    DEFAULT_FOLDS,
    assign_folds,
    burn_in_probability,
    two_phase_probabilities,
)
from empeval.analysis.stats.sequential import normal_mixture_boundary, normal_mixture_rho

STRATEGIES = ("human fixed", "human sequential", "PPI uniform", "PPI active", "PPI active sequential",
              "PPI active, calibrated", "PPI active, raw uncertainty")
#: The two-phase design with a residual model (module docstring); run by the benchmark beside ``STRATEGIES``.
RESIDUAL_BURN_IN = "PPI active, residual burn-in"
#: Its like-for-like references, drawn the same way (Poisson sampling on the pool, the same estimator): uniform
#: probabilities, and the oracle that knows each context's residual variance E[(d - lam g)^2 | w_c] (probabilities
#: proportional to its square root, unmixed: the most any residual model could give on this generator).
POISSON_UNIFORM = "PPI uniform, Poisson"
ORACLE_RESIDUAL = "PPI active, oracle residual"
#: empeval's single active draw exactly as `empeval study sample` draws it and the report estimates it: Poisson
#: sampling with ``sampling_probabilities`` of the judges' uncertainty, the weighted PPI++ with its weight and offset
#: tuned per stratum of the probability (``analysis.stats.ppi.active.probability_strata``).
ACTIVE_AS_DRAWN = "PPI active, as drawn"
POISSON_STRATEGIES = (RESIDUAL_BURN_IN, POISSON_UNIFORM, ORACLE_RESIDUAL, ACTIVE_AS_DRAWN)
UNDECIDED, A_BETTER, B_BETTER, EQUIVALENT = 0, 1, 2, 3
#: The share of the active probabilities mixed with uniform (robustness when the uncertainty misleads).
DEFAULT_UNIFORM_MIX = 0.2


@dataclass(frozen=True)
class DecisionDesign:
    """The simulated study's truth and sizes (module docstring)."""

    system_means: tuple[float, ...] = (3.6, 3.6, 3.3, 3.0)
    margin: float = 0.3
    alpha: float = 0.05
    power: float = 0.8
    response_sd: float = 1.0
    context_sd: float = 0.5
    rater_bias_sd: float = 0.25
    rater_noise_sd: float = 0.6
    raters_per_item: int = 3
    n_raters: int = 30
    pool: int = 5000
    difference_correlation: float = 0.7
    uncertainty_noise_sd: float = 0.5
    look_every: int = 5
    max_factor: float = 3.0
    uniform_mix: float = DEFAULT_UNIFORM_MIX
    error_shape: float = 1.0
    length_signal: float = 0.3
    burn_in: float = DEFAULT_BURN_IN

    @property
    def pairs(self) -> list[tuple[int, int]]:
        return list(itertools.combinations(range(len(self.system_means)), 2))

    @property
    def true_differences(self) -> np.ndarray:
        return np.array([self.system_means[a] - self.system_means[b] for a, b in self.pairs])

    @property
    def ratings_per_context(self) -> int:
        return len(self.system_means) * self.raters_per_item

    def label_noise_variance(self) -> float:
        """The variance a label (mean of k ratings) adds to the expected label: (bias^2 + noise^2) / k."""
        return (self.rater_bias_sd**2 + self.rater_noise_sd**2) / self.raters_per_item

    def judge_error_sd(self) -> float:
        """s such that corr(f_a - f_b, y_a - y_b) = difference_correlation, averaged over w (E[w] = 1):
        corr = 2 v / sqrt((2 v + 2 s^2) (2 v + 2 n)), v = response_sd^2, n the label noise variance, so
        s^2 = (2 v)^2 / (rho^2 (2 v + 2 n)) / 2 - v. ValueError when rho is above what the labels allow."""
        v, n, rho = self.response_sd**2, self.label_noise_variance(), self.difference_correlation
        ceiling = math.sqrt(2 * v / (2 * v + 2 * n))
        if not 0 < rho < ceiling:
            raise ValueError(f"difference_correlation must be in (0, {ceiling:.3f}) for these rating variances "
                             f"(the labels' own reliability), got {rho}")
        return math.sqrt((2 * v) ** 2 / (rho**2 * (2 * v + 2 * n)) / 2 - v)

    def residual_variance(self, w: np.ndarray) -> np.ndarray:
        """E[(d - lam g)^2 | w] of a pair's difference at the population's lam = 2 v / (2 v + 2 s^2):
        (1 - lam)^2 2 v + 2 n + lam^2 2 s^2 w (v the response variance, n the label noise, s the judge's error SD).
        Only the last term varies by context: the ceiling on what active sampling can gain here."""
        v, n, s2 = self.response_sd**2, self.label_noise_variance(), self.judge_error_sd() ** 2
        lam = 2 * v / (2 * v + 2 * s2)
        return (1 - lam) ** 2 * 2 * v + 2 * n + lam**2 * 2 * s2 * np.asarray(w, dtype=float)


@dataclass
class SimulatedPool:
    """One study's pool: per context and pair, the human difference d (as a draw of k raters would give it), the
    judge's difference g, the judges' uncertainty per context, and the responses' length feature (standardised)."""

    d: np.ndarray  # (pool, pairs)
    g: np.ndarray  # (pool, pairs)
    uncertainty: np.ndarray  # (pool,)
    length: np.ndarray | None = None  # (pool,)
    error_variance: np.ndarray | None = None  # (pool,): w, the oracle's knowledge

    def features(self) -> np.ndarray:
        """What a residual model may use for every context: sqrt(uncertainty), the judge's mean |g| over the
        pairs, and the length feature."""
        length = np.zeros(self.d.shape[0]) if self.length is None else self.length
        return np.c_[np.sqrt(self.uncertainty), np.abs(self.g).mean(axis=1), length]


def simulate_pool(design: DecisionDesign, rng: np.random.Generator) -> SimulatedPool:
    """Draw one study's pool (module docstring's rating model)."""
    n, s = design.pool, len(design.system_means)
    k = design.raters_per_item
    v = rng.normal(0.0, design.response_sd, (n, s))
    v -= v.mean(axis=0)
    expected = np.asarray(design.system_means) + rng.normal(0.0, design.context_sd, (n, 1)) + v
    biases = rng.normal(0.0, design.rater_bias_sd, design.n_raters)
    raters = rng.integers(0, design.n_raters, (n, s, k))
    labels = expected + (biases[raters] + rng.normal(0.0, design.rater_noise_sd, (n, s, k))).mean(axis=2)
    w = rng.gamma(design.error_shape, 1.0 / design.error_shape, n)
    judged = expected + rng.normal(0.0, 1.0, (n, s)) * design.judge_error_sd() * np.sqrt(w)[:, None]
    a, b = (np.array(side) for side in zip(*design.pairs, strict=True))
    uncertainty = w * np.exp(rng.normal(0.0, design.uncertainty_noise_sd, n))
    log_w = np.log(w)
    signal = (log_w - log_w.mean()) / log_w.std() if log_w.std() > 0 else np.zeros(n)
    rho = design.length_signal
    length = rho * signal + math.sqrt(1 - rho**2) * rng.normal(0.0, 1.0, n)
    return SimulatedPool(d=labels[:, a] - labels[:, b], g=judged[:, a] - judged[:, b], uncertainty=uncertainty,
                         length=length, error_variance=w)


def active_probabilities(uncertainty: np.ndarray, uniform_mix: float = DEFAULT_UNIFORM_MIX) -> np.ndarray:
    """Draw probabilities over the pool: proportional to sqrt(uncertainty) (the variance-optimal rule for an
    inverse-probability-weighted mean, Zrnic and Candès 2024), mixed with uniform: (1 - tau) q + tau / N."""
    root = np.sqrt(np.clip(uncertainty, 0.0, None))
    active = root / root.sum() if root.sum() > 0 else np.full(root.size, 1.0 / root.size)
    return (1 - uniform_mix) * active + uniform_mix / root.size


def decide(low: np.ndarray, high: np.ndarray, margin: float) -> np.ndarray:
    """The state of each comparison from its interval: A better (low > 0), B better (high < 0), equivalent
    (inside [-margin, margin]), else undecided.

    >>> decide(np.array([0.1, -0.5, -0.2, -0.5]), np.array([0.4, -0.1, 0.2, 0.5]), 0.3).tolist()
    [1, 2, 3, 0]
    """
    state = np.full(np.shape(low), UNDECIDED)
    state = np.where((low > -margin) & (high < margin), EQUIVALENT, state)
    state = np.where(high < 0, B_BETTER, state)
    return np.where(low > 0, A_BETTER, state)


def wrong_direction(state: np.ndarray, truth: np.ndarray) -> np.ndarray:
    """Whether a decided direction contradicts the truth (a type-I error when the truth is 0)."""
    return ((state == A_BETTER) & (truth <= 0)) | ((state == B_BETTER) & (truth >= 0))


def _draw(pool: SimulatedPool, q: np.ndarray | None, size: int, rng: np.random.Generator):
    """Indices of `size` labelled draws and their weights 1 / (N q) (1 for uniform)."""
    n = pool.d.shape[0]
    if q is None:
        return rng.integers(0, n, size), np.ones(size)
    index = rng.choice(n, size=size, p=q)
    return index, 1.0 / (n * q[index])


def _running_estimates(pool: SimulatedPool, index: np.ndarray, weight: np.ndarray, use_judge: bool):
    """Per prefix t = 1..T of the draws and per pair: the estimate and the sample SD of the x_j (module docstring)
    with lam re-tuned on the prefix (PPI++: cov(d w, g w) / var(g w), clipped to [0, 1])."""
    d, g = pool.d[index] * weight[:, None], pool.g[index] * weight[:, None]
    t = np.arange(1, len(index) + 1)[:, None]
    sd, sg = np.cumsum(d, 0), np.cumsum(g, 0)
    sdd, sgg, sdg = np.cumsum(d * d, 0), np.cumsum(g * g, 0), np.cumsum(d * g, 0)
    mean_d, mean_g = sd / t, sg / t
    var_d = np.maximum(sdd / t - mean_d**2, 0.0)
    var_g = np.maximum(sgg / t - mean_g**2, 0.0)
    cov = sdg / t - mean_d * mean_g
    if use_judge:
        with np.errstate(divide="ignore", invalid="ignore"):
            lam = np.clip(np.where(var_g > 0, cov / var_g, 0.0), 0.0, 1.0)
    else:
        lam = np.zeros_like(mean_d)
    estimate = lam * pool.g.mean(axis=0) + mean_d - lam * mean_g
    variance = var_d - 2 * lam * cov + lam**2 * var_g
    return estimate, np.sqrt(np.maximum(variance, 0.0) * t / np.maximum(t - 1, 1))


@dataclass(frozen=True)
class Pilot:
    """What a large pilot tells the planner (here simulated from the design itself, as an oracle pilot would):
    per strategy the SD of one labelled draw's x per pair, and the residual model of active sampling,
    E[(d - lam g)^2 | c] ~ intercept + slope * uncertainty_c (least squares over the pilot's contexts)."""

    sd: dict[str, np.ndarray]
    residual_model: tuple[float, float]

    def probabilities(self, strategy: str, uncertainty: np.ndarray, uniform_mix: float) -> np.ndarray | None:
        """The draw probabilities of `strategy` over a pool: None (uniform) unless active; active on the residual
        model's prediction (the calibrated rule), or on the raw uncertainty for "PPI active, raw uncertainty"."""
        if "active" not in strategy:
            return None
        if "raw" in strategy:
            return active_probabilities(uncertainty, uniform_mix)
        if "calibrated" in strategy:
            intercept, slope = self.residual_model
            floor = max(intercept, 1e-6) * 0.05
            return active_probabilities(np.maximum(intercept + slope * uncertainty, floor), uniform_mix)
        # empeval's own rule (`empeval study sample`): sqrt of the judges' uncertainty, mixed 50/50 with uniform.
        pi = sampling_probabilities(uncertainty, budget=0.05 * uncertainty.size)
        return pi / pi.sum()


def residual_burn_in_study(design: DecisionDesign, pool: SimulatedPool, rng: np.random.Generator,
                           budget: float, rule: str = RESIDUAL_BURN_IN) -> tuple[np.ndarray, np.ndarray, int]:
    """One study drawn by Poisson sampling on the pool with `budget` contexts expected in all, under `rule` (one of
    ``POISSON_STRATEGIES``: the two-phase design of the module docstring, uniform, the oracle, or empeval's single
    active draw): per pair the estimate and its standard error (analysis.stats.ppi.active.ipw_ppi_mean_interval with
    the report's strata of the probability), and the contexts rated."""
    n = pool.d.shape[0]
    budget = min(float(budget), 0.9 * n)
    if rule == RESIDUAL_BURN_IN:
        p1 = burn_in_probability(budget, n, design.burn_in)
        folds = assign_folds(n, DEFAULT_FOLDS, rng)
        burnt = np.asarray(rng.random(n) < p1)
        two_phase = two_phase_probabilities(pool.features(), np.where(burnt[:, None], pool.d, np.nan), pool.g, folds,
                                            burn_in_probability=p1, budget=budget)
        probability = two_phase.probability
        rated = burnt | (rng.random(n) < two_phase.phase_two)
    elif rule == POISSON_UNIFORM:
        probability = np.full(n, budget / n)
        rated = rng.random(n) < probability
    elif rule == ACTIVE_AS_DRAWN:
        probability = sampling_probabilities(pool.uncertainty, budget)
        rated = rng.random(n) < probability
    elif rule == ORACLE_RESIDUAL:
        if pool.error_variance is None:
            raise ValueError("the oracle needs the pool's error variances (simulate_pool keeps them)")
        probability = sampling_probabilities(design.residual_variance(pool.error_variance), budget, tau=0.0)
        rated = rng.random(n) < probability
    else:
        raise ValueError(f"rule must be one of {POISSON_STRATEGIES}, got {rule!r}")
    estimates, errors = np.empty(pool.d.shape[1]), np.empty(pool.d.shape[1])
    strata = probability_strata(probability, rated)  # every pair is rated on the same contexts
    for pair in range(pool.d.shape[1]):
        labels = np.where(rated, pool.d[:, pair], np.nan)
        result = ipw_ppi_mean_interval(labels, pool.g[:, pair], probability, strata=strata)
        estimates[pair] = result["ppi_mean"]
        errors[pair] = (result["ppi_ci_high"] - result["ppi_mean"]) / stats.norm.ppf(0.975)
    return estimates, errors, int(rated.sum())


def pilot(design: DecisionDesign, rng: np.random.Generator, size: int = 200_000, *, residual: bool = False,
          residual_studies: int = 30, residual_rules: tuple[str, ...] = POISSON_STRATEGIES) -> Pilot:
    """Estimate the planner's inputs from one large simulated pool (`Pilot`); with `residual`, the SD per labelled
    context of the Poisson designs too (`residual_rules`, by default ``POISSON_STRATEGIES``: the two-phase design and
    its references): sqrt(budget x mean squared standard error) over `residual_studies` studies of the design's pool
    size at uniform PPI's planned n (so that the residual model learns from a burn-in of a real study's size)."""
    big = simulate_pool(DecisionDesign(**{**design.__dict__, "pool": size}), rng)
    centred = big.g - big.g.mean(axis=0)
    lam = np.clip(((big.d - big.d.mean(axis=0)) * centred).mean(axis=0) / centred.var(axis=0), 0.0, 1.0)
    squared_residual = ((big.d - lam * big.g) ** 2).mean(axis=1)
    intercept, slope = np.linalg.lstsq(np.c_[np.ones(size), big.uncertainty], squared_residual, rcond=None)[0]
    model = Pilot(sd={}, residual_model=(float(intercept), float(slope)))
    for strategy in (s for s in STRATEGIES if "sequential" not in s):
        index, weight = _draw(big, model.probabilities(strategy, big.uncertainty, design.uniform_mix), size, rng)
        _, sd = _running_estimates(big, index, weight, use_judge=strategy != "human fixed")
        model.sd[strategy] = sd[-1]
    if residual:
        budget = planned_contexts(design, model.sd["PPI uniform"])
        squared: dict[str, list[np.ndarray]] = {rule: [] for rule in residual_rules}
        for _ in range(residual_studies):
            pool = simulate_pool(design, rng)
            for rule in residual_rules:
                squared[rule].append(residual_burn_in_study(design, pool, rng, budget, rule)[1] ** 2)
        for rule in residual_rules:
            model.sd[rule] = np.sqrt(np.mean(squared[rule], axis=0) * budget)
    return model


def planned_contexts(design: DecisionDesign, sd: np.ndarray, *, cap: int = 100_000) -> int:
    """The planner's n: the fewest labelled contexts for which every comparison is decided with probability at
    least `design.power` (the product over pairs of each one's chance, estimate ~ N(truth, sd^2 / n), interval
    half-width z_{1 - alpha / (2 P)} sd / sqrt(n))."""
    z = stats.norm.ppf(1 - design.alpha / (2 * len(design.pairs)))
    truth, m = design.true_differences, design.margin

    def chance(n: int) -> float:
        se = sd / math.sqrt(n)
        h = z * se
        above, below = stats.norm.sf((h - truth) / se), stats.norm.cdf((-h - truth) / se)
        inside = np.where(m > h, stats.norm.cdf((m - h - truth) / se) - stats.norm.cdf((-(m - h) - truth) / se), 0.0)
        # inside and outside overlap where m - h > h (an interval both excluding 0 and inside the margin).
        overlap = np.where(m - h > h, stats.norm.cdf((m - h - truth) / se) - stats.norm.cdf((h - truth) / se)
                           + stats.norm.cdf((-h - truth) / se) - stats.norm.cdf((-(m - h) - truth) / se), 0.0)
        return float(np.prod(np.clip(above + below + inside - overlap, 0.0, 1.0)))

    low, high = 2, 2
    while chance(high) < design.power:
        low, high = high, high * 2
        if high > cap:
            return cap
    while low < high:
        middle = (low + high) // 2
        low, high = (middle + 1, high) if chance(middle) < design.power else (low, middle)
    return high


def plans_for(design: DecisionDesign, plan: Pilot) -> dict[str, int]:
    """The planner's n per strategy; a sequential strategy's is the fixed design's it continues."""
    fixed = {strategy: planned_contexts(design, plan.sd[strategy]) for strategy in plan.sd}
    return {**fixed, "human sequential": fixed["human fixed"], "PPI active sequential": fixed["PPI active"]}


def sequence_half_width(sd: np.ndarray, t: np.ndarray, alpha: float, planned: float) -> np.ndarray:
    """The asymptotic confidence sequence's half-width after t labelled draws of SD sd: sd B(t) / t, Robbins'
    normal-mixture boundary B tuned at the planner's n (analysis.stats.sequential)."""
    rho = normal_mixture_rho(planned, alpha)
    return sd * normal_mixture_boundary(t, rho=rho, alpha=alpha) / t


@dataclass(frozen=True)
class Outcome:
    """One study under one strategy: labelled contexts paid for, whether every comparison was decided, the
    comparisons' final states, and whether each final interval covered the truth."""

    contexts: int
    decided: bool
    states: np.ndarray
    covered: np.ndarray


SequenceBound = Callable[[np.ndarray, np.ndarray, float, float], np.ndarray]


def run_strategy(design: DecisionDesign, strategy: str, pool: SimulatedPool, rng: np.random.Generator, *,
                 planned: int, human_planned: int, sequence_half_width: SequenceBound, plan: Pilot) -> Outcome:
    """One study under `strategy` (module docstring); `planned` is the strategy's planner's n (fixed designs),
    `human_planned` the human planner's n (the sequential cap and the confidence sequence's tuning point), and
    `sequence_half_width(sd, t, alpha, t_opt)` the confidence sequence's half-width."""
    truth = design.true_differences
    if strategy in POISSON_STRATEGIES:
        estimate, error, rated = residual_burn_in_study(design, pool, rng, planned, strategy)
        half = stats.norm.ppf(1 - design.alpha / (2 * len(design.pairs))) * error
        states = decide(estimate - half, estimate + half, design.margin)
        return Outcome(contexts=rated, decided=bool((states != UNDECIDED).all()), states=states,
                       covered=(estimate - half <= truth) & (truth <= estimate + half))
    q = plan.probabilities(strategy, pool.uncertainty, design.uniform_mix)
    use_judge = not strategy.startswith("human")
    if strategy.endswith("sequential"):
        cap = int(math.ceil(design.max_factor * human_planned))
        index, weight = _draw(pool, q, cap, rng)
        estimate, sd = _running_estimates(pool, index, weight, use_judge)
        looks = np.arange(design.look_every - 1, cap, design.look_every)
        looks = looks[looks >= 9]  # at least 10 labelled contexts before the first look
        t = (looks + 1).astype(float)[:, None]
        alpha = design.alpha / len(design.pairs)
        half = sequence_half_width(sd[looks], t, alpha, float(planned))
        low, high = estimate[looks] - half, estimate[looks] + half
        # The running intersection of a confidence sequence is one too: each comparison keeps its first decision.
        low, high = np.maximum.accumulate(low, axis=0), np.minimum.accumulate(high, axis=0)
        states = decide(low, high, design.margin)
        all_decided = (states != UNDECIDED).all(axis=1)
        stop = int(np.argmax(all_decided)) if all_decided.any() else len(looks) - 1
        first = np.argmax(states != UNDECIDED, axis=0)
        final = np.where((states != UNDECIDED).any(axis=0), states[first, np.arange(states.shape[1])], UNDECIDED)
        covered = (low[stop] <= truth) & (truth <= high[stop])
        return Outcome(contexts=int(looks[stop] + 1), decided=bool(all_decided.any()), states=final, covered=covered)
    index, weight = _draw(pool, q, planned, rng)
    estimate, sd = _running_estimates(pool, index, weight, use_judge)
    z = stats.norm.ppf(1 - design.alpha / (2 * len(design.pairs)))
    half = z * sd[-1] / math.sqrt(planned)
    low, high = estimate[-1] - half, estimate[-1] + half
    states = decide(low, high, design.margin)
    return Outcome(contexts=planned, decided=bool((states != UNDECIDED).all()), states=states,
                   covered=(low <= truth) & (truth <= high))
