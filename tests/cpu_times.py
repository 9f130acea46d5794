"""A pytest plugin that records what each test costs, for tests/heavy_list.py: per test (setup, call and teardown
together) its wall seconds, its CPU seconds (this process's, and its children's that ended meanwhile: a
`serve` or a CLI run in a subprocess counts for the test that started it) and when it ended (epoch seconds, to
see how busy each worker kept). One JSON line per test, appended to
`$EMPEVAL_TEST_TIMES/<xdist worker>.jsonl`; without that variable it records nothing.

    EMPEVAL_TEST_TIMES=/tmp/times make test PYTEST_ARGS="-p tests.cpu_times"
"""
from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest


def _cpu_seconds() -> float:
    spent = os.times()
    return spent.user + spent.system + spent.children_user + spent.children_system


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    folder = os.environ.get("EMPEVAL_TEST_TIMES")
    cpu, wall = _cpu_seconds(), time.perf_counter()
    yield
    if not folder:
        return
    record = {"id": item.nodeid, "cpu": round(_cpu_seconds() - cpu, 3), "wall": round(time.perf_counter() - wall, 3),
              "ended": round(time.time(), 3)}
    Path(folder).mkdir(parents=True, exist_ok=True)
    worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
    with open(Path(folder) / f"{worker}.jsonl", "a", encoding="utf-8") as out:
        out.write(json.dumps(record) + "\n")
