"""The pairwise judgment contract (analysis.kinds.pairwise.schema): what it accepts, and errors that name the column
and the row of what it refuses."""
from __future__ import annotations

import importlib
import inspect
import subprocess
import sys

import pandas as pd
import pytest

from empeval.analysis.kinds.pairwise.schema import JUDGMENT_COLUMNS, JudgmentError, pair_name, validate_judgments


def _row(**changes) -> dict:
    row = {"study": "ab", "assignment_id": 1, "annotator": "ann-1", "context_id": 7, "criterion": "Empathy",
           "pair": "gold|moel", "system_left": "moel", "system_right": "gold", "choice": "right",
           "preferred": "gold", "position": 0, "is_control": False, "control_target": None, "late": False}
    row.update(changes)
    return row


def _rows(bad: dict) -> list[dict]:
    """Two good rows, then the bad one as row 3."""
    return [_row(context_id=1), _row(context_id=2, choice="tie", preferred="tie"), _row(**{"context_id": 3, **bad})]


def test_a_clean_table_keeps_the_contract_columns_and_types():
    table = validate_judgments(pd.DataFrame([_row(extra="dropped"), _row(context_id="8", choice="LEFT",
                                                                          preferred="moel", late="true")]))
    assert list(table.columns) == list(JUDGMENT_COLUMNS)
    assert table["context_id"].tolist() == [7, 8] and table["context_id"].dtype == "int64"
    assert table["choice"].tolist() == ["right", "left"]
    assert table["late"].tolist() == [False, True] and table["late"].dtype == bool
    assert table["criterion"].tolist() == ["empathy", "empathy"]


def test_pair_name_sorts_the_two_systems():
    assert pair_name("moel", "gold") == pair_name("gold", "moel") == "gold|moel"


@pytest.mark.parametrize(("bad", "column"), [
    ({"preferred": "moel"}, "preferred"),
    ({"choice": "tie"}, "preferred"),
    ({"choice": "left", "preferred": "gold"}, "preferred"),
    ({"choice": "A"}, "choice"),
    ({"pair": "moel|gold"}, "pair"),
    ({"system_left": "gold", "pair": "gold|gold"}, "system_right"),
    ({"annotator": " "}, "annotator"),
    ({"context_id": "seven"}, "context_id"),
    ({"position": 1.5}, "position"),
    ({"late": "maybe"}, "late"),
    ({"is_control": True, "control_target": ""}, "control_target"),
])
def test_errors_name_the_column_and_the_row(bad, column):
    with pytest.raises(JudgmentError, match=rf"row 3, column '{column}'"):
        validate_judgments(_rows(bad))


def test_a_missing_column_is_named():
    rows = [{k: v for k, v in _row().items() if k != "pair"}]
    with pytest.raises(JudgmentError, match="missing column.*'pair'"):
        validate_judgments(rows)


def test_a_judgment_given_twice_names_both_rows():
    with pytest.raises(JudgmentError, match=r"more than once \(rows 1, 3\)"):
        validate_judgments([_row(), _row(criterion="fluency"), _row(choice="left", preferred="moel")])


def test_control_target_is_kept_for_controls_only():
    table = validate_judgments([_row(is_control="true", control_target="Empathy"),
                                _row(context_id=2, control_target="fluency")])
    assert table["control_target"].tolist() == ["empathy", None]


def test_the_schema_imports_neither_pandas_nor_numpy():
    probe = "import sys, analysis.kinds.pairwise.schema; print(sorted({'pandas', 'numpy'} & set(sys.modules)))"
    assert subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                          check=True).stdout.strip() == "[]"


PAIRWISE_MODULES = ["empeval.analysis.kinds.pairwise.schema", "empeval.analysis.kinds.pairwise.tables",
                    "empeval.analysis.stats.bradley_terry",
                    "empeval.analysis.simulate.pairwise", "empeval.analysis.kinds.pairwise.blocks"]


@pytest.mark.parametrize("module_name", PAIRWISE_MODULES)
def test_every_public_pairwise_function_documents_its_return_and_runs_an_example(module_name):
    module = importlib.import_module(module_name)
    functions = [value for name, value in vars(module).items()
                 if not name.startswith("_") and inspect.isfunction(value) and value.__module__ == module_name]
    assert functions
    for function in functions:
        doc = inspect.getdoc(function) or ""
        assert "\nReturns\n-------\n" in doc, f"{function.__name__}: no Returns section"
        assert "\nExamples\n--------\n" in doc and "\n>>> " in doc, f"{function.__name__}: no example"


def test_a_simulated_table_round_trips_through_csv_and_jsonl(tmp_path):
    from empeval.analysis.kinds.pairwise.schema import read_judgments
    from empeval.analysis.simulate.pairwise import simulate_pairwise_study

    table = validate_judgments(simulate_pairwise_study(n_contexts=5, k=2, seed=3).judgments)
    csv_path, jsonl_path = tmp_path / "ab.csv", tmp_path / "ab.jsonl"
    table.to_csv(csv_path, index=False)
    table.to_json(jsonl_path, orient="records", lines=True)
    for path in (csv_path, jsonl_path):
        read = read_judgments(path)
        pd.testing.assert_frame_equal(read, table, check_dtype=False)
        assert read["context_id"].dtype == "int64" and read["is_control"].dtype == bool


def test_reading_names_the_file_and_line_of_bad_input(tmp_path):
    from empeval.analysis.kinds.pairwise.schema import read_judgments

    bad = tmp_path / "ab.jsonl"
    bad.write_text('{"study": "ab"}\n{not json\n')
    with pytest.raises(JudgmentError, match="line 2 is not valid JSON"):
        read_judgments(bad)
    with pytest.raises(JudgmentError, match="unknown judgment file format '.xlsx'"):
        read_judgments(tmp_path / "ab.xlsx")
    short = tmp_path / "short.csv"
    short.write_text("study,pair\nab,gold|moel\n")
    with pytest.raises(JudgmentError, match=r"short.csv is missing column\(s\) 'assignment_id'"):
        read_judgments(short)
