"""Two-phase active sampling: a uniform burn-in, then a draw on a residual model learned from its labels (Zrnic and
Candès, "Active Statistical Inference", ICML 2024: sampling probability proportional to a learned prediction of
sqrt E[(Y - f(X))^2 | X]; the uniform mixing of Li, Zrnic and Candès, "Robust Sampling for Active Statistical
Inference", NeurIPS 2025, with its weight chosen on labelled data).

Why. The judges' disagreement (``active_draw.context_uncertainty``) sees the judge's error but not the people's own
noise, nor how the judge's error depends on what the judges' scores show; the residual Y - f(X) holds both, and
the burn-in's labels let a small model predict its size from features every context has.

The design. N contexts, an expected human budget B (design.human_share x N), a burn-in share beta.

* Phase 1 (burn-in): every context is drawn independently with p1 = beta B / N (uniform Poisson sampling).
* The contexts are split into K folds *before* the burn-in, from their keys and the seed alone.
* Phase 2, once the burn-in's labels are in: for each fold k, a residual model is fitted on the burn-in contexts
  of the *other* folds only (``residual_scale``: per target column j a calibration Y_j ~ a_j + b_j f_j, b_j in
  [0, 1] as PPI++'s lambda, then a ridge regression of the context's root-mean-square calibrated residual on
  standardised features), and predicts e_i for fold k's contexts. Their phase-2 probabilities are
  ``active_draw.sampling_probabilities`` of e_i^2 (so q proportional to e, clipped at 1), scaled so that fold k's
  share of the phase-2 budget, sum_{i in k} q_i = (B - N p1) n_k / (N (1 - p1)), is spent in expectation, and
  mixed with uniform, q_i = (1 - tau_k) q_active_i + tau_k (its fold's mean). tau_k is chosen on a grid to minimise
  the estimated variance sum_j r_j^2 (1 - pi_j) / pi_j over the other folds' burn-in contexts, each j scored by a
  model that saw neither fold k nor j's own fold (Li, Zrnic and Candès's rule of choosing the mix on labelled data;
  tau = 1, uniform, is on the grid, so a useless model costs little). Every context not drawn in phase 1 is then
  drawn independently with its q_i.

The weights. A context is rated when it was drawn in phase 1, or not drawn in phase 1 and drawn in phase 2:

    pi_i = P(rated_i | G_k) = p1 + (1 - p1) q_i,

where G_k holds the features and everything the burn-in showed outside fold k. The condition is what makes it
exact: q_i is a function of G_k alone, and context i's own phase-1 draw is independent of G_k (Poisson sampling),
so E[xi_i / pi_i | G_k] = 1 for every context, and the estimators of ``active`` (inverse-probability-weighted
PPI++ with an intercept) stay unbiased for every fixed (c, lambda) with pi_i as each context's
``inclusion_probability``. A model fitted on all the burn-in would let a context's own label raise its own
probability, and its weight 1 / pi_i would then depend on its residual: the fold split removes that. The total
expected number of contexts rated is N p1 + (1 - p1) sum_i q_i = B.

Why one probability per context rather than one per phase: weighting each phase's contexts by that phase's
probability and combining the two phases' estimates with fixed shares a, 1 - a is unbiased too, but context i
then contributes about r_i^2 (a^2 / p1 + (1 - a)^2 / q_i) to the variance against r_i^2 / (p1 + q_i) here, which
is smaller for every a (Cauchy-Schwarz; the balance heuristic of multiple importance sampling, Veach and Guibas
1995). The burn-in is part of the design's uniform floor: pi_i >= p1 whatever the model says.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from empeval.analysis.stats.ppi.active_draw import sampling_probabilities

#: The share of the human budget drawn uniformly before the residual model exists.
DEFAULT_BURN_IN = 0.3
#: Folds of the residual model (each fold's probabilities come from a model fitted on the others' burn-in).
DEFAULT_FOLDS = 5
#: The mixing weights of uniform sampling the phase-2 rule chooses between.
TAU_GRID = tuple(np.round(np.linspace(0.0, 1.0, 11), 2))
#: Fewer burn-in contexts than this to fit on: the fold's phase-2 probabilities are uniform.
MIN_RESIDUAL_CONTEXTS = 20
#: The ridge penalty on the standardised features (a small model on a few dozen contexts).
RIDGE = 1.0


@dataclass(frozen=True)
class TwoPhaseDesign:
    """Phase 2 of the two-phase design: each context's overall ``probability`` pi = p1 + (1 - p1) q (the weight
    the estimators need), its phase-2 probability ``phase_two`` (q), the uniform mix chosen per fold ``taus``, and
    ``basis``: what the model was fitted on, in words."""

    probability: np.ndarray
    phase_two: np.ndarray
    taus: tuple[float, ...]
    basis: str


def burn_in_probability(budget: float, n_contexts: int, burn_in: float) -> float:
    """p1 = burn_in x budget / N: each context's probability of being drawn in the uniform burn-in.

    >>> burn_in_probability(120, 600, 0.25)
    0.05
    """
    if not 0 < burn_in < 1:
        raise ValueError(f"the burn-in share must be strictly between 0 and 1, got {burn_in!r}")
    if not 0 < budget < n_contexts:
        raise ValueError(f"budget must be strictly between 0 and the {n_contexts} contexts, got {budget!r}")
    return burn_in * budget / n_contexts


def assign_folds(n_contexts: int, n_folds: int, rng: np.random.Generator) -> np.ndarray:
    """Balanced folds 0..n_folds-1 in a random order: fixed before the burn-in is drawn.

    >>> np.bincount(assign_folds(11, 5, np.random.default_rng(0))).tolist()
    [3, 2, 2, 2, 2]
    """
    return rng.permutation(np.arange(n_contexts) % n_folds)


def _calibrated_residual(labels: np.ndarray, judged: np.ndarray, train: np.ndarray) -> np.ndarray:
    """Per context the root mean square over target columns of Y_j - a_j - b_j f_j, the calibration fitted on the
    ``train`` rows (b_j in [0, 1]); NaN where a context has no label."""
    squares = np.full(labels.shape, np.nan)
    for j in range(labels.shape[1]):
        rows = train & np.isfinite(labels[:, j])
        y, f = labels[rows, j], judged[rows, j]
        slope = float(np.clip(np.cov(y, f)[0, 1] / np.var(f, ddof=1), 0.0, 1.0)) if rows.sum() > 2 and np.var(f) > 0 \
            else 0.0
        intercept = float(y.mean() - slope * f.mean()) if rows.any() else 0.0
        squares[:, j] = (labels[:, j] - intercept - slope * judged[:, j]) ** 2
    counted = np.isfinite(squares).sum(axis=1)
    total = np.where(np.isfinite(squares), squares, 0.0).sum(axis=1)
    return np.where(counted > 0, np.sqrt(total / np.maximum(counted, 1)), np.nan)


def residual_scale(features: np.ndarray, labels: np.ndarray, judged: np.ndarray, train: np.ndarray) -> np.ndarray:
    """Predicted size of each context's residual, e ~ sqrt E[(Y - a - b f)^2 | X]: a ridge regression (penalty
    ``RIDGE`` on features standardised over every context, intercept free) of the calibrated residual's root mean
    square over the target columns, fitted on the ``train`` rows alone; floored at a tenth of its mean there.

    >>> rng = np.random.default_rng(0)
    >>> x = rng.random((400, 1))
    >>> f = rng.normal(0, 1, (400, 2))
    >>> y = f + rng.normal(0, 1, (400, 2)) * (0.2 + 2 * x)   # the residual grows with the feature
    >>> e = residual_scale(x, y, f, np.arange(400) < 200)
    >>> bool(np.corrcoef(e[200:], x[200:, 0])[0, 1] > 0.99), round(float(e[x[:, 0] > 0.9].mean() / e[x[:, 0] < 0.1]
    ...                                                                                         .mean()), 1)
    (True, 5.0)
    """
    index = np.flatnonzero(train)
    target = _calibrated_residual(labels[index], judged[index], np.ones(index.size, dtype=bool))
    index, target = index[np.isfinite(target)], target[np.isfinite(target)]
    sd = features.std(axis=0)
    x = (features - features.mean(axis=0)) / np.where(sd > 0, sd, 1.0)
    xt, yt = x[index], target
    centre_x, centre_y = xt.mean(axis=0), yt.mean()
    a = (xt - centre_x).T @ (xt - centre_x) + RIDGE * np.eye(x.shape[1])
    beta = np.linalg.solve(a, (xt - centre_x).T @ (yt - centre_y))
    predicted = centre_y + (x - centre_x) @ beta
    return np.maximum(predicted, 0.1 * max(float(centre_y), 1e-12))


def two_phase_probabilities(features, labels, judged, folds, *, burn_in_probability: float, budget: float,
                            taus: tuple[float, ...] = TAU_GRID) -> TwoPhaseDesign:
    """Phase 2 of the module docstring's design: each context's overall probability of being rated.

    ``features`` (N x p): what every context has (the judges' scores and spread, response length, ...);
    ``labels`` (N x m): the target columns (e.g. per criterion the paired differences of the systems' mean
    ratings) on the burn-in's rated contexts, NaN elsewhere; ``judged`` (N x m): the judge's prediction of each
    column for every context; ``folds`` (N,): the folds fixed before the burn-in; ``burn_in_probability``: p1;
    ``budget``: B, the expected number of contexts rated in both phases together.

    Examples
    --------
    >>> rng = np.random.default_rng(1)
    >>> n = 3000
    >>> hard = rng.random(n) < 0.3                       # the judge errs more on hard contexts, which it shows
    >>> f = rng.normal(0, 1, (n, 1))
    >>> y = f + rng.normal(0, 1, (n, 1)) * np.where(hard, 2.0, 0.3)[:, None]
    >>> p1 = burn_in_probability(300, n, 0.3)
    >>> burnt = rng.random(n) < p1
    >>> design = two_phase_probabilities(np.c_[hard + rng.normal(0, 0.3, n)], np.where(burnt[:, None], y, np.nan),
    ...                                  f, assign_folds(n, 5, rng), burn_in_probability=p1, budget=300)
    >>> round(float(design.probability.sum())), round(float(design.probability[hard].mean() /
    ...                                                      design.probability[~hard].mean()), 1)
    (300, 2.2)
    >>> min(design.taus) >= 0 and float(design.probability.min()) >= p1
    True
    """
    x = np.asarray(features, dtype=float)
    y = np.asarray(labels, dtype=float)
    f = np.asarray(judged, dtype=float)
    fold = np.asarray(folds)
    n = x.shape[0] if x.ndim == 2 else -1
    if x.ndim != 2 or y.ndim != 2 or y.shape != f.shape or y.shape[0] != n or fold.shape != (n,):
        raise ValueError(f"features (N x p), labels and judged (N x m) and folds (N,) must agree, got {x.shape}, "
                         f"{y.shape}, {f.shape} and {fold.shape}")
    if not (np.isfinite(x).all() and np.isfinite(f).all()):
        raise ValueError("features and judge predictions must be finite for every context")
    p1 = float(burn_in_probability)
    if not 0 < p1 < budget / n < 1:
        raise ValueError(f"the burn-in probability {p1!r} must be positive and below the design's mean probability "
                         f"budget / N = {budget / n:.4g} (< 1)")
    labelled = np.isfinite(y).any(axis=1)
    fold_ids = np.unique(fold)
    # Fold k's share of phase 2's expected budget: sum_{i in k} (1 - p1) q_i = (B - N p1) n_k / N.
    share = {k: (budget - n * p1) * float((fold == k).sum()) / n / (1 - p1) for k in fold_ids}
    active: dict = {}
    scales: dict = {}

    def active_share(left_out: frozenset, k) -> np.ndarray | None:
        """Fold k's unmixed phase-2 probabilities from a model fitted on the burn-in outside the folds
        `left_out`; None when too few contexts are left."""
        if left_out not in scales:
            train = labelled & ~np.isin(fold, list(left_out))
            scales[left_out] = residual_scale(x, y, f, train) if train.sum() >= MIN_RESIDUAL_CONTEXTS else None
        scale = scales[left_out]
        return None if scale is None else sampling_probabilities(scale[fold == k] ** 2, share[k], tau=0.0)

    q = np.empty(n)
    chosen = []
    for k in fold_ids:
        member = fold == k
        active[k] = active_share(frozenset([k]), k)
        uniform = share[k] / member.sum()
        if active[k] is None:
            q[member], tau = uniform, 1.0
        else:
            tau = _chosen_tau(x, y, f, fold, k, labelled, share, p1, taus, active_share)
            q[member] = (1 - tau) * active[k] + tau * uniform
        chosen.append(tau)
    fitted = int(labelled.sum())
    basis = (f"from a residual model fitted on the uniform burn-in's {fitted} rated contexts ({len(fold_ids)} "
             f"folds, each fold's model fitted on the others; uniform share chosen per fold: "
             f"{', '.join(f'{t:g}' for t in chosen)})")
    if all(active[k] is None for k in fold_ids):
        basis = (f"uniform: the burn-in's {fitted} rated contexts are too few for the residual model (each fold's "
                 f"model needs {MIN_RESIDUAL_CONTEXTS} outside the fold)")
    return TwoPhaseDesign(probability=p1 + (1 - p1) * q, phase_two=q, taus=tuple(chosen), basis=basis)


def _chosen_tau(x, y, f, fold, k, labelled, share, p1, taus, active_share) -> float:
    """The uniform mix for fold k: the grid value minimising sum_j r_j^2 (1 - pi_j) / pi_j over the burn-in
    contexts j outside k, pi_j from a model fitted without fold k and without j's own fold, r_j calibrated on the
    burn-in outside k; everything from outside fold k. 0.5 when no such model can be fitted."""
    outside = labelled & (fold != k)
    residual = _calibrated_residual(y, f, outside)
    totals = np.zeros(len(taus))
    evaluated = False
    for m in np.unique(fold[outside]):
        inner = active_share(frozenset([k, m]), m)
        if inner is None:
            continue
        member = fold == m
        scored = outside[member] & np.isfinite(residual[member])
        uniform = share[m] / member.sum()
        r2 = residual[member][scored] ** 2
        for t, tau in enumerate(taus):
            pi = p1 + (1 - p1) * ((1 - tau) * inner[scored] + tau * uniform)
            totals[t] += float((r2 * (1 - pi) / pi).sum())
        evaluated = True
    if not evaluated:
        return 0.5
    best = totals.min()
    # Of the grid values within 0.5% of the best, the most uniform: the robust choice among near-equals.
    return float(max(tau for tau, total in zip(taus, totals, strict=True) if total <= best * 1.005))
