"""The tests `make test-fast` leaves out because they are heavy by measurement (tests/heavy_tests.txt): every test
that took HEAVY_SECONDS or more of wall time, or HEAVY_CPU_SECONDS or more of CPU, setup to teardown, in a full
`make test` run recorded by tests/cpu_times.py; and the files of WHOLE_FILES, whose module-scoped fixture is the
cost (leaving out the test that first asks for it only moves the cost to the next one). The full suite runs them
all; the list only keeps the inner loop short. PostgreSQL variants are not listed: the inner loop runs none.

Made again from a full run (new heavy tests then leave the inner loop; renamed ones are simply no longer listed):

    rm -rf /tmp/times; EMPEVAL_TEST_TIMES=/tmp/times make test PYTEST_ARGS="-p tests.cpu_times"
    .venv/bin/python -m tests.heavy_list /tmp/times/*.jsonl > tests/heavy_tests.txt

>>> heavy_tests([{"id": "tests/conftest.py::test_x", "wall": 1.6, "cpu": 0.1},
...              {"id": "tests/conftest.py::test_y", "wall": 0.4, "cpu": 0.35},
...              {"id": "tests/conftest.py::test_z", "wall": 0.4, "cpu": 0.1},
...              {"id": "tests/conftest.py::test_x[postgres]", "wall": 9.0, "cpu": 3.0}])
['tests/conftest.py::test_x', 'tests/conftest.py::test_y']
"""
from __future__ import annotations

import json
import sys
from collections.abc import Iterable

HEAVY_SECONDS = 1.5
#: 0.5 s left 3,320 tests taking 3 min 6 s (351 s of CPU) on the 2-core machine; 0.25 s leaves out ~220 more.
HEAVY_CPU_SECONDS = 0.25
WHOLE_FILES = (
    "tests/analysis/test_ab_report_fixture.py",
    "tests/analysis/test_analysis_report.py",
    "tests/analysis/test_report_fixture.py",
    "tests/analysis/test_report_paper_output.py",
    "tests/analysis/test_report_presentation.py",
    "tests/backend/test_judge_learned.py",
    "tests/backend/test_judge_learned_difference.py",
)


def heavy_tests(records: Iterable[dict], seconds: float = HEAVY_SECONDS,
                cpu_seconds: float = HEAVY_CPU_SECONDS) -> list[str]:
    """The node ids of `records` (tests/cpu_times.py's lines: id, wall, cpu) at `seconds` of wall or `cpu_seconds`
    of CPU or more, sorted, PostgreSQL variants left out; a test recorded twice counts its larger figures."""
    heavy = {record["id"] for record in records if record["wall"] >= seconds or record["cpu"] >= cpu_seconds}
    return sorted(node for node in heavy if "[postgres" not in node)


def listing(records: Iterable[dict]) -> str:
    """tests/heavy_tests.txt's text for `records`: the tests, then WHOLE_FILES, each part under its comment."""
    found = heavy_tests(records)
    return "\n".join([
        f"# {len(found)} tests that took {HEAVY_SECONDS} s of wall time or {HEAVY_CPU_SECONDS} s of CPU or more "
        "(setup, call and teardown) in a full run; make test-fast leaves them out (tests/heavy_list.py makes the "
        "list again from a run recorded by tests/cpu_times.py)",
        *found,
        "# Whole files whose module-scoped fixture is heavy (a report or a trained model built once for all its "
        "tests)",
        *WHOLE_FILES]) + "\n"


if __name__ == "__main__":
    read = [json.loads(line) for name in sys.argv[1:] for line in open(name, encoding="utf-8") if line.strip()]
    sys.stdout.write(listing(read))
