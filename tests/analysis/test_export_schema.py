"""The export contract is defined once (analysis.kinds.likert.schema): what the store writes and what the loader reads
both follow it, and these tests fail the day either drifts from it."""

from __future__ import annotations

import uuid
from datetime import timedelta

import pandas as pd
import pytest

from empeval.analysis.kinds.likert.load import ADDED_LATER, TIDY_COLUMNS, ExportError, read_export, tidy_from_export
from empeval.analysis.kinds.likert.schema import EXPORT_COLUMNS, EXPORT_SCHEMA
from empeval.server.annotation.annotators import invite
from empeval.server.annotation.export import export_rows, rows_to_csv, rows_to_jsonl
from empeval.server.annotation.handout import assignment_payload, next_assignment
from empeval.server.annotation.submission import submit_assignment
from empeval.server.datasets.ed_csv import parse_ed_csv
from empeval.server.datasets.importer import import_dialogues
from empeval.server.store import make_engine, upgrade
from empeval.server.store.queries import now_utc
from tests.annotation.conftest import add_responses, make_study
from tests.conftest import SAMPLE_ED

SYSTEMS = ["sys-a", "sys-b"]
CONTROLS = ["control-generic"]


def _submit(engine, annotator_id: int, *, minutes_after_start: float) -> int:
    """Claim the next assignment and submit every item, `minutes_after_start` after claiming it."""
    start = now_utc()
    assignment_id = next_assignment(engine, "pilot", annotator_id, now=start)
    assert assignment_id is not None
    items = assignment_payload(engine, assignment_id)["items"]
    ratings = [{"item_id": item["item_id"], "scores": {"empathy": 4, "relevance": 3, "fluency": 5}, "seconds": 7.5}
               for item in items]
    submit_assignment(engine, assignment_id, annotator_id,
                      {"submission_id": uuid.uuid4().hex, "ratings": ratings},
                      now=start + timedelta(minutes=minutes_after_start))
    return assignment_id


@pytest.fixture(scope="module")
def rated_study(tmp_path_factory):
    """A tiny study in a SQLite file: one assignment submitted on time, one after it had expired."""
    engine = make_engine(f"sqlite:///{tmp_path_factory.mktemp('store') / 'store.db'}")
    upgrade(engine)
    import_dialogues(engine, parse_ed_csv(SAMPLE_ED / "test.csv", "test"), dataset="empatheticdialogues")
    add_responses(engine, SYSTEMS + CONTROLS, 6)
    make_study(engine, count=4, k=1, per_assignment=4, control_rate=0.2, minutes=30, systems=SYSTEMS,
               controls=CONTROLS)
    on_time, _ = invite(engine, "on-time", "pilot")
    late, _ = invite(engine, "late", "pilot")
    _submit(engine, on_time.id, minutes_after_start=5)
    _submit(engine, late.id, minutes_after_start=45)
    yield engine
    engine.dispose()


def test_the_store_writes_exactly_the_export_columns(rated_study):
    rows = export_rows(rated_study, "pilot")
    assert rows, "the study has ratings"
    for row in rows:
        assert tuple(row) == EXPORT_COLUMNS  # same names, same order, nothing more


def test_csv_and_jsonl_from_the_store_read_back_with_late_ratings_kept(rated_study, tmp_path):
    rows = export_rows(rated_study, "pilot")
    csv_path, jsonl_path = tmp_path / "pilot.csv", tmp_path / "pilot.jsonl"
    csv_path.write_text(rows_to_csv(rows, EXPORT_COLUMNS), encoding="utf-8")
    jsonl_path.write_text(rows_to_jsonl(rows), encoding="utf-8")
    assert csv_path.read_text(encoding="utf-8").splitlines()[0].split(",") == list(EXPORT_COLUMNS)
    ratings = read_export(csv_path)
    assert list(ratings.columns) == list(TIDY_COLUMNS)
    assert ratings["late"].dtype == bool
    assert ratings["late"].tolist() == [bool(row["late"]) for row in rows]
    assert ratings["late"].any() and not ratings["late"].all()  # one assignment of each kind
    assert ratings.groupby("assignment")["late"].nunique().eq(1).all()  # late is a property of the assignment
    pd.testing.assert_frame_equal(read_export(jsonl_path), ratings)


