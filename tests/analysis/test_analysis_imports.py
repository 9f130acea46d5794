"""Importing the loader is cheap (the command line does it on every start), and the package's public names
still resolve, imported on first use."""

from __future__ import annotations

import subprocess
import sys

import pytest

import empeval.analysis

HEAVY = ("scipy", "statsmodels", "matplotlib", "sklearn", "krippendorff")


@pytest.mark.parametrize("module", ["empeval.analysis", "empeval.analysis.kinds.likert.load",
                                    "empeval.analysis.kinds.likert.schema"])
def test_importing_the_loader_pulls_in_nothing_heavy(module):
    probe = (f"import sys, {module}; "
             f"print(' '.join(sorted({{m.split('.')[0] for m in sys.modules}} & {set(HEAVY)!r})))")
    loaded = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout.split()
    assert loaded == [], f"import {module} loaded {loaded}"


def test_the_export_schema_imports_neither_pandas_nor_numpy():
    probe = "import sys, empeval.analysis.kinds.likert.schema; print(sorted({'pandas', 'numpy'} & set(sys.modules)))"
    assert subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                          check=True).stdout.strip() == "[]"


@pytest.mark.parametrize("name", empeval.analysis.__all__)
def test_every_public_name_resolves_from_the_package(name):
    value = getattr(empeval.analysis, name)
    assert callable(value) and value.__name__ == name
    assert name in dir(empeval.analysis)


def test_an_unknown_name_is_an_attribute_error():
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        empeval.analysis.nope  # noqa: B018

