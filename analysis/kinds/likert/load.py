"""Turn the store's export (CSV or JSONL, one row per rating) into the tidy ratings table.

The export contract is defined once, in ``empeval.analysis.kinds.likert.schema`` (``EXPORT_SCHEMA``/``EXPORT_COLUMNS``,
re-exported here): the store's exporter writes exactly those columns and this module reads them. The tidy
table the rest of ``analysis`` works on has one row per rating and the columns in ``TIDY_COLUMNS``:

    study, item, context, system, annotator, criterion, score, position, is_control,
    control_kind, control_target, assignment, started_at, submitted_at, seconds_on_item, late, comment,
    item_comment

``item`` is the rated unit (a dialogue context plus one response); ``context`` is the dialogue context,
which is what pairs the systems; ``late`` says the rating was submitted after its assignment had expired.
Validation is strict and every error names the column or the row (1-based, as a spreadsheet would show it)
and what to do about it.

Imports only numpy, pandas and the standard library: the command line imports this module on every start.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from pathlib import Path

import numpy as np
import pandas as pd

from empeval.analysis.kinds import ExportFileError
from empeval.analysis.kinds.csv_cells import read_csv_table
from empeval.analysis.kinds.likert.schema import EXPORT_COLUMNS, EXPORT_SCHEMA

_RENAMES = {"item_id": "item", "context_id": "context", "assignment_id": "assignment"}

TIDY_COLUMNS: tuple[str, ...] = tuple(_RENAMES.get(c, c) for c in EXPORT_COLUMNS)

DEFAULT_SCALE: tuple[int, int] = (1, 5)

_TRUE = {"true", "t", "1", "yes", "y"}
_FALSE = {"false", "f", "0", "no", "n"}
_REQUIRED_TEXT = tuple(c.name for c in EXPORT_SCHEMA if c.kind == "text" and c.required)

#: Columns added to the contract after exports had been written, with the value an older export implies:
#: the store only began recording late submissions with ``late``, so an export without it reads as on time;
#: an export from before ``comment`` (or ``item_comment``) reads as one without comments.
ADDED_LATER: dict[str, object] = {"late": False, "comment": "", "item_comment": ""}


class ExportError(ExportFileError):
    """The export does not follow the contract; the message says where and what to fix."""


def read_export(path: str | Path, *, scale: tuple[int, int] = DEFAULT_SCALE) -> pd.DataFrame:
    """Read an export file (``.csv``, or ``.jsonl``/``.ndjson``) and return the validated tidy table.

    CSV is read as text (ids stay strings: "007" is not 7; empty cells stay empty; a text cell the exporter quoted
    against spreadsheet formulas, ``'=1+1``, as written, ``=1+1``: see ``empeval.analysis.kinds.csv_cells``) and JSONL
    line by line, naming the line of any that is not JSON; both then go through ``tidy_from_export``.

    Returns
    -------
    ratings : pandas.DataFrame
        The tidy ratings table, one row per rating, columns ``TIDY_COLUMNS`` (see ``tidy_from_export``).

    Examples
    --------
    >>> import pathlib, tempfile
    >>> from empeval.analysis.simulate.likert import simulate_study
    >>> study = simulate_study(n_contexts=4, n_honest=3, n_random_clickers=0, n_straight_liners=0, seed=1)
    >>> with tempfile.TemporaryDirectory() as folder:
    ...     path = pathlib.Path(folder) / "pilot.csv"
    ...     study.export.to_csv(path, index=False)
    ...     ratings = read_export(path)
    >>> len(ratings) == len(study.export), list(ratings.columns) == list(TIDY_COLUMNS)
    (True, True)
    """
    path = Path(path)
    suffix = path.suffix.lower()
    if suffix == ".csv":
        # Everything as text first: ids must stay strings ("007" is not 7), empties stay empty; formula cells
        # restored (analysis.kinds.csv_cells).
        frame = read_csv_table(path, ExportError)
        return tidy_from_export(frame, scale=scale, source=str(path))
    if suffix in {".jsonl", ".ndjson"}:
        records = []
        with path.open(encoding="utf-8") as lines:
            for line_no, line in enumerate(lines, start=1):
                if not line.strip():
                    continue
                try:
                    records.append(json.loads(line))
                except json.JSONDecodeError as err:
                    raise ExportError(f"{path}: line {line_no} is not valid JSON ({err.msg})") from err
        return tidy_from_export(records, scale=scale, source=str(path))
    raise ExportError(f"{path}: unknown export format {suffix!r}; expected .csv, .jsonl or .ndjson")


def tidy_from_export(
    df_or_records: pd.DataFrame | Iterable[Mapping],
    *,
    scale: tuple[int, int] = DEFAULT_SCALE,
    source: str = "export",
) -> pd.DataFrame:
    """Validate export rows (the columns of ``empeval.analysis.kinds.likert.schema``) and return the tidy ratings table.

    Checks: every contract column is present; ids, system, annotator and criterion are non-empty; the score
    is an integer within ``scale`` (inclusive); ``is_control`` and ``late`` are booleans or true/false text;
    controls name the criterion they target; timestamps parse as ISO-8601; ``seconds_on_item`` is empty or
    a non-negative number; no annotator rates the same item on the same criterion twice. Columns outside
    the contract are dropped.

    Older exports, written before the store recorded late submissions, have no ``late`` column: they read as
    if every rating was on time (``late`` all False), and so does an empty ``late`` cell.

    Returns
    -------
    ratings : pandas.DataFrame
        One row per rating, in the columns ``TIDY_COLUMNS``:

        * ``study``: the study's name
        * ``item``: the rated unit, a dialogue context plus one response (text id)
        * ``context``: the dialogue context, which pairs the systems (text id)
        * ``system``: the system that wrote the response
        * ``annotator``: the annotator's pseudonym
        * ``criterion``: the criterion, lower case
        * ``score``: the score (int64, within ``scale``)
        * ``position``: position of the item in its assignment (Int64, may be missing)
        * ``is_control``: whether the item is a control (bool)
        * ``control_kind``, ``control_target``: the control's system and the criterion it is built to fail
          (missing for real items)
        * ``assignment``: the assignment the rating was given in
        * ``started_at``, ``submitted_at``: UTC timestamps (NaT when not recorded)
        * ``seconds_on_item``: seconds spent on the item (float, NaN when not measured)
        * ``late``: submitted after the assignment had expired (bool)
        * ``comment``: the annotator's comment on the assignment, on each of its rows (missing when none)
        * ``item_comment``: the annotator's comment on the item, on each rating of it (missing when none)

    Examples
    --------
    >>> row = {"study": "pilot", "item_id": 7, "context_id": 3, "system": "gold", "annotator": "ann-1",
    ...        "criterion": "Empathy", "score": "4", "position": "0", "is_control": "false",
    ...        "control_kind": "", "control_target": "", "assignment_id": 12,
    ...        "started_at": "2024-05-01T09:00:00Z", "submitted_at": "2024-05-01T09:04:00Z",
    ...        "seconds_on_item": "21.5", "late": "true"}
    >>> ratings = tidy_from_export([row])
    >>> print(ratings[["item", "criterion", "score", "is_control", "late"]].to_string(index=False))
    item criterion  score  is_control  late
       7   empathy      4       False  True

    An export from before ``late`` existed reads as on time; a missing contract column is named:

    >>> older = {column: value for column, value in row.items() if column != "late"}
    >>> tidy_from_export([older])["late"].tolist()
    [False]
    >>> tidy_from_export([{column: value for column, value in row.items() if column != "score"}])
    Traceback (most recent call last):
    ...
    empeval.analysis.kinds.likert.load.ExportError: export is missing column(s) 'score'; the export contract ...
    """
    if isinstance(df_or_records, pd.DataFrame):
        export = df_or_records.copy()
    else:
        export = pd.DataFrame.from_records(list(df_or_records))
    for column, implied in ADDED_LATER.items():
        if column not in export.columns:
            export[column] = implied
    missing = [c for c in EXPORT_COLUMNS if c not in export.columns]
    if missing:
        raise ExportError(
            f"{source} is missing column(s) {', '.join(repr(c) for c in missing)}; "
            f"the export contract has: {', '.join(EXPORT_COLUMNS)}"
        )
    export = export.loc[:, list(EXPORT_COLUMNS)].reset_index(drop=True)
    lo, hi = scale
    if not (isinstance(lo, (int, np.integer)) and isinstance(hi, (int, np.integer)) and lo < hi):
        raise ValueError(f"scale must be two integers (low, high) with low < high, got {scale!r}")

    tidy = pd.DataFrame(index=export.index)
    for column in _REQUIRED_TEXT:
        tidy[_RENAMES.get(column, column)] = _required_text(export[column], column, source)
    tidy["criterion"] = tidy["criterion"].str.lower()
    tidy["score"] = _scores(export["score"], scale, source)
    tidy["position"] = _optional_int(export["position"], "position", source)
    tidy["is_control"] = _booleans(export["is_control"], "is_control", source)
    tidy["control_kind"] = _optional_text(export["control_kind"])
    tidy["control_target"] = _optional_text(export["control_target"]).str.lower()
    for name in ("control_kind", "control_target"):
        tidy.loc[~tidy["is_control"], name] = pd.NA
    no_target = tidy["is_control"] & tidy["control_target"].isna()
    if no_target.any():
        row = int(np.flatnonzero(no_target.to_numpy())[0])
        raise ExportError(
            f"{source}: row {row + 1} is a control (is_control=true) but has no control_target; "
            "a control must name the criterion it is built to fail (e.g. empathy)"
        )
    tidy["started_at"] = _timestamps(export["started_at"], "started_at", source)
    tidy["submitted_at"] = _timestamps(export["submitted_at"], "submitted_at", source)
    tidy["seconds_on_item"] = _seconds(export["seconds_on_item"], source)
    tidy["late"] = _booleans(export["late"], "late", source, blank=False)
    tidy["comment"] = _optional_text(export["comment"])
    tidy["item_comment"] = _optional_text(export["item_comment"])

    duplicated = tidy.duplicated(["annotator", "item", "criterion"], keep=False)
    if duplicated.any():
        rows = np.flatnonzero(duplicated.to_numpy())[:4] + 1
        first = tidy.loc[duplicated].iloc[0]
        raise ExportError(
            f"{source}: annotator {first['annotator']!r} rated item {first['item']!r} on "
            f"{first['criterion']!r} more than once (rows {', '.join(map(str, rows))}); "
            "re-export from the store, whose ingestion is idempotent"
        )
    # A contract column added to the schema but not read above fails here, in every loader test.
    return tidy.loc[:, list(TIDY_COLUMNS)]


def require_columns(ratings: pd.DataFrame, columns: Iterable[str], *, what: str) -> None:
    """Raise a clear error when a tidy table lacks columns that ``what`` needs.

    Returns
    -------
    None
        Raises ``ValueError`` naming the missing columns and how to build the table.

    Examples
    --------
    >>> import pandas as pd
    >>> require_columns(pd.DataFrame({"item": [], "score": []}), ("item", "score"), what="item_means")
    >>> require_columns(pd.DataFrame({"item": []}), ("item", "score"), what="item_means")
    Traceback (most recent call last):
    ...
    ValueError: item_means needs column(s) 'score' in the ratings table; build it with ...
    """
    missing = [c for c in columns if c not in ratings.columns]
    if missing:
        raise ValueError(
            f"{what} needs column(s) {', '.join(repr(c) for c in missing)} in the ratings table; "
            "build it with analysis.kinds.likert.load.tidy_from_export or read_export"
        )


def _is_blank(values: pd.Series) -> np.ndarray:
    as_text = values.astype("object").where(values.notna(), "")
    return np.array([str(v).strip() == "" for v in as_text], dtype=bool)


def _first_bad(mask: np.ndarray) -> int:
    return int(np.flatnonzero(mask)[0])


def _required_text(values: pd.Series, column: str, source: str) -> pd.Series:
    blank = _is_blank(values)
    if blank.any():
        row = _first_bad(blank)
        raise ExportError(f"{source}: row {row + 1} has an empty {column!r}; every rating needs one")
    return pd.Series([_id_text(v) for v in values], index=values.index, dtype="object").str.strip()


def _id_text(value) -> str:
    # JSONL may carry integer ids; a float id like 3.0 would otherwise become "3.0".
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def _optional_text(values: pd.Series) -> pd.Series:
    blank = _is_blank(values)
    text = pd.Series([str(v).strip() for v in values.astype("object")], index=values.index, dtype="object")
    return text.where(~blank, pd.NA)


def _scores(values: pd.Series, scale: tuple[int, int], source: str) -> pd.Series:
    lo, hi = scale
    numeric = pd.to_numeric(values.astype("object").where(~_is_blank(values), np.nan), errors="coerce")
    numeric = numeric.astype(float)
    bad = numeric.isna().to_numpy() | (numeric.to_numpy() % 1 != 0)
    bad |= (numeric.to_numpy() < lo) | (numeric.to_numpy() > hi)
    if bad.any():
        row = _first_bad(bad)
        raise ExportError(
            f"{source}: row {row + 1} has score {values.iloc[row]!r}; scores must be whole numbers "
            f"from {lo} to {hi} (pass scale=(low, high) for another scale)"
        )
    return numeric.astype("int64")


def _optional_int(values: pd.Series, column: str, source: str) -> pd.Series:
    blank = _is_blank(values)
    numeric = pd.to_numeric(values.astype("object").where(~blank, np.nan), errors="coerce").astype(float)
    bad = (~blank & numeric.isna().to_numpy()) | (numeric.notna().to_numpy() & (numeric.to_numpy() % 1 != 0))
    if bad.any():
        row = _first_bad(bad)
        raise ExportError(f"{source}: row {row + 1} has {column} {values.iloc[row]!r}; expected a whole number")
    return numeric.astype("Int64")


def _booleans(values: pd.Series, column: str, source: str, *, blank: bool | None = None) -> pd.Series:
    """Booleans from bools or true/false text; an empty cell is ``blank``, or an error when that is None."""
    parsed = []
    empty = _is_blank(values)
    for row, value in enumerate(values.astype("object")):
        if empty[row] and blank is not None:
            parsed.append(blank)
            continue
        if isinstance(value, (bool, np.bool_)):
            parsed.append(bool(value))
            continue
        text = str(value).strip().lower()
        if text in _TRUE:
            parsed.append(True)
        elif text in _FALSE:
            parsed.append(False)
        else:
            raise ExportError(f"{source}: row {row + 1} has {column} {value!r}; expected true or false")
    return pd.Series(parsed, index=values.index, dtype=bool)


def _timestamps(values: pd.Series, column: str, source: str) -> pd.Series:
    blank = _is_blank(values)
    text = values.astype("object").where(~blank, None)
    parsed = pd.to_datetime(text, utc=True, errors="coerce", format="ISO8601")
    bad = ~blank & parsed.isna().to_numpy()
    if bad.any():
        row = _first_bad(bad)
        raise ExportError(
            f"{source}: row {row + 1} has {column} {values.iloc[row]!r}; expected an ISO-8601 UTC timestamp"
        )
    return parsed


def _seconds(values: pd.Series, source: str) -> pd.Series:
    blank = _is_blank(values)
    numeric = pd.to_numeric(values.astype("object").where(~blank, np.nan), errors="coerce").astype(float)
    bad = (~blank & numeric.isna().to_numpy()) | (numeric.to_numpy() < 0)
    if bad.any():
        row = _first_bad(bad)
        raise ExportError(
            f"{source}: row {row + 1} has seconds_on_item {values.iloc[row]!r}; expected empty or seconds >= 0"
        )
    return numeric
