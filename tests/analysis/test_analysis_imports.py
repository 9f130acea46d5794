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


def test_the_public_face_lists_each_name_once_where_it_lives_and_docs_api_names_them_all():
    from pathlib import Path

    homes = empeval.analysis._HOMES
    assert empeval.analysis.__all__ == list(homes)
    api = (Path(__file__).resolve().parents[2] / "docs" / "api.md").read_text(encoding="utf-8")
    assert [name for name in empeval.analysis.__all__ if f"`{name}`" not in api] == []
