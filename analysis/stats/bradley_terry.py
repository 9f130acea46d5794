"""Ranking systems from paired comparisons: Bradley-Terry, and Davidson's extension when ties are allowed.

The input of ``ranking`` is a table of comparisons, whatever the kind of study they come from (an A/B study's
judgments as they are; a best-worst study's choices as the comparisons they imply): one row per comparison with
``criterion``, ``context_id`` (the resampling unit), ``system_left`` and ``system_right`` (the two systems
compared), ``preferred`` (one of them, or ``TIE``) and optionally ``is_control`` (rows where it is true are left
out).

Bradley & Terry (1952): P(i preferred to j) = pi_i / (pi_i + pi_j). Fitted by maximum likelihood with
choix's I-LSR (Maystre & Grossglauser 2015), on the decisive judgments.

Davidson (1970), "On extending the Bradley-Terry model to accommodate ties in paired comparison
experiments": with a tie parameter nu >= 0,

    P(i preferred to j) = pi_i / D,   P(tie) = nu sqrt(pi_i pi_j) / D,   D = pi_i + pi_j + nu sqrt(pi_i pi_j).

choix has no model with ties (it fits Bradley-Terry / Plackett-Luce on wins only), so Davidson's likelihood
is maximised here by Newton's method with the analytic gradient and Hessian (scipy.optimize's trust region
as the fallback; see ``_newton`` for why not scipy first).
Strengths are reported as log strengths theta = log pi, centred to mean zero (the model fixes them only up
to a shared constant).

The Bradley-Terry maximum-likelihood estimate exists only when the systems cannot be split into two groups one of
which never loses to the other (the wins graph is strongly connected; Ford 1957). Under Davidson's model a tie is
evidence too: a system that never wins but ties can have a finite strength, as long as the tie parameter is pinned
by other pairs (``davidson_identifiable`` states the condition). A fit that fails its model's check is undefined
(NaN), and so is a bootstrap resample that does. Uncertainty: percentile bootstrap over contexts
(all judgments of a drawn context go together, since they are not independent).
"""
from __future__ import annotations

import numpy as np
import pandas as pd
from scipy import optimize

from empeval.analysis.stats.bootstrap import percentile_interval, resample_weights

# What `preferred` says of a tie (the A/B judgment table's value: tests/analysis/stats/test_bradley_terry.py checks
# the two agree).
TIE = "tie"
COMPARISON_COLUMNS = ("criterion", "context_id", "system_left", "system_right", "preferred")

RANKING_CAPTION = (
    "Ranking: log strengths (mean zero) of a Bradley-Terry model fitted by maximum likelihood to the "
    "non-control judgments of each criterion (Davidson's extension with a tie parameter when the criterion "
    "has ties), with percentile bootstrap intervals over contexts; rank 1 is the strongest."
)

MODELS = ("auto", "davidson", "bradley_terry")


def identifiable(wins: np.ndarray) -> bool:
    """Whether Bradley-Terry / Davidson log strengths have a finite maximum-likelihood estimate: every
    system must be reachable from every other through "beat at least once" links (Ford 1957).

    Returns
    -------
    ok : bool

    Examples
    --------
    >>> import numpy as np
    >>> identifiable(np.array([[0, 3], [1, 0]])), identifiable(np.array([[0, 3], [0, 0]]))
    (True, False)
    """
    wins = np.asarray(wins, dtype=float)
    n = wins.shape[0]
    if n < 2:
        return False
    # Reachability by repeated squaring of the "beat at least once" relation: the same answer as
    # scipy.sparse.csgraph.connected_components(connection="strong") == 1, without its per-call overhead,
    # which the bootstrap's thousands of checks of a handful of systems would pay.
    reach = (wins > 0) | np.eye(n, dtype=bool)
    for _ in range(int(np.ceil(np.log2(n))) + 1):
        reach = (reach.astype(np.int64) @ reach.astype(np.int64)) > 0
    return bool(reach.all())


