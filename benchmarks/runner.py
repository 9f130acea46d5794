"""The benchmarks' command line: `python -m benchmarks` lists them, `python -m benchmarks [--json PATH] NAME
[options]` runs one, its options passed through to its own parser (`NAME --help` prints them).

The benchmarks are the scripts of this folder, found by reading the files (nothing to register): a script with a
top-level `main()` is a benchmark, named after its file, described by its docstring's first line. The runner's own
modules (SUPPORT) are not scripts; HELPERS are the scripts a benchmark serves or imports rather than runs. A script
that is neither (no `main()`) is listed as a problem, and the listing then exits 1.
"""

from __future__ import annotations

import argparse
import ast
import importlib
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from benchmarks.session import JSON_ENV, RESULTS, run_main

FOLDER = Path(__file__).resolve().parent
SUPPORT = frozenset({"__init__", "__main__", "figures", "runner", "session"})
HELPERS = {"floor_app": "annotation_load", "schema_floor_app": "annotation_load"}
PROG = "python -m benchmarks"


@dataclass(frozen=True)
class Script:
    """A script of the benchmarks folder: its name, its docstring's first line, whether it has a `main()`."""

    name: str
    summary: str
    has_main: bool

    @property
    def helper_of(self) -> str | None:
        """The benchmark this script serves, if it is a helper."""
        return HELPERS.get(self.name)


def read_script(path: Path) -> Script:
    """The script at `path`, read without importing it (a benchmark's imports can take seconds: torch)."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    docstring = ast.get_docstring(tree) or ""
    has_main = any(isinstance(node, ast.FunctionDef) and node.name == "main" for node in tree.body)
    return Script(name=path.stem, summary=docstring.strip().split("\n", 1)[0].strip(), has_main=has_main)


def scripts(folder: Path = FOLDER) -> list[Script]:
    """Every script of `folder` (its .py files but the runner's own modules), by name."""
    return [read_script(path) for path in sorted(folder.glob("*.py")) if path.stem not in SUPPORT]


def benchmarks(folder: Path = FOLDER) -> list[Script]:
    """The runnable benchmarks of `folder`: its scripts with a `main()` that are not helpers."""
    return [script for script in scripts(folder) if script.has_main and script.helper_of is None]


def problems(found: Sequence[Script]) -> list[str]:
    """What keeps a script from being listed properly: no docstring, or neither a benchmark nor a known helper."""
    issues = []
    for script in found:
        if not script.summary:
            issues.append(f"{script.name}: no docstring (its first line is the listing's description)")
        if not script.has_main and script.helper_of is None:
            issues.append(f"{script.name}: no main() and not a known helper (runner.HELPERS): cannot be run")
    return issues


def listing(folder: Path = FOLDER) -> tuple[str, list[str]]:
    """The text `python -m benchmarks` prints, and the problems found (listed in it too)."""
    found = scripts(folder)
    width = max((len(script.name) for script in found), default=0) + 2
    lines = [f"usage: {PROG} [--json PATH] NAME [options]    ({PROG} NAME --help: its options)", "",
             "benchmarks:"]
    lines += [f"  {script.name:<{width}}{script.summary}" for script in benchmarks(folder)]
    helpers = [script for script in found if script.helper_of is not None]
    if helpers:
        lines += ["", "helpers (not run on their own):"]
        lines += [f"  {script.name:<{width}}(of {script.helper_of}) {script.summary}" for script in helpers]
    issues = problems(found)
    if issues:
        lines += ["", "problems:"] + [f"  {issue}" for issue in issues]
    return "\n".join(lines), issues


def split_command(argv: Sequence[str]) -> tuple[list[str], str | None, list[str]]:
    """The runner's own options (those before the name), the benchmark's name and the benchmark's arguments."""
    index = 0
    while index < len(argv) and argv[index].startswith("-"):
        index += 2 if argv[index] == "--json" else 1
    own, rest = list(argv[:index]), list(argv[index:])
    return own, (rest[0] if rest else None), rest[1:]


def parser() -> argparse.ArgumentParser:
    """The runner's own options."""
    own = argparse.ArgumentParser(prog=PROG, usage=f"{PROG} [-h] [--json PATH] [NAME [options ...]]",
                                  description="List the benchmarks, or run one (NAME [options]): each prints its "
                                  "figures as goal, measured value, ratio and verdict, and writes them to a JSON file.")
    own.add_argument("--json", metavar="PATH", default=None,
                     help=f"the JSON file (or a folder for it) of the run; default {JSON_ENV} or "
                          f"{RESULTS.relative_to(FOLDER.parent)}/NAME-YYYYMMDDTHHMMSSZ.json")
    return own


def run(name: str, args: Sequence[str], json_path: str | None = None) -> int:
    """Run benchmark `name` with `args` (its own options) as `python -m benchmarks NAME args...`; 2 if there is
    no such benchmark (the message names the known ones)."""
    wanted = name.removesuffix(".py").replace("-", "_")
    known = {script.name: script for script in scripts()}
    script = known.get(wanted)
    if script is None or not script.has_main or script.helper_of is not None:
        names = ", ".join(script.name for script in benchmarks())
        why = (f"{wanted} is a helper of {script.helper_of}, not run on its own" if script and script.helper_of
               else f"unknown benchmark {name!r}")
        print(f"{PROG}: {why}; known benchmarks: {names}", file=sys.stderr)
        return 2
    module = importlib.import_module(f"benchmarks.{wanted}")
    sys.argv = [f"{PROG} {wanted}", *args]
    run_main(wanted, module.main, list(args), json_path)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """The command line: list the benchmarks (exit 1 if a script is a problem) or run one."""
    own, name, args = split_command(sys.argv[1:] if argv is None else argv)
    options = parser().parse_args(own)
    if name is None:
        text, issues = listing()
        print(text)
        return 1 if issues else 0
    return run(name, args, options.json)
