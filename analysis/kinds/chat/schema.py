"""The chat kind's export contract: four tidy tables, their columns defined once, here.

The store's chat exporter writes exactly these columns and the report reads them through ``validate_table``:

- ``chat`` (the primary table; ``ReportRequest.table``): one row per conversation rating (a conversation, its
  criterion and the rater's score);
- ``conversations``: one row per conversation placed in an assignment that was claimed (its state: open, ended by
  the rater, or failed because the model did not answer; its length, the system's mean latency);
- ``turns``: one row per utterance (even indices the rater's, the speaker; odd ones the system's, the listener,
  with their provenance);
- ``turn_annotations``: one row per annotated system turn and per-turn question (ticked or not), of submitted
  assignments.

A *conversation* is a placement: ``(assignment_id, conversation_id)``, since an expired assignment's copy talks
about the same prompt with the same system afresh. The column definitions import nothing; the validators import
pandas when called. Whether a score lies on the study's scale is the report's check (the scale is in the study's
meta, not in the table); everything else of a value (types, the states, speakers and indices) is checked here,
each failure naming the file's line (or the table's row) and the column.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from empeval.analysis.kinds import ExportFileError
from empeval.analysis.kinds.columns import blank

if TYPE_CHECKING:
    import pandas as pd


@dataclass(frozen=True)
class ChatColumn:
    """One column of a chat table: its name, the kind of value it holds (text, raw_text, integer, number, boolean,
    choice, json, timestamp), whether every row needs one, what it means; for a choice the values allowed, for a
    number the least allowed."""

    name: str
    kind: str
    required: bool
    meaning: str
    choices: tuple[str, ...] = ()
    minimum: float | None = None


def _shared(*, emotion: bool = True) -> tuple[ChatColumn, ...]:
    """The columns every table starts with: the study, the assignment, the rater and the conversation."""
    columns: tuple[ChatColumn, ...] = (
        ChatColumn("study", "text", True, "the study's name"),
        ChatColumn("assignment_id", "integer", True, "the assignment (a rater's session) the conversation is in"),
        ChatColumn("annotator", "text", True, "the rater's pseudonym"),
        ChatColumn("conversation_id", "integer", True, "the conversation unit (one prompt with one partner)"),
    )
    if emotion:
        columns += (ChatColumn("context_id", "integer", True, "the prompt: an ED test dialogue's context"),
                    ChatColumn("emotion", "text", False, "the prompt's emotion (ED's label)"))
    return columns


STATES: tuple[str, ...] = ("open", "ended", "failed")
SPEAKERS: tuple[str, ...] = ("rater", "system")
#: The turn question a rater ticks when none of the study's applies (alone).
NONE_OF_THESE = "none"

CHAT_SCHEMA: tuple[ChatColumn, ...] = (
    *_shared(),
    ChatColumn("system", "text", True, "the partner's name (a system, or a control)"),
    ChatColumn("is_control", "boolean", True, "whether the partner is a control (a known-bad partner)"),
    ChatColumn("control_target", "text", False,
               "for controls, the criterion it is built to fail (empty: every criterion); empty otherwise"),
    ChatColumn("position", "integer", True, "the conversation's position in its session (0-based)", minimum=0),
    ChatColumn("criterion", "text", True, "the criterion rated (e.g. empathy)"),
    ChatColumn("score", "integer", True, "the rater's score of the whole conversation (on the study's scale)"),
    ChatColumn("utterances", "integer", True, "the conversation's utterances, both sides counted", minimum=0),
    ChatColumn("late", "boolean", True, "submitted after the assignment had expired"),
)

CONVERSATION_SCHEMA: tuple[ChatColumn, ...] = (
    *_shared(),
    ChatColumn("system", "text", True, "the partner's name"),
    ChatColumn("is_control", "boolean", True, "whether the partner is a control"),
    ChatColumn("position", "integer", True, "the conversation's position in its session (0-based)", minimum=0),
    ChatColumn("state", "choice", True, "open, ended (by the rater) or failed (the model did not answer)",
               choices=STATES),
    ChatColumn("utterances", "integer", True, "utterances so far, both sides counted", minimum=0),
    ChatColumn("system_turns", "integer", True, "the system's turns among them", minimum=0),
    ChatColumn("mean_latency_ms", "number", False, "the system turns' mean latency (empty without one)", minimum=0),
    ChatColumn("failure", "text", False, "why the model failed (empty unless failed)"),
    ChatColumn("submitted", "boolean", True, "whether the assignment was submitted"),
    ChatColumn("late", "boolean", True, "submitted after the assignment had expired"),
)

TURN_SCHEMA: tuple[ChatColumn, ...] = (
    *_shared(emotion=False),
    ChatColumn("system", "text", False, "the partner's name"),
    ChatColumn("index", "integer", True, "the utterance's index (0-based; even: the rater's, odd: the system's)",
               minimum=0),
    ChatColumn("speaker", "choice", True, "rater or system", choices=SPEAKERS),
    ChatColumn("text", "raw_text", False, "what was said, as sent"),
    ChatColumn("created_at", "timestamp", True, "when the utterance was acknowledged (ISO 8601, UTC)"),
    ChatColumn("latency_ms", "number", False, "for system turns, how long the model took", minimum=0),
    ChatColumn("version", "text", False, "for system turns, the system's version"),
    ChatColumn("parameters", "json", False, "for system turns, the generation parameters (JSON text)"),
    ChatColumn("context_sent", "json", False, "for system turns, the exact context sent: a JSON list of "
                                              "{role, text}"),
)

TURN_ANNOTATION_SCHEMA: tuple[ChatColumn, ...] = (
    *_shared(emotion=False),
    ChatColumn("system", "text", True, "the partner's name"),
    ChatColumn("is_control", "boolean", True, "whether the partner is a control"),
    ChatColumn("index", "integer", True, "the system turn's index (odd)", minimum=1),
    ChatColumn("question", "text", True, "the per-turn question's key (e.g. empathetic, or none)"),
    ChatColumn("checked", "boolean", True, "whether the rater ticked it for this turn"),
)

CHAT_COLUMNS: tuple[str, ...] = tuple(column.name for column in CHAT_SCHEMA)
CONVERSATION_COLUMNS: tuple[str, ...] = tuple(column.name for column in CONVERSATION_SCHEMA)
TURN_COLUMNS: tuple[str, ...] = tuple(column.name for column in TURN_SCHEMA)
TURN_ANNOTATION_COLUMNS: tuple[str, ...] = tuple(column.name for column in TURN_ANNOTATION_SCHEMA)

#: The tables by the names the export and ``ReportRequest.tables`` use: name -> its columns' definitions.
CHAT_SCHEMAS: dict[str, tuple[ChatColumn, ...]] = {
    "chat": CHAT_SCHEMA, "conversations": CONVERSATION_SCHEMA, "turns": TURN_SCHEMA,
    "turn_annotations": TURN_ANNOTATION_SCHEMA}
#: The same, by name -> its column names.
CHAT_TABLES: dict[str, tuple[str, ...]] = {name: tuple(c.name for c in schema) for name, schema in
                                           CHAT_SCHEMAS.items()}

# What makes a row a duplicate of another, per table, and what the message calls it.
_KEYS: dict[str, tuple[tuple[str, ...], str]] = {
    "chat": (("assignment_id", "conversation_id", "criterion"), "rating"),
    "conversations": (("assignment_id", "conversation_id"), "conversation"),
    "turns": (("assignment_id", "conversation_id", "index"), "utterance"),
    "turn_annotations": (("assignment_id", "conversation_id", "index", "question"), "annotation"),
}
_TRUE = {"true", "t", "1", "yes", "y"}
_FALSE = {"false", "f", "0", "no", "n"}
_DTYPES = {"integer": "int64", "number": "float64", "boolean": "bool"}


class ChatExportError(ExportFileError):
    """A chat table that does not follow the contract; the message names the line (or row), the column and the
    fix."""


class _Where:
    """Where a row of a table came from: the file's line when known, else the row (numbered from 1)."""

    def __init__(self, source: str, lines: list[int] | None) -> None:
        self.source, self.lines = source, lines

    def __call__(self, row: int) -> str:
        return f"line {self.lines[row]}" if self.lines is not None else f"row {row + 1}"

    def fail(self, row: int, column: str, what: str) -> ChatExportError:
        return ChatExportError(f"{self.source}: {self(row)}, column {column!r} {what}")


