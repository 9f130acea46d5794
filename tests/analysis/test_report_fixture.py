"""`empeval report --export` on the committed demo export gives the tables it gave before the rooms refactor."""
from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
from click.testing import CliRunner

from entry.cli import cli

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "demo_export"
TABLES = sorted(p.name for p in (FIXTURE / "expected_tables").glob("*.csv"))


@pytest.fixture(scope="module")
def report_dir(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("fixture-report")
    result = CliRunner().invoke(cli, ["report", "demo", "--export", str(FIXTURE / "demo.csv"), "--out", str(out)])
    assert result.exit_code == 0, result.output
    return out


@pytest.mark.parametrize("name", TABLES)
def test_report_tables_on_the_demo_export_are_unchanged(report_dir, name):
    expected = pd.read_csv(FIXTURE / "expected_tables" / name)
    written = pd.read_csv(report_dir / "tables" / name)
    pd.testing.assert_frame_equal(written[expected.columns], expected, check_exact=False, rtol=1e-9, atol=1e-12)
