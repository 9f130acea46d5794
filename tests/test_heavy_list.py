"""The inner loop's list of heavy tests (tests/heavy_list.py, tests/heavy_tests.txt): made from a full run recorded
by tests/cpu_times.py, read by the collection hook that marks them `heavy` for `make test-fast`."""
from __future__ import annotations

import doctest
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

from tests import heavy_list
from tests.conftest import REPO, _heavy_tests

LISTED = Path(__file__).with_name("heavy_tests.txt")


def test_a_test_is_heavy_by_its_wall_or_its_cpu_and_postgres_variants_are_left_out():
    assert doctest.testmod(heavy_list).failed == 0
    wall, cpu = heavy_list.HEAVY_SECONDS, heavy_list.HEAVY_CPU_SECONDS
    records = [{"id": "tests/conftest.py::test_a", "wall": wall, "cpu": 0.0},
               {"id": "tests/conftest.py::test_b", "wall": wall - 0.01, "cpu": cpu - 0.01},
               {"id": "tests/conftest.py::test_c", "wall": 0.1, "cpu": cpu},
               {"id": "tests/conftest.py::test_d[postgres]", "wall": 9.0, "cpu": 9.0}]
    assert heavy_list.heavy_tests(records) == ["tests/conftest.py::test_a", "tests/conftest.py::test_c"]
    assert heavy_list.heavy_tests(records, seconds=1.0, cpu_seconds=cpu + 0.01) == ["tests/conftest.py::test_a",
                                                                              "tests/conftest.py::test_b"]


def test_the_listing_is_what_the_hook_reads_and_keeps_the_whole_files(tmp_path):
    text = heavy_list.listing([{"id": "tests/conftest.py::test_a", "wall": 2.0, "cpu": 1.0}])
    ids = [line for line in text.splitlines() if line and not line.startswith("#")]
    assert ids == ["tests/conftest.py::test_a", *heavy_list.WHOLE_FILES]


def test_the_hook_reads_every_listed_id_and_no_comment():
    ids = [line for line in LISTED.read_text(encoding="utf-8").splitlines() if line and not line.startswith("#")]
    assert _heavy_tests() == frozenset(ids) and len(ids) > 100
    assert all(line.startswith("tests/") and "[postgres" not in line for line in ids)
    files = tuple(line for line in ids if "::" not in line)  # whole files: those of heavy_list, each there
    assert files == heavy_list.WHOLE_FILES and all((REPO / name).is_file() for name in files)


def test_the_plugin_records_each_test_with_the_cpu_of_the_subprocesses_it_ran(tmp_path):
    (tmp_path / "test_two.py").write_text(textwrap.dedent("""
        import subprocess, sys

        def test_idle():
            pass

        def test_child_burns_cpu():
            subprocess.run([sys.executable, "-c", "import time\\nend = time.process_time() + 0.4\\n"
                            "while time.process_time() < end: pass"], check=True)
    """), encoding="utf-8")
    times = tmp_path / "times"
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "tests.cpu_times",
                           "-p", "no:randomly", "--rootdir", str(tmp_path), str(tmp_path / "test_two.py")],
                          cwd=REPO, env={**{k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")},
                                             "EMPEVAL_TEST_TIMES": str(times)},
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    records = {r["id"].rsplit("::", 1)[1]: r for r in map(json.loads, (times / "main.jsonl").read_text().splitlines())}
    assert set(records) == {"test_idle", "test_child_burns_cpu"}
    assert records["test_child_burns_cpu"]["cpu"] >= 0.35 > records["test_idle"]["cpu"]
    assert records["test_child_burns_cpu"]["wall"] >= records["test_child_burns_cpu"]["cpu"] * 0.5
