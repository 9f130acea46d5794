"""Every integer, number and path argument of every command, fuzzed (issue 29, finding 9): a hostile value (a huge or
negative number, text where a number goes, a missing file, a folder where a file goes, a file where a folder goes, a
path under a file, a file this user may not read, a folder it may not write) ends in exit 2 with a message naming
the argument, when the command line is read: never a traceback, and the command's work never starts.

The commands come from the CLI itself, so a new command or option is fuzzed as soon as it exists; a new path
argument must say here what it is (a file read, a folder written, ...), and every integer argument must declare its
range (entry.cli.common: count, SEED, ROW_ID). The file-permission cases need a user the permissions apply to: run as
root, they run in one subprocess as `nobody`.

And the issue's own inputs, each through its whole command: `study create` with a seed of 2**63 - 1 and beyond (on
SQLite and PostgreSQL), `report --export` of a header-only CSV of each kind, `assignments release` of an id past
any store's.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import traceback
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from empeval.analysis.kinds.acute.schema import ACUTE_COLUMNS
from empeval.analysis.kinds.best_worst.schema import BEST_WORST_COLUMNS
from empeval.analysis.kinds.chat.schema import CHAT_COLUMNS
from empeval.analysis.kinds.likert.schema import EXPORT_COLUMNS
from empeval.analysis.kinds.pairwise.schema import JUDGMENT_COLUMNS
from empeval.cli import cli
from empeval.cli.common import FiniteRange
from tests.hostile.test_importers import study_toml
from tests.store.helpers import snapshot

REPO = Path(__file__).resolve().parents[2]
INT64_MAX = 2**63 - 1

# What each path argument is, by (command path, parameter name).
FILE_IN, FOLDER_IN, FILE_OR_FOLDER_IN = "file read", "folder read", "file or folder read"
FILE_OUT, FOLDER_OUT, FILE_IN_OR_OUT = "file written", "folder written", "file read if it exists, else written"
ROLES: dict[tuple[tuple[str, ...], str], str] = {
    ((), "secret_file"): FILE_IN_OR_OUT,
    (("data", "import-ed"), "path"): FILE_OR_FOLDER_IN,
    (("data", "import-jsonl"), "path"): FILE_IN,
    (("data", "fetch-ed"), "keep"): FOLDER_OUT,
    (("export",), "out"): FILE_OUT,
    (("generate",), "config_path"): FILE_IN,
    (("generate",), "cache_dir"): FOLDER_OUT,
    (("metrics",), "candidates_file"): FILE_IN_OR_OUT,
    (("metrics",), "config_path"): FILE_IN,
    (("metrics",), "cache_dir"): FOLDER_OUT,
    (("systems",), "config_path"): FILE_IN,
    (("systems", "replay-align"), "model_outputs"): FOLDER_IN,
    (("systems", "replay-align"), "ed_test"): FILE_IN,
    (("report",), "out_dir"): FOLDER_OUT,
    (("report",), "export_file"): FILE_IN,
    (("report",), "likert_export"): FILE_IN,
    (("report",), "systems_config"): FILE_IN,
    (("plan",), "pilot_export"): FILE_IN,
    (("plan",), "study_file"): FILE_IN,
    (("notebook",), "out"): FILE_OUT,
    (("plan",), "plot"): FILE_OUT,
    (("study", "create"), "study_file"): FILE_IN,
    (("demo",), "workdir"): FOLDER_OUT,
    (("judge",), "config_path"): FILE_IN,
    (("judge",), "cache_dir"): FOLDER_OUT,
    (("train", "retrieval"), "cache_dir"): FOLDER_OUT,
    (("train", "cobert"), "persona_corpus"): FILE_IN,
    (("train", "cobert"), "cache_dir"): FOLDER_OUT,
}
# The hostile values of each role: (name, needs a user the permission bits apply to).
HOSTILE_PATHS: dict[str, tuple[tuple[str, bool], ...]] = {
    FILE_IN: (("missing", False), ("a folder", False), ("under a file", False), ("unreadable file", True)),
    FOLDER_IN: (("missing", False), ("a file", False), ("under a file", False), ("unreadable folder", True)),
    FILE_OR_FOLDER_IN: (("missing", False), ("under a file", False), ("unreadable file", True),
                        ("unreadable folder", True)),
    FILE_OUT: (("a folder", False), ("under a file", False), ("in an unwritable folder", True)),
    FOLDER_OUT: (("a file", False), ("under a file", False), ("in an unwritable folder", True)),
    FILE_IN_OR_OUT: (("a folder", False), ("under a file", False), ("unreadable file", True),
                     ("in an unwritable folder", True)),
}
NOT_NUMBERS = ("abc", "1.5", "", "0x10", "1e3")


class BodyRan(Exception):
    """A command's work started although one of its arguments was hostile."""


