"""The benchmarks' shared runner (benchmarks/runner.py, `python -m benchmarks`): it lists every script of the folder,
refuses an unknown name, and a real run prints its figures in the one shared format and writes them to JSON; the
Figure record (benchmarks/figures.py) computes ratio and verdict right for every kind of goal."""

from __future__ import annotations

import json
import math
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks import runner
from benchmarks.figures import Figure, above, at_least, at_most, below

REPO = Path(__file__).resolve().parents[1]
FOLDER = REPO / "benchmarks"
# The shared line: name | goal | measured | ratio | verdict [| note]
LINE = re.compile(r"^figure: (?P<name>.+?) \| goal (?P<goal>none|(?:<=|>=|<|>) \S.*?) \| measured (?P<measured>\S.*?)"
                  r" \| ratio (?P<ratio>-|-?[0-9.e+-]+) \| (?P<verdict>met|NOT MET|no goal)(?: \| (?P<note>.+))?$")


def run_benchmarks(*args: str, env: dict[str, str] | None = None, timeout: float = 60) -> subprocess.CompletedProcess:
    """`python -m benchmarks ARGS` from the repository root (no bytecode written into the repository)."""
    return subprocess.run([sys.executable, *args], cwd=REPO, capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1", **(env or {})}, check=False)


def script_names() -> list[str]:
    """The scripts of the benchmarks folder, read off the files (the runner's own modules left out)."""
    return sorted(path.stem for path in FOLDER.glob("*.py") if path.stem not in runner.SUPPORT)


def figure_lines(stdout: str) -> list[re.Match]:
    lines = [line for line in stdout.splitlines() if line.startswith("figure:")]
    matches = [LINE.match(line) for line in lines]
    assert all(matches), [line for line, match in zip(lines, matches, strict=True) if not match]
    return matches


# --- the listing --------------------------------------------------------------------------------------------


def test_the_listing_names_every_script_of_the_folder(capsys):
    names = script_names()
    assert len(names) >= 11 and {"crossed_simulation", "report_scale", "floor_app"} <= set(names)
    assert runner.main([]) == 0
    listed = {line.split()[0]: line for line in capsys.readouterr().out.splitlines() if line.startswith("  ")}
    for name in names:
        assert name in listed, f"{name} missing from the listing"
        assert len(listed[name].split(maxsplit=1)) == 2, f"{name} has no description"
    # Every script is either a runnable benchmark (a main()) or a helper of one; none is a problem.
    assert runner.problems(runner.scripts()) == []
    runnable = {script.name for script in runner.benchmarks()}
    assert runnable | set(runner.HELPERS) == set(names) and not runnable & set(runner.HELPERS)


def test_every_benchmark_reports_through_the_shared_format_and_runs_as_a_file():
    """Each benchmark opens a session when run as a file and prints its goals through report(Figure(...)), not a
    verdict of its own."""
    own_verdict = re.compile(r"""["'](NOT )?met["']|def verdict|def _check""")
    for script in runner.benchmarks():
        source = (FOLDER / f"{script.name}.py").read_text(encoding="utf-8")
        compile(source, script.name, "exec")
        assert "run_script(__file__, main)" in source, script.name
        assert "report(Figure(" in source, script.name
        assert not own_verdict.search(source), f"{script.name} prints a verdict of its own"


def test_a_script_without_main_that_is_no_helper_is_a_problem(tmp_path):
    (tmp_path / "fine.py").write_text('"""A fine benchmark."""\n\ndef main() -> None:\n    pass\n')
    (tmp_path / "stray.py").write_text('"""Forgot its main."""\nX = 1\n')
    (tmp_path / "bare.py").write_text("def main() -> None:\n    pass\n")
    text, issues = runner.listing(tmp_path)
    assert [script.name for script in runner.benchmarks(tmp_path)] == ["bare", "fine"]
    assert any(issue.startswith("stray: no main()") for issue in issues)
    assert any(issue.startswith("bare: no docstring") for issue in issues)
    assert "problems:" in text and re.search(r"^  fine +A fine benchmark\.$", text, re.MULTILINE)


def test_the_runner_keeps_its_own_options_apart_from_the_benchmarks():
    assert runner.split_command(["--json", "x.json", "train", "--json", "y"]) == (["--json", "x.json"], "train",
                                                                                  ["--json", "y"])
    assert runner.split_command([]) == ([], None, [])
    assert runner.split_command(["ppi_coverage", "--studies", "2"]) == ([], "ppi_coverage", ["--studies", "2"])


def test_an_unknown_name_exits_non_zero_naming_the_known_ones():
    done = run_benchmarks("-m", "benchmarks", "no_such_benchmark", "--fast")
    assert done.returncode != 0
    assert "unknown benchmark 'no_such_benchmark'" in done.stderr
    for script in runner.benchmarks():
        assert script.name in done.stderr
    helper = run_benchmarks("-m", "benchmarks", "floor_app")
    assert helper.returncode != 0 and "helper of annotation_load" in helper.stderr


def test_a_benchmarks_help_passes_through_and_writes_nothing(tmp_path):
    done = run_benchmarks("-m", "benchmarks", "--json", str(tmp_path / "out.json"), "analysis_bootstrap", "--help")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("usage: python -m benchmarks analysis_bootstrap") and "--resamples" in done.stdout
    assert "machine:" not in done.stdout and not (tmp_path / "out.json").exists()


# --- the figure ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("goal", "measured", "verdict"), [
    (at_most(6), 5, "met"), (at_most(6), 6, "met"), (at_most(6), 7, "NOT MET"),
    (at_least(0.935), 0.95, "met"), (at_least(0.935), 0.935, "met"), (at_least(0.935), 0.93, "NOT MET"),
    (below(150), 149.9, "met"), (below(150), 150, "NOT MET"),
    (above(25), 25.1, "met"), (above(25), 25, "NOT MET"),
    (at_most(1e-3), math.nan, "NOT MET"), (at_least(1), math.nan, "NOT MET"),
])
def test_the_verdict_follows_the_goals_direction(goal, measured, verdict):
    assert Figure("x", measured, goal=goal).verdict == verdict


