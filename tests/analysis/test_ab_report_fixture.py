"""`empeval report --export` on the committed A/B demo export (with the Likert demo export beside it) gives the
pinned tables: every column of every table to 1e-9 relative. Pinned before the study-kinds refactor; re-pinned
(2026-12-03) when the A/B report began leaving out the raters its quality rules flag (issue 30): with
--keep-flagged the A/B tables that do not involve the Likert study are still those of before
(expected_tables_all_raters), so the only change is the exclusion."""
from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
from click.testing import CliRunner

from empeval.cli import cli

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
AB = FIXTURES / "demo_ab_export"
TABLES = sorted(p.name for p in (AB / "expected_tables").glob("*.csv"))
ALL_RATERS = sorted(p.name for p in (AB / "expected_tables_all_raters").glob("*.csv"))


def test_the_fixture_holds_every_table_of_the_ab_report():
    assert TABLES == ["ab_table.csv", "choice_agreement.csv", "control_pairs.csv", "likert_beside_ab.csv",
                      "position_bias.csv", "ranking.csv", "rater_quality.csv"]
    assert ALL_RATERS == ["ab_table.csv", "control_pairs.csv", "position_bias.csv", "ranking.csv"]


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


def test_with_every_rater_kept_the_ab_tables_are_those_of_before_the_exclusion(tmp_path):
    result = CliRunner().invoke(cli, ["report", "demo-ab", "--export", str(AB / "demo_ab.csv"), "--likert-export",
                                      str(FIXTURES / "demo_export" / "demo.csv"), "--out", str(tmp_path),
                                      "--keep-flagged"])
    assert result.exit_code == 0, result.output
    for name in ALL_RATERS:
        expected = pd.read_csv(AB / "expected_tables_all_raters" / name)
        pd.testing.assert_frame_equal(pd.read_csv(tmp_path / "tables" / name), expected, check_exact=False,
                                      rtol=1e-9, atol=1e-12, obj=name)
    flagged = pd.read_csv(AB / "expected_tables" / "rater_quality.csv").query("flagged")
    assert len(flagged) == 3  # two always on one screen side, one who failed her control pairs
