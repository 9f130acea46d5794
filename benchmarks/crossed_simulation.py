"""How the crossed-random-intercepts fit (analysis.stats.crossed) behaves on unbalanced designs, by simulation.

    .venv/bin/python -m benchmarks crossed_simulation [--replicates 100] [--annotators 20] [--items 100]
                                                      [--k 3] [--seed 0]

Each replicate draws a study like the report's: 5 systems, every item rated by k annotators drawn with
unequal probabilities (some annotators do many items, most few: the unbalanced case the moment method is
not REML on), crossed random intercepts for annotator and item, true variances 0.16 (annotator),
0.25 (item), 0.49 (residual), system effects 0.9, 0.3, 0.2, 0, -0.6. Three fits per replicate:

- ``moments``: Gao & Owen (2017) moment estimates + GLS, no REML refinement (what the report runs on
  designs with more than 600 random-effect levels);
- ``refined``: the same refined to REML (what it runs on smaller designs);
- ``MixedLM``: statsmodels' dense REML MixedLM, the reference.

Printed: for each variance component and fit, the mean estimate, its bias and relative bias with a Monte Carlo
standard error, and the RMSE; the coverage of the 95% Wald intervals of the 10 pairwise system differences
(nominal 0.95), their mean standard error, and the largest difference of fixed effects from MixedLM.
Figures (benchmarks/figures.py) state the issue's tolerances: fixed effects within 1e-3 of MixedLM's REML
(ratio = max / 1e-3); coverage within 0.02 of 0.95 (ratio = |coverage - 0.95| / 0.02).
"""

from __future__ import annotations

import argparse
import itertools
import sys
import time
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

from empeval.analysis.stats.crossed import fit_crossed

if not __package__:  # run as a file (python benchmarks/NAME.py): the benchmarks package is in the repository root
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks.figures import Figure, at_most  # noqa: E402
from benchmarks.session import report, run_script  # noqa: E402

COVERAGE_GAP_GOAL = 0.02
FIXED_GAP_GOAL = 1e-3

EFFECTS = np.array([0.9, 0.3, 0.2, 0.0, -0.6])
TRUE = {"annotator": 0.16, "item": 0.25, "residual": 0.49}
PAIRS = list(itertools.combinations(range(EFFECTS.size), 2))


def unbalanced_design(n_annotators: int, n_items: int, *, k: int, rng: np.random.Generator):
    """y, X, annotator and item codes, system per rating: annotators drawn for each item with probabilities
    proportional to 1 / (rank + 2) (a few do many items, most do few), k distinct ones per item."""
    weights = 1.0 / (np.arange(n_annotators) + 2.0)
    weights /= weights.sum()
    item = np.repeat(np.arange(n_items), k)
    annotator = np.concatenate([rng.choice(n_annotators, k, replace=False, p=weights) for _ in range(n_items)])
    system = item % EFFECTS.size
    y = (3.0 + EFFECTS[system] + rng.normal(0, np.sqrt(TRUE["annotator"]), n_annotators)[annotator]
         + rng.normal(0, np.sqrt(TRUE["item"]), n_items)[item] + rng.normal(0, np.sqrt(TRUE["residual"]), item.size))
    X = np.column_stack([np.ones(item.size)] + [(system == s).astype(float) for s in range(1, EFFECTS.size)])
    return y, X, annotator, item, system


def _contrasts() -> np.ndarray:
    """Rows: the difference a - b of system effects in treatment coding (intercept = system 0)."""
    rows = np.zeros((len(PAIRS), EFFECTS.size))
    for row, (a, b) in enumerate(PAIRS):
        if a > 0:
            rows[row, a] += 1.0
        if b > 0:
            rows[row, b] -= 1.0
    return rows


def _mixedlm(y, system, annotator, item):
    import statsmodels.formula.api as smf

    frame = pd.DataFrame({"y": y, "s": system, "a": annotator, "i": item, "g": 0})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fit = smf.mixedlm("y ~ C(s)", frame, groups="g", re_formula="0",
                          vc_formula={"a": "0 + C(a)", "i": "0 + C(i)"}).fit(reml=True)
    names = list(fit.fe_params.index)
    variances = dict(zip(["annotator", "item"], fit.vcomp, strict=True)) | {"residual": float(fit.scale)}
    return fit.fe_params.to_numpy(), fit.cov_params().loc[names, names].to_numpy(), variances


