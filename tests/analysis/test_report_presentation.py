"""The report as a reviewer reads it: criteria in the study's order, n per system, intervals as [low, high], the
narrowed pairwise table with its test variant stated once, one meaning of "conclusion changes", the reading of
alpha beside AC2, shared system order across figure panels and stacked Likert bars."""

from __future__ import annotations

import re

import numpy as np
import pandas as pd
import pytest

from empeval.analysis.kinds.likert.load import tidy_from_export
from empeval.analysis.kinds.likert.report import write_report
from empeval.analysis.report.plots import stacked_score_shares, system_means_plot, system_order
from empeval.analysis.report.tables import criteria_in_order, pairs_table, paper_table, wilcoxon_variants
from empeval.analysis.simulate.likert import simulate_study
from empeval.analysis.stats.agreement_reading import modal_share
from empeval.analysis.stats.conclusions import DEFINITION, conclusion_changes
from empeval.analysis.stats.rater_aware import rater_aware_check
from empeval.analysis.stats.significance import compare_pairs, system_means

STUDY_ORDER = ["relevance", "fluency", "empathy"]  # neither sorted nor the default: only the study file says so


@pytest.fixture(scope="module")
def small():
    study = simulate_study(n_contexts=12, n_honest=6, n_random_clickers=1, n_straight_liners=1, seed=4)
    return study, tidy_from_export(study.export)


@pytest.fixture(scope="module")
def report(small, tmp_path_factory):
    _, ratings = small
    paths = write_report(ratings, tmp_path_factory.mktemp("presentation"), n_boot=100,
                         study_meta={"name": "small", "criteria": STUDY_ORDER})
    return paths, paths["markdown"].read_text(encoding="utf-8")


def _section(markdown: str, heading: str) -> str:
    return markdown.split(f"\n{heading}\n", 1)[1].split("\n## ", 1)[0]


def _table_after(text: str, header_start: str) -> list[list[str]]:
    block = text.split(header_start, 1)[1].split("\n\n", 1)[0]
    lines = (header_start + block).splitlines()
    return [[cell.strip() for cell in line.strip("|").split(" | ")] for line in lines if not line.startswith("|---")]


def test_criteria_follow_the_study_files_order_not_the_alphabet(report):
    _, markdown = report
    main = _table_after(markdown, "| System |")
    assert main[0] == ["System", "n", "Relevance", "Fluency", "Empathy"]
    rankings = re.findall(r"^- (\w+): \w", _section(markdown, "## Results"), flags=re.MULTILINE)
    assert rankings == STUDY_ORDER
    assert _table_after(markdown, "| Coefficient |")[0] == ["Coefficient", "Relevance", "Fluency", "Empathy"]
    pairs = _table_after(markdown, "| Criterion | Pair (a vs b) | n |")
    assert list(dict.fromkeys(row[0] for row in pairs[1:])) == STUDY_ORDER
    methods = _section(markdown, "## Methods")
    assert "on 3 criteria (relevance, fluency, empathy)" in methods
    assert re.search(r"was relevance [\d.]+ \[[\d.]+, [\d.]+\]; fluency [\d.]+ \[[\d.]+, [\d.]+\]; empathy", methods)


def test_criteria_the_study_file_does_not_name_follow_sorted():
    assert criteria_in_order(["style", "fluency", "empathy", "clarity"], ["fluency", "relevance", "empathy"]) == [
        "fluency", "empathy", "clarity", "style"]
    assert criteria_in_order(["b", "a"], None) == ["a", "b"]


def test_main_table_gives_n_per_system_and_the_interval_as_low_high(small):
    _, ratings = small
    kept = ratings.loc[ratings["annotator"].isin(sorted(ratings["annotator"].unique())[:4])]
    means = system_means(kept, n_boot=100)
    table = paper_table(means, compare_pairs(kept, n_boot=100), criteria=["empathy"])
    real = kept.loc[~kept["is_control"] & (kept["criterion"] == "empathy")]
    for row in table.itertuples(index=False):
        own = real.loc[real["system"] == row.System]
        assert row.n == f"{own['item'].nunique()} ({len(own)})"
        entry = means.loc[(means["system"] == row.System) & (means["criterion"] == "empathy")].iloc[0]
        assert row.Empathy.strip("*").split(" †")[0] == (f"{entry['mean']:.2f} [{entry['ci_low']:.2f}, "
                                                         f"{entry['ci_high']:.2f}]")
    assert not table.apply(lambda column: column.str.contains("±")).any().any()


def test_an_asymmetric_interval_is_printed_as_it_is():
    means = pd.DataFrame([{"criterion": "empathy", "system": "gold", "mean": 4.5, "ci_low": 3.9, "ci_high": 4.6,
                           "n_items": 10, "n_ratings": 30}])
    table = paper_table(means, pd.DataFrame(columns=["criterion", "system_a", "system_b", "p_adj"]))
    assert table.loc[0, "Empathy"] == "**4.50 [3.90, 4.60]**"


def test_the_pairwise_table_is_narrow_and_states_its_test_variant_once(report, small):
    _, markdown = report
    section = markdown.split("### Pairwise comparisons", 1)[1].split("*Friedman", 1)[0]
    header = _table_after(section, "| Criterion |")[0]
    assert header == ["Criterion", "Pair (a vs b)", "n", "Δ mean (a−b)", "p adj.", "r (rank-biserial)", "d_z",
                      "sig."]
    _, ratings = small
    methods = set(compare_pairs(ratings, n_boot=0)["wilcoxon_method"])
    for method in methods:
        assert section.count(method) == 1, method  # in the caption, not on every row


