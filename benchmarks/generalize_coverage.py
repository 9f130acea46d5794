"""Coverage for new raters of the intervals of `empeval report --generalize` (analysis.stats.generalize), by simulation.

    nice -n 10 .venv/bin/python -m benchmarks generalize_coverage [--studies 1000] [--raters 5 10 15 30]
                                                                  [--contexts 40] [--jobs 1] [--seed 0]

Each study is drawn by ``empeval.analysis.simulate.likert.simulate_study`` (3 systems with effects 0.9, 0.2, -0.6,
one criterion, ``contexts`` contexts, 3 ratings per response in assignments of 10 items, every rater honest:
severity SD 0.3, noise SD 0.7, rounded and clipped to 1-5) with a pool of R raters. The target is the value for a
fresh pool of raters: the expected score over new raters (and new contexts), computed exactly from the
simulator's normal model (the mean of clip(round(N(m, s^2))) over the scale), which is what an infinite fresh
pool of raters rating new contexts would average.

Two settings per pool size:

- ``contexts vary`` (the simulator's default: context SD 0.4, response SD 0.4): the value for new raters and new
  contexts; intervals ``items`` (the report's percentile bootstrap over items, today's default, B = 400), ``both``
  (the crossed method, what the report uses; the two-way cluster-robust variance).
- ``contexts alike`` (context and response SD 0): every context has the same value, so the value for new raters
  on this study's contexts is the same number, and the ``raters`` intervals can be checked against it too.

Printed per setting: coverage of 95% intervals of the system means and of the paired differences (Monte Carlo
SE), mean width. Then a figure line per (setting, pool of 10 or more raters, ``raters``/``both`` method, estimand):
the goal is coverage at least 0.93.
"""

from __future__ import annotations

import argparse
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np
import pandas as pd
from scipy import stats

if not __package__:  # run as a file (python benchmarks/NAME.py): the benchmarks package is in the repository root
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks.figures import Figure, at_least  # noqa: E402
from benchmarks.session import report, run_script  # noqa: E402

COVERAGE_GOAL = 0.93
EFFECTS = {"gold": 0.9, "moel": 0.2, "baseline": -0.6}
CENTRE, RATER_SD, NOISE_SD = 3.2, 0.3, 0.7
SETTINGS = {"contexts vary": 0.4, "contexts alike": 0.0}
CHUNK = 20


def value_for_new_raters(effect: float, spread: float) -> float:
    """The expected 1-5 score of a response with latent centre + effect, over new raters and new contexts: the
    simulator rounds and clips latent + context + response + severity + noise, all normal (``spread``: the SD of
    the context and response parts, 0.4 by default, entering as ``context + 0.7 shared + 0.7 own``)."""
    sd = np.sqrt(spread**2 + 2 * 0.49 * spread**2 + RATER_SD**2 + NOISE_SD**2)
    return 1.0 + float(sum(stats.norm.sf(t - 0.5, CENTRE + effect, sd) for t in range(2, 6)))


def intervals(ratings: pd.DataFrame, seed: int) -> dict[str, tuple[pd.DataFrame, pd.DataFrame]]:
    """Each interval's means and pairs (columns system / system_a, system_b, ci_low, ci_high)."""
    from empeval.analysis.stats.generalize import generalized_means, generalized_pairs
    from empeval.analysis.stats.significance import system_means

    found = {}
    for target, method in (("raters", "crossed"), ("both", "crossed"), ("both", "cluster")):
        found[f"{target}, {method}"] = (generalized_means(ratings, target=target, method=method),
                                        generalized_pairs(ratings, target=target, method=method))
    found["items, bootstrap (today)"] = (system_means(ratings, n_boot=400, seed=seed), None)
    return found


def run_chunk(setting: str, n_raters: int, n_contexts: int, seeds: list[int]) -> list[dict]:
    from empeval.analysis import simulate_study, tidy_from_export

    spread = SETTINGS[setting]
    truth = {system: value_for_new_raters(effect, spread) for system, effect in EFFECTS.items()}
    records = []
    for seed in seeds:
        study = simulate_study(n_contexts=n_contexts, n_honest=n_raters, n_random_clickers=0, n_straight_liners=0,
                               criteria=("empathy",), system_effects=dict(EFFECTS), context_sd=spread,
                               response_sd=spread, rater_bias_sd=RATER_SD, noise_sd=NOISE_SD, seed=seed)
        ratings = tidy_from_export(study.export)
        for name, (means, pairs) in intervals(ratings, seed).items():
            for row in means.itertuples():
                records.append({"interval": name, "estimand": "system means", "seed": seed,
                                "covered": row.ci_low <= truth[row.system] <= row.ci_high,
                                "width": row.ci_high - row.ci_low})
            for row in (pairs.itertuples() if pairs is not None else ()):
                value = truth[row.system_a] - truth[row.system_b]
                records.append({"interval": name, "estimand": "paired differences", "seed": seed,
                                "covered": row.ci_low <= value <= row.ci_high, "width": row.ci_high - row.ci_low})
    return records


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--studies", type=int, default=1000, help="simulated studies per setting and pool size")
    parser.add_argument("--raters", type=int, nargs="+", default=[5, 10, 15, 30], help="sizes of the rater pool")
    parser.add_argument("--contexts", type=int, default=40)
    parser.add_argument("--jobs", type=int, default=1, help="worker processes (the machine is shared: keep it low)")
    parser.add_argument("--seed", type=int, default=0, help="first seed; study i uses seed + i")
    args = parser.parse_args()
    seeds = list(range(args.seed, args.seed + args.studies))
    started = time.perf_counter()
    jobs = [(setting, n, args.contexts, seeds[i:i + CHUNK]) for setting in SETTINGS for n in args.raters
            for i in range(0, len(seeds), CHUNK)]
    collected: dict[tuple[str, int], list[dict]] = {}
    with ProcessPoolExecutor(max_workers=args.jobs) as pool:
        futures = {pool.submit(run_chunk, *job): job[:2] for job in jobs}
        for future, key in futures.items():
            collected.setdefault(key, []).extend(future.result())
    print(f"{args.studies} studies per setting and pool, {args.contexts} contexts x 3 systems, 3 ratings per "
          f"response; {time.perf_counter() - started:.0f} s with {args.jobs} job(s)")
    for (setting, n_raters), records in collected.items():
        frame = pd.DataFrame(records)
        print(f"\n{setting}, {n_raters} raters: coverage of the value for new raters (MC SE), mean width")
        for (name, estimand), part in frame.groupby(["interval", "estimand"], sort=True):
            if setting == "contexts vary" and name.startswith("raters"):
                continue  # their target (this study's contexts) is not the value for new contexts
            coverage = float(part["covered"].mean())
            se = float(np.sqrt(coverage * (1 - coverage) / len(part)))
            print(f"  {name:<26} {estimand:<19} {coverage:.3f} ({se:.3f})  width {part['width'].mean():.3f}")
            if n_raters >= 10 and not name.startswith("items"):
                report(Figure(f"coverage for new raters, {setting}, {n_raters} raters, {name}, {estimand}",
                              coverage, "", goal=at_least(COVERAGE_GOAL), fmt=".3f",
                              note=f"MC SE {se:.3f}, {len(part)} intervals"))


if __name__ == "__main__":
    run_script(__file__, main)
