"""The tests `make test-fast` leaves out because they are heavy by measurement (tests/heavy_tests.txt): every test
whose setup, call and teardown took HEAVY_SECONDS or more of wall time together in a full `make test` run, as
pytest's `--durations` prints them. The full suite runs them all; the list only keeps the inner loop short. A line
without `::` names a whole file: one whose module-scoped fixture is heavy (leaving out the test that first asked for
it only moves the fixture's cost to the next one), added by hand.

Made again from a run's log (new heavy tests then leave the inner loop; renamed ones are simply no longer
listed):

    make test PYTEST_ARGS="--durations=0 --durations-min=0.2" 2>&1 | tee /tmp/suite.log
    .venv/bin/python -m tests.heavy_list /tmp/suite.log > tests/heavy_tests.txt

>>> heavy_tests(["1.20s call     tests/conftest.py::test_x[sqlite]", "0.40s setup    tests/conftest.py::test_x[sqlite]",
...              "0.30s call     tests/conftest.py::test_y", "2.00s call     tests/heavy_list.py::test_z[postgres]"])
['tests/conftest.py::test_x[sqlite]']
"""
from __future__ import annotations

import re
import sys
from collections import defaultdict
from collections.abc import Iterable

HEAVY_SECONDS = 1.5
_LINE = re.compile(r"^\s*([0-9.]+)s (setup|call|teardown)\s+(\S+)\s*$")


def heavy_tests(lines: Iterable[str], seconds: float = HEAVY_SECONDS) -> list[str]:
    """The node ids whose durations in `lines` sum to `seconds` or more, sorted; PostgreSQL variants are left out
    (the inner loop runs no PostgreSQL test anyway)."""
    total: dict[str, float] = defaultdict(float)
    for line in lines:
        if match := _LINE.match(line):
            total[match.group(3)] += float(match.group(1))
    return sorted(node for node, spent in total.items() if spent >= seconds and "[postgres" not in node)


if __name__ == "__main__":
    with open(sys.argv[1], encoding="utf-8") as log:
        found = heavy_tests(log)
    print(f"# {len(found)} tests of {HEAVY_SECONDS} s or more in a full run (tests/heavy_list.py); make test-fast "
          "leaves them out")
    print("\n".join(found))