def empty_table(name: str) -> pd.DataFrame:
    """An empty table `name` with its columns and their dtypes (int64, float64, bool, else object).

    Returns
    -------
    table : pandas.DataFrame
        No rows; the columns of ``CHAT_TABLES[name]``.

    Examples
    --------
    >>> empty_table("chat")["score"].dtype
    dtype('int64')
    """
    import pandas as pd

    return pd.DataFrame({column.name: pd.Series(dtype=_DTYPES.get(column.kind, "object"))
                         for column in _schema(name)})


def validate_table(name: str, rows: Any, *, source: str | None = None, lines: list[int] | None = None) -> pd.DataFrame:
    """Check one chat table (`name`: chat, conversations, turns or turn_annotations; `rows` a DataFrame or records)
    against the contract and return it with clean dtypes.

    Checks: every column of the table is present (others are dropped); required values are there; whole numbers,
    numbers, booleans (or true/false text), ISO-8601 timestamps and JSON text parse, and counts and indices are not
    negative; a conversation's ``state`` is open, ended or failed and a turn's ``speaker`` rater or system; even
    indices are the rater's and odd ones the system's (an annotation is about an odd one); no rating, conversation,
    utterance or annotation comes twice. A failure names `source`, the line (`lines`: the file's line of each row)
    or else the row (from 1), and the column. Criterion names are lower-cased; a control_target is kept for
    controls only.

    Returns
    -------
    table : pandas.DataFrame
        The table's columns in order: integers int64, numbers float64 (NaN where empty), booleans bool,
        timestamps as UTC datetimes, text as object (None where an optional one is empty).

    Examples
    --------
    >>> row = {"study": "chat", "assignment_id": 1, "annotator": "r1", "conversation_id": 3, "context_id": 7,
    ...        "emotion": "proud", "system": "retrieval", "is_control": "false", "control_target": "",
    ...        "position": 0, "criterion": "Empathy", "score": "4", "utterances": 6, "late": False}
    >>> validate_table("chat", [row])[["criterion", "score", "control_target"]].values.tolist()
    [['empathy', 4, None]]
    >>> validate_table("chat", [{**row, "score": "4.5"}], source="chat.csv", lines=[2])
    Traceback (most recent call last):
    ...
    empeval.analysis.kinds.chat.schema.ChatExportError: chat.csv: line 2, column 'score' is '4.5'; expected a whole ...
    """
    import pandas as pd

    schema = _schema(name)
    source = source or f"the chat {name} table"
    table = rows.copy() if isinstance(rows, pd.DataFrame) else pd.DataFrame.from_records(list(rows))
    if table.empty and len(table.columns) == 0:
        return empty_table(name)
    columns = [column.name for column in schema]
    missing = [c for c in columns if c not in table.columns]
    if missing:
        raise ChatExportError(f"{source} is missing column(s) {', '.join(map(repr, missing))}; the chat {name!r} "
                              f"table has: {', '.join(columns)}")
    table = table.loc[:, columns].reset_index(drop=True)
    where = _Where(source, lines)
    clean = pd.DataFrame({column.name: _parse(column, table[column.name], where) for column in schema},
                         index=table.index)
    if name == "chat":
        clean["criterion"] = clean["criterion"].str.lower()
        targets = clean["control_target"].map(lambda value: value.lower() if isinstance(value, str) else None)
        clean["control_target"] = targets.where(clean["is_control"], None)
    if name in ("turns", "turn_annotations"):
        _check_indices(name, clean, where)
    _check_duplicates(name, clean, where)
    return clean


