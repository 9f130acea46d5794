"""Paid human ratings until every pre-registered comparison is decided, per strategy (issue 28's goal).

    nice -n 10 .venv/bin/python -m benchmarks paid_ratings [--studies 2000] [--jobs 1] [--seed 0]
                                                           [--correlations 0.5,0.7,0.9] [--error-shape 1.0]
                                                           [--length-signal 0.3]

Each simulated study (``empeval.analysis.simulate.decisions``, whose docstring has the model): 4 systems with true
means 3.6, 3.6, 3.3, 3.0 (one pair equal, so that type-I errors can happen), all 6 pairs pre-registered on one
criterion with an equivalence margin of 0.3 scale points, 3 ratings per response from a pool of 15-60 raters
(drawn per study) with bias and noise, a pool of 5,000 contexts every one of which a judge scores first, with a
difference correlation of 0.5 / 0.7 / 0.9 (by default) between the judge's and the people's per-context difference.
The strategies: human-only at the planner's fixed n; human-only with an anytime-valid confidence sequence looked at
every 5 labelled contexts and stopped when every comparison is decided; PPI++ with uniform sampling at its planner's
n; active PPI (inverse-probability weighted, draws by empeval's own rule: the square root of the judges' uncertainty
mixed 50/50 with uniform, as `empeval study sample` draws) at its planner's n, with replacement and one weight for
the judge, and "as drawn": Poisson sampling and the report's estimator, the judge's weight tuned per stratum of the
probability; active PPI with the confidence sequence; two what-ifs: draws on a pilot's residual model (the people's
noise included), mixed 20% with uniform, and on the raw uncertainty mixed only 20%; and the two-phase design
`empeval study sample` draws with a burn-in (a uniform Poisson burn-in of 30% of the budget, a fold-wise residual
model of the burn-in's labels on features every context has, the rest drawn by its probabilities mixed with uniform
as the rule chooses; analysis.stats.ppi.active_phases), beside its like-for-like references drawn and estimated the
same way (Poisson sampling on the pool, inverse-probability weights): uniform probabilities, and an oracle that
knows each context's true residual variance (the ceiling of any residual model on this generator). The planner's n
is the fewest labelled contexts that decide every comparison with probability 0.8 (normal approximation with the
pilot's SDs, Bonferroni over the 6 comparisons, as every strategy's intervals are).

Printed per correlation and strategy: the planner's n, the median paid ratings (labelled contexts x 12) over the
studies, the share of studies with every comparison decided, the type-I error (a direction claimed on the equal
pair) with its Monte Carlo SE, and the simultaneous coverage of the six final intervals with its SE. Then the goal
figures at correlation 0.7: active PPI (the best of "as drawn", sequential and the two-phase design) at least 50%
fewer paid ratings than human-only fixed n and at least 20% fewer than uniform PPI; type-I at most 0.05 + 2 SE and
coverage at least 0.94 for every strategy.
"""

from __future__ import annotations

import argparse
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import replace
from pathlib import Path

import numpy as np
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn
from rich.table import Table

from empeval.analysis.simulate.decisions import (
    ACTIVE_AS_DRAWN,
    POISSON_STRATEGIES,
    POISSON_UNIFORM,
    RESIDUAL_BURN_IN,
    STRATEGIES,
    DecisionDesign,
    Pilot,
    pilot,
    plans_for,
    run_strategy,
    sequence_half_width,
    simulate_pool,
    wrong_direction,
)

if not __package__:  # run as a file (python benchmarks/NAME.py): the benchmarks package is in the repository root
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks.figures import Figure, at_least, at_most  # noqa: E402
from benchmarks.session import report, run_script  # noqa: E402

CHUNK = 50
GOAL_CORRELATION = 0.7
FEWER_THAN_HUMAN, FEWER_THAN_UNIFORM = 0.50, 0.20
TYPE_I, COVERAGE = 0.05, 0.94
RATERS = (15, 60)
#: Every strategy run: empeval's and the what-ifs, then the Poisson designs (the two-phase one and its references).
RUN = (*STRATEGIES, *POISSON_STRATEGIES)


def run_chunk(design: DecisionDesign, plan: Pilot, plans: dict[str, int], seeds: list[int]) -> list[dict]:
    """Simulate the studies of `seeds` under every strategy: one record per study and strategy."""
    truth = design.true_differences
    records = []
    for seed in seeds:
        rng = np.random.default_rng(seed)
        study = replace(design, n_raters=int(rng.integers(RATERS[0], RATERS[1] + 1)))
        pool = simulate_pool(study, rng)
        for strategy in RUN:
            outcome = run_strategy(study, strategy, pool, np.random.default_rng([seed, RUN.index(strategy)]),
                                   planned=plans[strategy], human_planned=plans["human fixed"],
                                   sequence_half_width=sequence_half_width, plan=plan)
            records.append({"strategy": strategy, "paid": outcome.contexts * design.ratings_per_context,
                            "decided": outcome.decided,
                            "type_i": bool(wrong_direction(outcome.states, truth)[truth == 0].any()),
                            "covered": bool(outcome.covered.all())})
    return records


