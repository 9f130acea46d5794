"""CSV exports are safe to open in a spreadsheet and read back exactly (issue 29, finding 5): free text a
spreadsheet would run as a formula (= + - @ TAB CR first) is written behind a single quote, as OWASP recommends,
every cell holding a line break is quoted, and our own readers (`empeval report --export`, read_export, every kind's
reader) take the quote off again, so the statistics and the report see the text as the rater wrote it."""
from __future__ import annotations

import csv
import io
from pathlib import Path

import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import update

from empeval.analysis.kinds.acute.schema import ACUTE_COLUMNS, acute_rows, read_acute
from empeval.analysis.kinds.chat.schema import TURN_COLUMNS, read_chat_file
from empeval.analysis.kinds.csv_cells import FORMULA_STARTS, neutralise, read_csv_table, restore, write_csv
from empeval.analysis.report.study import export_kind
from empeval.server.annotation.annotators import invite
from empeval.server.annotation.export import export_text, rows_to_csv
from empeval.server.store import make_engine, unit_of_work
from empeval.server.store.models import Assignment
from tests.annotation.conftest import add_responses, make_study
from tests.annotation.researcher_helpers import cli_run, work

SYSTEMS = ["sys-a", "sys-b"]
FORMULAS = ["=1+1", "+SUM(A1:A9)", "-2+3", "@cmd", "\t=1+1", "\r=1+1", '=HYPERLINK("http://x.test","click")']
# What the store can hold (no NUL, no lone surrogate): anything else a rater may type.
STORABLE_TEXT = st.text(st.characters(exclude_categories=("Cs",), exclude_characters="\x00"), max_size=40)
# Text leaning on the characters that matter here, so that the hard cases come up in every run.
TRICKY_TEXT = st.lists(st.sampled_from([*FORMULA_STARTS, "'", '"', ",", "\n", "\r\n", " ", "x", "é", "\u2028"]),
                       max_size=12).map("".join)
SOME_TEXT = st.one_of(TRICKY_TEXT, STORABLE_TEXT)


@pytest.fixture(scope="module")
def commented_study(tmp_path_factory, sample_templates):
    """A Likert study with three raters' submitted assignments, the first with a comment (rewritten per test)."""
    folder = tmp_path_factory.mktemp("formula-cells")
    url = f"sqlite:///{folder / 'store.db'}"
    sample_templates.fill(url)
    engine = make_engine(url)
    add_responses(engine, SYSTEMS, 8)
    make_study(engine, count=8, k=3, per_assignment=4, control_rate=0.0, systems=SYSTEMS, controls=[])
    assignments = [work(engine, invite(engine, f"rater-{n}", "pilot")[0].id, score=2 + n, comment="first")
                   for n in range(3)]
    yield engine, assignments[0], folder
    engine.dispose()


def _comment(engine, assignment_id: int, comment: str) -> None:
    with unit_of_work(engine) as session:
        session.execute(update(Assignment).where(Assignment.id == assignment_id).values(comment=comment))


def _cells(text: str, column: str) -> list[str]:
    return [row[column] for row in csv.DictReader(io.StringIO(text, newline=""))]


def _exported(engine, folder: Path, fmt: str = "csv") -> Path:
    text, _, _ = export_text(engine, "pilot", fmt)
    path = folder / f"pilot.{fmt}"
    path.write_text(text, encoding="utf-8", newline="")
    return path


@pytest.mark.parametrize("formula", FORMULAS)
def test_a_comment_a_spreadsheet_would_run_is_written_behind_a_single_quote(commented_study, formula):
    engine, assignment_id, _ = commented_study
    _comment(engine, assignment_id, formula)
    text, n_rows, _ = export_text(engine, "pilot", "csv")
    cells = _cells(text, "comment")
    assert len(cells) == n_rows  # no phantom row
    assert cells.count("'" + formula) == n_rows // 3  # every row of her assignment, quoted
    assert formula not in cells


def test_a_comment_with_a_carriage_return_is_one_quoted_cell_and_pandas_reads_no_phantom_row(commented_study):
    engine, assignment_id, folder = commented_study
    _comment(engine, assignment_id, "\r=1+1")
    text, n_rows, _ = export_text(engine, "pilot", "csv")
    assert '"\'\r=1+1"' in text  # quoted, and behind the quote
    assert len(pd.read_csv(io.StringIO(text), dtype=str, keep_default_na=False)) == n_rows


