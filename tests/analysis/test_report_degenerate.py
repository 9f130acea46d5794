"""write_report on small or degenerate exports: each gives a report that opens with what could not be computed
and why, names it again in the section where its table would be, and writes no table or figure it could not
compute. (The same through the real command on SQLite studies: tests/tasks/test_report_degenerate_cli.py.)"""

from __future__ import annotations

import pandas as pd
import pytest

from empeval.analysis.kinds.likert.load import tidy_from_export
from empeval.analysis.kinds.likert.report import write_report
from empeval.analysis.simulate.likert import simulate_study


def _gaps(markdown: str) -> list[str]:
    if "## What could not be computed\n" not in markdown:
        return []
    section = markdown.split("## What could not be computed\n", 1)[1].split("\n## ", 1)[0]
    return [line[2:] for line in section.splitlines() if line.startswith("- ")]


def _study(**options) -> pd.DataFrame:
    defaults = {"n_contexts": 6, "n_honest": 3, "n_random_clickers": 0, "n_straight_liners": 0, "seed": 2}
    return tidy_from_export(simulate_study(**{**defaults, **options}).export)


def test_a_one_system_export_reports_means_but_no_comparison(tmp_path):
    ratings = _study()
    one = ratings.loc[(ratings["system"] == "gold") | ratings["is_control"]]
    paths = write_report(one, tmp_path, n_boot=50)
    markdown = paths["markdown"].read_text(encoding="utf-8")
    assert _gaps(markdown) == ["Pairwise tests, Friedman tests and the rater-aware check: not computed, only one "
                               "system (gold) has ratings: the pairwise tests, the Friedman tests and the rater-aware "
                               "check compare two or more systems rated on the same contexts."]
    assert "table_system_means" in paths and "table_rater_aware_check" not in paths
    assert "| gold | 6 (18) |" in markdown  # 6 responses, 3 ratings each
    assert "We collected 54 ratings of 6 responses (6 dialogue contexts × 1 system: gold)" in markdown


def test_an_export_of_control_ratings_only_says_results_need_real_responses(tmp_path):
    ratings = _study()
    paths = write_report(ratings.loc[ratings["is_control"]], tmp_path, n_boot=50)
    markdown = paths["markdown"].read_text(encoding="utf-8")
    assert _gaps(markdown) == ["System means, pairwise tests, agreement and figures: not computed, every rating is "
                               "of a control item; results need ratings of the real systems' responses."]
    assert not any(key.startswith("figure_") for key in paths)
    assert set(k for k in paths if k.startswith("table_")) == {"table_rater_quality"}
    assert "No rating of a real response is left to analyse" in markdown


def test_one_rating_per_item_says_agreement_needs_two(tmp_path):
    ratings = _study(n_honest=1, raters_per_item=1)
    markdown = write_report(ratings, tmp_path, n_boot=50)["markdown"].read_text(encoding="utf-8")
    assert _gaps(markdown) == ["Agreement coefficients: not computed, no item has two or more ratings: nothing to "
                               "pair."]
    agreement = markdown.split("## Agreement\n", 1)[1].split("\n## ", 1)[0]
    assert agreement.strip() == "Not computed: no item has two or more ratings: nothing to pair."
    assert "from 1 annotator in " in markdown and "from 1 annotators" not in markdown


def test_one_context_allows_no_paired_test(tmp_path):
    ratings = _study(n_contexts=1, n_honest=2, raters_per_item=2, controls_per_assignment=0)
    paths = write_report(ratings, tmp_path, n_boot=50)
    markdown = paths["markdown"].read_text(encoding="utf-8")
    assert _gaps(markdown) == ["Pairwise tests, Friedman tests and the rater-aware check: not computed, no pair of "
                               "systems could be tested (fewer than two contexts rated for both systems), so neither "
                               "could the rater-aware check."]
    assert "table_rater_aware_check" not in paths
    assert "no pair of systems could be tested" in markdown.split("## Methods", 1)[1]


@pytest.mark.parametrize("kind", ["random", "straight"])
def test_a_pilot_where_every_annotator_is_flagged_reports_why(kind, tmp_path):
    options = {"n_random_clickers": 3} if kind == "random" else {"n_straight_liners": 3}
    ratings = _study(n_honest=0, **options)
    paths = write_report(ratings, tmp_path, n_boot=50)
    markdown = paths["markdown"].read_text(encoding="utf-8")
    (gap,) = _gaps(markdown)
    assert gap.startswith("System means, pairwise tests, agreement and figures: not computed, every annotator who "
                          "rated a real response (3 of 3 annotators) was flagged by the quality checks")
    assert "3 of 3 annotators flagged, excluded from the main results." in markdown
    kept = _gaps(write_report(ratings, tmp_path / "kept", n_boot=50, exclude_flagged=False)["markdown"]
                 .read_text(encoding="utf-8"))
    # Kept, random clickers give results; straight-liners score every system alike, leaving nothing to test.
    assert kept == ([] if kind == "random" else [
        "Pairwise tests, Friedman tests and the rater-aware check: not computed, no pair of systems could be tested "
        "(all differences are zero: Wilcoxon undefined), so neither could the rater-aware check."])