def test_mixed_test_variants_name_the_pairs_of_the_rarer_ones():
    pairs = pd.DataFrame({"criterion": ["empathy"] * 3, "system_a": ["a", "a", "b"], "system_b": ["b", "c", "c"],
                          "wilcoxon_method": ["exact", "normal approx.", "normal approx."]})
    assert wilcoxon_variants(pairs) == "exact for empathy a vs b; normal approx. for the other 2 pairs"
    assert wilcoxon_variants(pairs.iloc[1:]) == "normal approx. for every pair"


def test_pairs_table_keeps_a_significant_pair_significant(small):
    _, ratings = small
    pairs = compare_pairs(ratings, n_boot=50)
    shown = pairs_table(pairs)
    assert (shown["sig."] == np.where(pairs["significant"], "yes", "no")).all()


def test_the_rater_aware_check_flags_exactly_the_pairs_whose_conclusion_changes(small):
    _, ratings = small
    raw = compare_pairs(ratings, n_boot=0)
    check = rater_aware_check(ratings, raw=raw, n_boot=0)
    by_rule = [conclusion_changes(r.mean_diff, r.p_adj, r.lmm_diff, r.lmm_p_adj, alpha=0.05)
               or conclusion_changes(r.mean_diff, r.p_adj, r.z_diff, r.z_p_adj, alpha=0.05)
               for r in check.itertuples()]
    assert list(check["flagged"]) == by_rule


def test_conclusion_changes_is_defined_once_and_used_in_one_section_only(report):
    _, markdown = report
    assert markdown.count(DEFINITION) == 1
    side = _section(markdown, "## With and without the flagged annotators")
    assert DEFINITION in side and "| conclusion changes |" in side
    assert markdown.count("conclusion changes") == side.count("conclusion changes")
    rater = markdown.split("### Rater-aware check", 1)[1].split("\n## ", 1)[0]
    assert "changes" not in rater and "| disagreement |" in rater
    assert "unchanged" not in _section(markdown, "## Methods")


def test_alpha_beside_ac2_is_read_next_to_the_agreement_table(report, small):
    _, markdown = report
    agreement = _section(markdown, "## Agreement")
    after_table = agreement.split("| Within-one agreement |", 1)[1].split("\n\n", 1)[1]
    assert after_table.startswith("Reading α beside AC2: here ordinal α is ")
    assert "Feinstein & Cicchetti 1990" in after_table and "Gwet 2008" in after_table
    paths, _ = report
    _, ratings = small
    quality = pd.read_csv(paths["table_rater_quality"])
    kept = ratings.loc[~ratings["annotator"].isin(quality.loc[quality["flagged"], "annotator"])]
    for criterion in STUDY_ORDER:
        counts = kept.loc[~kept["is_control"] & (kept["criterion"] == criterion), "score"].value_counts()
        assert modal_share(kept, criterion) == (int(counts.index[0]), counts.iloc[0] / counts.sum())
        assert f"{criterion} {counts.index[0]} ({counts.iloc[0] / counts.sum():.0%})" in after_table


def _top_down(axis) -> list[str]:
    """The y tick labels of a panel from the top of the panel down."""
    ticks = sorted(zip(axis.get_yticks(), (t.get_text() for t in axis.get_yticklabels()), strict=True), reverse=True)
    return [label for _, label in ticks]


def test_every_panel_of_the_means_figure_lists_the_systems_in_one_order(small):
    _, ratings = small
    means = system_means(ratings, n_boot=50)
    # Make the per-criterion orders disagree, so that sorting each panel by its own means would show it.
    lifted = (means["criterion"] == "fluency") & (means["system"] == "baseline")
    means.loc[lifted, ["mean", "ci_low", "ci_high"]] += 3.0
    order = system_order(means)
    overall = means.groupby("system")["mean"].mean().sort_values(ascending=False)
    assert order == list(overall.index)
    figure = system_means_plot(means, criteria=STUDY_ORDER)
    assert _top_down(figure.axes[0]) == order  # the panels share their y axis: the first one carries the labels
    position = {label: y for y, label in zip(figure.axes[0].get_yticks(),
                                             (t.get_text() for t in figure.axes[0].get_yticklabels()), strict=True)}
    for axis, criterion in zip(figure.axes, STUDY_ORDER, strict=True):
        points = dict(zip(*axis.lines[0].get_data(), strict=True))  # mean -> row of each system's point
        for entry in means.loc[means["criterion"] == criterion].itertuples():
            assert points[entry.mean] == position[entry.system], (criterion, entry.system)
    assert [axis.get_title() for axis in figure.axes] == [c.capitalize() for c in STUDY_ORDER]


def test_stacked_bars_split_each_system_into_its_share_of_each_score(small):
    _, ratings = small
    order = ["moel", "gold", "baseline"]
    figure = stacked_score_shares(ratings, criteria=["empathy", "fluency"], systems=order)
    for axis, criterion in zip(figure.axes, ["empathy", "fluency"], strict=False):
        real = ratings.loc[~ratings["is_control"] & (ratings["criterion"] == criterion)]
        assert [label.split(" (")[0] for label in _top_down(axis)] == order
        assert len(axis.containers) == 5  # one per score, 1 to 5
        for row, system in enumerate(order):
            scores = real.loc[real["system"] == system, "score"]
            widths = [container.patches[row].get_width() for container in axis.containers]
            expected = [float((scores == value).mean()) for value in range(1, 6)]
            assert widths == pytest.approx(expected)
            assert sum(widths) == pytest.approx(1.0)
            lefts = [container.patches[row].get_x() for container in axis.containers]
            assert lefts == pytest.approx(np.concatenate([[0.0], np.cumsum(expected)[:-1]]))
