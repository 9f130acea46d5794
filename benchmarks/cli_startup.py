"""How long `empeval --help` and each `empeval CMD --help` take (goal: under 0.5 s wall, issue 31 item 7), beside
what the same help would cost if the command line imported the app.

    .venv/bin/python -m benchmarks cli_startup [--runs 5] [--subcommands] [--commands generate,plan,...]

Each help runs in a fresh process (the installed `empeval` script beside this Python, else `python -m
empeval.cli`), --runs times; the median wall-clock time and the median CPU time (user + system, of the child) are
printed, with the load average, since on a shared machine the wall clock also counts waiting for a core. Beside
them, two references run the same way: `python -c pass` (the interpreter alone: no help can cost less) and
`python -c "import empeval.server.web.app"` (the app with the store, Flask and the models: about what every help
cost while the commands' modules imported them at the top, and what a command that needs the store still pays).
tests/test_cli_startup.py holds the cause (no heavy module imported by any --help) without timing anything.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

if not __package__:  # run as a file (python benchmarks/NAME.py): the benchmarks package is in the repository root
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks.figures import Figure, at_most  # noqa: E402
from benchmarks.session import report, run_script  # noqa: E402

GOAL_S = 0.5
APP_IMPORT = "import empeval.server.web.app"


@dataclass(frozen=True)
class Timing:
    """The medians of one command line's runs: wall-clock and CPU (user + system) seconds, and the 1-minute load
    average after the last run."""

    wall_s: float
    cpu_s: float
    load: float


def empeval_command() -> list[str]:
    """How a user starts empeval here: the console script installed beside this Python, else the module."""
    script = Path(sys.executable).with_name("empeval")
    return [str(script)] if script.exists() else [sys.executable, "-m", "empeval.cli"]


def timed(argv: list[str], runs: int) -> Timing:
    """`argv` run `runs` times, one after the other (so that the children's CPU time read between two runs is that
    run's); a failing run stops the benchmark with its error output."""
    walls, cpus = [], []
    for _ in range(runs):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        started = time.perf_counter()
        done = subprocess.run(argv, capture_output=True, text=True, timeout=300, check=False)
        wall = time.perf_counter() - started
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        if done.returncode != 0:
            raise SystemExit(f"{' '.join(argv)} exited {done.returncode}: {done.stderr[-2000:]}")
        walls.append(wall)
        cpus.append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
    return Timing(statistics.median(walls), statistics.median(cpus), os.getloadavg()[0])


def help_paths(names: list[str], *, subcommands: bool) -> list[list[str]]:
    """The command lines whose help is timed: the root's, each command's, and with `subcommands` each subcommand's
    (read from the command, which imports its module here, in the benchmark's own process)."""
    import click

    from empeval.cli import load_command

    paths: list[list[str]] = [[]]
    for name in names:
        paths.append([name])
        command = load_command(name)
        if subcommands and isinstance(command, click.Group):
            paths += [[name, sub] for sub in command.list_commands(click.Context(command))]
    return paths


def main() -> None:
    from empeval.cli import COMMANDS

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5, help="runs of each command line (the median is reported)")
    parser.add_argument("--subcommands", action="store_true", help="also time each subcommand's --help")
    parser.add_argument("--commands", default=None,
                        help=f"comma-separated commands (default: all {len(COMMANDS)})")
    args = parser.parse_args()
    if args.runs < 1:
        parser.error("--runs must be at least 1")
    names = sorted(COMMANDS) if args.commands is None else [n.strip() for n in args.commands.split(",") if n.strip()]
    unknown = [name for name in names if name not in COMMANDS]
    if unknown:
        parser.error(f"unknown command(s) {', '.join(unknown)}; known: {', '.join(sorted(COMMANDS))}")

    empeval = empeval_command()
    print(f"each command line run {args.runs} times in a fresh process ({' '.join(empeval)}); medians; CPU = user "
          "+ system time of the child")
    floor = timed([sys.executable, "-c", "pass"], args.runs)
    app = timed([sys.executable, "-c", APP_IMPORT], args.runs)
    report(Figure("python -c pass (the interpreter alone), wall", floor.wall_s, "s", fmt=".3f",
                  note=f"CPU {floor.cpu_s:.3f} s; load {floor.load:.2f}"))
    report(Figure(f"python -c '{APP_IMPORT}' (what an eager command line imports), wall", app.wall_s, "s",
                  fmt=".3f", note=f"CPU {app.cpu_s:.3f} s; load {app.load:.2f}"))

    slowest: tuple[float, str] = (0.0, "")
    for path in help_paths(names, subcommands=args.subcommands):
        line = " ".join(["empeval", *path, "--help"])
        timing = timed([*empeval, *path, "--help"], args.runs)
        slowest = max(slowest, (timing.wall_s, line))
        report(Figure(f"{line}, wall", timing.wall_s, "s", goal=at_most(GOAL_S), fmt=".3f",
                      note=f"CPU {timing.cpu_s:.3f} s; {timing.wall_s / app.wall_s:.2f} of the app import's wall; "
                           f"load {timing.load:.2f}"))
    report(Figure("slowest --help, wall", slowest[0], "s", goal=at_most(GOAL_S), fmt=".3f", note=slowest[1]))
    print(f"load average at end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    run_script(__file__, main)
