"""`empeval report STUDY` on small or degenerate studies in a real SQLite store: a one-system study, a pilot where
every annotator is flagged, a 3-item study and a study with no ratings. Each gives a report that says what
could not be computed and why (or, with no ratings at all, a clear error exiting 2), never a traceback.

Ratings go in through the store's own hand-out and submission functions (no browser, no HTTP)."""
from __future__ import annotations

import re

import pytest
from click.testing import CliRunner
from sqlalchemy import select
from sqlalchemy.orm import Session

from empeval.cli import cli
from empeval.server.annotation.annotators import invite
from empeval.server.annotation.handout import next_assignment
from empeval.server.annotation.submission import submit_assignment
from empeval.server.store.kinds.likert import AssignmentItem
from tests.annotation.conftest import CONTROLS, add_responses, make_study, new_submission_id

CRITERIA = ("empathy", "relevance", "fluency")
SQLITE_ONLY = pytest.mark.parametrize("store_url", ["sqlite"], indirect=True)


def _rate_all(engine, study: str, names: list[str], *, seconds: float, score=lambda item, criterion, rater: 3,
              comment: str | None = None) -> int:
    """Every annotator in names takes and submits assignments of study until none is left; returns how many
    assignments were submitted."""
    submitted = 0
    for rater, name in enumerate(names):
        annotator, _ = invite(engine, name, study)
        while (assignment_id := next_assignment(engine, study, annotator.id)) is not None:
            with Session(engine) as session:
                items = session.scalars(select(AssignmentItem.item_id)
                                        .where(AssignmentItem.assignment_id == assignment_id)
                                        .order_by(AssignmentItem.position)).all()
            body = {"submission_id": new_submission_id(),
                    "ratings": [{"item_id": item, "seconds": seconds,
                                 "scores": {c: score(item, c, rater) for c in CRITERIA}} for item in items]}
            if comment is not None:
                body["comment"] = comment
            submit_assignment(engine, assignment_id, annotator.id, body)
            submitted += 1
    return submitted


def _report(engine, study: str, out, *extra: str):
    url = engine.url.render_as_string(hide_password=False)
    return CliRunner().invoke(cli, ["--database-url", url, "report", study, "--out", str(out), "--n-boot", "100",
                                    *extra])


def _section(markdown: str, heading: str) -> str:
    return markdown.split(f"## {heading}\n", 1)[1].split("\n## ", 1)[0]


def _varied(item, criterion, rater) -> int:
    return 1 + (item * 7 + rater * 3 + len(criterion)) % 5


@pytest.fixture
def engine(sample_engine):
    return sample_engine


@SQLITE_ONLY
def test_a_one_system_study_reports_its_means_and_says_no_comparison_was_possible(engine, tmp_path):
    add_responses(engine, ["gold"], 6)
    make_study(engine, name="solo", count=6, k=2, per_assignment=3, systems=["gold"], controls=[])
    assert _rate_all(engine, "solo", ["ann", "bob", "cy"], seconds=12.0, score=_varied) > 0
    result = _report(engine, "solo", tmp_path / "r", "--latex")
    assert result.exit_code == 0, result.output
    assert result.exception is None
    markdown = (tmp_path / "r" / "report.md").read_text()
    gaps = _section(markdown, "What could not be computed")
    assert ("Pairwise tests, Friedman tests and the rater-aware check: not computed, only one system (Gold) has "
            "ratings") in gaps  # systems.toml's display name
    assert "| Gold | 6 (" in markdown  # the mean is there, with its n
    rater_check = markdown.split("### Rater-aware check", 1)[1].split("\n## ", 1)[0]
    assert "Not computed: only one system (Gold) has ratings" in rater_check
    assert (tmp_path / "r" / "latex" / "main_results.tex").exists()


@SQLITE_ONLY
def test_a_pilot_where_every_annotator_is_flagged_says_so_and_shows_why(engine, tmp_path):
    add_responses(engine, ["gold", "moel", *CONTROLS], 6)
    make_study(engine, name="pilot", count=6, k=2, per_assignment=4, systems=["gold", "moel"])
    # Two seconds an item: every annotator is implausibly fast, so the quality checks flag them all.
    names = ["ann", "bob", "cy", "dee", "eve", "fay"]
    assert _rate_all(engine, "pilot", names, seconds=2.0, score=_varied) > 0
    result = _report(engine, "pilot", tmp_path / "r")
    assert result.exit_code == 0, result.output
    markdown = (tmp_path / "r" / "report.md").read_text()
    gaps = _section(markdown, "What could not be computed")
    assert (f"System means, pairwise tests, agreement and figures: not computed, every annotator who rated a real "
            f"response ({len(names)} of {len(names)} annotators) was flagged by the quality checks, and flagged "
            "annotators are excluded (see Rater quality for why). Keep them (empeval report --keep-flagged)") in gaps
    assert "gaps:" in result.output and "--keep-flagged" in result.output  # the terminal says so too
    quality = _section(markdown, "Rater quality")
    flagged = re.findall(r"^- \S+: median 2\.0 s per item \(< 5 s\)", quality, flags=re.MULTILINE)
    assert f"{len(flagged)} of {len(flagged)} annotators flagged, excluded from the main results" in quality
    assert "Not computed:" in _section(markdown, "Results")
    kept = _report(engine, "pilot", tmp_path / "kept", "--keep-flagged")
    assert kept.exit_code == 0, kept.output
    assert "What could not be computed" not in (tmp_path / "kept" / "report.md").read_text()


