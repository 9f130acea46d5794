"""The loader turns the store's export into the tidy table and rejects broken exports with clear errors."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from empeval.analysis.kinds.likert.load import (
    EXPORT_COLUMNS,
    TIDY_COLUMNS,
    ExportError,
    read_export,
    tidy_from_export,
)


def test_csv_export_becomes_the_tidy_table(simulated, tmp_path):
    path = tmp_path / "study.csv"
    simulated.export.to_csv(path, index=False)
    ratings = read_export(path)
    assert list(ratings.columns) == list(TIDY_COLUMNS)
    assert len(ratings) == len(simulated.export)
    assert ratings["score"].dtype == np.int64
    assert ratings["is_control"].dtype == bool
    assert ratings["is_control"].sum() == simulated.export["is_control"].sum()
    assert str(ratings["started_at"].dt.tz) == "UTC"
    controls = ratings.loc[ratings["is_control"]]
    assert controls["control_target"].isin({"empathy", "relevance", "fluency"}).all()
    assert ratings.loc[~ratings["is_control"], "control_target"].isna().all()


def test_jsonl_export_reads_the_same_as_csv(simulated, tmp_path):
    csv_path, jsonl_path = tmp_path / "study.csv", tmp_path / "study.jsonl"
    simulated.export.to_csv(csv_path, index=False)
    with jsonl_path.open("w") as out:
        for record in simulated.export.to_dict(orient="records"):
            out.write(json.dumps(record) + "\n")
    pd.testing.assert_frame_equal(read_export(csv_path), read_export(jsonl_path))


def test_integer_ids_in_jsonl_stay_plain_text():
    record = {c: "" for c in EXPORT_COLUMNS}
    record.update(study="s", item_id=7, context_id=3, system="gold", annotator=12, criterion="Empathy", score=4,
                  position=1, is_control=False, assignment_id=99, started_at="2024-05-01T09:00:00Z",
                  submitted_at="2024-05-01T09:05:00Z", seconds_on_item=None)
    ratings = tidy_from_export([record])
    assert ratings.loc[0, "item"] == "7" and ratings.loc[0, "annotator"] == "12"
    assert ratings.loc[0, "criterion"] == "empathy"
    assert np.isnan(ratings.loc[0, "seconds_on_item"])


def test_missing_column_is_named(export_rows):
    with pytest.raises(ExportError, match="missing column.*'control_target'"):
        tidy_from_export(export_rows.drop(columns=["control_target"]))


def test_score_outside_the_scale_names_the_row(export_rows):
    export_rows.loc[4, "score"] = "6"
    with pytest.raises(ExportError, match=r"row 5 has score '6'.*from 1 to 5"):
        tidy_from_export(export_rows)


def test_fractional_or_empty_score_is_rejected(export_rows):
    export_rows.loc[2, "score"] = "3.5"
    with pytest.raises(ExportError, match="row 3"):
        tidy_from_export(export_rows)
    export_rows.loc[2, "score"] = ""
    with pytest.raises(ExportError, match="row 3"):
        tidy_from_export(export_rows)


def test_scale_bounds_are_parameters(export_rows):
    export_rows.loc[0, "score"] = "7"
    assert tidy_from_export(export_rows, scale=(1, 7)).loc[0, "score"] == 7


def test_unreadable_is_control_names_the_row(export_rows):
    export_rows.loc[1, "is_control"] = "maybe"
    with pytest.raises(ExportError, match="row 2 has is_control 'maybe'"):
        tidy_from_export(export_rows)


def test_control_without_target_is_rejected(export_rows):
    export_rows.loc[0, ["is_control", "control_kind", "control_target"]] = ["true", "control-generic", ""]
    with pytest.raises(ExportError, match="row 1 is a control.*no control_target"):
        tidy_from_export(export_rows)


def test_empty_annotator_is_rejected(export_rows):
    export_rows.loc[3, "annotator"] = "  "
    with pytest.raises(ExportError, match="row 4 has an empty 'annotator'"):
        tidy_from_export(export_rows)


def test_bad_timestamp_names_the_row(export_rows):
    export_rows.loc[6, "started_at"] = "yesterday"
    with pytest.raises(ExportError, match="row 7 has started_at 'yesterday'"):
        tidy_from_export(export_rows)


def test_same_rating_twice_is_rejected(export_rows):
    doubled = pd.concat([export_rows, export_rows.iloc[[0]]], ignore_index=True)
    with pytest.raises(ExportError, match="more than once"):
        tidy_from_export(doubled)


def test_unknown_file_type_is_refused(tmp_path):
    path = tmp_path / "study.xlsx"
    path.write_text("")
    with pytest.raises(ExportError, match="expected .csv, .jsonl"):
        read_export(path)


def test_broken_jsonl_line_is_named(tmp_path):
    path = tmp_path / "study.jsonl"
    path.write_text('{"study": "s"}\n{not json\n')
    with pytest.raises(ExportError, match="line 2 is not valid JSON"):
        read_export(path)
