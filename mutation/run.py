"""Mutation testing of the critical modules with mutmut, each module against its own fast tests.

    python mutation/run.py                      # every mutant of every module of mutation/modules.toml
    python mutation/run.py --sample 150         # a seeded sample of 150 mutants per module (make mutation)
    python mutation/run.py compare design       # some of the modules
    python mutation/run.py compare --show       # ... and print the diff of every surviving mutant
    python mutation/run.py compare --retest     # re-test only the last run's survivors against today's tests

For each module this copies the working tree (tracked and untracked files, not ignored ones) into
mutation/work/<module>/, writes a [tool.mutmut] table into that copy's pyproject.toml that mutates only the
module and selects only its tests, and runs `mutmut run` there. mutmut itself mutates a further copy
(mutants/) inside it, so no source file of the working tree is ever touched.

Surviving mutants that are listed in mutation/equivalent.toml (matched by module, function and the changed
lines, so the list survives edits elsewhere in the file) count as equivalent. The table gives, per module:
mutants, killed, survived (including mutants no test reached), timed out, equivalent, and
score = killed / (mutants - equivalent). The exit status is 1 when a module scores below --fail-under.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import time
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
WORK = HERE / "work"
PACKAGES = ("analysis", "entry", "server", "tasks")

# mutmut's exit codes per mutant (mutmut.stats.status_by_exit_code), folded into the table's columns.
KILLED = {1, 3}
TIMED_OUT = {24, -24, 36, 152, 255}
SURVIVED = {0, 5, 33}  # 5 and 33: no test reached the mutant, which is as bad as surviving


@dataclass
class ModuleResult:
    name: str
    source: str
    seconds: float = 0.0
    killed: list[str] = field(default_factory=list)
    survived: list[str] = field(default_factory=list)
    timed_out: list[str] = field(default_factory=list)
    other: list[str] = field(default_factory=list)  # suspicious, segfault, not checked: shown, never a kill
    equivalent: list[str] = field(default_factory=list)
    diffs: dict[str, str] = field(default_factory=dict)

    @property
    def total(self) -> int:
        return len(self.killed) + len(self.survived) + len(self.timed_out) + len(self.other) + len(self.equivalent)

    @property
    def score(self) -> float:
        judged = self.total - len(self.equivalent)
        return len(self.killed) / judged if judged else float("nan")


def _project_files() -> list[Path]:
    """Files a clone of the working tree would have, with local edits: tracked plus untracked, not ignored (or,
    outside a git checkout, the packages, the tests and pyproject.toml)."""
    try:
        listing = subprocess.run(
            ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
            cwd=REPO, check=True, capture_output=True,
        ).stdout.decode()
    except (OSError, subprocess.CalledProcessError):
        skip = {"__pycache__", "node_modules", "dist", ".hypothesis", ".pytest_cache"}
        return [path.relative_to(REPO) for top in (*PACKAGES, "tests") for path in (REPO / top).rglob("*")
                if path.is_file() and not skip & set(path.relative_to(REPO).parts)] + [Path("pyproject.toml")]
    return [Path(name) for name in listing.split("\0") if name and (REPO / name).is_file()]


def _copy_tree(target: Path, *, fresh: bool = True) -> None:
    if fresh and target.exists():
        shutil.rmtree(target)
    for relative in _project_files():
        if relative.parts[0] == "mutation":
            continue
        destination = target / relative
        destination.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(REPO / relative, destination)


def _toml_list(values: list[str]) -> str:
    return "[" + ", ".join(json.dumps(value) for value in values) + "]"


def merged_pytest_args(common: list[str], own: list[str]) -> list[str]:
    """The global pytest arguments followed by a module's own, except that marker expressions are joined (pytest
    keeps only the last `-m`, so a module's `-m "not slow"` would silently drop the global "not postgres").

    >>> merged_pytest_args(["-m", "not postgres", "-p", "no:cacheprovider"], ["-m", "not slow", "-k", "x"])
    ['-p', 'no:cacheprovider', '-k', 'x', '-m', '(not postgres) and (not slow)']
    >>> merged_pytest_args(["-m", "not postgres"], [])
    ['-m', 'not postgres']
    """
    markers, rest = [], []
    for args in (common, own):
        position = 0
        while position < len(args):
            if args[position] == "-m" and position + 1 < len(args):
                markers.append(args[position + 1])
                position += 2
            else:
                rest.append(args[position])
                position += 1
    if not markers:
        return rest
    expression = markers[0] if len(markers) == 1 else " and ".join(f"({m})" for m in markers)
    return [*rest, "-m", expression]


def _write_mutmut_config(target: Path, source: str, tests: list[str], pytest_args: list[str]) -> None:
    pyproject = target / "pyproject.toml"
    text = (REPO / "pyproject.toml").read_text()
    if "[tool.mutmut]" in text:
        raise SystemExit("pyproject.toml already has a [tool.mutmut] table; mutation/run.py writes its own per module")
    text += (
        "\n[tool.mutmut]\n"
        f"source_paths = {_toml_list([p for p in PACKAGES if (target / p).is_dir()])}\n"
        f"only_mutate = {_toml_list([source])}\n"
        f"pytest_add_cli_args = {_toml_list(pytest_args)}\n"
        f"pytest_add_cli_args_test_selection = {_toml_list(tests)}\n"
        "use_git_change_detection = false\n"
    )
    pyproject.write_text(text)


def _function_of(mutant: str) -> str:
    # analysis.stats.significance.x_paired_tests__mutmut_12 -> paired_tests; a method: module.xǁClassǁname__mutmut_3
    local = mutant.rsplit("__mutmut_", 1)[0].rsplit(".", 1)[-1]
    if local.startswith("xǁ"):
        return local.removeprefix("xǁ").replace("ǁ", ".")
    return local.removeprefix("x_")


def _changed_lines(diff: str) -> tuple[list[str], list[str]]:
    removed = [line[1:].strip() for line in diff.splitlines() if line.startswith("-") and not line.startswith("---")]
    added = [line[1:].strip() for line in diff.splitlines() if line.startswith("+") and not line.startswith("+++")]
    return removed, added


def _load_equivalents() -> list[dict]:
    path = HERE / "equivalent.toml"
    if not path.exists():
        return []
    return tomllib.loads(path.read_text()).get("equivalent", [])


def _lines(value: str | list[str]) -> list[str]:
    return [line.strip() for line in ([value] if isinstance(value, str) else value)]


def _is_equivalent(entry: dict, module: str, mutant: str, diff: str) -> bool:
    if entry["module"] != module or entry["function"] != _function_of(mutant):
        return False
    removed, added = _changed_lines(diff)
    return removed == _lines(entry["original"]) and added == _lines(entry["mutant"])


def _mutmut(target: Path, arguments: list[str], log: Path, name: str) -> None:
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
    with log.open("a") as out:
        process = subprocess.run([sys.executable, "-m", "mutmut", *arguments], cwd=target, stdout=out,
                                 stderr=subprocess.STDOUT, env=env)
    if process.returncode != 0:
        tail = "\n".join(log.read_text(errors="replace").splitlines()[-30:])
        raise SystemExit(f"mutmut failed for {name} (exit {process.returncode}); the end of {log}:\n{tail}")


def run_module(name: str, spec: dict, pytest_args: list[str], *, jobs: int, retest: bool, sample: int | None,
               seed: int) -> ModuleResult:
    target = WORK / name
    meta = target / "mutants" / (spec["source"] + ".meta")
    retest = retest and meta.exists()
    _copy_tree(target, fresh=not retest)
    _write_mutmut_config(target, spec["source"], spec["tests"], pytest_args)
    result = ModuleResult(name=name, source=spec["source"])
    log = target / "mutmut.log"
    log.write_text("")
    started = time.monotonic()
    run = ["run", "--max-children", str(jobs)]
    chosen: set[str] | None = None
    if retest:
        # Only the mutants the last run left alive, against the tests as they are now (for iterating on tests).
        if (target / "sample.json").exists():
            chosen = set(json.loads((target / "sample.json").read_text()))
        last = {m: code for m, code in json.loads(meta.read_text())["exit_code_by_key"].items()
                if chosen is None or m in chosen}
        alive = sorted((m for m, code in last.items() if code is not None and code not in KILLED | TIMED_OUT),
                       key=_mutant_order)
        if alive:
            _mutmut(target, [*run, *alive], log, name)
    elif sample:
        (target / "sample.json").unlink(missing_ok=True)
        # mutmut creates every mutant (and maps tests to functions) on any run; this first one tests only the
        # first mutant of each function, so that the names exist to draw the sample from.
        _mutmut(target, [*run, "*__mutmut_1"], log, name)
        names = sorted(json.loads(meta.read_text())["exit_code_by_key"], key=_mutant_order)
        chosen = set(random.Random(seed).sample(names, min(sample, len(names))))
        (target / "sample.json").write_text(json.dumps(sorted(chosen)))
        _mutmut(target, [*run, *sorted(chosen, key=_mutant_order)], log, name)
    else:
        _mutmut(target, run, log, name)
    result.seconds = time.monotonic() - started
    # Mutants never tested (None: outside a sample, here or in the run --retest builds on) are not counted.
    exit_codes = {m: code for m, code in json.loads(meta.read_text())["exit_code_by_key"].items() if code is not None}
    if chosen is not None:
        exit_codes = {mutant: code for mutant, code in exit_codes.items() if mutant in chosen}
    equivalents = [entry for entry in _load_equivalents() if entry["module"] == name]
    unkilled = [mutant for mutant, code in exit_codes.items() if code not in KILLED | TIMED_OUT]
    result.diffs = _diffs(target, spec["source"], unkilled)
    for mutant, code in sorted(exit_codes.items(), key=lambda kv: _mutant_order(kv[0])):
        if code in KILLED:
            result.killed.append(mutant)
            continue
        if code in TIMED_OUT:
            result.timed_out.append(mutant)
            continue
        diff = result.diffs[mutant]
        if code in SURVIVED and any(_is_equivalent(entry, name, mutant, diff) for entry in equivalents):
            result.equivalent.append(mutant)
        elif code in SURVIVED:
            result.survived.append(mutant)
        else:
            result.other.append(mutant)
    return result


# `mutmut show` for many mutants in one process (it parses the mutated module once per call otherwise).
_SHOW_MANY = """
import json, sys
from mutmut.mutation.diff_apply import get_diff_for_mutant
names = json.load(sys.stdin)
json.dump({name: get_diff_for_mutant(name, path=sys.argv[1]) for name in names}, sys.stdout)
"""


def _diffs(target: Path, source: str, mutants: list[str]) -> dict[str, str]:
    if not mutants:
        return {}
    shown = subprocess.run([sys.executable, "-c", _SHOW_MANY, source], cwd=target, input=json.dumps(mutants),
                           capture_output=True, text=True, check=True)
    return json.loads(shown.stdout)


def _mutant_order(mutant: str) -> tuple[str, int]:
    stem, _, number = mutant.rpartition("__mutmut_")
    return stem, int(number) if number.isdigit() else 0


def print_table(results: list[ModuleResult]) -> None:
    header = ("module", "source", "mutants", "killed", "survived", "timed out", "equivalent", "score", "time")
    rows = [
        (r.name, r.source, str(r.total), str(len(r.killed)), str(len(r.survived) + len(r.other)),
         str(len(r.timed_out)), str(len(r.equivalent)), f"{100 * r.score:.1f}%", f"{r.seconds / 60:.1f} min")
        for r in results
    ]
    widths = [max(len(row[i]) for row in [header, *rows]) for i in range(len(header))]

    def line(cells) -> str:
        pairs = enumerate(zip(cells, widths, strict=True))
        return "  ".join(cell.ljust(w) if i < 2 else cell.rjust(w) for i, (cell, w) in pairs)

    print(line(header))
    print("  ".join("-" * w for w in widths))
    for row in rows:
        print(line(row))


def main(argv: list[str] | None = None) -> int:
    config = tomllib.loads((HERE / "modules.toml").read_text())
    modules = config["modules"]
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("modules", nargs="*", help=f"modules to mutate (default: all of {', '.join(modules)})")
    parser.add_argument("--jobs", type=int, default=2, help="mutants tested at once (default: 2)")
    parser.add_argument("--fail-under", type=float, default=90.0, help="minimum score per module, in percent")
    parser.add_argument("--show", action="store_true", help="print the diff of every surviving mutant")
    parser.add_argument("--sample", type=int, default=None,
                        help="test a seeded random sample of this many mutants per module (default: all of them)")
    parser.add_argument("--seed", type=int, default=0, help="seed of --sample (default: 0)")
    parser.add_argument("--retest", action="store_true",
                        help="re-test only the mutants the last run of a module left alive, against the tests as "
                             "they are now (for iterating on tests; the table then counts the last run's kills too)")
    args = parser.parse_args(argv)
    names = args.modules or list(modules)
    unknown = sorted(set(names) - set(modules))
    if unknown:
        parser.error(f"unknown module {unknown[0]!r}; mutation/modules.toml lists {', '.join(modules)}")
    equivalents = _load_equivalents()
    results = []
    for name in names:
        print(f"mutating {modules[name]['source']} against {len(modules[name]['tests'])} test files ...", flush=True)
        pytest_args = merged_pytest_args(config.get("pytest_args", []), modules[name].get("pytest_args", []))
        result = run_module(name, modules[name], pytest_args, jobs=args.jobs, retest=args.retest,
                            sample=args.sample, seed=args.seed)
        results.append(result)
        if args.show:
            for mutant in result.survived + result.other:
                print(f"\n# {mutant} ({_function_of(mutant)})\n{result.diffs[mutant]}")
    listed = {(e["module"], e["function"], tuple(_lines(e["original"])), tuple(_lines(e["mutant"])))
              for e in equivalents}
    matched = set()
    for result in results:
        for mutant in result.equivalent:
            removed, added = _changed_lines(result.diffs[mutant])
            matched.add((result.name, _function_of(mutant), tuple(removed), tuple(added)))
    # Under --sample (or a --retest of one) most listed mutants are not drawn: only a full run can tell.
    stale = [] if args.sample or args.retest else sorted(key for key in listed - matched if key[0] in names)
    print()
    print_table(results)
    print("\nscore = killed / (mutants - equivalent); survived includes mutants no selected test reached.")
    for module, function, original, mutant in stale:
        print(f"warning: equivalent.toml entry matched no surviving mutant: {module} {function}: "
              f"{' / '.join(original)!r} -> {' / '.join(mutant)!r}")
    below = [r.name for r in results if not r.score * 100 >= args.fail_under]
    if below:
        print(f"below {args.fail_under:.0f}%: {', '.join(below)}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