@SQLITE_ONLY
def test_a_three_item_study_reports_means_and_says_no_pair_could_be_tested(engine, tmp_path):
    add_responses(engine, ["sys-a", "sys-b", "sys-c"], 1)
    make_study(engine, name="tiny", count=1, k=2, per_assignment=3, systems=["sys-a", "sys-b", "sys-c"],
               controls=[])
    # An annotator sees a context once: one item each, so six annotators give the three items two ratings each.
    assert _rate_all(engine, "tiny", ["ann", "bob", "cy", "dee", "eve", "fay"], seconds=12.0, score=_varied) == 6
    result = _report(engine, "tiny", tmp_path / "r")
    assert result.exit_code == 0, result.output
    markdown = (tmp_path / "r" / "report.md").read_text()
    gaps = _section(markdown, "What could not be computed")
    assert "no pair of systems could be tested (fewer than two contexts rated for both systems)" in gaps
    assert "18 ratings of 3 items (1 dialogue context × 3 systems)" in markdown
    for system in ("sys-a", "sys-b", "sys-c"):
        assert f"| {system} | 1 (2) |" in markdown


@SQLITE_ONLY
def test_a_study_without_ratings_exits_2_saying_what_to_do(engine, tmp_path):
    add_responses(engine, ["gold", "moel"], 4)
    make_study(engine, name="empty", count=4, k=2, per_assignment=4, systems=["gold", "moel"], controls=[])
    result = _report(engine, "empty", tmp_path / "r")
    assert result.exit_code == 2
    assert "study 'empty' has no ratings yet: nothing to report" in result.output
    assert "empeval annotators invite NAME --study empty" in result.output
    assert "Traceback" not in result.output and not (tmp_path / "r" / "report.md").exists()


@SQLITE_ONLY
def test_a_study_reports_its_criteria_in_the_study_files_order_and_how_raters_were_recruited(engine, tmp_path):
    from empeval.tasks.study_create import create_study
    from empeval.tasks.study_file import parse_study

    add_responses(engine, ["gold", "moel"], 4)
    order = [{"key": "fluency", "label": "Fluency", "question": "Could you understand it?"},
             {"key": "empathy", "label": "Empathy", "question": "Did it understand the feelings?"},
             {"key": "relevance", "label": "Relevance", "question": "Was it on-topic?"}]
    create_study(engine, parse_study({
        "name": "turk", "seed": 1, "contexts": {"split": "test", "count": 4},
        "systems": {"names": ["gold", "moel"], "controls": []}, "criteria": order,
        "design": {"ratings_per_response": 2, "items_per_assignment": 4, "control_rate": 0.0},
        "pay": {"per_assignment": 0.8, "currency": "USD", "platform_fee": 0.2},
        "recruitment": {"platform": "mturk"}}))
    assert _rate_all(engine, "turk", ["ann", "bob", "cy", "dee"], seconds=12.0, score=_varied) > 0
    result = _report(engine, "turk", tmp_path / "r")
    assert result.exit_code == 0, result.output
    markdown = (tmp_path / "r" / "report.md").read_text()
    assert "| System | n | Fluency | Empathy | Relevance |" in markdown
    summary = [line.split()[0] for line in result.output.splitlines() if line.startswith("  ")]
    assert summary == ["fluency", "empathy", "relevance"], result.output  # the terminal lines too
    methods = _section(markdown, "Methods")
    assert ("Annotators were recruited on Amazon Mechanical Turk (MTurk) with a reward of 0.80 USD per assignment "
            "of 4 items") in methods and "MTurk's fee was 20% on top." in methods


@SQLITE_ONLY
def test_a_local_study_with_pay_states_no_platform_fee(engine, tmp_path):
    add_responses(engine, ["gold", "moel"], 4)
    make_study(engine, name="local", count=4, k=2, per_assignment=4, systems=["gold", "moel"], controls=[])
    assert _rate_all(engine, "local", ["ann", "bob", "cy", "dee"], seconds=12.0, score=_varied) > 0
    result = _report(engine, "local", tmp_path / "r")
    assert result.exit_code == 0, result.output
    methods = _section((tmp_path / "r" / "report.md").read_text(), "Methods")
    assert "Annotators were volunteers recruited by the researchers, paid 0.50 USD per assignment" in methods
    assert "fee" not in methods
