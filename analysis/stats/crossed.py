"""Linear mixed model with crossed random intercepts, fitted in time linear in the number of ratings.

``y = X b + Z_1 u_1 + ... + Z_m u_m + e``, ``u_k ~ N(0, s_k^2 I)``, ``e ~ N(0, s_e^2 I)``, every ``Z_k`` an
indicator matrix (annotator, item, ...). Dense likelihood fits (statsmodels' MixedLM) cost O(n^2) or worse
in memory and time; crossed designs have no nesting to exploit. Following Ghosh, Hastie & Owen (2022,
"Backfitting for large scale crossed random effects regressions", Annals of Statistics 50(1)):

1. ordinary least squares for ``b``, and its residuals;
2. the variance components by the method of moments of Gao & Owen (2017, "Efficient moment calculations for
   variance components in large unbalanced crossed random effects models", Electronic Journal of Statistics
   11(1)): the within-level sums of squares of each factor and the total sum of squares of the residuals,
   set equal to their expectations, which are linear in the components with coefficients from the level
   counts and the counts of each pair of levels (an (m + 1) x (m + 1) linear system, O(n) to build);
3. generalised least squares for ``b`` with those components: ``V^-1 X`` through the Woodbury identity, the
   sparse system ``(Z'Z + s_e^2 diag(1 / s_k^2)) w = Z'X`` solved by Jacobi-preconditioned conjugate
   gradients (each step one sparse product with n nonzeros per factor pair);
   ``cov(b) = (X' V^-1 X)^-1``.

On balanced designs the moment estimates are the ANOVA estimates, which equal REML when positive; on
unbalanced designs they are unbiased but not REML (tests/analysis/stats/test_crossed.py measures the
difference against statsmodels' REML and the coverage of the Wald tests by simulation).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import sparse

from empeval.analysis.stats.threads import blas_single_threaded

METHOD_NAME = ("method-of-moments variance components (Gao & Owen 2017) with generalised least squares for the "
               "fixed effects (Ghosh, Hastie & Owen 2022)")


@dataclass
class CrossedFit:
    """The fitted model: fixed effects, their covariance, the variance components and what went wrong."""

    fe_params: np.ndarray
    cov_params: np.ndarray
    variances: dict[str, float]  # factor name -> s_k^2, and "residual" -> s_e^2
    note: str = ""


@blas_single_threaded
def fit_crossed(
    y: np.ndarray,
    X: np.ndarray,
    factors: dict[str, np.ndarray],
    *,
    tol: float = 1e-10,
    max_iter: int = 2000,
    reml_max_levels: int = 600,
) -> CrossedFit:
    """Fit ``y ~ X`` with a random intercept for each factor in ``factors`` (name -> integer codes 0..L-1).

    Designs with at most ``reml_max_levels`` random-effect levels in all (small studies, where dense algebra
    is cheap) are then refined to the REML optimum, from the moment estimates, by maximising the REML
    likelihood profiled over the residual variance (dense Cholesky of ``I + G^1/2 Z'Z G^1/2``); 0 turns
    this off.

    Raises ValueError when the design cannot identify the components (one level of a factor; a factor that
    is another in disguise, such as items each rated by one annotator); the message says which.

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> annotator, item = np.repeat(np.arange(20), 30), np.tile(np.arange(30), 20)
    >>> y = 1.0 + rng.normal(0, 0.5, 20)[annotator] + rng.normal(0, 1.0, 30)[item] + rng.normal(0, 0.7, 600)
    >>> fit = fit_crossed(y, np.ones((600, 1)), {"annotator": annotator, "item": item})
    >>> {k: round(v, 2) for k, v in fit.variances.items()}
    {'annotator': 0.16, 'item': 0.81, 'residual': 0.49}
    """
    y = np.asarray(y, dtype=float)
    X = np.asarray(X, dtype=float)
    n, p = X.shape
    codes = {name: np.asarray(c, dtype=np.int64) for name, c in factors.items()}
    names = list(codes)
    beta_ols, *_ = np.linalg.lstsq(X, y, rcond=None)
    residuals = y - X @ beta_ols
    components, note = _moment_components(residuals, X, codes)
    variances = dict(zip(names, components[:-1], strict=True)) | {"residual": float(components[-1])}
    sigma2 = float(components[-1])
    if not sigma2 > 0:
        raise ValueError("the residual variance is estimated at zero: the ratings are fitted exactly")

    if reml_max_levels and sum(int(codes[name].max()) + 1 for name in names) <= reml_max_levels:
        refined = _reml_refine(y, X, codes, variances)
        if refined is not None:
            variances, note = refined, ""
            sigma2 = variances["residual"]
    kept = [name for name in names if variances[name] > 0]
    if not kept:
        xtvx, xtvy = X.T @ X, X.T @ y
    else:
        Z = sparse.hstack([_indicators(codes[name]) for name in kept], format="csr")
        ridge = np.concatenate([np.full(int(codes[name].max()) + 1, sigma2 / variances[name]) for name in kept])
        system = (Z.T @ Z).tocsr() + sparse.diags(ridge)
        right = np.asarray(Z.T @ np.column_stack([X, y]))
        solved, converged = _conjugate_gradients(system, right, tol=tol, max_iter=max_iter)
        if not converged:
            note = "; ".join(filter(None, [note, "conjugate gradients did not converge"]))
        cross = np.column_stack([X, y]).T @ np.column_stack([X, y]) - right.T @ solved
        xtvx, xtvy = cross[:p, :p], cross[:p, p]
    beta = np.linalg.solve(xtvx, xtvy)
    covariance = sigma2 * np.linalg.inv(xtvx)
    return CrossedFit(fe_params=beta, cov_params=covariance, variances=variances, note=note)


def _reml_refine(y: np.ndarray, X: np.ndarray, codes: dict[str, np.ndarray],
                 start: dict[str, float]) -> dict[str, float] | None:
    """REML variance components (Patterson & Thompson 1971) by maximising the profiled restricted likelihood
    over the log variance ratios, dense; None when the optimiser fails (the moment estimates stand)."""
    from scipy import linalg, optimize

    n, p = X.shape
    names = list(codes)
    Z = sparse.hstack([_indicators(codes[name]) for name in names], format="csr")
    sizes = [int(codes[name].max()) + 1 for name in names]
    ztz = (Z.T @ Z).toarray()
    W = np.column_stack([X, y])
    ztw = np.asarray(Z.T @ W)
    wtw = W.T @ W

    def parts(theta: np.ndarray):
        scale = np.sqrt(np.repeat(np.exp(theta), sizes))
        inner = np.eye(ztz.shape[0]) + scale[:, None] * ztz * scale[None, :]
        factor = linalg.cho_factor(inner, lower=True)
        scaled = scale[:, None] * ztw
        cross = wtw - scaled.T @ linalg.cho_solve(factor, scaled)
        log_det = 2.0 * float(np.sum(np.log(np.diag(factor[0]))))
        return cross, log_det

    def objective(theta: np.ndarray) -> float:
        cross, log_det = parts(theta)
        xtvx, xtvy = cross[:p, :p], cross[:p, p]
        rss = float(cross[p, p] - xtvy @ np.linalg.solve(xtvx, xtvy))
        sign, log_det_x = np.linalg.slogdet(xtvx)
        if rss <= 0 or sign <= 0:
            return np.inf
        return (n - p) * np.log(rss) + log_det + log_det_x

    residual = start["residual"]
    theta0 = np.array([np.log(max(start[name] / residual, 1e-6)) for name in names])
    try:
        result = optimize.minimize(objective, theta0, method="L-BFGS-B", bounds=[(-14.0, 8.0)] * len(names))
    except (np.linalg.LinAlgError, ValueError):
        return None
    if not np.isfinite(result.fun):
        return None
    cross, _ = parts(result.x)
    xtvx, xtvy = cross[:p, :p], cross[:p, p]
    sigma2 = float(cross[p, p] - xtvy @ np.linalg.solve(xtvx, xtvy)) / (n - p)
    ratios = np.exp(result.x)
    return {name: float(ratio * sigma2) if ratio > 1e-5 else 0.0
            for name, ratio in zip(names, ratios, strict=True)} | {"residual": sigma2}


def _indicators(codes: np.ndarray) -> sparse.csr_matrix:
    n = codes.size
    return sparse.csr_matrix((np.ones(n), (np.arange(n), codes)), shape=(n, int(codes.max()) + 1))


def _moment_components(residuals: np.ndarray, X: np.ndarray,
                       codes: dict[str, np.ndarray]) -> tuple[np.ndarray, str]:
    """Gao & Owen's moment equations for m crossed factors, on the OLS residuals ``r = M y`` (``M = I - X G X'``,
    ``G = (X'X)^-1``). For each factor k, the sum of squares of ``r`` about its level means of k, ``r' A_k r``
    with ``A_k = I - P_k``, and the total sum of squares (``A = I - 11'/N``) have expectation
    ``sum_l s_l^2 ||A M Z_l||_F^2 + s_e^2 tr(A M)``; the fixed effects enter only through ``M``, whose
    corrections to the plain counts are p x p traces (this is what makes the estimates ANOVA's, hence REML's,
    on balanced designs). Negative solutions are set to zero (the boundary) and the others re-solved."""
    n, p = X.shape
    names = list(codes)
    m = len(names)
    counts = {name: np.bincount(c).astype(float) for name, c in codes.items()}
    for name in names:
        if np.count_nonzero(counts[name]) < 2:
            raise ValueError(f"only one {name}: its variance cannot be told from the others")
    gram_inverse = np.linalg.inv(X.T @ X)
    groupings = [*(codes[name] for name in names), np.zeros(n, dtype=np.int64)]
    coefficients = np.zeros((m + 1, m + 1))
    sums = np.zeros(m + 1)
    for k, grouping in enumerate(groupings):
        group_counts = np.bincount(grouping).astype(float)
        safe_counts = np.maximum(group_counts, 1)
        level_means = np.bincount(grouping, weights=residuals) / safe_counts
        sums[k] = float(np.sum((residuals - level_means[grouping]) ** 2))
        projected_X = np.column_stack([np.bincount(grouping, weights=column) / safe_counts
                                       for column in X.T])[grouping]
        xtax = X.T @ X - X.T @ projected_X
        for j, name in enumerate(names):
            pair = grouping * (int(codes[name].max()) + 1) + codes[name]
            _, inverse, pair_counts = np.unique(pair, return_inverse=True, return_counts=True)
            # ||A Z_l||^2 = N - sum over pairs (g, h) of n_gh^2 / n_g, written as a sum over ratings
            plain = n - float(np.sum(pair_counts[inverse] / group_counts[grouping]))
            level_count = int(codes[name].max()) + 1
            ktx = np.column_stack([np.bincount(codes[name], weights=column, minlength=level_count) for column in X.T])
            ktpx = np.column_stack([np.bincount(codes[name], weights=column, minlength=level_count)
                                    for column in projected_X.T])
            h = gram_inverse @ ktx.T
            coefficients[k, j] = plain - 2.0 * float(np.trace(h @ (ktx - ktpx))) + float(np.trace(xtax @ h @ h.T))
        coefficients[k, m] = n - np.count_nonzero(group_counts) - float(np.trace(gram_inverse @ xtax))
    if np.linalg.matrix_rank(coefficients) < m + 1:
        raise ValueError(f"the design does not cross {' and '.join(names)}: their variances cannot be told apart "
                         "(e.g. every item rated by one annotator)")
    active = list(range(m + 1))
    boundary = []
    while True:
        solution = np.zeros(m + 1)
        solution[active] = np.linalg.solve(coefficients[np.ix_(active, active)], sums[active])
        negative = [i for i in active[:-1] if solution[i] < 0]
        if not negative:
            break
        worst = min(negative, key=lambda i: solution[i])
        active.remove(worst)
        boundary.append(names[worst])
    note = (f"variance of {', '.join(sorted(boundary))} estimated at zero (boundary)" if boundary else "")
    return solution, note


def _conjugate_gradients(matrix: sparse.csr_matrix, right: np.ndarray, *, tol: float,
                         max_iter: int) -> tuple[np.ndarray, bool]:
    """Solve ``matrix @ x = right`` for every column of ``right`` at once (symmetric positive definite
    ``matrix``), Jacobi-preconditioned; each column keeps its own step lengths."""
    inverse_diagonal = 1.0 / matrix.diagonal()
    x = np.zeros_like(right)
    r = right.copy()
    z = inverse_diagonal[:, None] * r
    d = z.copy()
    rz = np.einsum("ij,ij->j", r, z)
    norms = np.linalg.norm(right, axis=0)
    norms[norms == 0] = 1.0
    for _ in range(max_iter):
        if np.all(np.linalg.norm(r, axis=0) <= tol * norms):
            return x, True
        md = matrix @ d
        curvature = np.einsum("ij,ij->j", d, md)
        step = np.divide(rz, curvature, out=np.zeros_like(rz), where=curvature > 0)
        x += step * d
        r -= step * md
        z = inverse_diagonal[:, None] * r
        rz_new = np.einsum("ij,ij->j", r, z)
        d = z + np.divide(rz_new, rz, out=np.zeros_like(rz), where=rz > 0) * d
        rz = rz_new
    return x, bool(np.all(np.linalg.norm(r, axis=0) <= tol * norms))
