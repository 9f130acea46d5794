"""The report on a simulated study with known truth: right ranking, spammers flagged, self-contained HTML,
methods filled with the study's own numbers."""

from __future__ import annotations

import re

import pytest

from empeval.analysis.kinds.likert.report import write_report

META = {"name": "Simulated ED study", "pay_per_assignment": 1.5, "currency": "USD", "platform_fee": 0.2,
        "items_per_assignment": 11, "k": 3}


@pytest.fixture(scope="module")
def report(simulated_ratings, tmp_path_factory):
    out_dir = tmp_path_factory.mktemp("report")
    paths = write_report(simulated_ratings, out_dir, study_meta=META, n_boot=400)
    return paths, paths["markdown"].read_text(encoding="utf-8"), paths["html"].read_text(encoding="utf-8")


def _ranking_lines(markdown: str) -> dict[str, list[str]]:
    lines = re.findall(r"^- (\w+): (.+)$", markdown, flags=re.MULTILINE)
    return {criterion: re.findall(r"([\w-]+) \(\d\.\d\d\)", text) for criterion, text in lines
            if re.search(r"\(\d\.\d\d\)", text)}


def test_report_writes_markdown_html_figures_and_tables(report):
    paths, _, _ = report
    for key in ("markdown", "html", "figure_score_distributions", "figure_system_means", "table_pairwise_tests",
                "table_agreement", "table_rater_quality"):
        assert paths[key].exists() and paths[key].stat().st_size > 0, key
    assert paths["figure_score_distributions"].read_bytes().startswith(b"\x89PNG")


def test_report_ranks_the_systems_as_simulated(report, simulated):
    _, markdown, _ = report
    rankings = _ranking_lines(markdown)
    assert set(rankings) == {"empathy", "relevance", "fluency"}
    for criterion, order in rankings.items():
        assert order == simulated.true_ranking(criterion), criterion


def test_report_flags_the_spammers(report, simulated):
    _, markdown, _ = report
    assert f"{len(simulated.spammers)} of 15 annotators flagged, excluded from the main results" in markdown
    for annotator in simulated.spammers:
        assert re.search(rf"^- {annotator}: \S", markdown, flags=re.MULTILINE), annotator


def test_html_is_self_contained(report):
    _, _, html = report
    assert html.count("data:image/png;base64,") == 2
    assert not re.search(r"""(src|href)=["']?(https?:|//|[\w./-]+\.(png|css|js))""", html)
    assert "<script" not in html
    assert "<table>" in html and "Holm-Bonferroni" in html


def test_methods_paragraph_uses_the_studys_numbers(report, simulated_ratings, simulated):
    _, markdown, _ = report
    methods = markdown.split("## Methods", 1)[1]
    kept = simulated_ratings.loc[~simulated_ratings["annotator"].isin(list(simulated.spammers))]
    real = kept.loc[~kept["is_control"]]
    assert f"We collected {len(real)} ratings of {real['item'].nunique()} responses" in methods
    assert f"({real['context'].nunique()} dialogue contexts × 3 systems" in methods
    assert f"from {kept['annotator'].nunique()} annotators" in methods
    assert f"3 of 15 annotators were excluded with their {(len(simulated_ratings) - len(kept))} ratings" in methods
    assert "Holm-Bonferroni method over the 3 pairwise comparisons within each criterion" in methods
    assert "paid 1.50 USD per assignment of 11 items" in methods and "platform fee was 20%" in methods
    assert "Krippendorff's α, ordinal) was empathy 0." in methods


def test_paper_table_marks_significance_and_names_the_correction(report):
    _, markdown, _ = report
    table = markdown.split("| System |", 1)[1].split("\n\n", 1)[0]
    assert table.count("**") == 6  # the best system per criterion in bold
    assert "†" in table
    assert "Holm-Bonferroni correction over all pairs within each criterion" in markdown


