"""The judgment table of a pairwise study, against rows written out by hand: sides as shown (the placement's
shown_left), the system preferred, ties, controls with their target only, late submissions; the contract's columns
in its order (a drift test against analysis.kinds.pairwise.schema, until the exporter may import it); and `empeval
export`
writing it for a pairwise study while a Likert study still gets its ratings."""
from __future__ import annotations

import csv
import io
import json

import pytest
from click.testing import CliRunner
from sqlalchemy import update
from sqlalchemy.orm import Session

from empeval.analysis.kinds.pairwise.schema import EXPORT_COLUMNS, validate_judgments
from empeval.cli import cli
from empeval.server.annotation.annotators import invite
from empeval.server.annotation.export import export_rows, rows_to_csv
from empeval.server.store.kinds.pairwise import AssignmentPair, Choice, PairItem
from empeval.server.store.models import Assignment
from empeval.server.store.queries import now_utc
from tests.annotation.conftest import make_study
from tests.annotation.pairwise_fixtures import AB_CRITERIA, assignment_ids, give, make_ab_study, placements


@pytest.fixture
def judged(sample_engine):
    """A pairwise study whose first assignment rita judged: its first pair shown the stored way round (a on the
    left, 7.5 s on it), its second swapped (b on the left), the second pair made a control built to lose on relevance.
    Choices: first pair left, right, tie; second pair right, right, left; the others left.
    (engine, assignment id, placements)."""
    make_ab_study(sample_engine, control_rate=0.0)
    rita, _ = invite(sample_engine, "rita", "ab")
    assignment_id = assignment_ids(sample_engine, "ab")[0]
    first, second = placements(sample_engine, assignment_id)[:2]
    with Session(sample_engine) as session, session.begin():
        for placement, side in ((first, "a"), (second, "b")):
            session.execute(update(AssignmentPair).where(AssignmentPair.assignment_id == assignment_id,
                                                         AssignmentPair.pair_item_id == placement.pair_item_id)
                            .values(shown_left=side, seconds_on_item=7.5 if side == "a" else None))
        session.execute(update(PairItem).where(PairItem.id == second.pair_item_id)
                        .values(is_control=True, control_target="relevance", control_side="a"))
    give(sample_engine, assignment_id, rita.id)
    answers = {first.pair_item_id: ("left", "right", "tie"), second.pair_item_id: ("right", "right", "left")}
    with Session(sample_engine) as session, session.begin():  # stored as a submission stores them (screen sides)
        session.execute(update(Assignment).where(Assignment.id == assignment_id)
                        .values(status="submitted", submission_id="export-0001", submitted_at=now_utc()))
        session.add_all(Choice(assignment_id=assignment_id, pair_item_id=p.pair_item_id, annotator_id=rita.id,
                               criterion=criterion, choice=side, submission_id="export-0001")
                        for p in placements(sample_engine, assignment_id)
                        for criterion, side in zip(AB_CRITERIA, answers.get(p.pair_item_id, ("left",) * 3),
                                                   strict=True))
    return sample_engine, assignment_id, placements(sample_engine, assignment_id)


def test_rows_name_the_sides_as_shown_and_the_system_preferred(judged):
    engine, assignment_id, placed = judged
    first, second = placed[:2]
    a1, b1, a2, b2 = first.system_a, first.system_b, second.system_a, second.system_b
    rows = export_rows(engine, "ab")
    annotator = rows[0]["annotator"]
    assert annotator != "rita" and len({r["annotator"] for r in rows}) == 1  # the pseudonym, never the name

    def row(placement, criterion, left, right, choice, preferred, control_target=None):
        return {"study": "ab", "assignment_id": assignment_id, "annotator": annotator,
                "context_id": placement.context_id, "criterion": criterion, "pair": "|".join(sorted((a1, b1)))
                if placement is first else "|".join(sorted((a2, b2))), "system_left": left, "system_right": right,
                "choice": choice, "preferred": preferred, "position": placement.position,
                "is_control": control_target is not None, "control_target": control_target, "late": False,
                "item_comment": None, "seconds_on_item": 7.5 if placement is first else None}

    by_key = {(r["position"], r["criterion"]): r for r in rows}
    assert [by_key[(first.position, c)] for c in ("empathy", "fluency", "relevance")] == [
        row(first, "empathy", a1, b1, "left", a1),
        row(first, "fluency", a1, b1, "tie", "tie"),
        row(first, "relevance", a1, b1, "right", b1),
    ]
    assert [by_key[(second.position, c)] for c in ("empathy", "fluency", "relevance")] == [
        row(second, "empathy", b2, a2, "right", a2, "relevance"),
        row(second, "fluency", b2, a2, "left", b2, "relevance"),
        row(second, "relevance", b2, a2, "right", a2, "relevance"),
    ]
    assert len(rows) == 3 * len(placed)
    assert [(r["position"], r["criterion"]) for r in rows] == sorted((r["position"], r["criterion"]) for r in rows)
    assert not any(r["is_control"] for r in rows if r["position"] != second.position)


def test_the_export_passes_the_contracts_validator_as_records_and_as_csv(judged):
    engine, _, placed = judged
    rows = export_rows(engine, "ab")
    from_records = validate_judgments(rows)
    text = rows_to_csv(rows, EXPORT_COLUMNS)
    assert text.splitlines()[0] == ",".join(EXPORT_COLUMNS)
    from_csv = validate_judgments(list(csv.DictReader(io.StringIO(text))), source="export.csv")
    assert from_csv.equals(from_records) and len(from_csv) == 3 * len(placed)


def test_a_late_submission_is_flagged_in_every_row(judged):
    engine, assignment_id, _ = judged
    with Session(engine) as session, session.begin():
        session.execute(update(Assignment).where(Assignment.id == assignment_id).values(late=True))
    assert {r["late"] for r in export_rows(engine, "ab")} == {True}


def test_empeval_export_writes_the_judgment_table_for_a_pairwise_study_and_ratings_for_a_likert_one(judged,
                                                                                                     tmp_path):
    engine, _, placed = judged
    make_study(engine, name="pilot", count=4, k=1, per_assignment=4, controls=[])
    url = engine.url.render_as_string(hide_password=False)
    runner = CliRunner()
    result = runner.invoke(cli, ["--database-url", url, "export", "ab", "--format", "csv"])
    assert result.exit_code == 0, result.output
    assert result.output == rows_to_csv(export_rows(engine, "ab"), EXPORT_COLUMNS)
    out = tmp_path / "ab.jsonl"
    result = runner.invoke(cli, ["--database-url", url, "export", "ab", "--format", "jsonl", "--out", str(out)])
    assert result.exit_code == 0 and f"{3 * len(placed)} judgments written to {out}" in result.output
    assert [json.loads(line) for line in out.read_text().splitlines()] == export_rows(engine, "ab")
    likert = runner.invoke(cli, ["--database-url", url, "export", "pilot", "--format", "csv"])
    assert likert.exit_code == 0 and likert.output.startswith("study,item_id,") and export_rows(engine, "pilot") == []