@dataclass(frozen=True)
class Case:
    path: tuple[str, ...]
    param: str
    value: str
    what: str  # the hostile value, in words

    @property
    def name(self) -> str:
        return f"{' '.join(self.path) or 'empeval'} {self.param}: {self.what}"


def _commands(command: click.Command = cli, path: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...],
                                                                                        click.Command]]:
    yield path, command
    if isinstance(command, click.Group):
        context = click.Context(command)  # the root loads its commands lazily: ask it, not its `commands`
        for name in command.list_commands(context):
            sub = command.get_command(context, name)
            assert sub is not None
            yield from _commands(sub, (*path, name))


def _params(kind: type) -> list[tuple[tuple[str, ...], click.Parameter]]:
    return [(path, param) for path, command in _commands() for param in command.params
            if isinstance(param.type, kind) and param.name != "help"]


def hostile_paths(folder: Path) -> dict[str, Path]:
    """The hostile paths, made in a new `folder` that other users may enter (the subprocess's user must)."""
    folder.mkdir(mode=0o755)
    regular = folder / "a-file.toml"
    regular.write_text("x = 1\n")
    (folder / "a-folder").mkdir()
    unreadable = folder / "unreadable.csv"
    unreadable.write_text("secret\n")
    unreadable.chmod(0)
    (folder / "unreadable-folder").mkdir(mode=0)
    (folder / "unwritable").mkdir(mode=0o555)
    return {"missing": folder / "missing.csv", "a folder": folder / "a-folder", "a file": regular,
            "under a file": regular / "sub" / "x.csv", "unreadable file": unreadable,
            "unreadable folder": folder / "unreadable-folder", "in an unwritable folder": folder / "unwritable" / "x"}


def path_cases(paths: dict[str, Path], *, permissions: bool) -> list[Case]:
    """The path cases whose refusal rests on permission bits (`permissions`), or the others."""
    return [Case(path, name, str(paths[what]), f"{what} ({role})")
            for (path, name), role in ROLES.items() for what, needs_user in HOSTILE_PATHS[role]
            if needs_user == permissions]


def int_cases() -> list[Case]:
    cases = []
    for path, param in _params(click.types.IntParamType):
        low, high = getattr(param.type, "min", None), getattr(param.type, "max", None)
        values = {"10**30": 10**30, "-10**30": -(10**30), "2**63": 2**63,
                  **({"one past its largest": high + 1} if high is not None else {}),
                  **({"one below its least": low - 1} if low is not None else {})}
        cases += [Case(path, param.name, str(value), what) for what, value in values.items()]
        cases += [Case(path, param.name, text, f"not a whole number ({text!r})") for text in NOT_NUMBERS]
    return cases


def float_cases() -> list[Case]:
    """Not-a-number, the infinities, a number past either bound, and text, for every number-with-a-fraction argument."""
    cases = []
    for path, param in _params(click.types.FloatParamType):
        low, high = getattr(param.type, "min", None), getattr(param.type, "max", None)
        values = {"nan": "nan", "inf": "inf", "-inf": "-inf", "1e309 (overflows to inf)": "1e309", "text": "abc",
                  "empty": "", **({"past its largest": str(high + 1)} if high is not None else {}),
                  **({"below its least": str(low - 1)} if low is not None else {})}
        cases += [Case(path, param.name, value, what) for what, value in values.items()]
    return cases


