"""Active against uniform sampling for an A/B study's net preference, through the report's own functions (issue 28).

    nice -n 10 .venv/bin/python -m benchmarks pairwise_active [--studies 1000] [--seed 0] [--contexts 600]
                                                              [--share 0.2]

Each simulated A/B study has ``contexts`` contexts of one pair (sys-a, sys-b) and one criterion. Context i has a
true net preference m_i = tanh(N(0.1, 0.6)) (sys-a's share of wins minus sys-b's); a person judging it picks sys-a
with probability 0.9 (1 + m_i) / 2, sys-b with 0.9 (1 - m_i) / 2, a tie with 0.1; k = 3 judgments per judged
context. Two judges of differences see every context: verdict_ij = m_i + e_ij, e_ij ~ N(0, s_i) independent across
judges. Two judge settings:

* ``informative``: s_i = 0.1 on 85% of the contexts, 1.2 on the other 15% (the judges are unsure of some contexts,
  and then disagree);
* ``flat``: s_i = 0.4 everywhere (their disagreement says nothing about where they are wrong).

Per study and setting, two designs with the same expected number of judged contexts (``share`` x contexts):
uniform (a fixed-size seeded sample, analysed by ``model_assisted_net_preferences`` with PPI++, judge 1 the
predictor) and active (each context drawn with the probability `empeval study sample` gives it: the two verdicts'
disagreement through ``context_uncertainty`` and ``sampling_probabilities``, tau 0.5; analysed by the same function,
which weights by the recorded probabilities). Printed per setting and design: the coverage of the 95% interval of
the study's net preference (its truth: 0.9 x the mean m_i over all contexts) with its Monte Carlo SE, the mean
width, and the judged contexts a design saves against uniform PPI++ for the same width, 1 - (w_active / w_uniform)^2.
The figures: every coverage (goal at least 0.94, issue 28's) and active sampling's saving with informative judges
(goal at least 20% against uniform PPI++, issue 28's goal for the decisions).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn
from rich.table import Table

from empeval.analysis.kinds.pairwise.judged import model_assisted_net_preferences
from empeval.analysis.stats.ppi.active_draw import context_uncertainty, sampling_probabilities

if not __package__:  # run as a file (python benchmarks/NAME.py): the benchmarks package is in the repository root
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks.figures import Figure, at_least  # noqa: E402
from benchmarks.session import report, run_script  # noqa: E402

COVERAGE_GOAL, SAVING_GOAL = 0.94, 20.0
SETTINGS = {"informative": lambda rng, n: np.where(rng.random(n) < 0.15, 1.2, 0.1),
            "flat": lambda rng, n: np.full(n, 0.4)}
K = 3


def _judgments(rng: np.random.Generator, truth: np.ndarray, judged: np.ndarray) -> pd.DataFrame:
    """k judgments of each judged context, as the A/B export has them."""
    ids = np.repeat(np.flatnonzero(judged), K)
    m = truth[ids]
    u = rng.random(ids.size)
    preferred = np.where(u < 0.9 * (1 + m) / 2, "sys-a", np.where(u < 0.9, "sys-b", "tie"))
    return pd.DataFrame({"context_id": ids, "criterion": "empathy", "pair": "sys-a|sys-b", "preferred": preferred,
                         "is_control": False})


def one_study(seed: int, setting: str, n: int, share: float) -> dict[str, tuple[bool, float]]:
    """(covered, width) of each design on one simulated study."""
    rng = np.random.default_rng(seed)
    truth = np.tanh(rng.normal(0.1, 0.6, n))
    sd = SETTINGS[setting](rng, n)
    verdicts = [truth + rng.normal(0, sd) for _ in range(2)]
    target = float(0.9 * truth.mean())
    pair_scores = pd.DataFrame({"criterion": "empathy", "context_id": np.arange(n), "system_a": "sys-a",
                                "system_b": "sys-b", "judge_diff": verdicts[0]})
    budget = share * n
    out = {}

    uniform = np.zeros(n, dtype=bool)
    uniform[rng.choice(n, size=round(budget), replace=False)] = True
    design = pd.DataFrame({"context_id": np.arange(n), "sampled": uniform})
    row = model_assisted_net_preferences(_judgments(rng, truth, uniform), pair_scores, design).iloc[0]
    out["uniform PPI++"] = (row["ppi_ci_low"] <= target <= row["ppi_ci_high"], row["ppi_ci_high"] - row["ppi_ci_low"])

    scores = pd.DataFrame({"judge": np.repeat(["one", "two"], n), "context_id": np.tile(np.arange(n), 2),
                           "system": "sys-a|sys-b", "criterion": "empathy", "judge_score": np.concatenate(verdicts)})
    pi = sampling_probabilities(context_uncertainty(scores)["uncertainty"].to_numpy(), budget)
    drawn = rng.random(n) < pi
    design = pd.DataFrame({"context_id": np.arange(n), "sampled": drawn, "inclusion_probability": pi})
    row = model_assisted_net_preferences(_judgments(rng, truth, drawn), pair_scores, design).iloc[0]
    out["active PPI++"] = (row["ppi_ci_low"] <= target <= row["ppi_ci_high"], row["ppi_ci_high"] - row["ppi_ci_low"])
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--studies", type=int, default=1000, help="simulated studies per judge setting")
    parser.add_argument("--seed", type=int, default=0, help="first seed; study i uses seed + i")
    parser.add_argument("--contexts", type=int, default=600)
    parser.add_argument("--share", type=float, default=0.2, help="the expected share of contexts people judge")
    args = parser.parse_args()
    console = Console()
    started = time.perf_counter()
    results: dict[str, dict[str, list[tuple[bool, float]]]] = {s: {} for s in SETTINGS}
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn())
    with Progress(*columns, console=console) as progress:
        for setting in SETTINGS:
            task = progress.add_task(f"{setting} judges", total=args.studies)
            for i in range(args.studies):
                for design, value in one_study(args.seed + i, setting, args.contexts, args.share).items():
                    results[setting].setdefault(design, []).append(value)
                progress.advance(task)
    table = Table(title=f"A/B net preference, {args.studies} studies per setting, {args.contexts} contexts, "
                        f"{args.share:.0%} judged by people (expected), k = {K}")
    for column in ("judges", "design", "coverage (SE)", "mean width", "contexts saved vs uniform PPI++"):
        table.add_column(column)
    figures, saving = [], {}
    for setting, designs in results.items():
        reference = float(np.mean([w for _, w in designs["uniform PPI++"]]))
        for design, values in designs.items():
            covered = np.array([c for c, _ in values], dtype=float)
            width = float(np.mean([w for _, w in values]))
            se = float(np.sqrt(covered.mean() * (1 - covered.mean()) / covered.size))
            saving[setting, design] = 1 - (width / reference) ** 2
            table.add_row(setting, design, f"{covered.mean():.3f} ({se:.3f})", f"{width:.4f}",
                          f"{saving[setting, design]:+.1%}")
            figures.append(Figure(f"coverage, {setting} judges, {design}", float(covered.mean()),
                                  goal=at_least(COVERAGE_GOAL), fmt=".3f", note=f"Monte Carlo SE {se:.3f}"))
    console.print(table)
    console.print(f"{time.perf_counter() - started:.0f} s")
    for figure in figures:
        report(figure)
    report(Figure("judged contexts saved at equal width, active vs uniform PPI++, informative judges",
                  saving["informative", "active PPI++"] * 100, "%", goal=at_least(SAVING_GOAL), fmt=".1f",
                  note=f"flat judges {saving['flat', 'active PPI++'] * 100:+.1f}%"))


if __name__ == "__main__":
    run_script(__file__, main)
