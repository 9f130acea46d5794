"""benchmarks/annotation_load.py's think part in its smoke size: a few raters thinking a fraction of a second, two
levels of a ramp and a steady phase against a real `empeval serve` on a real SQLite file, each request over a new
connection. The part must print its curve (a row per level, the load client's CPU beside the server's, the writer
gate's timing) and its figures in the shared format, with no error and every acknowledged rating stored, so that
it cannot rot between the long runs."""

from __future__ import annotations

import json
import re

import pytest

from tests.test_benchmarks_runner import figure_lines, run_benchmarks

ROW = re.compile(r"^ +(?P<raters>[\d,]+) +(?P<rps>[\d.]+) +(?P<all>\d+/\d+/\d+) +\d+/\d+/\d+ +\d+/\d+/\d+ "
                 r"+(?P<errors>\d+) +(?P<client>[\d.]+) cpu +(?P<server>[\d.]+) cpu +(?P<ms>[\d.]+) +(?P<load>[\d.]+)")


@pytest.mark.slow  # a server and two 1.3 s levels: about 12 s on a quiet machine
def test_the_think_part_prints_its_curve_and_stores_what_it_acknowledged(tmp_path):
    out = tmp_path / "think.json"
    done = run_benchmarks("benchmarks/annotation_load.py", "--stores", "sqlite", "--parts", "think",
                          "--levels", "3,6", "--think", "0.1,0.3", "--ramp", "0.3", "--steady", "1.0",
                          "--client-processes", "1", "--probe-writer", env={"EMPEVAL_BENCHMARK_JSON": str(out)},
                          timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "shares this machine's" in done.stdout and "load average at start" in done.stdout
    rows = [match for line in done.stdout.splitlines() if (match := ROW.match(line))]
    assert [int(row["raters"]) for row in rows] == [3, 6], done.stdout
    for row in rows:
        assert int(row["errors"]) == 0 and float(row["rps"]) > 0, row.group(0)
        assert float(row["client"]) > 0 and float(row["server"]) > 0, row.group(0)  # both CPUs were measured
        assert 0 < float(row["ms"]) < 1000, row.group(0)  # the server's CPU per request
    # The writer-gate probe timed the server's write transactions, a line per level.
    gates = re.findall(r"writer gate: ([\d.]+) writes/s, held (\d+)% of the time", done.stdout)
    assert len(gates) == 2 and all(float(writes) > 0 for writes, _ in gates), done.stdout
    figures = {match["name"]: match for match in figure_lines(done.stdout)}
    assert figures["sqlite: think-time errors"]["measured"] == "0"
    assert figures["sqlite: think-time server CPU per request"]["measured"].endswith(" ms")
    assert figures["sqlite: think-time ratings stored - acknowledged"]["measured"] == "0"
    p99 = figures["sqlite: think-time raters, p99 at 6 raters"]
    assert p99["goal"] == "< 500 ms" and p99["measured"].endswith(" ms")
    acknowledged = re.search(r"(\d+) acknowledged, (\d+) stored", done.stdout)
    assert acknowledged and int(acknowledged[1]) == int(acknowledged[2]) > 0
    recorded = json.loads(out.read_text())
    assert {figure["name"] for figure in recorded["figures"]} == set(figures)