def _placeholder(param: click.Parameter, folder: Path) -> str:
    """A value the parameter accepts, for the arguments a case does not fuzz."""
    if isinstance(param.type, click.types.IntParamType):
        return str(getattr(param.type, "min", None) or 1)
    if isinstance(param.type, click.Choice):
        return str(param.type.choices[0])
    if isinstance(param.type, click.Path):
        valid = folder / "valid"
        valid.mkdir(exist_ok=True)
        (valid / "input.csv").write_text("a\n1\n")
        return str(valid if not param.type.file_okay else valid / "input.csv")
    return "pilot"


def command_line(case: Case, folder: Path) -> list[str]:
    """The case's command line: the commands on its path, the leaf's required arguments, the case's hostile value
    for its parameter (a group's option right after the group's name); the leaf's options before a `--`, so that a
    value such as -1 is not read as an option. A case of the root's own option runs `db current`."""
    owner = _owner(case)
    path = case.path or ("db", "current")
    command: click.Command = cli
    for name in path:
        assert isinstance(command, click.Group)
        found = command.get_command(click.Context(command), name)
        assert found is not None
        command = found
    options, positionals = [], []
    for param in command.params:
        fuzzed = owner is command and param.name == case.param
        if fuzzed or param.required:
            value = case.value if fuzzed else _placeholder(param, folder)
            if isinstance(param, click.Argument):
                positionals.append(value)
            else:
                options += [param.opts[0], value]
    line = [*path, *options, *(["--", *positionals] if positionals else [])]
    if owner is not command:
        option = next(p for p in owner.params if p.name == case.param)
        depth = len(_path_of(owner))  # the root's options go first, a group's after its name
        line[depth:depth] = [option.opts[0], case.value]
    return line


def _path_of(command: click.Command) -> tuple[str, ...]:
    return next(path for path, found in _commands() if found is command)


def _owner(case: Case) -> click.Command:
    """The command (or group) the case's parameter belongs to: the deepest on its path that has it."""
    found: click.Command = cli
    for path, command in _commands():
        if case.path[:len(path)] == path and any(p.name == case.param for p in command.params):
            found = command
    return found


def run_cases(cases: list[Case], folder: Path) -> dict[str, dict]:
    """Run each case in this process with every command's work replaced by BodyRan; its exit code, output and the
    exception it ended with, by case name."""
    originals = {}
    for path, command in _commands():
        if path:  # the root's own callback only builds the context
            originals[command] = command.callback
            command.callback = _no_op if isinstance(command, click.Group) else _body
    try:
        results = {}
        for case in cases:
            line = command_line(case, folder)
            done = CliRunner().invoke(cli, line)
            raised = None if done.exc_info is None or isinstance(done.exception, SystemExit) else \
                "".join(traceback.format_exception(*done.exc_info))
            results[case.name] = {"line": line, "exit": done.exit_code, "output": done.output, "raised": raised}
        return results
    finally:
        for command, callback in originals.items():
            command.callback = callback


def _no_op(*_args, **_kwargs) -> None:
    return None


def _body(*_args, **_kwargs) -> None:
    raise BodyRan("the command's work started")


def _check(case: Case, result: dict) -> None:
    shown = f"{' '.join(result['line'])}\n-> exit {result['exit']}: {result['output'][-600:]}{result['raised'] or ''}"
    assert result["raised"] is None, f"a traceback: {shown}"
    assert result["exit"] == 2, shown
    assert "Traceback" not in result["output"], shown
    param = next(p for path, command in _commands() for p in command.params
                 if p.name == case.param and case.path[:len(path)] == path)
    names = [f"'{opt}'" for opt in param.opts] + [f"'{param.human_readable_name}'",
                                                  f"'[{param.human_readable_name}]'"]  # an optional argument
    assert "Invalid value for" in result["output"] and any(name in result["output"] for name in names), shown


# --- the contract every argument follows ---------------------------------------------------------------------