def test_flagged_raters_can_be_kept(simulated_ratings, tmp_path):
    paths = write_report(simulated_ratings, tmp_path, exclude_flagged=False, n_boot=100, family="study")
    markdown = paths["markdown"].read_text(encoding="utf-8")
    assert "kept in the main results" in markdown and "were flagged but kept" in markdown
    assert "all pairwise tests of the study" in markdown
    assert "Pay per assignment was not recorded" in markdown


def test_untrusted_names_are_escaped(simulated_ratings, tmp_path):
    ratings = simulated_ratings.copy()
    ratings["system"] = ratings["system"].replace({"moel": "<script>alert(1)</script>"})
    paths = write_report(ratings, tmp_path, n_boot=50)
    html = paths["html"].read_text(encoding="utf-8")
    assert "<script>" not in html and "&lt;script&gt;" in html


def test_the_raw_export_is_accepted_as_it_comes(simulated, tmp_path):
    paths = write_report(simulated.export, tmp_path, n_boot=50)
    assert "We collected" in paths["markdown"].read_text(encoding="utf-8")


def test_a_small_two_system_study_without_controls_or_timing(tmp_path):
    from empeval.analysis.kinds.likert.load import tidy_from_export
    from empeval.analysis.simulate.likert import simulate_study

    study = simulate_study(seed=3, system_effects={"a": 0.8, "b": 0.0}, criteria=("empathy",), n_contexts=15,
                           controls_per_assignment=0, n_honest=6, n_random_clickers=0, n_straight_liners=0)
    ratings = tidy_from_export(study.export).assign(seconds_on_item=float("nan"))
    markdown = write_report(ratings, tmp_path, n_boot=50)["markdown"].read_text(encoding="utf-8")
    assert "Friedman needs three or more systems" in markdown
    assert "on 1 criterion (empathy)" in markdown
    assert "1 pairwise comparison within each criterion" in markdown
    assert _ranking_lines(markdown)["empathy"] == ["a", "b"]


def _with_one_late_assignment(ratings, simulated):
    honest = ratings.loc[~ratings["annotator"].isin(list(simulated.spammers))]
    assignment = sorted(honest["assignment"].unique())[0]
    return ratings.assign(late=ratings["assignment"] == assignment), assignment


def test_late_ratings_are_counted_and_analysed_by_default(simulated_ratings, simulated, tmp_path):
    ratings, _ = _with_one_late_assignment(simulated_ratings, simulated)
    n_late = int(ratings["late"].sum())
    markdown = write_report(ratings, tmp_path, n_boot=50)["markdown"].read_text(encoding="utf-8")
    sentence = (f"{n_late} ratings from 1 assignment (1 annotator) were submitted after the assignment had expired; "
                "they are analysed with the others.")
    summary, methods = markdown.split("## Results", 1)[0], markdown.split("## Methods", 1)[1]
    assert sentence in summary and sentence in methods


def test_late_ratings_can_be_left_out(simulated_ratings, simulated, tmp_path):
    ratings, _ = _with_one_late_assignment(simulated_ratings, simulated)
    kept = ratings.loc[~ratings["late"] & ~ratings["annotator"].isin(list(simulated.spammers))]
    markdown = write_report(ratings, tmp_path, n_boot=50, include_late=False)["markdown"].read_text(encoding="utf-8")
    methods = markdown.split("## Methods", 1)[1]
    assert "were submitted after the assignment had expired; they are left out of every analysis." in methods
    assert f"We collected {int((~kept['is_control']).sum())} ratings" in methods


def test_a_table_without_late_counts_every_rating_as_on_time(simulated_ratings, tmp_path):
    ratings = simulated_ratings.drop(columns=["late"])
    markdown = write_report(ratings, tmp_path, n_boot=50, include_late=False)["markdown"].read_text(encoding="utf-8")
    assert "None of the ratings reported here was submitted after its assignment had expired." in markdown
    assert "late" not in ratings.columns  # the caller's table is left as it was


def test_a_study_rated_only_late_has_nothing_to_report_without_late_ratings(simulated_ratings, tmp_path):
    with pytest.raises(ValueError, match="ratings were submitted late: nothing to report"):
        write_report(simulated_ratings.assign(late=True), tmp_path, include_late=False)
