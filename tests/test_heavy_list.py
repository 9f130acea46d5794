"""The inner loop's list of heavy tests (tests/heavy_list.py, tests/heavy_tests.txt): made from a run's durations,
read by the collection hook that marks them `heavy` for `make test-fast`."""
from __future__ import annotations

import doctest
from pathlib import Path

from tests import heavy_list
from tests.conftest import _heavy_tests

LISTED = Path(__file__).with_name("heavy_tests.txt")


def test_the_durations_of_a_test_are_summed_over_its_phases_and_postgres_variants_left_out():
    assert doctest.testmod(heavy_list).failed == 0
    lines = ["0.90s setup    tests/conftest.py::test_a", "0.70s call     tests/conftest.py::test_a",
             "1.40s call     tests/conftest.py::test_b", "9.00s call     tests/conftest.py::test_c[postgres]",
             "garbage"]
    assert heavy_list.heavy_tests(lines) == ["tests/conftest.py::test_a"]  # 1.6 s in two phases; 1.4 s is not heavy
    assert heavy_list.heavy_tests(lines, seconds=1.0) == ["tests/conftest.py::test_a", "tests/conftest.py::test_b"]


def test_the_hook_reads_every_listed_id_and_no_comment():
    ids = [line for line in LISTED.read_text(encoding="utf-8").splitlines() if line and not line.startswith("#")]
    assert _heavy_tests() == frozenset(ids) and len(ids) > 100
    assert all(line.startswith("tests/") and "[postgres" not in line for line in ids)
    files = [line for line in ids if "::" not in line]  # whole files: each exists
    assert files and all((LISTED.parent.parent / name).is_file() for name in files)