def test_every_integer_argument_declares_a_range_the_store_and_generators_can_take():
    unbounded = [f"{' '.join(path)} {param.name}" for path, param in _params(click.types.IntParamType)
                 if not isinstance(param.type, click.IntRange) or param.type.min is None or param.type.max is None
                 or param.type.max > INT64_MAX or param.type.min < -INT64_MAX - 1]
    assert not unbounded, f"integer arguments without a range: {unbounded} (use entry.cli.common count/SEED/ROW_ID)"


def test_every_float_argument_declares_finite_bounds():
    """click's FloatRange lets NaN through and an open end lets infinity through: every such argument is an
    entry.cli.common.FiniteRange (share, positive), bounded on both sides."""
    loose = [f"{' '.join(path)} {param.name}" for path, param in _params(click.types.FloatParamType)
             if not isinstance(param.type, FiniteRange)]
    assert not loose, f"float arguments without finite bounds: {loose} (entry.cli.common FiniteRange/share/positive)"


def test_a_hostile_float_is_refused_with_its_name_before_any_work(tmp_path):
    cases = float_cases()
    assert len(cases) > 150  # every float argument of every command, eight values each
    results = run_cases(cases, tmp_path)
    for case in cases:
        _check(case, results[case.name])


def test_every_path_argument_says_what_it_is():
    found = {(path, param.name) for path, param in _params(click.Path)}
    assert found == set(ROLES), f"not in ROLES: {sorted(found - set(ROLES))}; gone: {sorted(set(ROLES) - found)}"


# --- the fuzz ----------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def int_results(tmp_path_factory) -> tuple[list[Case], dict[str, dict]]:
    cases = int_cases()
    return cases, run_cases(cases, tmp_path_factory.mktemp("ints"))


def test_a_hostile_integer_is_refused_with_its_name_before_any_work(int_results):
    cases, results = int_results
    assert len(cases) > 300  # every integer argument of every command, a dozen values each
    for case in cases:
        _check(case, results[case.name])


def test_a_hostile_path_is_refused_with_its_name_before_any_work(tmp_path):
    cases = path_cases(hostile_paths(tmp_path / "paths"), permissions=False)
    results = run_cases(cases, tmp_path)
    for case in cases:
        _check(case, results[case.name])


def test_a_path_this_user_may_not_read_or_write_is_refused_with_its_name_before_any_work(tmp_path):
    if os.geteuid() != 0:
        cases = path_cases(hostile_paths(tmp_path / "paths"), permissions=True)
        results = run_cases(cases, tmp_path)
    else:  # root reads and writes everything: the cases run as root without the capabilities that override
        folder = Path(tempfile.mkdtemp(prefix="empeval-fuzz-"))
        try:
            folder.chmod(0o755)
            cases = path_cases(hostile_paths(folder / "paths"), permissions=True)
            results = _without_root_override(cases, folder)
        finally:
            for path in folder.rglob("*"):
                if path.is_dir():
                    path.chmod(0o755)
            shutil.rmtree(folder)
    assert len(cases) >= 20
    for case in cases:
        _check(case, results[case.name])


def _without_root_override(cases: list[Case], folder: Path) -> dict[str, dict]:
    """Run the cases as root without CAP_DAC_OVERRIDE and CAP_DAC_READ_SEARCH (dropped from the bounding set, so
    the process started does not get them): file permissions then hold for it as for any user, while it still
    reaches the checkout (a fresh clone under `mktemp -d` is 0700, which another user, nobody, cannot enter)."""
    cases_file = folder / "cases.json"
    cases_file.write_text(json.dumps([case.__dict__ for case in cases]))
    script = ("import json, sys; from pathlib import Path; "
              "from tests.hostile.test_cli_fuzz import Case, run_cases; "
              "cases = [Case(tuple(c['path']), c['param'], c['value'], c['what']) "
              "for c in json.loads(Path(sys.argv[1]).read_text())]; "
              "print(json.dumps(run_cases(cases, Path(sys.argv[2]))))")
    work = folder / "work"
    work.mkdir()
    work.chmod(0o777)
    done = subprocess.run(["setpriv", "--bounding-set=-dac_override,-dac_read_search", sys.executable,
                           "-c", script, str(cases_file), str(work)],
                          cwd=REPO, capture_output=True, text=True, timeout=300,
                          env={**os.environ, "HOME": str(work), "MPLCONFIGDIR": str(work)})
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