def read_chat_file(path: Any, name: str = "chat") -> pd.DataFrame:
    """Read one chat table written by ``empeval export`` (``.csv``, or ``.jsonl`` / ``.ndjson``: one JSON object a
    line) and return it validated by ``validate_table``, failures naming the file's line.

    Returns
    -------
    table : pandas.DataFrame
        As ``validate_table`` returns it.

    Examples
    --------
    >>> import pathlib, tempfile
    >>> text = ("study,assignment_id,annotator,conversation_id,context_id,emotion,system,is_control,control_target,"
    ...         "position,criterion,score,utterances,late\\n"
    ...         "chat,1,r1,3,7,proud,retrieval,false,,0,empathy,4,6,false\\n"
    ...         "chat,1,r1,3,7,proud,retrieval,false,,0,fluency,five,6,false\\n")
    >>> with tempfile.TemporaryDirectory() as folder:
    ...     path = pathlib.Path(folder) / "chat.csv"
    ...     _ = path.write_text(text)
    ...     read_chat_file(path)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    empeval.analysis.kinds.chat.schema.ChatExportError: .../chat.csv: line 3, column 'score' is 'five'; expected ...
    """
    path = Path(path)
    suffix = path.suffix.lower()
    if suffix == ".csv":
        frame, lines = _csv_rows(path)
        return validate_table(name, frame, source=str(path), lines=lines)
    if suffix in {".jsonl", ".ndjson"}:
        records, lines = _json_lines(path)
        return validate_table(name, records, source=str(path), lines=lines)
    raise ChatExportError(f"{path}: unknown chat {name} file format {suffix!r}; expected .csv, .jsonl or .ndjson")


