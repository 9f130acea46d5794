"""`empeval report --export` on the committed A/B demo export (with the Likert demo export beside it) gives the
tables it gave before the study-kinds refactor: every column of every table to 1e-9 relative."""
from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
from click.testing import CliRunner

from empeval.cli import cli

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
AB = FIXTURES / "demo_ab_export"
TABLES = sorted(p.name for p in (AB / "expected_tables").glob("*.csv"))


def test_the_fixture_holds_every_table_of_the_ab_report():
    assert TABLES == ["ab_table.csv", "choice_agreement.csv", "control_pairs.csv", "likert_beside_ab.csv",
                      "position_bias.csv", "ranking.csv"]


@pytest.fixture(scope="module")
def report_dir(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("ab-fixture-report")
    result = CliRunner().invoke(cli, ["report", "demo-ab", "--export", str(AB / "demo_ab.csv"), "--likert-export",
                                      str(FIXTURES / "demo_export" / "demo.csv"), "--out", str(out)])
    assert result.exit_code == 0, result.output
    return out


@pytest.mark.parametrize("name", TABLES)
def test_ab_report_tables_on_the_demo_export_are_unchanged(report_dir, name):
    expected = pd.read_csv(AB / "expected_tables" / name)
    written = pd.read_csv(report_dir / "tables" / name)
    assert list(written.columns) == list(expected.columns)
    pd.testing.assert_frame_equal(written, expected, check_exact=False, rtol=1e-9, atol=1e-12)
