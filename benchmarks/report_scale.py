"""The whole study report (every section, the rater-aware check with random intercepts for annotator and item)
on simulated studies shaped like real ones, at 10k, 100k and 1M ratings.

    .venv/bin/python -m benchmarks report_scale [--sizes 10000 100000 1000000] [--resamples 1000]
                                                [--old-at 10000] [--default-at 10000]

The studies: 5 systems, 3 criteria, k = 3 ratings per response, 10 real items plus one control per
assignment, no annotator doing more than 20 assignments (so annotators grow with the study), 10% careless
raters (random clickers and straight-liners). Each size runs in a fresh process so that its peak memory
(``ru_maxrss``) is its own. Prints, per size, a table line and then figures (benchmarks/figures.py): the report's
wall-clock and CPU time (goals 10 s at 100k ratings, 120 s at 1M) and its peak memory (goal 1,100 MB, issue 31);
the time exponent from 100k to 1M (goal <= 1.2); the report at the default number of resamples once; and the old
dense statsmodels MixedLM rater-aware check beside the new one at ``--old-at`` ratings (their ratio, no goal).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

if not __package__:  # run as a file (python benchmarks/NAME.py): the benchmarks package is in the repository root
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks.figures import Figure, at_most  # noqa: E402
from benchmarks.session import report, run_script  # noqa: E402

SYSTEMS = ("gold", "moel", "mime", "empdg", "baseline")
SYSTEM_EFFECTS = np.array([0.9, 0.3, 0.2, 0.0, -0.6])
CRITERIA = ("empathy", "relevance", "fluency")
CONTROLS = (("control-generic", "empathy"), ("control-mismatched", "relevance"), ("control-scrambled", "fluency"))
CONTROL_LATENT = np.array([[1.2, 2.6, 4.5], [2.0, 1.2, 4.3], [1.8, 1.8, 1.1]])
GOALS = {100_000: 10.0, 1_000_000: 120.0}
MEMORY_GOAL_MB = 1100.0  # issue 31 (it was 2 GB)
EXPONENT_GOAL = 1.2


def simulate_ratings(n_ratings: int, *, seed: int = 0, k: int = 3, items_per_assignment: int = 10,
                     max_assignments: int = 20, careless_share: float = 0.1) -> pd.DataFrame:
    """A tidy ratings table (``analysis.kinds.likert.load.TIDY_COLUMNS``) of about ``n_ratings`` ratings, built with
    numpy
    (``empeval.analysis.simulate.likert.simulate_study`` builds one dict per rating: too slow and too big at 1M)."""
    rng = np.random.default_rng(seed)
    n_systems, n_criteria = len(SYSTEMS), len(CRITERIA)
    per_assignment = (items_per_assignment + 1) * n_criteria
    n_chunks = max(2, round(n_ratings / per_assignment / k))
    n_contexts = max(2, n_chunks * items_per_assignment // n_systems)
    n_items = n_contexts * n_systems
    n_chunks = math.ceil(n_items / items_per_assignment)
    n_assignments = n_chunks * k

    # Annotators: each takes 1-20 assignments (most take several), until every slot is filled.
    loads = []
    while sum(loads) < n_assignments:
        loads.append(int(rng.integers(1, max_assignments + 1)))
    loads[-1] -= sum(loads) - n_assignments
    n_annotators = len(loads)
    slot_annotator = rng.permutation(np.repeat(np.arange(n_annotators), loads))
    # Slot (chunk c, rater j) sits at c * k + j; an annotator twice in one chunk swaps with a random slot.
    by_chunk = slot_annotator.reshape(n_chunks, k)
    for _ in range(50):
        sorted_chunk = np.sort(by_chunk, axis=1)
        clash = np.flatnonzero((sorted_chunk[:, 1:] == sorted_chunk[:, :-1]).any(axis=1))
        if clash.size == 0:
            break
        rows = by_chunk[clash]
        column = np.argmax(rows == np.roll(rows, 1, axis=1), axis=1)  # one of the twins
        other = rng.integers(0, n_chunks, size=clash.size)
        twin = by_chunk[clash, column].copy()
        by_chunk[clash, column] = by_chunk[other, column]
        by_chunk[other, column] = twin
    slot_annotator = by_chunk.reshape(-1)
    role = np.zeros(n_annotators, dtype=int)  # 0 honest, 1 random clicker, 2 straight-liner
    careless = rng.choice(n_annotators, size=max(1, round(careless_share * n_annotators)), replace=False)
    role[careless] = 1 + (rng.random(careless.size) < 0.4)
    bias = rng.normal(0.0, 0.3, n_annotators)
    constant = rng.integers(3, 6, n_annotators)

    context_effect = rng.normal(0.0, 0.4, n_contexts)
    item_context = np.repeat(np.arange(n_contexts), n_systems)
    item_system = np.tile(np.arange(n_systems), n_contexts)
    latent = (3.2 + SYSTEM_EFFECTS[item_system] + context_effect[item_context] + rng.normal(0, 0.3, n_items))[:, None] \
        + rng.normal(0.0, 0.25, (n_items, n_criteria))
    order = rng.permutation(n_items)
    chunk_items = np.full((n_chunks, items_per_assignment), -1)
    chunk_items.reshape(-1)[:n_items] = order

    # Rows: per assignment, its real items then one control, each on every criterion.
    shown = items_per_assignment + 1
    assignment = np.repeat(np.arange(n_assignments), shown)
    chunk = assignment // k
    slot = np.tile(np.arange(shown), n_assignments)
    item = np.where(slot < items_per_assignment, chunk_items[chunk, np.minimum(slot, items_per_assignment - 1)], -1)
    keep = (slot == items_per_assignment) | (item >= 0)
    assignment, chunk, slot, item = assignment[keep], chunk[keep], slot[keep], item[keep]
    is_control = slot == items_per_assignment
    control_kind = rng.integers(0, len(CONTROLS), assignment.size)
    annotator = slot_annotator[assignment]
    n_shown = assignment.size
    seconds = np.round(rng.lognormal(np.log(np.array([25.0, 4.0, 3.0])[role[annotator]]), 0.35), 1)

    rows = np.repeat(np.arange(n_shown), n_criteria)
    criterion = np.tile(np.arange(n_criteria), n_shown)
    row_item = item[rows]
    row_annotator = annotator[rows]
    row_latent = np.where(is_control[rows], CONTROL_LATENT[control_kind[rows], criterion],
                          latent[np.maximum(row_item, 0), criterion])
    honest = np.clip(np.rint(row_latent + bias[row_annotator] + rng.normal(0.0, 0.7, rows.size)), 1, 5)
    row_role = role[row_annotator]
    score = np.where(row_role == 0, honest, np.where(row_role == 1, rng.integers(1, 6, rows.size),
                                                     constant[row_annotator])).astype(np.int64)

    # Names as shared string objects: an object column then costs 8 bytes a row, not a string a row.
    annotator_names = np.array([f"worker-{i:05d}" for i in range(n_annotators)], dtype=object)
    item_names = np.array([f"ctx-{c:06d}:{SYSTEMS[s]}" for c, s in zip(item_context, item_system, strict=True)],
                          dtype=object)
    control_names = np.array([f"asg-{a:06d}:control-0" for a in range(n_assignments)], dtype=object)
    context_names = np.array([f"ctx-{c:06d}" for c in range(n_contexts)], dtype=object)
    assignment_names = np.array([f"asg-{a:06d}" for a in range(n_assignments)], dtype=object)
    kinds = np.array([kind for kind, _ in CONTROLS], dtype=object)
    targets = np.array([target for _, target in CONTROLS], dtype=object)
    row_control = is_control[rows]
    row_assignment = assignment[rows]
    row_kind = control_kind[rows]
    control_context = rng.integers(0, n_contexts, n_assignments)
    start = pd.Timestamp("2024-05-01T09:00:00Z")
    started = start + pd.to_timedelta(17 * 60 * assignment[rows], unit="s")
    duration = pd.Series(seconds).groupby(assignment).sum().to_numpy()
    submitted = started + pd.to_timedelta(duration[row_assignment] + 5.0, unit="s")
    missing = np.array([None], dtype=object)
    return pd.DataFrame({
        "study": np.array(["scale"], dtype=object)[np.zeros(rows.size, dtype=int)],
        "item": np.where(row_control, control_names[row_assignment], item_names[np.maximum(row_item, 0)]),
        "context": np.where(row_control, context_names[control_context[row_assignment]],
                            context_names[item_context[np.maximum(row_item, 0)]]),
        "system": np.where(row_control, kinds[row_kind], np.array(SYSTEMS, dtype=object)[
            item_system[np.maximum(row_item, 0)]]),
        "annotator": annotator_names[row_annotator],
        "criterion": np.array(CRITERIA, dtype=object)[criterion],
        "score": score,
        "position": pd.array(slot[rows], dtype="Int64"),
        "is_control": row_control,
        "control_kind": np.where(row_control, kinds[row_kind], missing[np.zeros(rows.size, dtype=int)]),
        "control_target": np.where(row_control, targets[row_kind], missing[np.zeros(rows.size, dtype=int)]),
        "assignment": assignment_names[row_assignment],
        "started_at": started,
        "submitted_at": submitted,
        "seconds_on_item": seconds[rows],
        "late": np.zeros(rows.size, dtype=bool),
    })


def run_one(n_ratings: int, resamples: int, *, old: bool = False) -> dict:
    """Simulate a study and time its report (in this process: call it in a fresh one for ru_maxrss)."""
    from empeval.analysis.kinds.likert.report import write_report

    start = time.perf_counter()
    ratings = simulate_ratings(n_ratings)
    simulated = time.perf_counter() - start
    with tempfile.TemporaryDirectory() as out:
        if old:  # the dense statsmodels MixedLM (REML) the report used before
            import functools

            from empeval.analysis.kinds.likert import report
            from empeval.analysis.stats import rater_aware
            report.rater_aware_check = functools.partial(rater_aware.rater_aware_check, method="statsmodels")
        start, cpu_start = time.perf_counter(), time.process_time()
        write_report(ratings, Path(out), n_boot=resamples)
        seconds, cpu_seconds = time.perf_counter() - start, time.process_time() - cpu_start
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return {"n_ratings": len(ratings), "n_annotators": int(ratings["annotator"].nunique()),
            "simulate_s": simulated, "report_s": seconds, "report_cpu_s": cpu_seconds, "peak_mb": peak_mb,
            "load": os.getloadavg()[0]}


def _in_fresh_process(n_ratings: int, resamples: int, *, old: bool = False) -> dict:
    command = [sys.executable, __file__, "--one", str(n_ratings), "--resamples", str(resamples)]
    if old:
        command.append("--old")
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"{n_ratings} ratings failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000, 1_000_000])
    parser.add_argument("--resamples", type=int, default=1000)
    parser.add_argument("--old-at", type=int, default=10_000, help="time the old dense MixedLM here (0: skip)")
    parser.add_argument("--default-at", type=int, default=10_000,
                        help="also time the report at its default number of resamples here (0: skip)")
    parser.add_argument("--one", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--old", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        print(json.dumps(run_one(args.one, args.resamples, old=args.old)))
        return

    print(f"Whole report, B = {args.resamples} resamples, 5 systems x 3 criteria, k = 3, 10 items (+1 control) "
          "per assignment, <= 20 assignments per annotator, 10% careless raters; each size in a fresh process")
    print("report wall-clock time: of write_report; CPU time: the process's CPU time over the same span (on a shared "
          "machine the wall clock also counts waiting for a core: compare the two, and the 1-minute load beside)")
    results = {}
    for size in args.sizes:
        result = _in_fresh_process(size, args.resamples)
        results[size] = result
        goal = at_most(GOALS[size]) if size in GOALS else None
        print(f"{result['n_ratings']:,} ratings, {result['n_annotators']:,} annotators "
              f"(load {result['load']:.1f} at the end of the report):", flush=True)
        report(Figure(f"report wall-clock time, {size:,} ratings", result["report_s"], "s", goal=goal, fmt=".2f"))
        report(Figure(f"report CPU time, {size:,} ratings", result["report_cpu_s"], "s", goal=goal, fmt=".2f"))
        report(Figure(f"peak memory (ru_maxrss), {size:,} ratings", result["peak_mb"], "MB",
                      goal=at_most(MEMORY_GOAL_MB), fmt=".0f"))
    if 100_000 in results and 1_000_000 in results:
        small, large = results[100_000], results[1_000_000]
        for key, what in (("report_s", "wall"), ("report_cpu_s", "CPU")):
            exponent = math.log(large[key] / small[key]) / math.log(large["n_ratings"] / small["n_ratings"])
            report(Figure(f"time exponent 100k -> 1M ratings ({what})", exponent, goal=at_most(EXPONENT_GOAL),
                          fmt=".2f"))
    if args.default_at:
        from empeval.analysis.kinds.likert.report import write_report

        default_b = write_report.__kwdefaults__["n_boot"]
        result = _in_fresh_process(args.default_at, default_b)
        at_b = results.get(args.default_at) or _in_fresh_process(args.default_at, args.resamples)
        print(f"report's own default B = {default_b} at {result['n_ratings']} ratings: {result['report_s']:.2f} s "
              f"(CPU {result['report_cpu_s']:.2f} s); B = {args.resamples}: {at_b['report_s']:.2f} s "
              f"(CPU {at_b['report_cpu_s']:.2f} s)")
    if args.old_at:
        new = results.get(args.old_at) or _in_fresh_process(args.old_at, args.resamples)
        old = _in_fresh_process(args.old_at, args.resamples, old=True)
        report(Figure(f"whole report with the old dense statsmodels MixedLM / now, {old['n_ratings']:,} ratings",
                      old["report_s"] / new["report_s"], "x", fmt=".1f",
                      note=f"{old['report_s']:.2f} s vs {new['report_s']:.2f} s (CPU {old['report_cpu_s']:.2f} s vs "
                           f"{new['report_cpu_s']:.2f} s), ru_maxrss {old['peak_mb']:.0f} MB vs "
                           f"{new['peak_mb']:.0f} MB"))


if __name__ == "__main__":
    run_script(__file__, main)
