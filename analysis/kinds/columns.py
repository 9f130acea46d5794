"""Parsing the columns of a kind's export table, for the kinds whose validators check it column by column (pairwise,
best-worst): required and optional text, whole numbers and booleans, each failure raised as the kind's own
ExportFileError subclass naming the row (numbered from 1, as a spreadsheet shows it) and the column; and reading
an export file (CSV read as text, or JSON lines) into the kind's validator.

>>> import pandas as pd
>>> booleans(pd.Series(["true", "no", "1"]), "late", "t.csv", ValueError).tolist()
[True, False, True]
>>> integers(pd.Series(["4", "x"]), "position", "t.csv", ValueError)
Traceback (most recent call last):
...
ValueError: t.csv: row 2, column 'position' is 'x'; expected a whole number
"""
from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pandas as pd

_TRUE = {"true", "t", "1", "yes", "y"}
_FALSE = {"false", "f", "0", "no", "n"}


def blank(values: pd.Series) -> list[bool]:
    """Per value, whether it is missing or only whitespace."""
    return [v is None or (isinstance(v, float) and v != v) or str(v).strip() == "" for v in values.astype("object")]


def required_text(values: pd.Series, column: str, source: str, error: type[Exception]) -> pd.Series:
    """The values stripped, as text; `error` naming the first empty one."""
    import pandas as pd

    if pd.api.types.infer_dtype(values, skipna=False) == "string":  # the common case, checked without a loop
        stripped = values.str.strip()
        if (stripped != "").all():
            return stripped.astype(object)
    for row, empty in enumerate(blank(values)):
        if empty:
            raise error(f"{source}: row {row + 1}, column {column!r} is empty; every row needs one")
    return pd.Series([str(v).strip() for v in values.astype("object")], index=values.index, dtype=object)


def optional_text(values: pd.Series) -> pd.Series:
    """The values stripped, as text, None where blank."""
    import pandas as pd

    return pd.Series([None if empty else str(v).strip() for v, empty in zip(values.astype("object"),
                                                                            blank(values), strict=True)],
                     index=values.index, dtype=object)


def integers(values: pd.Series, column: str, source: str, error: type[Exception]) -> pd.Series:
    """The values as int64; `error` naming the first that is no whole number."""
    import pandas as pd

    if pd.api.types.is_integer_dtype(values.dtype) and not pd.api.types.is_bool_dtype(values.dtype):
        if not values.isna().any():
            return values.astype("int64")
    parsed = []
    for row, value in enumerate(values.astype("object")):
        try:
            number = float(str(value).strip())
        except ValueError:
            number = float("nan")
        if not number == number or not number.is_integer() or isinstance(value, bool):
            raise error(f"{source}: row {row + 1}, column {column!r} is {value!r}; expected a whole number")
        parsed.append(int(number))
    return pd.Series(parsed, index=values.index, dtype="int64")


def booleans(values: pd.Series, column: str, source: str, error: type[Exception]) -> pd.Series:
    """The values as bool (booleans, or true/false, t/f, 1/0, yes/no as text); `error` naming the first that is
    neither."""
    import numpy as np
    import pandas as pd

    if pd.api.types.is_bool_dtype(values.dtype):
        return values.astype(bool)
    parsed = []
    for row, value in enumerate(values.astype("object")):
        text = str(value).strip().lower()
        if isinstance(value, (bool, np.bool_)):
            parsed.append(bool(value))
        elif text in _TRUE or text in _FALSE:
            parsed.append(text in _TRUE)
        else:
            raise error(f"{source}: row {row + 1}, column {column!r} is {value!r}; expected true or false")
    return pd.Series(parsed, index=values.index, dtype=bool)


def read_table_file(path: Any, validate: Callable[..., pd.DataFrame], error: type[Exception], *,
                    what: str) -> pd.DataFrame:
    """An export file (``.csv``, read as text so that empty cells stay empty, formula cells restored as
    analysis.kinds.csv_cells says, or ``.jsonl`` / ``.ndjson``, one row per line) passed to `validate` (with
    ``source``, the path); `error` naming the line that is no JSON, an empty CSV or the suffix no reader knows
    (`what`: the table's name in that message, "judgment")."""
    import json

    from empeval.analysis.kinds.csv_cells import read_csv_table

    path = Path(path)
    suffix = path.suffix.lower()
    if suffix == ".csv":
        return validate(read_csv_table(path, error), source=str(path))
    if suffix in {".jsonl", ".ndjson"}:
        records = []
        with path.open(encoding="utf-8") as lines:
            for line_no, line in enumerate(lines, start=1):
                if line.strip():
                    try:
                        records.append(json.loads(line))
                    except json.JSONDecodeError as err:
                        raise error(f"{path}: line {line_no} is not valid JSON ({err.msg})") from err
        return validate(records, source=str(path))
    raise error(f"{path}: unknown {what} file format {suffix!r}; expected .csv, .jsonl or .ndjson")
