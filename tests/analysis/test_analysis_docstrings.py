"""Every public analysis function documents what it returns and shows a call that runs (as a doctest,
`pytest --doctest-modules analysis`), the way pingouin's functions do."""

from __future__ import annotations

import importlib
import inspect

import pytest

import empeval.analysis

MODULES = ["stats.agreement", "stats.bootstrap", "stats.coefficients", "stats.significance", "stats.exclusions",
           "kinds.likert.load", "stats.power", "stats.preferences", "kinds.likert.quality", "stats.rater_aware",
           "simulate.likert"]


def _public_functions() -> list:
    found = {f"empeval.analysis.{name}": getattr(empeval.analysis, name) for name in empeval.analysis.__all__}
    for name in MODULES:
        module = importlib.import_module(f"empeval.analysis.{name}")
        for attribute, value in vars(module).items():
            if not attribute.startswith("_") and inspect.isfunction(value) and value.__module__ == module.__name__:
                found[f"{module.__name__}.{attribute}"] = value
    return [pytest.param(name, function, id=name) for name, function in found.items()]


@pytest.mark.parametrize(("name", "function"), _public_functions())
def test_public_function_has_returns_and_a_runnable_example(name, function):
    doc = inspect.getdoc(function) or ""
    assert "\nReturns\n-------\n" in doc, f"{name}: no Returns section"
    assert "\nExamples\n--------\n" in doc and "\n>>> " in doc, f"{name}: no Examples section with a doctest"
