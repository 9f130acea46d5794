"""Every Examples section in the docstrings runs, in `make test` (what `pytest --doctest-modules` would do for
these modules, inside the one test run)."""
from __future__ import annotations

import doctest
import importlib
import io
import pkgutil

import pytest

import empeval.analysis
import empeval.server.store.kinds

# Every module of analysis/ and of the store's study kinds, and these others.
OTHERS = {"empeval.server.store.study_config", "empeval.server.store.study_parts", "empeval.server.store.statuses",
          "empeval.server.errors", "empeval.tasks.design", "empeval.tasks.kind_parts",
          "empeval.tasks.kinds.likert_active", "empeval.planning"}
MODULES = sorted({m.name for package in (empeval.analysis, empeval.server.store.kinds)
                  for m in pkgutil.walk_packages(package.__path__, package.__name__ + ".")} | OTHERS)


def _examples() -> list:
    finder = doctest.DocTestFinder(exclude_empty=True)
    found = []
    for name in MODULES:
        module = importlib.import_module(name)
        found += [pytest.param(test, id=test.name) for test in finder.find(module, name) if test.examples]
    return found


EXAMPLES = _examples()


def test_there_are_examples_to_run():
    assert len(EXAMPLES) >= 50


@pytest.mark.parametrize("example", EXAMPLES)
def test_docstring_example_runs(example):
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    report = io.StringIO()
    result = runner.run(example, out=report.write)
    assert result.failed == 0, report.getvalue()