def _schema(name: str) -> tuple[ChatColumn, ...]:
    if name not in CHAT_SCHEMAS:
        raise ValueError(f"no chat table {name!r}; the chat tables are {', '.join(map(repr, CHAT_SCHEMAS))}")
    return CHAT_SCHEMAS[name]


def _csv_rows(path: Path) -> tuple[pd.DataFrame, list[int]]:
    """The CSV's rows as text (empty cells stay empty, formula cells restored: analysis.kinds.csv_cells) and the line
    each starts on (a quoted cell may span lines)."""
    import csv

    import pandas as pd

    from empeval.analysis.kinds.csv_cells import restore

    with path.open(encoding="utf-8", newline="") as handle:
        reader = csv.reader(handle)
        header = [cell.strip() for cell in next(reader, [])]
        if not header:
            raise ChatExportError(f"{path}: the file is empty; expected a header line naming the columns")
        rows, lines = [], []
        start = reader.line_num + 1
        for cells in reader:
            if cells:
                if len(cells) != len(header):
                    raise ChatExportError(f"{path}: line {start} has {len(cells)} cells; the header has "
                                          f"{len(header)}")
                rows.append([restore(cell) for cell in cells])
                lines.append(start)
            start = reader.line_num + 1
    return pd.DataFrame(rows, columns=header, dtype=object), lines


def _json_lines(path: Path) -> tuple[list[dict], list[int]]:
    records, lines = [], []
    with path.open(encoding="utf-8") as handle:
        for number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError as err:
                raise ChatExportError(f"{path}: line {number} is not valid JSON ({err.msg})") from err
            if not isinstance(record, dict):
                raise ChatExportError(f"{path}: line {number} is not a JSON object (one row, column: value)")
            records.append(record)
            lines.append(number)
    return records, lines


def _parse(column: ChatColumn, values: pd.Series, where: _Where) -> pd.Series:
    """One column's values parsed by its kind; the first bad one raised, named by `where`."""
    import pandas as pd

    empty = blank(values)
    fast = _parse_fast(column, values, empty)
    if fast is not None:
        return fast
    parsed: list[Any] = []
    for row, (value, is_blank) in enumerate(zip(values.astype(object), empty, strict=True)):
        if is_blank and column.kind != "raw_text":
            if column.required:
                raise where.fail(row, column.name, "is empty; every row needs one")
            parsed.append(float("nan") if column.kind == "number" else None)
            continue
        parsed.append(_value(column, value, row, where))
    if column.kind == "timestamp":
        return pd.Series(pd.to_datetime(parsed, utc=True), index=values.index)
    return pd.Series(parsed, index=values.index, dtype=_DTYPES.get(column.kind, "object"))


def _parse_fast(column: ChatColumn, values: pd.Series, empty: list[bool]) -> pd.Series | None:
    """The common cases parsed without a loop (columns already of their type, or text that parses); None when a
    value may be bad, for the loop of ``_parse`` to find and name it."""
    import numpy as np
    import pandas as pd

    kind, types = column.kind, pd.api.types
    missing = np.asarray(empty, dtype=bool)
    if column.required and missing.any():
        return None
    if kind == "boolean":
        return values.astype(bool) if types.is_bool_dtype(values.dtype) else None
    if kind in ("integer", "number"):
        if types.is_bool_dtype(values.dtype):
            return None
        if types.infer_dtype(values, skipna=True) in ("string", "integer", "floating", "mixed-integer-float"):
            numbers = pd.to_numeric(values.where(~missing, np.nan), errors="coerce").astype(float)
            present = numbers.to_numpy()[~missing]
            if np.isnan(present).any() or np.isinf(present).any():
                return None
            if column.minimum is not None and (present < column.minimum).any():
                return None
            if kind == "integer":
                return numbers.astype("int64") if (present % 1 == 0).all() else None
            return numbers
        return None
    if kind == "text" and types.infer_dtype(values, skipna=True) == "string":
        stripped = values.where(~missing, "").astype(str).str.strip()
        return stripped.astype(object).where(~missing, None)
    if kind == "timestamp" and types.is_datetime64_any_dtype(values.dtype):
        stamps = pd.to_datetime(values, utc=True)
        return None if stamps.isna().any() else stamps
    if kind == "timestamp" and types.infer_dtype(values, skipna=True) == "string":
        stamps = pd.to_datetime(values, utc=True, format="ISO8601", errors="coerce")
        return None if stamps.isna().any() else stamps
    return None


