"""The annotators' comments in the report (from the export's optional `comment` column: once per assignment,
escaped), and the methods paragraph's sentence on how raters were recruited and paid, per platform."""

from __future__ import annotations

import pandas as pd
import pytest
from click.testing import CliRunner

from empeval.analysis.kinds.likert.load import tidy_from_export
from empeval.analysis.kinds.likert.report import write_report
from empeval.analysis.report.comments import assignment_comments
from empeval.analysis.report.recruitment import recruitment_sentence
from empeval.analysis.simulate.likert import simulate_study
from empeval.cli import cli

HOSTILE = "<script>alert(1)</script> **loud** [click](http://x.test) | pipe\nsecond line"


@pytest.fixture(scope="module")
def commented_export():
    """A small export with the `comment` column: two assignments commented (one with hostile text), the others
    with an empty cell."""
    export = simulate_study(n_contexts=8, n_honest=4, n_random_clickers=0, n_straight_liners=0, seed=6).export.copy()
    assignments = sorted(export["assignment_id"].unique())
    texts = {assignments[0]: "The second reply was cut off.", assignments[1]: HOSTILE}
    export["comment"] = export["assignment_id"].map(texts).fillna("")
    return export, texts


def test_comments_are_listed_once_per_assignment_with_their_annotator(commented_export, tmp_path):
    export, texts = commented_export
    markdown = write_report(export, tmp_path, n_boot=50)["markdown"].read_text(encoding="utf-8")
    section = markdown.split("## Comments\n", 1)[1].split("\n## ", 1)[0]
    bullets = [line for line in section.splitlines() if line.startswith("- ")]
    assert len(bullets) == 2 and "2 comments left on assignments" in section
    first = min(texts)
    annotator = export.loc[export["assignment_id"] == first, "annotator"].iloc[0]
    assert f"- {annotator}, assignment {first}: The second reply was cut off." in bullets


def test_a_comment_cannot_inject_markup_in_markdown_or_html(commented_export, tmp_path):
    export, _ = commented_export
    paths = write_report(export, tmp_path, n_boot=50)
    markdown, html = paths["markdown"].read_text(encoding="utf-8"), paths["html"].read_text(encoding="utf-8")
    line = next(line for line in markdown.splitlines() if "alert(1)" in line)
    assert r"\<script>" in line and r"\*\*loud\*\*" in line and r"\](http" in line and r"\| pipe" in line
    assert line.endswith("pipe second line")  # one line: a newline in a comment cannot end the list
    assert "<script>alert" not in html and "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert "<strong>loud</strong>" not in html and "**loud**" in html


def test_no_comments_section_without_the_column_or_without_a_comment(commented_export, tmp_path):
    export, _ = commented_export
    for name, frame in {"absent": export.drop(columns="comment"), "empty": export.assign(comment=" ")}.items():
        markdown = write_report(frame, tmp_path / name, n_boot=50)["markdown"].read_text(encoding="utf-8")
        assert "## Comments" not in markdown, name


def test_assignment_comments_fold_whitespace_and_sort_assignments_by_number():
    rows = pd.DataFrame({"annotator": ["b", "a", "a", "a"], "assignment": ["10", "2", "2", "9"],
                         "comment": ["late  again", "  fine\n\nthanks ", "  fine\n\nthanks ", None]})
    assert assignment_comments(rows).to_dict("records") == [
        {"annotator": "a", "assignment": "2", "comment": "fine thanks"},
        {"annotator": "b", "assignment": "10", "comment": "late again"}]


def test_the_report_command_lists_the_comments_of_an_export_file(commented_export, tmp_path):
    export, _ = commented_export
    path = tmp_path / "pilot.csv"
    export.to_csv(path, index=False)
    result = CliRunner().invoke(cli, ["report", "pilot", "--export", str(path), "--out", str(tmp_path / "r")])
    assert result.exit_code == 0, result.output
    assert "The second reply was cut off." in (tmp_path / "r" / "report.md").read_text(encoding="utf-8")


def test_a_tidy_table_with_comments_is_reported_the_same(commented_export, tmp_path):
    export, _ = commented_export
    tidy = tidy_from_export(export)
    if "comment" not in tidy.columns:  # the contract gains the column in another change
        tidy["comment"] = export["comment"].to_numpy()
    markdown = write_report(tidy, tmp_path, n_boot=50)["markdown"].read_text(encoding="utf-8")
    assert "The second reply was cut off." in markdown


PAY = {"pay_per_assignment": 1.5, "currency": "GBP", "platform_fee": 0.33, "items_per_assignment": 10}


@pytest.mark.parametrize(("meta", "expected"), [
    ({"platform": "local"}, "Annotators were volunteers recruited by the researchers and were not paid."),
    ({"platform": "local", "pay_per_assignment": 0.0, "platform_fee": 0.2},
     "Annotators were volunteers recruited by the researchers and were not paid."),
    ({**PAY, "platform": "local"},
     "Annotators were volunteers recruited by the researchers, paid 1.50 GBP per assignment of 10 items (0.150 GBP "
     "per item), about 54.00 GBP per hour at the median 10 s per item."),
    ({**PAY, "platform": "prolific"},
     "Annotators were recruited on Prolific and paid 1.50 GBP per assignment of 10 items (0.150 GBP per item), "
     "about 54.00 GBP per hour at the median 10 s per item."),
    ({"platform": "prolific"}, "Annotators were recruited on Prolific; their pay was not recorded for this report."),
    ({**PAY, "platform": "mturk"},
     "Annotators were recruited on Amazon Mechanical Turk (MTurk) with a reward of 1.50 GBP per assignment of 10 "
     "items (0.150 GBP per item), about 54.00 GBP per hour at the median 10 s per item; MTurk's fee was 33% on top."),
    ({}, "Pay per assignment was not recorded for this report."),
])
def test_the_methods_say_how_raters_were_recruited_and_paid(meta, expected):
    assert recruitment_sentence(meta, median_seconds=10.0) == expected


def test_a_local_study_never_states_a_platform_fee():
    text = recruitment_sentence({**PAY, "platform": "local"}, median_seconds=10.0)
    assert "fee" not in text and "platform" not in text
