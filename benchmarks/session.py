"""One benchmark run: the machine it runs on (one line at the start), the figures it reports (a line each, in the
shared format of benchmarks/figures.py, as they come) and a JSON file of both, with the run's arguments, written
at the end: benchmarks/results/NAME-YYYYMMDDTHHMMSSZ.json, or the path the runner's `--json PATH` or the
environment variable EMPEVAL_BENCHMARK_JSON gives (an existing folder: the file goes in it under that name). A run
that reported no figure (`--help`, a failure before any measurement, a benchmark's own child process) writes no
file.
"""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from benchmarks.figures import Figure

REPO = Path(__file__).resolve().parents[1]
RESULTS = Path(__file__).resolve().parent / "results"
JSON_ENV = "EMPEVAL_BENCHMARK_JSON"
HELP_FLAGS = frozenset({"-h", "--help"})


def git_commit() -> str | None:
    """The commit checked out in the repository (HEAD), or None where git or the repository is missing."""
    try:
        done = subprocess.run(["git", "rev-parse", "HEAD"], cwd=REPO, capture_output=True, text=True, timeout=10,
                              check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    return (done.stdout.strip() or None) if done.returncode == 0 else None


def machine_context(now: datetime | None = None) -> dict[str, Any]:
    """What the figures depend on beside the code: the UTC time, the load averages (1, 5, 15 minutes), the CPUs
    (all and those this process may use), the Python version, the platform and the git commit."""
    now = now or datetime.now(UTC)
    return {"utc": now.strftime("%Y-%m-%dT%H:%M:%SZ"),
            "load_average": [round(x, 2) for x in os.getloadavg()],
            "cpu_count": os.cpu_count(), "usable_cpus": len(os.sched_getaffinity(0)),
            "python": platform.python_version(), "platform": platform.platform(), "git_commit": git_commit()}


def context_line(context: dict[str, Any]) -> str:
    """The machine context as the one line printed at the start of a run."""
    commit = (context["git_commit"] or "unknown")[:12]
    load = " / ".join(f"{x:.2f}" for x in context["load_average"])
    return (f"machine: {context['utc']}; load average {load}; {context['cpu_count']} CPUs "
            f"({context['usable_cpus']} usable); commit {commit}; Python {context['python']}")


@dataclass
class Run:
    """A benchmark run in progress: its name, arguments, machine context, where its JSON goes, its figures."""

    name: str
    args: list[str]
    json_path: Path
    context: dict[str, Any]
    started: datetime
    figures: list[dict[str, Any]] = field(default_factory=list)

    def document(self, *, completed: bool, error: str | None = None) -> dict[str, Any]:
        """The JSON document of the run so far."""
        finished = datetime.now(UTC)
        return {"benchmark": self.name, "args": self.args, "machine": self.context,
                "started": self.started.strftime("%Y-%m-%dT%H:%M:%SZ"),
                "finished": finished.strftime("%Y-%m-%dT%H:%M:%SZ"),
                "seconds": round((finished - self.started).total_seconds(), 3),
                "load_average_at_end": [round(x, 2) for x in os.getloadavg()],
                "completed": completed, "error": error, "figures": self.figures}


_current: Run | None = None


def report(figure: Figure) -> Figure:
    """Print `figure` in the shared one-line format and add it (with the 1-minute load average and the time) to the
    running benchmark's JSON, if a run is open."""
    print(figure.line(), flush=True)
    if _current is not None:
        _current.figures.append({**figure.as_dict(), "load_average": round(os.getloadavg()[0], 2),
                                 "utc": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")})
    return figure


def json_path_for(name: str, started: datetime, given: str | Path | None = None) -> Path:
    """Where the run's JSON goes: `given`, else EMPEVAL_BENCHMARK_JSON, else benchmarks/results/; a folder gets
    NAME-YYYYMMDDTHHMMSSZ.json (the run's start, UTC) inside it."""
    chosen = given or os.environ.get(JSON_ENV) or RESULTS
    path = Path(chosen).expanduser()
    if path == RESULTS or path.is_dir():
        return path / f"{name}-{started.strftime('%Y%m%dT%H%M%SZ')}.json"
    return path


def _shown(path: Path) -> str:
    try:
        return str(path.resolve().relative_to(Path.cwd()))
    except ValueError:
        return str(path)


@contextmanager
def session(name: str, args: Sequence[str], json_path: str | Path | None = None) -> Iterator[Run]:
    """Open a run of benchmark `name`: print the machine context, collect the figures `report` prints, and at the
    end (also after a failure) write them to the JSON file if there are any."""
    global _current
    started = datetime.now(UTC)
    context = machine_context(started)
    print(context_line(context), flush=True)
    run = Run(name=name, args=list(args), json_path=json_path_for(name, started, json_path), context=context,
              started=started)
    previous, _current = _current, run
    error: str | None = None
    try:
        yield run
    except BaseException as exc:
        if not (isinstance(exc, SystemExit) and exc.code in (None, 0)):
            error = f"{type(exc).__name__}: {exc}"
        raise
    finally:
        _current = previous
        if run.figures:
            run.json_path.parent.mkdir(parents=True, exist_ok=True)
            document = run.document(completed=error is None, error=error)
            run.json_path.write_text(json.dumps(document, indent=2, allow_nan=False) + "\n", encoding="utf-8")
            print(f"results: {_shown(run.json_path)}", flush=True)


def run_main(name: str, main: Callable[[], object], args: Sequence[str], json_path: str | Path | None = None) -> None:
    """Run a benchmark's `main` (which parses sys.argv[1:] itself) with `args` in a session; only asking for its
    help opens none."""
    if HELP_FLAGS & set(args):
        main()
        return
    with session(name, args, json_path):
        main()


def run_script(file: str, main: Callable[[], object]) -> None:
    """The entry point of a benchmark run as a file (`python benchmarks/NAME.py [options]`): a session named after
    the file, around `main`, with the command line's arguments."""
    run_main(Path(file).stem, main, sys.argv[1:])
