"""`empeval report --generalize items|raters|both`: what the Likert report's intervals and p-values generalise to.
The default (items) keeps today's bootstrap and Wilcoxon tests and now says they hold for this study's raters only;
raters and both switch the means' and differences' intervals and p-values to the crossed random-effects ones
(analysis.stats.generalize) and say they hold for new raters; one rater falls back to items and says why."""

from __future__ import annotations

import pandas as pd
from click.testing import CliRunner

from empeval.analysis.kinds.likert.load import tidy_from_export
from empeval.analysis.kinds.likert.report import write_report
from empeval.analysis.simulate.likert import simulate_study
from empeval.cli import cli

ITEMS = "valid for new contexts rated by this study's raters"
BOTH = "valid for new raters and new contexts"


def _export(**options) -> pd.DataFrame:
    defaults = {"n_contexts": 16, "n_honest": 10, "n_random_clickers": 0, "n_straight_liners": 0,
                "criteria": ("empathy", "fluency"), "rater_bias_sd": 0.5, "seed": 5}
    return simulate_study(**{**defaults, **options}).export


def _methods(markdown: str) -> str:
    return markdown.split("## Methods\n", 1)[1]


def test_the_default_report_says_its_intervals_hold_for_this_studys_raters(tmp_path):
    paths = write_report(_export(), tmp_path, n_boot=100)
    markdown = paths["markdown"].read_text(encoding="utf-8")
    assert f"95% percentile bootstrap CI over items, B = 100, {ITEMS}" in markdown  # the main table's caption
    assert "Wilcoxon signed-rank tests on item-level means paired by context" in markdown
    assert ("they are valid for new contexts rated by this study's raters, not for new raters (empeval report "
            "--generalize both gives intervals for new raters and new contexts)") in _methods(markdown)
    means = pd.read_csv(paths["table_system_means"])
    assert "items_ci_low" not in means.columns and "target" not in means.columns  # today's table, unchanged


def test_both_switches_the_intervals_and_p_values_and_says_so(tmp_path):
    export = _export()
    items = write_report(export, tmp_path / "items", n_boot=100)
    both = write_report(export, tmp_path / "both", n_boot=100, generalize="both")
    markdown = both["markdown"].read_text(encoding="utf-8")
    assert f"crossed random-effects variance (contexts, responses, raters and raters' system preferences as random), " \
           f"{BOTH}" in markdown
    assert f"The intervals and tests of the system means and comparisons are {BOTH}." in _methods(markdown)
    assert "not for new raters" not in markdown

    means = pd.read_csv(both["table_system_means"])
    before = pd.read_csv(items["table_system_means"])
    assert (means["target"] == "both").all()
    assert means[["items_ci_low", "items_ci_high"]].to_numpy().tolist() == \
        before[["ci_low", "ci_high"]].to_numpy().tolist()  # the bootstrap kept beside
    # With 10 raters of severity SD 0.5 the raters' share is large: every interval for new raters is wider.
    assert ((means["ci_high"] - means["ci_low"]) > (means["items_ci_high"] - means["items_ci_low"])).all()

    pairs = pd.read_csv(both["table_pairwise_tests"])
    assert {"p_target", "p_adj_wilcoxon", "diff_ci_low", "diff_ci_high"} <= set(pairs.columns)
    assert not pairs["p_adj"].equals(pairs["p_adj_wilcoxon"])
    row = pairs.iloc[0]
    shown = f"| {row['criterion']} | {row['system_a']} vs {row['system_b']} | 16 | {row['mean_diff']:.2f} " \
            f"[{row['diff_ci_low']:.2f}, {row['diff_ci_high']:.2f}] |"
    assert shown in markdown


def test_raters_says_the_contexts_are_held_fixed(tmp_path):
    paths = write_report(_export(), tmp_path, n_boot=50, study_meta={"generalize": "raters"})
    markdown = paths["markdown"].read_text(encoding="utf-8")
    assert ("The intervals and tests of the system means and comparisons are valid for new raters rating this "
            "study's contexts (the contexts held fixed).") in markdown
    assert (pd.read_csv(paths["table_system_means"])["target"] == "raters").all()


def test_one_rater_falls_back_to_items_and_says_why(tmp_path):
    ratings = tidy_from_export(_export(n_honest=3, raters_per_item=1))
    one = ratings.loc[ratings["annotator"] == ratings.loc[~ratings["is_control"], "annotator"].iloc[0]]
    paths = write_report(one, tmp_path, n_boot=50, generalize="both", exclude_flagged=False)
    markdown = paths["markdown"].read_text(encoding="utf-8")
    gaps = markdown.split("## What could not be computed\n", 1)[1].split("\n## ", 1)[0]
    assert ("Intervals and tests for new raters: not computed, generalising over raters needs ratings from at least 2 "
            "raters, got 1 on empathy") in gaps
    assert f"95% percentile bootstrap CI over items, B = 50, {ITEMS}" in markdown
    assert "intervals for new raters were asked for but could not be computed" in _methods(markdown)


def test_the_report_command_takes_generalize(tmp_path):
    path = tmp_path / "pilot.csv"
    _export(n_contexts=10, criteria=("empathy",)).to_csv(path, index=False)
    result = CliRunner().invoke(cli, ["report", "pilot", "--export", str(path), "--out", str(tmp_path / "r"),
                                      "--generalize", "both"])
    assert result.exit_code == 0, result.output
    assert BOTH in (tmp_path / "r" / "report.md").read_text(encoding="utf-8")
    refused = CliRunner().invoke(cli, ["report", "pilot", "--export", str(path), "--generalize", "annotators"])
    assert refused.exit_code == 2 and "'annotators' is not one of 'items', 'raters', 'both'" in refused.output