def test_report_from_the_csv_export_lists_the_comment_as_the_rater_wrote_it(commented_study):
    engine, assignment_id, folder = commented_study
    _comment(engine, assignment_id, "=1+1 was my score, \r@everyone")
    path = _exported(engine, folder)
    done = cli_run(engine, "report", "pilot", "--export", str(path), "--out", str(folder / "report"))
    assert done.exit_code == 0, done.output
    markdown = (folder / "report" / "report.md").read_text(encoding="utf-8")
    assert "=1+1 was my score, @everyone" in markdown  # whitespace folded as the report does; no quote in front
    assert "'=1+1" not in markdown


def test_a_text_not_starting_like_a_formula_is_written_as_it_is():
    assert [neutralise(text) for text in ("'tis", "it's", "a=b", "", "3", " =x")] == [
        "'tis", "it's", "a=b", "", "3", " =x"]
    assert write_csv(["n", "text"], [[-3, "x"], [1.5, "-y"]]) == "n,text\n-3,x\n1.5,'-y\n"  # numbers stay numbers


@given(texts=st.lists(SOME_TEXT, min_size=1, max_size=6))
@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_any_text_round_trips_through_the_csv_writer_and_reader(tmp_path, texts):
    assert [restore(neutralise(text)) for text in texts] == texts
    path = tmp_path / "cells.csv"
    path.write_text(write_csv(["n", "text"], list(enumerate(texts))), encoding="utf-8", newline="")
    table = read_csv_table(path, ValueError)
    assert table["text"].tolist() == texts and table["n"].tolist() == [str(n) for n in range(len(texts))]
    for cell in _cells(path.read_text(encoding="utf-8"), "text"):
        assert not cell.startswith(FORMULA_STARTS)  # each cell as a spreadsheet sees it: never a formula


@given(comment=SOME_TEXT)
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_any_comment_reads_back_from_the_csv_export_as_from_the_jsonl_export(commented_study, comment):
    """The reader `empeval report --export` uses, on the CSV export and on the JSON lines export (written as it
    is): the same table, the comment as the rater wrote it (stripped, as the tidy table strips text)."""
    engine, assignment_id, folder = commented_study
    _comment(engine, assignment_id, comment)
    csv_path, jsonl_path = _exported(engine, folder, "csv"), _exported(engine, folder, "jsonl")
    from_csv = export_kind(csv_path).read_export(csv_path)
    pd.testing.assert_frame_equal(from_csv, export_kind(jsonl_path).read_export(jsonl_path))
    assert from_csv.groupby("assignment").size().tolist() == [12, 12, 12]  # 4 items x 3 criteria: no phantom row
    hers = from_csv.loc[from_csv["assignment"].astype(str) == str(assignment_id), "comment"]
    assert set(hers.fillna("")) == {comment.strip()}


@given(justification=SOME_TEXT.filter(lambda text: text.strip() != ""))
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_any_acute_justification_reads_back_from_csv(tmp_path, justification):
    rows = [{**row, "justification": justification} for row in acute_rows([(1, 1, "a", 4, 2, "b", 4, "left")])]
    path = tmp_path / "acute.csv"
    path.write_text(rows_to_csv(rows, ACUTE_COLUMNS), encoding="utf-8", newline="")
    assert read_acute(path)["justification"].tolist() == [justification.strip()]


@given(utterances=st.lists(SOME_TEXT.filter(lambda text: text.strip() != ""), min_size=1, max_size=4))
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_any_chat_utterance_reads_back_from_csv_as_sent(tmp_path, utterances):
    rows = [{"study": "chat", "assignment_id": 1, "annotator": "r1", "conversation_id": 3, "system": "retrieval",
             "index": index, "speaker": ("rater", "system")[index % 2], "text": text,
             "created_at": "2026-12-02T10:00:00+00:00", "latency_ms": None, "version": None, "parameters": None,
             "context_sent": None} for index, text in enumerate(utterances)]
    assert set(rows[0]) == set(TURN_COLUMNS)
    path = tmp_path / "turns.csv"
    path.write_text(rows_to_csv(rows, TURN_COLUMNS), encoding="utf-8", newline="")
    assert read_chat_file(path, "turns")["text"].tolist() == utterances


def test_the_export_docs_say_how_formula_cells_are_written():
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text(encoding="utf-8")
    assert "analysis/kinds/csv_cells.py" in readme and "formula" in readme