def davidson_identifiable(wins: np.ndarray, ties: np.ndarray) -> bool:
    """Whether Davidson's (1970) model has a finite maximum-likelihood estimate of its log strengths and its tie
    parameter nu from these counts (``wins[i, j]``: i preferred to j; ``ties``: symmetric).

    The negative log-likelihood is convex in (theta, log nu), so a finite minimiser exists unless some direction
    other than a shared shift of theta leaves every observed outcome's probability from falling: along a direction
    (d, e), outcome "i beats j" keeps its probability iff d_i >= d_j and d_i - d_j >= 2e, and a tie of i and j iff
    |d_i - d_j| <= 2e. With e = 0 that asks for a split of the systems that no win crosses one way and no tie
    crosses at all: ``identifiable`` of wins plus ties fails. With e > 0 (scaled to 1/2) it asks for d with
    d_i - d_j >= 1 for each observed win and |d_i - d_j| <= 1 for each observed tie, a system of difference
    constraints, feasible iff its constraint graph has no negative cycle (Bellman 1958; checked by Floyd-Warshall
    here): then nu and the strength gaps grow together without bound (two systems where one never wins but ties).
    e < 0 needs no tie at all, where the fit is Bradley-Terry's.

    Returns
    -------
    ok : bool

    Examples
    --------
    Two systems, one never winning but tying: no finite estimate. A third system pins nu: then it has one.

    >>> import numpy as np
    >>> davidson_identifiable(np.array([[0, 5], [0, 0]]), np.array([[0, 3], [3, 0]]))
    False
    >>> wins = np.array([[0, 4, 3], [2, 0, 2], [0, 0, 0]])
    >>> ties = np.array([[0, 2, 2], [2, 0, 1], [2, 1, 0]])
    >>> davidson_identifiable(wins, ties)
    True
    """
    wins = np.asarray(wins, dtype=float)
    ties = np.asarray(ties, dtype=float)
    ties = np.maximum(ties, ties.T)
    if not identifiable(wins + ties):
        return False
    n = wins.shape[0]
    # Edge u -> v of weight w stands for d_v - d_u <= w: a win of i over j is j - i <= -1 (edge i -> j, -1); a tie
    # of i and j is |j - i| <= 1 (edges both ways, 1). The tighter constraint of a pair is kept.
    distance = np.full((n, n), np.inf)
    distance[ties > 0] = 1.0
    distance[wins > 0] = -1.0
    np.fill_diagonal(distance, np.minimum(np.diag(distance), 0.0))
    for k in range(n):
        distance = np.minimum(distance, distance[:, k, None] + distance[None, k, :])
    return bool((np.diag(distance) < 0).any())


def fit_bradley_terry(wins: np.ndarray, *, start: np.ndarray | None = None) -> np.ndarray:
    """Maximum-likelihood Bradley-Terry log strengths from a wins matrix (``wins[i, j]``: times i was
    preferred to j; counts may be fractional, as bootstrap weights make them), with choix's
    ``ilsr_pairwise_dense`` started from ``start`` (log strengths; a bootstrap starts from the full fit);
    NaN when not ``identifiable``.

    Returns
    -------
    theta : numpy.ndarray
        Log strengths, mean zero.

    Examples
    --------
    For two systems the estimate is log(wins / losses), split around zero:

    >>> import numpy as np
    >>> theta = fit_bradley_terry(np.array([[0, 6], [2, 0]]))
    >>> bool(np.isclose(theta[0] - theta[1], np.log(6 / 2)))
    True
    """
    import choix

    wins = np.asarray(wins, dtype=float)
    if not identifiable(wins):
        return np.full(wins.shape[0], np.nan)
    initial = None if start is None or not np.isfinite(start).all() else np.asarray(start, dtype=float)
    theta = choix.ilsr_pairwise_dense(wins, alpha=0.0, initial_params=initial, max_iter=10_000, tol=1e-10)
    return theta - theta.mean()