# --- the issue's own inputs, through their whole command ------------------------------------------------------


@pytest.fixture(scope="module")
def store(hostile_store):
    hostile_store.baseline = snapshot(hostile_store.engine)
    return hostile_store


@pytest.mark.parametrize("seed", [2**63 - 1, 2**63, 2**31])
def test_study_create_with_a_seed_the_store_cannot_hold_exits_2_and_says_so(store, tmp_path, seed):
    file = tmp_path / "study.toml"
    file.write_text(study_toml(name=f"seed-{seed}", extra=f"seed = {seed}"), encoding="utf-8")
    done = CliRunner().invoke(cli, ["--database-url", store.url, "study", "create", str(file)])
    assert done.exit_code == 2, done.output
    assert done.output.strip().splitlines()[-1] == f"error: {file}: seed: must be an integer <= 2147483647, got {seed}"
    assert not store.changed_tables()


def test_study_create_takes_the_largest_seed_the_store_holds(store, tmp_path):
    file = tmp_path / "study.toml"
    file.write_text(study_toml(name="largest-seed", extra="seed = 2147483647"), encoding="utf-8")
    done = CliRunner().invoke(cli, ["--database-url", store.url, "study", "create", str(file)])
    assert done.exit_code == 0, done.output
    store.changed_tables()  # the new study is the new baseline


@pytest.mark.parametrize("columns", [EXPORT_COLUMNS, JUDGMENT_COLUMNS, BEST_WORST_COLUMNS, ACUTE_COLUMNS, CHAT_COLUMNS],
                         ids=["likert", "pairwise", "best-worst", "acute", "chat"])
def test_report_of_a_header_only_export_exits_2_and_says_so(tmp_path, columns):
    export = tmp_path / "export.csv"
    export.write_text(",".join(columns) + "\n", encoding="utf-8")
    done = CliRunner().invoke(cli, ["--database-url", f"sqlite:///{tmp_path / 'unused.db'}", "report", "x",
                                    "--export", str(export), "--out", str(tmp_path / "report")])
    assert done.exit_code == 2, done.output
    assert f"error: {export} holds a header and no rows: nothing to report" in done.output
    assert not (tmp_path / "report").exists()


@pytest.mark.parametrize("content", ["", "\n\n", "\xff\xfe not text"], ids=["empty", "blank lines", "not UTF-8"])
def test_report_of_an_export_that_is_no_table_exits_2_naming_the_file(tmp_path, content):
    export = tmp_path / "export.csv"
    export.write_bytes(content.encode("latin-1"))
    done = CliRunner().invoke(cli, ["--database-url", f"sqlite:///{tmp_path / 'unused.db'}", "report", "x",
                                    "--export", str(export), "--out", str(tmp_path / "report")])
    assert done.exit_code == 2, done.output
    assert done.output.startswith(f"error: {export}: "), done.output


@pytest.mark.parametrize("assignment_id", ["1180591620717411303424", "9223372036854775808", "2147483648", "0"])
def test_releasing_an_assignment_id_past_any_store_exits_2_naming_it(store, assignment_id):
    done = CliRunner().invoke(cli, ["--database-url", store.url, "assignments", "release", "--",
                                    assignment_id])
    assert done.exit_code == 2, done.output
    assert f"Invalid value for 'ASSIGNMENT_ID': {assignment_id} is not in the range 1<=x<=2147483647" in done.output
    assert not store.changed_tables()


def test_releasing_the_largest_assignment_id_exits_2_with_no_such_assignment(store):
    done = CliRunner().invoke(cli, ["--database-url", store.url, "assignments", "release", "2147483647"])
    assert done.exit_code == 2, done.output
    assert "error: no assignment 2147483647" in done.output