def test_the_ratio_is_measured_over_the_threshold():
    assert Figure("statements", 5, goal=at_most(6)).ratio == pytest.approx(5 / 6)
    assert Figure("coverage", 0.95, goal=at_least(0.935)).ratio == pytest.approx(0.95 / 0.935)
    assert Figure("cold", 120, "s", goal=below(150)).ratio == pytest.approx(0.8)
    # No goal, a threshold that is not positive, a NaN: no ratio.
    assert Figure("speed-up", 31, "x").ratio is None
    assert Figure("difference", 1.0, goal=at_least(-2)).ratio is None
    assert Figure("difference", math.nan, goal=at_most(1)).ratio is None


def test_the_line_has_one_format_with_and_without_a_goal():
    met = Figure("statements per submit", 5, goal=at_most(6), note="max over 3 and 30 items").line()
    assert met == "figure: statements per submit | goal <= 6 | measured 5 | ratio 0.83 | met | max over 3 and 30 items"
    missed = Figure("coverage, good judge", 0.9, goal=at_least(0.935), fmt=".3f").line()
    assert missed == "figure: coverage, good judge | goal >= 0.935 | measured 0.900 | ratio 0.96 | NOT MET"
    info = Figure("speed-up", 31.4, "x", fmt=".0f").line()
    assert info == "figure: speed-up | goal none | measured 31x | ratio - | no goal"
    timed = Figure("cold retrieval", 120.04, "s", goal=below(150), fmt=".1f").line()
    assert timed == "figure: cold retrieval | goal < 150 s | measured 120.0 s | ratio 0.80 | met"
    for line in (met, missed, info, timed):
        assert LINE.match(line), line


def test_the_figure_as_json_has_no_nan_and_a_name_has_no_separator():
    record = Figure("gap", math.nan, goal=at_most(0.02)).as_dict()
    assert record == {"name": "gap", "measured": None, "unit": "", "goal": {"direction": "at most", "threshold": 0.02},
                      "ratio": None, "verdict": "NOT MET", "note": ""}
    json.dumps(record, allow_nan=False)
    with pytest.raises(ValueError):
        Figure("a | b", 1.0)


# --- real runs -----------------------------------------------------------------------------------------------


def test_a_real_run_prints_the_shared_lines_and_writes_the_json(tmp_path):
    results = sorted((FOLDER / "results").glob("*.json")) if (FOLDER / "results").exists() else []
    out = tmp_path / "crossed.json"
    args = ["--replicates", "2", "--annotators", "8", "--items", "20"]
    done = run_benchmarks("-m", "benchmarks", "--json", str(out), "crossed_simulation", *args)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("machine: ") and "load average" in done.stdout.splitlines()[0]
    printed = figure_lines(done.stdout)
    assert len(printed) == 5 and {m["verdict"] for m in printed} <= {"met", "NOT MET"}
    assert all(m["goal"] in ("<= 0.02", "<= 0.001") for m in printed)

    document = json.loads(out.read_text(encoding="utf-8"))
    assert document["benchmark"] == "crossed_simulation" and document["args"] == args and document["completed"]
    assert set(document["machine"]) >= {"utc", "load_average", "cpu_count", "git_commit"}
    assert [figure["name"] for figure in document["figures"]] == [m["name"] for m in printed]
    for figure, match in zip(document["figures"], printed, strict=True):
        assert figure["verdict"] == match["verdict"]
        assert figure["ratio"] == pytest.approx(figure["measured"] / figure["goal"]["threshold"])
        assert match["ratio"] == format(figure["ratio"], ".2f") or float(match["ratio"]) == pytest.approx(
            figure["ratio"], rel=0.05)
    # Nothing written into the repository's results folder.
    assert (sorted((FOLDER / "results").glob("*.json")) if (FOLDER / "results").exists() else []) == results


def test_a_script_run_as_a_file_writes_its_json_into_the_folder_the_environment_names(tmp_path):
    done = run_benchmarks(str(FOLDER / "analysis_bootstrap.py"), "--items", "20", "--resamples", "10",
                          env={"EMPEVAL_BENCHMARK_JSON": str(tmp_path)})
    assert done.returncode == 0, done.stderr
    assert len(figure_lines(done.stdout)) == 4
    written = list(tmp_path.glob("analysis_bootstrap-*.json"))
    assert len(written) == 1 and re.fullmatch(r"analysis_bootstrap-\d{8}T\d{6}Z\.json", written[0].name)
    document = json.loads(written[0].read_text(encoding="utf-8"))
    assert [figure["verdict"] for figure in document["figures"]] == ["no goal"] * 4