def fit_davidson(wins: np.ndarray, ties: np.ndarray, *, start: tuple[np.ndarray, float] | None = None
                 ) -> tuple[np.ndarray, float]:
    """Maximum-likelihood estimates of Davidson's (1970) model (module docstring) from a wins matrix and a
    symmetric ties matrix (``ties[i, j]``: ties of i and j; the upper triangle is used); NaN when no finite estimate
    exists (``davidson_identifiable``; ``identifiable`` of the wins when there are no ties). ``start``: (log
    strengths, nu) to start from; by default the log odds of each system's wins against its losses, and the share
    of ties.

    Returns
    -------
    theta : numpy.ndarray
        Log strengths, mean zero.
    nu : float
        The tie parameter.

    Examples
    --------
    Two systems, W = 6 wins, L = 2 losses, T = 4 ties: theta_1 - theta_2 = log(W / L) and
    nu = T / sqrt(W L) (derived in tests/analysis/stats/test_bradley_terry.py).

    >>> import numpy as np
    >>> theta, nu = fit_davidson(np.array([[0, 6], [2, 0]]), np.array([[0, 4], [4, 0]]))
    >>> bool(np.isclose(theta[0] - theta[1], np.log(3), atol=1e-6)), bool(np.isclose(nu, 4 / np.sqrt(12), atol=1e-6))
    (True, True)
    """
    wins = np.asarray(wins, dtype=float)
    ties = np.asarray(ties, dtype=float)
    n = wins.shape[0]
    upper_i, upper_j = np.triu_indices(n, k=1)
    w_ij, w_ji, t_ij = wins[upper_i, upper_j], wins[upper_j, upper_i], ties[upper_i, upper_j]
    total = w_ij + w_ji + t_ij
    if t_ij.sum() == 0:
        return fit_bradley_terry(wins), 0.0
    if not davidson_identifiable(wins, ties):
        return np.full(n, np.nan), float("nan")

    # Each pair's log D is a log-sum-exp of three linear forms of (theta_i, theta_j, log nu) with coefficient
    # rows C: the negative log-likelihood is convex, its Hessian is sum of n_ij Cov_p(C) (p: the model's three
    # outcome probabilities), and Newton steps in a trust region (scipy's trust-exact) converge in a few
    # iterations, which the bootstrap's many refits need.
    coefficients = np.array([[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.5, 0.5, 1.0]])
    slots = np.stack([upper_i, upper_j, np.full_like(upper_i, n)], axis=1)  # rows/cols of (theta..., log nu)

    def probabilities(params: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        theta = np.concatenate([[0.0], params[:-1]])  # theta_0 = 0 fixes the shared constant
        exponents = np.stack([theta[upper_i], theta[upper_j], params[-1] + (theta[upper_i] + theta[upper_j]) / 2],
                             axis=1)
        log_d = np.logaddexp.reduce(exponents, axis=1)
        return exponents, np.exp(exponents - log_d[:, None])

    observed = np.stack([w_ij, w_ji, t_ij], axis=1)

    def negative_log_likelihood(params: np.ndarray) -> tuple[float, np.ndarray]:
        exponents, p = probabilities(params)
        ll = np.sum(observed * (exponents - np.logaddexp.reduce(exponents, axis=1)[:, None]))
        per_pair = (observed - total[:, None] * p) @ coefficients  # d ll / d (theta_i, theta_j, log nu)
        grad = np.bincount(slots.ravel(), per_pair.ravel(), minlength=n + 1)
        return -float(ll), -grad[1:]

    def hessian(params: np.ndarray) -> np.ndarray:
        _, p = probabilities(params)
        mean = p @ coefficients
        second = np.einsum("pk,ka,kb->pab", p, coefficients, coefficients)
        blocks = total[:, None, None] * (second - mean[:, :, None] * mean[:, None, :])
        full = np.zeros((n + 1, n + 1))
        np.add.at(full, (slots[:, :, None], slots[:, None, :]), blocks)
        return full[1:, 1:]

    if start is not None and np.isfinite(start[0]).all() and start[1] > 0:
        theta_0, log_nu_0 = np.asarray(start[0], dtype=float), float(np.log(start[1]))
    else:
        theta_0 = np.log(wins.sum(axis=1) + 0.5) - np.log(wins.sum(axis=0) + 0.5)
        log_nu_0 = float(np.log(max(t_ij.sum(), 0.5) / max(total.sum(), 1.0)))
    initial = np.concatenate([theta_0[1:] - theta_0[0], [log_nu_0]])
    solution = _newton(negative_log_likelihood, hessian, initial)
    if solution is None:  # not converged: scipy's trust region, slower but more careful
        solution = optimize.minimize(negative_log_likelihood, initial, jac=True, hess=hessian, method="trust-exact",
                                     options={"gtol": 1e-10}).x
    theta = np.concatenate([[0.0], solution[:-1]])
    return theta - theta.mean(), float(np.exp(solution[-1]))


def _newton(objective, hessian, start: np.ndarray, *, max_iter: int = 100, tol: float = 1e-10) -> np.ndarray | None:
    """Newton's method with step halving for a smooth convex objective (returning value and gradient); None
    when it does not converge. Written out because the bootstrap refits the model thousands of times and the
    per-call overhead of scipy.optimize.minimize (about 5 ms here) would dominate a report; scipy's
    trust-exact takes over when this fails."""
    x = np.asarray(start, dtype=float)
    value, gradient = objective(x)
    for _ in range(max_iter):
        if np.max(np.abs(gradient)) < tol * max(1.0, abs(value)):
            return x
        try:
            step = np.linalg.solve(hessian(x), gradient)
        except np.linalg.LinAlgError:
            return None
        scale = 1.0
        for _ in range(40):
            candidate = x - scale * step
            new_value, new_gradient = objective(candidate)
            if np.isfinite(new_value) and new_value <= value + 1e-12 * max(1.0, abs(value)):
                break
            scale /= 2
        else:
            return None
        if np.max(np.abs(candidate - x)) < 1e-13:
            x, value, gradient = candidate, new_value, new_gradient
            return x
        x, value, gradient = candidate, new_value, new_gradient
    return None


def ranking(comparisons: pd.DataFrame, *, model: str = "auto", n_boot: int = 1000, ci_level: float = 0.95,
            seed: int = 0) -> pd.DataFrame:
    """Per criterion, log strengths of the systems from the non-control comparisons (see the module docstring for
    the table), with percentile bootstrap CIs over contexts (``n_boot`` resamples, seeded). ``model``:
    "bradley_terry" (ties dropped), "davidson" (ties modelled), or "auto" (Davidson when the criterion has ties,
    Bradley-Terry otherwise).

    Returns
    -------
    ranking : pandas.DataFrame
        One row per criterion and system, strongest first:

        * ``criterion``, ``system``, ``rank`` (1 = strongest)
        * ``strength``: log strength, mean zero within the criterion; ``ci_low``, ``ci_high``: its interval
        * ``wins``, ``losses``, ``ties``: the system's judgments
        * ``model``: "bradley_terry" or "davidson"; ``tie_parameter``: Davidson's nu (NaN for Bradley-Terry)
        * ``resamples``: bootstrap resamples with a defined estimate (the others had a system that never lost)

    Examples
    --------
    >>> rows = [("gold", "moel", "gold"), ("gold", "baseline", "gold"), ("moel", "baseline", "moel"),
    ...         ("moel", "gold", "tie"), ("baseline", "moel", "baseline"), ("gold", "moel", "moel")]
    >>> comparisons = pd.DataFrame([{"criterion": "empathy", "context_id": i % 3, "system_left": left,
    ...                              "system_right": right, "preferred": won} for i, (left, right, won) in
    ...                             enumerate(rows * 5)])
    >>> ranking(comparisons, n_boot=50)[["system", "rank", "model"]].values.tolist()
    [['gold', 1, 'davidson'], ['moel', 2, 'davidson'], ['baseline', 3, 'davidson']]
    """
    if model not in MODELS:
        raise ValueError(f"model must be one of {MODELS}, got {model!r}")
    missing = [column for column in COMPARISON_COLUMNS if column not in comparisons.columns]
    if missing:
        raise ValueError(f"the comparisons table has no column {missing[0]!r}; it needs "
                         f"{', '.join(COMPARISON_COLUMNS)}")
    table = comparisons
    if "is_control" in table.columns:
        table = table.loc[~table["is_control"].astype(bool)]
    frames = []
    for criterion, part in table.groupby("criterion", sort=True):
        frames.append(_rank_criterion(part, criterion=str(criterion), model=model, n_boot=n_boot,
                                      ci_level=ci_level, seed=seed))
    columns = ["criterion", "system", "rank", "strength", "ci_low", "ci_high", "wins", "losses", "ties", "model",
               "tie_parameter", "resamples"]
    return pd.concat(frames, ignore_index=True)[columns] if frames else pd.DataFrame(columns=columns)


def _rank_criterion(part: pd.DataFrame, *, criterion: str, model: str, n_boot: int, ci_level: float,
                    seed: int) -> pd.DataFrame:
    systems = sorted(set(part["system_left"]) | set(part["system_right"]))
    index = {system: i for i, system in enumerate(systems)}
    contexts = sorted(set(part["context_id"]))
    where = {context: c for c, context in enumerate(contexts)}
    n = len(systems)
    # Per-context count matrices, so that a bootstrap resample of contexts is one weighted sum.
    wins = np.zeros((len(contexts), n, n))
    ties = np.zeros((len(contexts), n, n))
    left = part["system_left"].map(index).to_numpy()
    right = part["system_right"].map(index).to_numpy()
    context = part["context_id"].map(where).to_numpy()
    preferred = part["preferred"].to_numpy()
    is_tie = preferred == TIE
    winner = np.where(preferred == part["system_left"].to_numpy(), left, right)
    loser = np.where(preferred == part["system_left"].to_numpy(), right, left)
    np.add.at(wins, (context[~is_tie], winner[~is_tie], loser[~is_tie]), 1.0)
    np.add.at(ties, (context[is_tie], left[is_tie], right[is_tie]), 1.0)
    ties = ties + ties.transpose(0, 2, 1)
    use_davidson = model == "davidson" or (model == "auto" and bool(is_tie.any()))

    def fit(w: np.ndarray, t: np.ndarray, start=None) -> tuple[np.ndarray, float]:
        if use_davidson:
            return fit_davidson(w, t, start=start)
        return fit_bradley_terry(w, start=None if start is None else start[0]), np.nan

    theta, nu = fit(wins.sum(axis=0), ties.sum(axis=0))
    full = (theta, nu)
    weights = resample_weights(len(contexts), n_boot=n_boot, seed=seed)
    boot_wins = np.tensordot(weights, wins, axes=1)
    boot_ties = np.tensordot(weights, ties, axes=1)
    boot = np.array([fit(boot_wins[b], boot_ties[b], full)[0] for b in range(n_boot)])
    total_wins, total_ties = wins.sum(axis=0), ties.sum(axis=0)
    rows = []
    for i, system in enumerate(systems):
        low, high, defined = percentile_interval(boot[:, i], level=ci_level)
        rows.append({"criterion": criterion, "system": system, "strength": float(theta[i]), "ci_low": low,
                     "ci_high": high, "wins": int(total_wins[i].sum()), "losses": int(total_wins[:, i].sum()),
                     "ties": int(total_ties[i].sum()), "model": "davidson" if use_davidson else "bradley_terry",
                     "tie_parameter": nu, "resamples": defined})
    frame = pd.DataFrame(rows).sort_values(["strength", "system"], ascending=[False, True], kind="stable")
    frame["rank"] = pd.array(np.where(frame["strength"].notna(), np.arange(1, n + 1), -1), dtype="Int64")
    frame.loc[frame["strength"].isna(), "rank"] = pd.NA  # no finite estimate (a system never lost): no rank
    return frame