def _value(column: ChatColumn, value: Any, row: int, where: _Where) -> Any:
    """One present value of `column`, parsed; ChatExportError naming its place when it does not parse."""
    kind = column.kind
    if kind == "text":
        return str(int(value)) if isinstance(value, float) and value.is_integer() else str(value).strip()
    if kind == "raw_text":
        return "" if value is None or (isinstance(value, float) and value != value) else str(value)
    if kind == "boolean":
        import numpy as np

        text = str(value).strip().lower()
        if isinstance(value, (bool, np.bool_)):
            return bool(value)
        if text in _TRUE or text in _FALSE:
            return text in _TRUE
        raise where.fail(row, column.name, f"is {value!r}; expected true or false")
    if kind in ("integer", "number"):
        return _number(column, value, row, where)
    if kind == "choice":
        text = str(value).strip().lower()
        if text not in column.choices:
            raise where.fail(row, column.name, f"is {value!r}; expected one of {', '.join(column.choices)}")
        return text
    if kind == "json":
        if isinstance(value, (dict, list)):
            return json.dumps(value)
        try:
            json.loads(str(value))
        except json.JSONDecodeError as err:
            raise where.fail(row, column.name, f"is {value!r}; expected JSON text ({err.msg})") from err
        return str(value)
    return _timestamp(column, value, row, where)


def _number(column: ChatColumn, value: Any, row: int, where: _Where) -> float | int:
    whole = column.kind == "integer"
    expected = "a whole number" if whole else "a number"
    try:
        number = float(str(value).strip())
    except ValueError:
        number = float("nan")
    if isinstance(value, bool) or not number == number or abs(number) == float("inf") or (
            whole and not number.is_integer()):
        raise where.fail(row, column.name, f"is {value!r}; expected {expected}")
    if column.minimum is not None and number < column.minimum:
        raise where.fail(row, column.name, f"is {value!r}; expected {expected} of at least {column.minimum:g}")
    return int(number) if whole else number


def _timestamp(column: ChatColumn, value: Any, row: int, where: _Where) -> Any:
    import pandas as pd

    try:
        stamp = pd.Timestamp(str(value).strip())
    except ValueError:
        stamp = pd.NaT
    if stamp is pd.NaT:
        raise where.fail(row, column.name, f"is {value!r}; expected an ISO-8601 timestamp")
    return stamp.tz_localize("UTC") if stamp.tzinfo is None else stamp.tz_convert("UTC")


def _check_indices(name: str, table: pd.DataFrame, where: _Where) -> None:
    """Even indices are the rater's, odd ones the system's; an annotation is about a system turn."""
    odd = (table["index"] % 2 == 1).to_numpy()
    if name == "turns":
        wrong = odd != (table["speaker"] == "system").to_numpy()
        if wrong.any():
            row = int(wrong.argmax())
            raise where.fail(row, "speaker", f"is {table['speaker'].iloc[row]!r} but index {table['index'].iloc[row]} "
                                             "is " + ("odd" if odd[row] else "even") + "; even indices are the "
                                             "rater's utterances, odd ones the system's")
    elif (~odd).any():
        row = int((~odd).argmax())
        raise where.fail(row, "index", f"is {table['index'].iloc[row]}; annotations are about the system's turns, "
                                       "whose indices are odd")


def _check_duplicates(name: str, table: pd.DataFrame, where: _Where) -> None:
    key, what = _KEYS[name]
    repeated = table.duplicated(list(key), keep=False).to_numpy()
    if not repeated.any():
        return
    rows = [int(i) for i in repeated.nonzero()[0]]
    first = table.iloc[rows[0]]
    twin = next(row for row in rows[1:] if all(table[k].iloc[row] == first[k] for k in key))
    described = ", ".join(f"{k} {first[k]!r}" for k in key)
    raise ChatExportError(f"{where.source}: {where(rows[0])} and {where(twin)} hold the same {what} ({described}); "
                          "each comes once: re-export from the store")
