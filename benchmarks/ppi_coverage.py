"""Coverage and efficiency of the prediction-powered intervals (analysis.stats.ppi), by simulation.

    nice -n 10 .venv/bin/python -m benchmarks ppi_coverage [--studies 2000] [--jobs 1] [--seed 0]
                                                           [--n-contexts 400] [--human-share 0.2]
                                                           [--crossppi-studies 200]

Each study is drawn by ``empeval.analysis.simulate.judges.simulate_judged_study``: 3 systems (true effects 0.6, 0.3,
0 on the latent scale), ``n-contexts`` contexts of which ``human-share`` are rated by people (3 ratings per
response, raters with severity drawn from a pool of 20 shared across items, 10 items per assignment), one
criterion, and a judge on every item. Three judges: ``good`` (correlation 0.9 with the latent quality, about
0.7 with the item labels), ``useless`` (correlation 0) and ``biased`` (correlation 0.8, shifted +1.5,
compressed x0.5, +0.4 for one system). Every study is analysed as ``ppi_system_means`` and
``ppi_paired_differences`` analyse it (defaults: 95%, clustered by assignment), by the same core functions
(``ppi_mean_interval``, ``shared_rater_variance``) called on the study's numpy arrays rather than through the
DataFrame layer, which costs ten times more per study (``empeval.analysis.simulate.judges.analyse_judged_arrays``;
tests/analysis/stats/ppi/test_estimates_simulation.py pins it equal to the DataFrame functions).

Printed per judge: n studies and n intervals; the coverage of the 95% PPI++ intervals for the system means
and the paired differences with a Monte Carlo standard error (goal: at least 0.935 each), beside it the
coverage of ppi_py's own intervals, which treat items as independent (the same intervals without the
shared-rater term), and the human-only intervals' coverage on the same ratings; mean widths, human-only vs
PPI, and their ratio; the judge's mean correlation with the labels and its mean lambda; and the human
ratings needed for equal width: a human-only study needs (w_human / w_ppi)^2 times the ratings to match the
PPI width, so the judge saves 1 - (w_ppi / w_human)^2 of them (goal: at least 30% for means with a
correlation of about 0.7).

Then cross-prediction-powered inference (a learned judge, as ``learned-judge`` is used): on
``crossppi-studies`` further studies per judge (the same design; each cross-fitted with 5 folds and analysed
through the DataFrame layer, ``empeval.analysis.simulate.judges.cross_fitted_estimates``: ridge from the simulated
judge's score and the system to the labels, then ``crossppi_system_means`` / ``crossppi_paired_differences``
with the shared-rater term), the same coverage columns: the 95% cross-PPI intervals clustered by assignment,
the same intervals without the shared-rater term (ppi_py's), and the human-only ones.

After the tables, one figure line per goal (benchmarks/figures.py): the coverage of every judge and estimand, PPI++
and cross-PPI (at least 0.935), and the good judge's saving for the system means (at least 30%).
"""

from __future__ import annotations

import argparse
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np
import pandas as pd
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn
from rich.table import Table

from empeval.analysis.simulate.judges import (
    BIASED_JUDGE,
    GOOD_JUDGE,
    USELESS_JUDGE,
    analyse_judged_arrays,
    cross_fitted_estimates,
    simulate_judged_study,
)

if not __package__:  # run as a file (python benchmarks/NAME.py): the benchmarks package is in the repository root
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks.figures import Figure, at_least  # noqa: E402
from benchmarks.session import report, run_script  # noqa: E402

JUDGES = {"good": GOOD_JUDGE, "useless": USELESS_JUDGE, "biased": BIASED_JUDGE}
RATERS_PER_ITEM = 3
COVERAGE_GOAL = 0.935
SAVING_GOAL = 0.30
CHUNK = 25
Z95 = 1.959963984540054


def run_chunk(judge_name: str, seeds: list[int], n_contexts: int, human_share: float) -> dict[str, list]:
    """Simulate and analyse the studies of ``seeds``; per-interval records for the means and differences."""
    out: dict[str, list] = {"means": [], "pairs": []}
    for seed in seeds:
        study = simulate_judged_study(judge=JUDGES[judge_name], n_contexts=n_contexts, human_share=human_share,
                                      raters_per_item=RATERS_PER_ITEM, seed=seed)
        means, pairs = analyse_judged_arrays(study.arrays)
        truth = dict(zip(study.arrays["systems"], study.arrays["true_means"], strict=True))
        for row in means:
            true = truth[row["system"]]
            out["means"].append(_record(seed, row, true, row["correlation"]))
        for row in pairs:
            true = truth[row["system_a"]] - truth[row["system_b"]]
            out["pairs"].append(_record(seed, row, true, np.nan))
    return out


