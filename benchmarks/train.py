"""Benchmark of `empeval train retrieval` on the full ED (prints goal and measured value; asserts nothing).

1. Trains (or resumes) the `retrieval-ft` encoder on every ED train pair in the store with a time budget
   (`--max-minutes`, default 55), and prints the training time, the steps done and the valid P@1,100 of
   model selection.
2. Scores the zero-shot `retrieval` and the fine-tuned `retrieval-ft` (and `cobert`, when the CoBERT code and a
   trained checkpoint are present; otherwise says why not) over one shared candidate set per ED test context
   (the gold reply + 99 test references drawn with seed 0, stored under the cache directory), printing
   P@1,100 (= R@1), R@10, R@50 and MRR beside the goals of issue 16: fine-tuned P@1,100 >= 57 (aiming at 66),
   trained in under 60 minutes on the 2-core machine.

The machine's load average is printed beside the figures: on a shared machine the steps done within the
budget move with it. Goals and P@1,100s are printed as figures (benchmarks/figures.py).

Usage: python -m benchmarks train --database-url sqlite:////tmp/full.db [--cache-dir DIR] [--max-minutes 55]
The database must hold ED train, valid and test, e.g. `empeval --database-url ... data import-ed PATH`.
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from empeval.server.backend.contexts import load_contexts  # noqa: E402
from empeval.server.backend.metrics import draw_candidates, rank_metrics, save_candidates, score_shared  # noqa: E402
from empeval.server.backend.registry import Registry  # noqa: E402
from empeval.server.backend.resources import BackendResources, default_cache_dir  # noqa: E402
from empeval.server.errors import BadInput  # noqa: E402
from empeval.server.store import ensure_schema, make_engine  # noqa: E402
from empeval.server.store.engine import unit_of_work  # noqa: E402
from empeval.training.config import RetrievalTrainingConfig  # noqa: E402
from empeval.training.retrieval import train_retrieval  # noqa: E402

if not __package__:  # run as a file (python benchmarks/NAME.py): the benchmarks package is in the repository root
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks.figures import Figure, at_least, below  # noqa: E402
from benchmarks.session import report, run_script  # noqa: E402

GOAL_P_AT_1 = 57.0
AIM_P_AT_1 = 66.0
GOAL_MINUTES = 60.0
ED = "empatheticdialogues"


def load() -> str:
    return "load average " + " / ".join(f"{x:.1f}" for x in os.getloadavg())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--database-url", required=True)
    parser.add_argument("--cache-dir", type=Path, default=None)
    parser.add_argument("--max-minutes", type=float, default=55.0)
    parser.add_argument("--max-steps", type=int, default=None, help="planned steps (overrides --epochs)")
    parser.add_argument("--epochs", type=float, default=RetrievalTrainingConfig.epochs)
    parser.add_argument("--eval-steps", type=int, default=RetrievalTrainingConfig.eval_steps,
                        help="steps between evaluations on valid (each costs a few seconds)")
    parser.add_argument("--batch-size", type=int, default=RetrievalTrainingConfig.batch_size)
    parser.add_argument("--learning-rate", type=float, default=RetrievalTrainingConfig.learning_rate)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--skip-training", action="store_true", help="only score the existing checkpoint")
    args = parser.parse_args()
    cache_dir = args.cache_dir or default_cache_dir()
    engine = make_engine(args.database_url)
    ensure_schema(engine)
    print(f"start: {time.strftime('%H:%M:%S', time.gmtime())} UTC, {load()}", flush=True)

    if not args.skip_training:
        config = RetrievalTrainingConfig(batch_size=args.batch_size, learning_rate=args.learning_rate,
                                         epochs=args.epochs, max_steps=args.max_steps, eval_steps=args.eval_steps)
        start = time.perf_counter()
        result = train_retrieval(engine, dataset=ED, cache_dir=cache_dir, config=config,
                                 max_minutes=args.max_minutes, threads=args.threads, show_progress=False,
                                 echo=lambda line: print(line, flush=True))
        seconds = time.perf_counter() - start
        manifest = result.manifest
        print(result.describe())
        print(f"training: {seconds / 60:.1f} min this invocation; {manifest['global_step']:,} steps of "
              f"{config.batch_size} ({manifest['global_step'] * config.batch_size / manifest['train_pairs']:.2f} "
              f"epochs); {load()}", flush=True)
        report(Figure("training time of retrieval-ft, in all", manifest["train_seconds"] / 60, "min",
                      goal=below(GOAL_MINUTES), fmt=".1f", note=f"{seconds / 60:.1f} min this invocation"))
        losses = manifest["losses"]
        if losses:
            print(f"loss: {losses[0][1]:.3f} at step {losses[0][0]} -> {losses[-1][1]:.3f} at step {losses[-1][0]}")
        print("valid P@1,100 by step: " + ", ".join(f"{step}: {value * 100:.1f}"
                                                    for step, value in manifest["evaluations"]), flush=True)

    resources = BackendResources(engine=engine, dataset=ED, cache_dir=cache_dir, show_progress=False)
    registry = Registry.from_config(None, resources)
    with unit_of_work(engine) as session:
        contexts = [c for c in load_contexts(session, dataset=ED, split="test") if c.reference]
    candidates = draw_candidates(contexts, dataset=ED, split="test", seed=0)
    path = save_candidates(candidates, cache_dir / "candidates" / candidates.file_name())
    print(f"\n{len(contexts):,} test contexts, shared candidate sets in {path}")
    print(f"{'system':<16}{'P@1,100':>9}{'R@10':>8}{'R@50':>8}{'MRR':>8}   scored in   load")
    scored: dict[str, float] = {}
    for name in ("retrieval", "retrieval-ft", "cobert"):
        if name not in registry.names:
            print(f"{name:<16}not configured in systems.toml: skipped")
            continue
        try:
            model = registry.get(name)
        except (BadInput, ImportError) as error:
            print(f"{name:<16}skipped: {error}")
            continue
        if not hasattr(model, "score_candidate_sets"):
            print(f"{name:<16}skipped: it has no score_candidate_sets method to score candidate sets with")
            continue
        start = time.perf_counter()
        figures = rank_metrics(score_shared(model, contexts, candidates))
        seconds = time.perf_counter() - start
        print(f"{name:<16}{figures['r@1'] * 100:>9.2f}{figures['r@10'] * 100:>8.2f}{figures['r@50'] * 100:>8.2f}"
              f"{figures['mrr'] * 100:>8.2f}   {seconds:>7.0f} s   {load()}", flush=True)
        scored[name] = figures["r@1"] * 100
    for name, p_at_1 in scored.items():
        fine_tuned = name == "retrieval-ft"
        report(Figure(f"test P@1,100, {name}", p_at_1, goal=at_least(GOAL_P_AT_1) if fine_tuned else None, fmt=".2f",
                      note=f"aim {AIM_P_AT_1:.0f}" if fine_tuned else ""))
    print(f"end: {time.strftime('%H:%M:%S', time.gmtime())} UTC")


if __name__ == "__main__":
    run_script(__file__, main)
