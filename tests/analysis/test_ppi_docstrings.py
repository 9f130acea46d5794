"""The model-assisted evaluation modules document what every public function returns and show a call that
runs, as the rest of analysis does (tests/test_docstring_examples.py collects only analysis' top-level
modules, so the analysis.stats.ppi package's examples run here)."""

from __future__ import annotations

import doctest
import importlib
import inspect
import io

import pytest

MODULES = ["empeval.analysis.stats.ppi.tables", "empeval.analysis.stats.ppi.estimates",
           "empeval.analysis.stats.ppi.agreement", "empeval.analysis.stats.ppi.crossfit",
           "empeval.analysis.stats.ppi.planner", "empeval.analysis.simulate.judges"]


def _public_functions() -> list:
    found = []
    for name in MODULES:
        module = importlib.import_module(name)
        for attribute, value in vars(module).items():
            if not attribute.startswith("_") and inspect.isfunction(value) and value.__module__ == name:
                found.append(pytest.param(value, id=f"{name}.{attribute}"))
    return found


def _examples() -> list:
    finder = doctest.DocTestFinder(exclude_empty=True)
    return [pytest.param(test, id=test.name) for name in MODULES
            for test in finder.find(importlib.import_module(name), name) if test.examples]


@pytest.mark.parametrize("function", _public_functions())
def test_public_function_has_returns_and_a_runnable_example(function):
    doc = inspect.getdoc(function) or ""
    assert "\nReturns\n-------\n" in doc, "no Returns section"
    assert "\nExamples\n--------\n" in doc and "\n>>> " in doc, "no Examples section with a doctest"


@pytest.mark.parametrize("example", _examples())
def test_docstring_example_runs(example):
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    report = io.StringIO()
    assert runner.run(example, out=report.write).failed == 0, report.getvalue()
