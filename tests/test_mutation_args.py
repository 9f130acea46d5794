"""mutation/run.py gives every module's pytest run the global arguments and the module's own, with one marker
expression that keeps both (pytest keeps only the last `-m`: a module asking for "not slow" used to drop the
global "not postgres" and mutate against PostgreSQL variants)."""
from __future__ import annotations

import doctest
import importlib.util
import sys
import tomllib

from tests.conftest import REPO


def _run_module():
    spec = importlib.util.spec_from_file_location("mutation_run", REPO / "mutation" / "run.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def test_the_merge_examples_run():
    run = _run_module()
    failures, tried = doctest.testmod(run, verbose=False, report=False)
    assert tried >= 2 and failures == 0


def test_every_listed_module_runs_with_one_marker_expression_that_keeps_the_global_one():
    run = _run_module()
    config = tomllib.loads((REPO / "mutation" / "modules.toml").read_text())
    common = config["pytest_args"]
    assert "-m" in common
    for name, spec in config["modules"].items():
        merged = run.merged_pytest_args(common, spec.get("pytest_args", []))
        assert merged.count("-m") == 1, name
        expression = merged[merged.index("-m") + 1]
        assert "not postgres" in expression, (name, expression)
        if "-m" in spec.get("pytest_args", []):
            own = spec["pytest_args"][spec["pytest_args"].index("-m") + 1]
            assert own in expression, (name, expression)