def test_the_tidy_table_has_one_column_per_contract_column_in_order():
    renamed = {"item_id": "item", "context_id": "context", "assignment_id": "assignment"}
    assert TIDY_COLUMNS == tuple(renamed.get(c, c) for c in EXPORT_COLUMNS)
    assert "late" in TIDY_COLUMNS
    assert len({c.name for c in EXPORT_SCHEMA}) == len(EXPORT_SCHEMA)


def _one_row_of_each_column() -> dict[str, object]:
    values = {"text": "x", "integer": "1", "boolean": "false", "timestamp": "2024-05-01T09:00:00Z",
              "number": "12.5"}
    return {column.name: values[column.kind] for column in EXPORT_SCHEMA}


def test_the_loader_accepts_exactly_the_schema():
    ratings = tidy_from_export([_one_row_of_each_column()])
    assert list(ratings.columns) == list(TIDY_COLUMNS) and len(ratings) == 1


@pytest.mark.parametrize("column", [c for c in EXPORT_COLUMNS if c not in ADDED_LATER])
def test_the_loader_names_a_missing_column(column):
    row = _one_row_of_each_column()
    del row[column]
    with pytest.raises(ExportError, match=f"missing column\\(s\\) '{column}'"):
        tidy_from_export([row])


def test_an_export_from_before_late_existed_reads_as_on_time():
    row = _one_row_of_each_column()
    del row["late"]
    assert tidy_from_export([row, {**row, "annotator": "y"}])["late"].tolist() == [False, False]


def test_late_must_be_a_boolean_and_an_empty_cell_is_on_time():
    row = _one_row_of_each_column()
    assert tidy_from_export([{**row, "late": ""}])["late"].tolist() == [False]
    assert tidy_from_export([{**row, "late": True}])["late"].tolist() == [True]
    with pytest.raises(ExportError, match="row 1 has late 'soon'; expected true or false"):
        tidy_from_export([{**row, "late": "soon"}])


def test_only_optional_columns_are_implied_for_older_exports():
    required = {column.name for column in EXPORT_SCHEMA if column.required}
    assert set(ADDED_LATER) <= {column.name for column in EXPORT_SCHEMA} - required


def test_an_export_from_before_comment_existed_reads_as_without_comments():
    row = _one_row_of_each_column()
    del row["comment"]
    assert tidy_from_export([row])["comment"].isna().all()


def test_the_comment_is_repeated_on_every_row_of_its_assignment_and_reads_back(tmp_path):
    engine = make_engine(f"sqlite:///{tmp_path / 'store.db'}")
    upgrade(engine)
    import_dialogues(engine, parse_ed_csv(SAMPLE_ED / "test.csv", "test"), dataset="empatheticdialogues")
    add_responses(engine, SYSTEMS, 6)
    make_study(engine, count=4, k=1, per_assignment=4, control_rate=0.0, systems=SYSTEMS, controls=[])
    said, _ = invite(engine, "said", "pilot")
    silent, _ = invite(engine, "silent", "pilot")
    for annotator, comment in ((said, 'Two replies were cut off, "mid-sentence",\nby the look of it.'),
                               (silent, None)):
        assignment_id = next_assignment(engine, "pilot", annotator.id)
        items = assignment_payload(engine, assignment_id)["items"]
        body = {"submission_id": uuid.uuid4().hex, "comment": comment, "ratings": [
            {"item_id": item["item_id"], "scores": {"empathy": 4, "relevance": 3, "fluency": 5}} for item in items]}
        submit_assignment(engine, assignment_id, annotator.id, body)
    rows = export_rows(engine, "pilot")
    by_annotator = {row["annotator"]: set() for row in rows}
    for row in rows:
        by_annotator[row["annotator"]].add(row["comment"])
    assert by_annotator == {said.pseudonym: {'Two replies were cut off, "mid-sentence",\nby the look of it.'},
                            silent.pseudonym: {None}}
    csv_path = tmp_path / "pilot.csv"
    csv_path.write_text(rows_to_csv(rows, EXPORT_COLUMNS), encoding="utf-8")
    ratings = read_export(csv_path)
    comments = ratings.groupby("annotator")["comment"].agg(lambda c: set(c.dropna()))
    assert comments[said.pseudonym] == {'Two replies were cut off, "mid-sentence",\nby the look of it.'}
    assert comments[silent.pseudonym] == set()
    engine.dispose()