def run_crossppi_chunk(judge_name: str, seeds: list[int], n_contexts: int, human_share: float) -> dict[str, list]:
    """Cross-fit a learned judge on each study of ``seeds`` and record its cross-PPI intervals, renamed to the
    PPI records' fields so that ``summarise`` reads them."""
    out: dict[str, list] = {"means": [], "pairs": []}
    for seed in seeds:
        study = simulate_judged_study(judge=JUDGES[judge_name], n_contexts=n_contexts, human_share=human_share,
                                      raters_per_item=RATERS_PER_ITEM, seed=seed)
        means, pairs = cross_fitted_estimates(study, seed=seed)
        truth = dict(zip(study.true_means["system"], study.true_means["true_mean"], strict=True))
        for row in means.to_dict("records"):
            out["means"].append(_record(seed, _as_ppi(row, "crossppi_mean"), truth[row["system"]], np.nan))
        for row in pairs.to_dict("records"):
            row["human_mean"] = row["human_diff"]
            out["pairs"].append(_record(seed, _as_ppi(row, "crossppi_diff"), truth[row["system_a"]]
                                        - truth[row["system_b"]], np.nan))
    return out


def _as_ppi(row: dict, estimate: str) -> dict:
    return {**row, "ppi_mean": row[estimate], "ppi_ci_low": row["crossppi_ci_low"],
            "ppi_ci_high": row["crossppi_ci_high"], "lam": 1.0}


def _record(seed: int, row: dict, true: float, correlation: float) -> dict:
    return {"seed": seed, "ppi_cover": row["ppi_ci_low"] <= true <= row["ppi_ci_high"],
            "human_cover": row["human_ci_low"] <= true <= row["human_ci_high"],
            "independent_cover": abs(row["ppi_mean"] - true) <= np.sqrt(
                max(0.0, ((row["ppi_ci_high"] - row["ppi_ci_low"]) / (2 * Z95)) ** 2 - row["rater_variance"])) * Z95,
            "ppi_width": row["ppi_ci_high"] - row["ppi_ci_low"],
            "human_width": row["human_ci_high"] - row["human_ci_low"], "lam": row["lam"],
            "correlation": correlation, "n_human": row["n_human"]}


def summarise(records: pd.DataFrame) -> dict:
    cover, human = records["ppi_cover"].mean(), records["human_cover"].mean()
    ratio = records["ppi_width"].mean() / records["human_width"].mean()
    return {"n": len(records), "coverage": cover, "mc_se": np.sqrt(cover * (1 - cover) / len(records)),
            "human_coverage": human, "independent_coverage": records["independent_cover"].mean(),
            "human_width": records["human_width"].mean(),
            "ppi_width": records["ppi_width"].mean(), "ratio": ratio, "saving": 1 - ratio**2,
            "lam": records["lam"].mean(), "correlation": records["correlation"].mean()}