def simulate(replicates: int, *, n_annotators: int, n_items: int, k: int, seed: int) -> dict:
    rng = np.random.default_rng(seed)
    contrasts = _contrasts()
    truth = contrasts @ np.concatenate([[0.0], EFFECTS[1:] - EFFECTS[0]])
    fits = ("moments", "refined", "MixedLM")
    variances = {fit: {name: [] for name in TRUE} for fit in fits}
    covered = {fit: [] for fit in fits}
    standard_errors = {fit: [] for fit in fits}
    fixed_gap = {"moments": [], "refined": []}
    seconds = dict.fromkeys(fits, 0.0)
    for _ in range(replicates):
        y, X, annotator, item, system = unbalanced_design(n_annotators, n_items, k=k, rng=rng)
        results = {}
        for fit, levels in (("moments", 0), ("refined", 10**9)):
            start = time.perf_counter()
            crossed = fit_crossed(y, X, {"annotator": annotator, "item": item}, reml_max_levels=levels)
            seconds[fit] += time.perf_counter() - start
            results[fit] = (crossed.fe_params, crossed.cov_params, crossed.variances)
        start = time.perf_counter()
        results["MixedLM"] = _mixedlm(y, system, annotator, item)
        seconds["MixedLM"] += time.perf_counter() - start
        for fit, (beta, covariance, components) in results.items():
            for name in TRUE:
                variances[fit][name].append(components[name])
            difference = contrasts @ beta
            se = np.sqrt(np.einsum("ij,jk,ik->i", contrasts, covariance, contrasts))
            covered[fit].extend(np.abs(difference - truth) <= 1.959964 * se)
            standard_errors[fit].extend(se)
        for fit in fixed_gap:
            fixed_gap[fit].append(float(np.max(np.abs(results[fit][0] - results["MixedLM"][0]))))
    return {"variances": variances, "covered": covered, "standard_errors": standard_errors,
            "fixed_gap": fixed_gap, "seconds": seconds}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--replicates", type=int, default=100)
    parser.add_argument("--annotators", type=int, default=20)
    parser.add_argument("--items", type=int, default=100)
    parser.add_argument("--k", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    result = simulate(args.replicates, n_annotators=args.annotators, n_items=args.items, k=args.k, seed=args.seed)
    r = args.replicates
    print(f"Unbalanced crossed designs: {r} replicates, {args.items} items x k = {args.k} of {args.annotators} "
          f"annotators (drawn with probability ~ 1/(rank+2)), 5 systems; true variances {TRUE}")
    print(f"{'component':>10} {'fit':>8} {'mean':>7} {'bias':>8} {'MC se':>7} {'rel. bias':>9} {'RMSE':>7}")
    for name, true in TRUE.items():
        for fit, by_name in result["variances"].items():
            values = np.asarray(by_name[name])
            bias = values.mean() - true
            print(f"{name:>10} {fit:>8} {values.mean():>7.4f} {bias:>+8.4f} {values.std(ddof=1) / np.sqrt(r):>7.4f} "
                  f"{bias / true:>+9.1%} {np.sqrt(np.mean((values - true) ** 2)):>7.4f}")
    print(f"95% Wald intervals of the {len(PAIRS)} pairwise differences ({r * len(PAIRS)} intervals per fit):")
    for fit, hits in result["covered"].items():
        coverage = float(np.mean(hits))
        mc = np.sqrt(0.95 * 0.05 / len(hits))
        report(Figure(f"|coverage - 0.95| of the 95% Wald intervals, {fit}", abs(coverage - 0.95),
                      goal=at_most(COVERAGE_GAP_GOAL), fmt=".3f",
                      note=f"coverage {coverage:.3f} (MC se {mc:.3f}), mean se "
                           f"{np.mean(result['standard_errors'][fit]):.4f}, fit time "
                           f"{result['seconds'][fit] / r * 1000:.1f} ms"))
    for fit, gaps in result["fixed_gap"].items():
        gaps = np.asarray(gaps)
        report(Figure(f"max |fixed effect - MixedLM REML's|, {fit}", gaps.max(), goal=at_most(FIXED_GAP_GOAL),
                      fmt=".2e", note=f"median {np.median(gaps):.2e}"))


if __name__ == "__main__":
    run_script(__file__, main)
