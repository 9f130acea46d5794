"""Bootstrap CI of Krippendorff's alpha: the vectorised resample (analysis.stats.coefficients) vs a loop of
krippendorff.alpha calls over the very same resamples.

    .venv/bin/python -m benchmarks analysis_bootstrap [--items 300] [--raters 3] [--resamples 1000] [--level ordinal]

Prints both timings, their ratio, and the largest difference between the two sets of estimates (which must
be at floating-point noise level: both compute the same thing), as figures without a goal.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import krippendorff
import numpy as np

from empeval.analysis.stats.bootstrap import resample_weights
from empeval.analysis.stats.coefficients import krippendorff_alpha, unit_value_counts
from empeval.analysis.stats.threads import single_threaded_blas

if not __package__:  # run as a file (python benchmarks/NAME.py): the benchmarks package is in the repository root
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks.figures import Figure  # noqa: E402
from benchmarks.session import report, run_script  # noqa: E402


def simulated_reliability_data(n_items: int, n_raters: int, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    truth = rng.normal(3.0, 1.0, size=n_items)
    return np.clip(np.rint(truth[None, :] + rng.normal(0.0, 0.8, size=(n_raters, n_items))), 1, 5)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=300)
    parser.add_argument("--raters", type=int, default=3)
    parser.add_argument("--resamples", type=int, default=1000)
    parser.add_argument("--level", default="ordinal", choices=["nominal", "ordinal", "interval", "ratio"])
    args = parser.parse_args()

    values = np.arange(1, 6)
    data = simulated_reliability_data(args.items, args.raters)
    weights = resample_weights(args.items, n_boot=args.resamples, seed=1)

    with single_threaded_blas():  # small matrices: threads only add overhead (see analysis.stats.threads)
        start = time.perf_counter()
        counts = unit_value_counts(data, values)
        vectorised = krippendorff_alpha(counts, values, level=args.level, unit_weights=weights)
        vectorised_seconds = time.perf_counter() - start

        start = time.perf_counter()
        looped = np.empty(args.resamples)
        for b, row in enumerate(weights):
            resampled = data[:, np.repeat(np.arange(args.items), row.astype(int))]
            looped[b] = krippendorff.alpha(resampled, level_of_measurement=args.level, value_domain=values)
        loop_seconds = time.perf_counter() - start

    print(f"Krippendorff's alpha ({args.level}), {args.items} items x {args.raters} raters, "
          f"{args.resamples} bootstrap resamples")
    report(Figure("bootstrap, vectorised (coincidences x resample weights)", vectorised_seconds * 1000, "ms",
                  fmt=".1f"))
    report(Figure("bootstrap, loop of krippendorff.alpha calls", loop_seconds * 1000, "ms", fmt=".1f"))
    report(Figure("speed-up, loop / vectorised", loop_seconds / vectorised_seconds, "x", fmt=".0f"))
    report(Figure("largest |vectorised - loop| of the estimates", np.max(np.abs(vectorised - looped)), fmt=".2e",
                  note="floating-point noise: both compute the same"))
    print(f"  alpha = {krippendorff_alpha(counts, values, level=args.level):.4f}, "
          f"95% CI [{np.quantile(vectorised, 0.025):.4f}, {np.quantile(vectorised, 0.975):.4f}]")


if __name__ == "__main__":
    run_script(__file__, main)