def coverage_figure(name: str, summary: dict) -> Figure:
    """The coverage of one setting's 95% intervals (a `summarise` result) against the goal, its Monte Carlo error
    and interval count in the note."""
    return Figure(name, summary["coverage"], goal=at_least(COVERAGE_GOAL), fmt=".3f",
                  note=f"MC se {summary['mc_se']:.3f}, {summary['n']} intervals")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--studies", type=int, default=2000, help="simulated studies per judge")
    parser.add_argument("--jobs", type=int, default=1, help="worker processes (the machine is shared: keep it low)")
    parser.add_argument("--seed", type=int, default=0, help="first seed; study i of every judge uses seed + i")
    parser.add_argument("--n-contexts", type=int, default=400)
    parser.add_argument("--human-share", type=float, default=0.2)
    parser.add_argument("--crossppi-studies", type=int, default=200,
                        help="simulated studies per judge for cross-PPI (each is cross-fitted: ~0.5 s)")
    args = parser.parse_args()
    console = Console()
    seeds = list(range(args.seed, args.seed + args.studies))
    chunks = [(name, seeds[i:i + CHUNK]) for name in JUDGES for i in range(0, len(seeds), CHUNK)]
    collected: dict[str, dict[str, list]] = {name: {"means": [], "pairs": []} for name in JUDGES}
    started = time.perf_counter()
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn())
    cross_seeds = list(range(args.seed + args.studies, args.seed + args.studies + args.crossppi_studies))
    cross_chunks = [(name, cross_seeds[i:i + CHUNK]) for name in JUDGES for i in range(0, len(cross_seeds), CHUNK)]
    crossed: dict[str, dict[str, list]] = {name: {"means": [], "pairs": []} for name in JUDGES}
    with Progress(*columns, console=console) as progress, ProcessPoolExecutor(max_workers=args.jobs) as pool:
        task = progress.add_task("simulated studies", total=len(JUDGES) * args.studies)
        futures = {pool.submit(run_chunk, name, chunk, args.n_contexts, args.human_share): (name, len(chunk))
                   for name, chunk in chunks}
        for future in futures:
            name, size = futures[future]
            result = future.result()
            for key in ("means", "pairs"):
                collected[name][key].extend(result[key])
            progress.advance(task, size)
        cross_task = progress.add_task("cross-fitted studies", total=len(JUDGES) * args.crossppi_studies)
        cross_futures = {pool.submit(run_crossppi_chunk, name, chunk, args.n_contexts, args.human_share):
                         (name, len(chunk)) for name, chunk in cross_chunks}
        for future in cross_futures:
            name, size = cross_futures[future]
            result = future.result()
            for key in ("means", "pairs"):
                crossed[name][key].extend(result[key])
            progress.advance(cross_task, size)
    elapsed = time.perf_counter() - started

    n_human = round(args.human_share * args.n_contexts)
    console.print(f"\n{args.studies} studies per judge; {args.n_contexts} contexts, {n_human} human-rated "
                  f"({RATERS_PER_ITEM} ratings per response, 3 systems: {n_human * RATERS_PER_ITEM * 3} human "
                  f"ratings per study); {elapsed:.0f} s with {args.jobs} job(s)")
    table = Table(title="95% intervals: coverage (goal >= 0.935) and width, PPI++ vs human-only on the same ratings")
    for column in ("judge", "estimand", "n studies", "n intervals", "PPI coverage (MC SE)",
                   "PPI, items independent", "human-only coverage",
                   "width human", "width PPI", "PPI / human", "corr(judge, label)", "mean lambda",
                   "ratings saved at equal width"):
        table.add_column(column, justify="right")
    figures = []
    for name in JUDGES:
        for estimand, key in (("system means", "means"), ("paired differences", "pairs")):
            records = pd.DataFrame(collected[name][key])
            s = summarise(records)
            figures.append(coverage_figure(f"PPI++ coverage, {name} judge, {estimand}", s))
            correlation = "" if np.isnan(s["correlation"]) else f"{s['correlation']:.2f}"
            table.add_row(name, estimand, str(records["seed"].nunique()), str(s["n"]),
                          f"{s['coverage']:.3f} ({s['mc_se']:.3f})", f"{s['independent_coverage']:.3f}",
                          f"{s['human_coverage']:.3f}",
                          f"{s['human_width']:.3f}", f"{s['ppi_width']:.3f}", f"{s['ratio']:.3f}", correlation,
                          f"{s['lam']:.2f}", f"{s['saving']:.0%}")
    console.print(table)
    good = summarise(pd.DataFrame(collected["good"]["means"]))
    if args.crossppi_studies:
        cross = Table(title="95% cross-PPI intervals of a learned judge (ridge, 5 folds): coverage (goal >= 0.935) "
                            "and width, vs human-only on the same ratings")
        for column in ("judge features from", "estimand", "n studies", "n intervals", "cross-PPI coverage (MC SE)",
                       "cross-PPI, items independent", "human-only coverage", "width human", "width cross-PPI",
                       "cross-PPI / human", "ratings saved at equal width"):
            cross.add_column(column, justify="right")
        for name in JUDGES:
            for estimand, key in (("system means", "means"), ("paired differences", "pairs")):
                records = pd.DataFrame(crossed[name][key])
                s = summarise(records)
                figures.append(coverage_figure(f"cross-PPI coverage, {name} judge, {estimand}", s))
                cross.add_row(name, estimand, str(records["seed"].nunique()), str(s["n"]),
                              f"{s['coverage']:.3f} ({s['mc_se']:.3f})", f"{s['independent_coverage']:.3f}",
                              f"{s['human_coverage']:.3f}", f"{s['human_width']:.3f}", f"{s['ppi_width']:.3f}",
                              f"{s['ratio']:.3f}", f"{s['saving']:.0%}")
        console.print(cross)
    for figure in figures:
        report(figure)
    report(Figure("human ratings saved at equal width, good judge, system means", good["saving"] * 100, "%",
                  goal=at_least(SAVING_GOAL * 100), fmt=".0f",
                  note=f"width PPI / human {good['ratio']:.3f}, corr(judge, label) {good['correlation']:.2f}"))


if __name__ == "__main__":
    run_script(__file__, main)