def summarise(records: list[dict], strategy: str) -> dict[str, float]:
    rows = [r for r in records if r["strategy"] == strategy]
    n = len(rows)

    def share(key: str) -> tuple[float, float]:
        p = float(np.mean([r[key] for r in rows]))
        return p, float(np.sqrt(p * (1 - p) / n))

    type_i, type_i_se = share("type_i")
    coverage, coverage_se = share("covered")
    return {"n": n, "median_paid": float(np.median([r["paid"] for r in rows])), "decided": share("decided")[0],
            "type_i": type_i, "type_i_se": type_i_se, "coverage": coverage, "coverage_se": coverage_se}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--studies", type=int, default=2000, help="simulated studies per correlation")
    parser.add_argument("--jobs", type=int, default=1, help="worker processes (the machine is shared: keep it low)")
    parser.add_argument("--seed", type=int, default=0, help="first seed; study i uses seed + i")
    parser.add_argument("--correlations", default="0.5,0.7,0.9",
                        help="the judge's difference correlations, comma-separated")
    parser.add_argument("--error-shape", type=float, default=1.0,
                        help="gamma shape of the judge's per-context error variance (1: exponential; smaller: "
                             "more uneven, where active sampling has more to gain)")
    parser.add_argument("--length-signal", type=float, default=0.3,
                        help="correlation of the simulated responses' length feature with the log of the judge's "
                             "error variance (an assumption: 0 makes length useless to the residual model)")
    args = parser.parse_args()
    console = Console(width=170)
    correlations = [float(value) for value in args.correlations.split(",")]
    results: dict[float, dict[str, dict[str, float]]] = {}
    plans: dict[float, dict[str, int]] = {}
    started = time.perf_counter()
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn())
    with Progress(*columns, console=console) as progress, ProcessPoolExecutor(max_workers=args.jobs) as workers:
        for rho in correlations:
            design = DecisionDesign(difference_correlation=rho, error_shape=args.error_shape,
                                    length_signal=args.length_signal)
            plan = pilot(design, np.random.default_rng([args.seed, int(rho * 1000)]), residual=True)
            plans[rho] = plans_for(design, plan)
            seeds = list(range(args.seed, args.seed + args.studies))
            task = progress.add_task(f"correlation {rho:g}", total=args.studies)
            futures = [(workers.submit(run_chunk, design, plan, plans[rho], seeds[i:i + CHUNK]),
                        len(seeds[i:i + CHUNK])) for i in range(0, len(seeds), CHUNK)]
            records: list[dict] = []
            for future, size in futures:
                records.extend(future.result())
                progress.advance(task, size)
            results[rho] = {strategy: summarise(records, strategy) for strategy in RUN}
    elapsed = time.perf_counter() - started
    console.print(f"\n{args.studies} studies per correlation, judge error shape {args.error_shape:g}, length signal "
                  f"{args.length_signal:g}, "
                  f"{elapsed:.0f} s with {args.jobs} job(s)")
    table = Table(title="Paid human ratings until every comparison is decided (12 per labelled context)")
    for column in ("difference corr.", "strategy", "planner's n", "median paid ratings", "vs human fixed",
                   "all decided", "type-I (SE)", "coverage (SE)"):
        table.add_column(column, justify="right")
    for rho in correlations:
        human = results[rho]["human fixed"]["median_paid"]
        for strategy in RUN:
            s = results[rho][strategy]
            table.add_row(f"{rho:g}", strategy, str(plans[rho][strategy]), f"{s['median_paid']:.0f}",
                          f"{1 - s['median_paid'] / human:+.0%}".replace("+-", "-"), f"{s['decided']:.3f}",
                          f"{s['type_i']:.3f} ({s['type_i_se']:.3f})", f"{s['coverage']:.3f} ({s['coverage_se']:.3f})")
    console.print(table)
    if GOAL_CORRELATION in results:
        r = results[GOAL_CORRELATION]
        best = min((ACTIVE_AS_DRAWN, "PPI active sequential", RESIDUAL_BURN_IN),
                   key=lambda name: r[name]["median_paid"])  # empeval's draws
        paid = r[best]["median_paid"]
        report(Figure(f"paid ratings saved vs human-only fixed n, {best}, difference correlation 0.7",
                      100 * (1 - paid / r["human fixed"]["median_paid"]), "%", goal=at_least(100 * FEWER_THAN_HUMAN),
                      fmt=".0f", note=f"{paid:.0f} vs {r['human fixed']['median_paid']:.0f} paid ratings"))
        report(Figure(f"paid ratings saved vs uniform PPI, {best}, difference correlation 0.7",
                      100 * (1 - paid / r["PPI uniform"]["median_paid"]), "%", goal=at_least(100 * FEWER_THAN_UNIFORM),
                      fmt=".0f", note=f"{paid:.0f} vs {r['PPI uniform']['median_paid']:.0f} paid ratings"))
        paid = r[RESIDUAL_BURN_IN]["median_paid"]
        for reference in ("PPI uniform", POISSON_UNIFORM):
            report(Figure(f"paid ratings saved vs {reference}, {RESIDUAL_BURN_IN}, difference correlation 0.7",
                          100 * (1 - paid / r[reference]["median_paid"]), "%",
                          goal=at_least(100 * FEWER_THAN_UNIFORM), fmt=".0f",
                          note=f"{paid:.0f} vs {r[reference]['median_paid']:.0f} paid ratings"))
        for strategy in RUN:
            s = r[strategy]
            report(Figure(f"type-I error, {strategy}, difference correlation 0.7", s["type_i"], "",
                          goal=at_most(TYPE_I + 2 * s["type_i_se"]), fmt=".3f", note=f"MC SE {s['type_i_se']:.3f}"))
            report(Figure(f"simultaneous coverage, {strategy}, difference correlation 0.7", s["coverage"], "",
                          goal=at_least(COVERAGE), fmt=".3f", note=f"MC SE {s['coverage_se']:.3f}"))


if __name__ == "__main__":
    run_script(__file__, main)
