"""The draw of active sampling: which contexts people rate, with what probability, from the judges' uncertainty
(Zrnic and Candès, "Active Statistical Inference", ICML 2024; the robust mixing of Li, Zrnic and Candès, "Robust
Sampling for Active Statistical Inference", NeurIPS 2025). The estimators that weight by these probabilities are in
``analysis.stats.ppi.active``; this module needs only numpy and pandas, so that drawing a sample (`empeval study
sample`) does not load the statistics (scipy, statsmodels) it never uses.

The design. Judges score every item first; each context i then gets a probability pi_i of being rated by people,
and is drawn independently with that probability (Poisson sampling: xi_i ~ Bernoulli(pi_i)). The probabilities
follow the judges' *uncertainty* u_i about the context (``context_uncertainty``: the disagreement between several
judges, or a learned judge's predictive variance), since a label is worth most where the judge is likely wrong.
For a mean, the variance of the weighted estimator (``active``) is, up to terms that do not depend on the design,
mean_i E[(Y_i - lambda f_i)^2 | X_i] / pi_i, which under sum_i pi_i = B is smallest at
pi_i proportional to sqrt(E[(Y_i - lambda f_i)^2 | X_i]) (Zrnic and Candès 2024, section 3); with u_i standing in
for that error's variance,

    pi_active_i = clip(c * sqrt(u_i), pi_min, 1),   c such that sum_i pi_active_i = B,

where the expected budget B = human_share x N contexts. An uncertainty that does not track the judge's errors can
make those probabilities worse than uniform ones, so they are mixed with uniform along the budget-preserving path
of Li, Zrnic and Candès (2025):

    pi_i = (1 - tau) pi_active_i + tau B / N,

which still sums to B. Their variance is convex along that path, so pi's variance is at most
(1 - tau) V(active) + tau V(uniform); and every pi_i >= tau B / N bounds it by V(uniform) / tau, whatever the
uncertainty's quality. Li, Zrnic and Candès choose tau from labelled data; our draw happens before any label
exists, so tau is fixed: ``DEFAULT_TAU`` = 0.5 keeps at least half of active sampling's variance reduction when
the uncertainty is informative and loses at most a factor 2 of variance (sqrt(2) of width) when it is not.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

#: The weight of uniform sampling in the mix (Li, Zrnic and Candès 2025; see the module docstring).
DEFAULT_TAU = 0.5


def context_uncertainty(judge_scores: pd.DataFrame) -> pd.DataFrame:
    """How unsure the judges are about each context: the variance the active design's probabilities follow.

    ``judge_scores`` holds one row per item scored (``context_id``, ``system``, ``criterion``, ``judge_score``),
    with a ``judge`` column when several judges scored the study, and a learned judge's ``fold_score_*`` columns
    when it has them (``server.backend.judges.scores.judge_scores(..., folds=True)``). Per judge and criterion the
    scores are standardised (mean 0, SD 1 over the items), so that judges on different scales are comparable, then:

    * two or more judges: an item's uncertainty is the variance of the judges' standardised scores of it
      (their disagreement);
    * one judge with fold scores: the variance of its fold models' standardised scores of the item (the learned
      judge's predictive variance);
    * one judge without either: no per-item uncertainty exists; every context gets 1 and the probabilities
      are uniform (``attrs["informative"]`` False says so).

    A context's uncertainty is the mean over its items (every system, every criterion). Items with no usable
    value (a failed score) are left out of the mean; a context with none gets the median of the others.

    Returns
    -------
    uncertainty : pandas.DataFrame
        ``context_id``, ``uncertainty`` (>= 0), sorted by context; ``attrs["basis"]`` says in words what it was
        computed from and ``attrs["informative"]`` whether it varies by context at all.

    Examples
    --------
    >>> scores = pd.DataFrame({"judge": ["a", "a", "a", "b", "b", "b"], "context_id": [1, 2, 3, 1, 2, 3],
    ...                        "system": "gold", "criterion": "empathy",
    ...                        "judge_score": [1.0, 3.0, 5.0, 1.0, 5.0, 3.0]})
    >>> table = context_uncertainty(scores)
    >>> table.round(2).to_dict("list"), table.attrs["basis"]
    ({'context_id': [1, 2, 3], 'uncertainty': [0.0, 0.5, 0.5]}, 'from the disagreement of judges a, b')
    >>> context_uncertainty(scores.loc[scores["judge"] == "a"]).attrs["informative"]
    False
    """
    required = {"context_id", "system", "criterion", "judge_score"}
    if missing := sorted(required - set(judge_scores.columns)):
        raise ValueError(f"judge_scores needs column(s) {', '.join(map(repr, missing))}")
    scores = judge_scores.copy()
    if "judge" not in scores.columns:
        scores["judge"] = "judge"
    judges = sorted(scores["judge"].astype(str).unique())
    if not judges:
        raise ValueError("judge_scores holds no score: score the study's items first (empeval judge)")
    fold_columns = [c for c in scores.columns if str(c).startswith("fold_score_")]
    contexts = np.sort(scores["context_id"].unique())

    def standardised(values: pd.Series, reference: pd.Series) -> pd.Series:
        sd = reference.std(ddof=1)
        return (values - reference.mean()) / sd if sd > 0 else values * 0.0

    if len(judges) >= 2:
        scores["z"] = scores.groupby(["judge", "criterion"], observed=True)["judge_score"].transform(
            lambda s: standardised(s, s))
        per_item = scores.groupby(["criterion", "system", "context_id"], observed=True)["z"].var(ddof=1)
        basis = f"from the disagreement of judges {', '.join(judges)}"
    elif fold_columns and scores[fold_columns].notna().sum(axis=1).max() >= 2:
        spread = scores[fold_columns].var(axis=1, ddof=1)
        sd = scores.groupby("criterion", observed=True)["judge_score"].transform(lambda s: s.std(ddof=1))
        scores["v"] = spread / sd.where(sd > 0) ** 2
        per_item = scores.set_index(["criterion", "system", "context_id"])["v"]
        basis = f"from the predictive variance of learned judge {judges[0]} (the spread of its {len(fold_columns)} " \
                "fold models)"
    else:
        table = pd.DataFrame({"context_id": contexts, "uncertainty": 1.0})
        table.attrs.update(basis=f"uniform: judge {judges[0]} alone gives no per-context uncertainty (score the "
                                 "study with a second judge, or a learned judge with folds)", informative=False)
        return table
    by_context = per_item.groupby(level="context_id").mean().reindex(contexts)
    fill = float(by_context.median()) if by_context.notna().any() else 1.0
    values = by_context.fillna(fill).clip(lower=0.0).to_numpy(dtype=float)
    table = pd.DataFrame({"context_id": contexts, "uncertainty": values})
    table.attrs.update(basis=basis, informative=bool(np.ptp(values) > 0))
    return table


def sampling_probabilities(uncertainty, budget: float, *, tau: float = DEFAULT_TAU,
                           pi_min: float = 0.0) -> np.ndarray:
    """Each context's probability of being rated by people: proportional to the square root of its
    ``uncertainty``, scaled so that they sum to ``budget`` (the expected number of contexts people rate,
    human_share x N) and clipped to [``pi_min``, 1] (``c`` found by bisection), then mixed with uniform:
    (1 - ``tau``) active + ``tau`` budget / N (module docstring). Zero uncertainty everywhere gives uniform
    probabilities. The result sums to ``budget`` and lies in [max(pi_min (1 - tau), tau budget / N), 1].

    Examples
    --------
    >>> sampling_probabilities([1, 1, 4, 4], budget=2).round(4).tolist()
    [0.4167, 0.4167, 0.5833, 0.5833]
    >>> sampling_probabilities([1, 1, 4, 4], budget=2, tau=0).round(4).tolist()
    [0.3333, 0.3333, 0.6667, 0.6667]
    >>> sampling_probabilities([0, 0, 0, 100], budget=2, tau=0).tolist()  # clipped at 1, the rest spread evenly
    [0.3333333333333333, 0.3333333333333333, 0.3333333333333333, 1.0]
    """
    u = np.asarray(uncertainty, dtype=float)
    n = u.size
    if u.ndim != 1 or n < 2:
        raise ValueError(f"uncertainty must be 1-d with one value per context (at least 2), got shape {u.shape}")
    if not np.isfinite(u).all() or (u < 0).any():
        raise ValueError("uncertainty must be finite and non-negative (a variance per context)")
    if not 0 < budget < n:
        raise ValueError(f"budget (the expected number of contexts people rate) must be strictly between 0 and the "
                         f"{n} contexts, got {budget!r}")
    if not 0 <= tau <= 1:
        raise ValueError(f"tau (the weight of uniform sampling) must be in [0, 1], got {tau!r}")
    uniform = budget / n
    if not 0 <= pi_min <= uniform:
        raise ValueError(f"pi_min must be in [0, budget / N = {uniform:.4g}] (a floor above the mean probability "
                         f"cannot sum to the budget), got {pi_min!r}")
    root = np.sqrt(u)
    if not root.any():
        return np.full(n, uniform)

    def total(c: float) -> float:
        return float(np.clip(c * root, pi_min, 1.0).sum())

    positive = root > 0
    if positive.sum() + pi_min * (~positive).sum() <= budget:
        # Every uncertain context at 1 still leaves budget: the others share it evenly.
        active = np.where(positive, 1.0, (budget - positive.sum()) / max((~positive).sum(), 1))
    else:
        low, high = 0.0, 1.0
        while total(high) < budget:
            high *= 2
        for _ in range(200):
            middle = (low + high) / 2
            low, high = (middle, high) if total(middle) < budget else (low, middle)
            if high - low <= 1e-12 * high:
                break
        active = np.clip(high * root, pi_min, 1.0)
        active *= budget / active.sum()  # the bisection's last rounding
        active = np.minimum(active, 1.0)
    return (1 - tau) * active + tau * uniform
