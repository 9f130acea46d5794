"""The pairwise (A/B) judgment contract: one row per judgment, per criterion, of one pair on one context.

Defined once, here: the store's pairwise exporter writes exactly these columns and ``analysis.kinds.pairwise.tables``
reads them through ``validate_judgments``. A rater shown two responses (the left one labelled A, the right
one B) to one dialogue context says, per criterion, which is better or that they tie. ``choice`` records the
screen side; ``preferred`` maps it to the system, which is what every system comparison and agreement figure
uses (never the screen position; position only serves the position-bias check).

The column definitions import nothing; the validator imports numpy and pandas when called.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from empeval.analysis.kinds import ExportFileError
from empeval.analysis.kinds.columns import booleans, integers, optional_text, read_table_file, required_text

if TYPE_CHECKING:
    import pandas as pd


@dataclass(frozen=True)
class JudgmentColumn:
    """One column of the judgment table: its name, the kind of value it holds, and what it means."""

    name: str
    kind: str  # text, integer, boolean
    required: bool
    meaning: str


JUDGMENT_SCHEMA: tuple[JudgmentColumn, ...] = (
    JudgmentColumn("study", "text", True, "the study's name"),
    JudgmentColumn("assignment_id", "integer", True, "the assignment the judgment was given in"),
    JudgmentColumn("annotator", "text", True, "the annotator's pseudonym"),
    JudgmentColumn("context_id", "integer", True, "the dialogue context both responses answer"),
    JudgmentColumn("criterion", "text", True, "the criterion judged (e.g. empathy)"),
    JudgmentColumn("pair", "text", True, "the two systems as 'a|b', in sorted order (a < b)"),
    JudgmentColumn("system_left", "text", True, "the system shown on the left (labelled A)"),
    JudgmentColumn("system_right", "text", True, "the system shown on the right (labelled B)"),
    JudgmentColumn("choice", "text", True, "the side chosen: left, right or tie"),
    JudgmentColumn("preferred", "text", True, "the system chosen (the left or right system), or tie"),
    JudgmentColumn("position", "integer", True, "the pair's position within its assignment (0-based)"),
    JudgmentColumn("is_control", "boolean", True, "whether one side is a control built to lose"),
    JudgmentColumn("control_target", "text", False,
                   "for controls, the criterion the control side is built to lose on (empty otherwise)"),
    JudgmentColumn("late", "boolean", True, "submitted after the assignment had expired"),
)

JUDGMENT_COLUMNS: tuple[str, ...] = tuple(column.name for column in JUDGMENT_SCHEMA)

#: The A/B study's export: the judgment contract (which the ACUTE export builds on too) and the rater's comment on
#: the pair, an optional column (an export from before it, or a hand-made table, has none; ``validate_judgments``
#: keeps it when given).
ITEM_COMMENT = JudgmentColumn("item_comment", "text", False,
                              "the rater's comment on the pair (studies with design.item_comments; empty when none)")
#: Optional too: the seconds the rater spent on the pair, as the page measured them (the same on each criterion's
#: row; missing when not measured). The speed rule of ``analysis.kinds.pairwise.quality`` reads it when given.
SECONDS = JudgmentColumn("seconds_on_item", "number", False, "seconds the rater spent on the pair (empty when not "
                         "measured)")
EXPORT_SCHEMA: tuple[JudgmentColumn, ...] = (*JUDGMENT_SCHEMA, ITEM_COMMENT, SECONDS)
EXPORT_COLUMNS: tuple[str, ...] = tuple(column.name for column in EXPORT_SCHEMA)
OPTIONAL_COLUMNS: tuple[JudgmentColumn, ...] = (ITEM_COMMENT, SECONDS)

CHOICES: tuple[str, ...] = ("left", "right", "tie")
TIE = "tie"
PAIR_SEPARATOR = "|"


class JudgmentError(ExportFileError):
    """The judgment table does not follow the contract; the message names the column, the row and the fix."""


def pair_name(system_1: str, system_2: str) -> str:
    """The ``pair`` value of two systems: their names in sorted order, joined by ``|``.

    Returns
    -------
    pair : str

    Examples
    --------
    >>> pair_name("moel", "gold"), pair_name("gold", "moel")
    ('gold|moel', 'gold|moel')
    """
    first, second = sorted((system_1, system_2))
    return f"{first}{PAIR_SEPARATOR}{second}"


def validate_judgments(judgments: Any, *, source: str = "judgments") -> pd.DataFrame:
    """Check a judgment table (a DataFrame or records) against the contract and return it with clean dtypes.

    Checks: every contract column is present; text columns are non-empty (``control_target`` only for
    controls); integer columns are whole numbers; ``is_control`` and ``late`` are booleans or true/false text;
    ``choice`` is left, right or tie; the two sides differ and ``pair`` is their sorted names joined by ``|``;
    ``preferred`` is the system on the chosen side (``tie`` for a tie); no annotator judges the same pair on
    the same context and criterion twice. Rows are numbered from 1, as a spreadsheet shows them. Criterion
    names are lower-cased; columns outside the contract are dropped, but for the optional ``item_comment`` and
    ``seconds_on_item``.

    Returns
    -------
    judgments : pandas.DataFrame
        The columns ``JUDGMENT_COLUMNS`` in order: text as ``object``, ``assignment_id``, ``context_id`` and
        ``position`` as int64, ``is_control`` and ``late`` as bool, ``control_target`` missing (None) for
        non-controls; then ``item_comment`` when the table has it, as the A/B export does (``EXPORT_COLUMNS``):
        the comment on the pair, missing when none; then ``seconds_on_item`` (float, NaN when not measured) when
        the table has it.

    Examples
    --------
    >>> row = {"study": "ab", "assignment_id": 1, "annotator": "ann-1", "context_id": 7,
    ...        "criterion": "Empathy", "pair": "gold|moel", "system_left": "moel", "system_right": "gold",
    ...        "choice": "right", "preferred": "gold", "position": 0, "is_control": "false",
    ...        "control_target": "", "late": False}
    >>> print(validate_judgments([row])[["criterion", "pair", "preferred", "is_control"]].to_string(index=False))
    criterion      pair preferred  is_control
      empathy gold|moel      gold       False
    >>> validate_judgments([{**row, "preferred": "moel"}])
    Traceback (most recent call last):
    ...
    empeval.analysis.kinds.pairwise.schema.JudgmentError: judgments: row 1, column 'preferred' is 'moel' but choice ...
    """
    import numpy as np
    import pandas as pd

    table = judgments.copy() if isinstance(judgments, pd.DataFrame) else pd.DataFrame.from_records(list(judgments))
    missing = [c for c in JUDGMENT_COLUMNS if c not in table.columns]
    if missing:
        raise JudgmentError(f"{source} is missing column(s) {', '.join(repr(c) for c in missing)}; "
                            f"the judgment contract has: {', '.join(JUDGMENT_COLUMNS)}")
    schema = (*JUDGMENT_SCHEMA, *(column for column in OPTIONAL_COLUMNS if column.name in table.columns))
    table = table.loc[:, [column.name for column in schema]].reset_index(drop=True)
    clean = pd.DataFrame(index=table.index)
    for column in schema:
        values = table[column.name]
        if column.kind == "text" and column.required:
            clean[column.name] = required_text(values, column.name, source, JudgmentError)
        elif column.kind == "integer":
            clean[column.name] = integers(values, column.name, source, JudgmentError)
        elif column.kind == "boolean":
            clean[column.name] = booleans(values, column.name, source, JudgmentError)
        elif column.kind == "number":
            clean[column.name] = _seconds(values, column.name, source)
        else:
            clean[column.name] = optional_text(values)
    clean["criterion"] = clean["criterion"].str.lower()
    clean["choice"] = clean["choice"].str.lower()

    def fail(mask: Any, column: str, why: str) -> None:
        row = int(np.flatnonzero(np.asarray(mask))[0])
        raise JudgmentError(f"{source}: row {row + 1}, column {column!r} is {table[column].iloc[row]!r} "
                            + why.format(**clean.iloc[row].to_dict()))

    bad_choice = ~clean["choice"].isin(CHOICES)
    if bad_choice.any():
        fail(bad_choice, "choice", "; expected one of left, right, tie")
    same = clean["system_left"] == clean["system_right"]
    if same.any():
        fail(same, "system_right", ", the same as system_left; a pair needs two different systems")
    expected_pair = [pair_name(a, b) for a, b in zip(clean["system_left"], clean["system_right"], strict=True)]
    bad_pair = clean["pair"] != pd.Series(expected_pair, index=clean.index, dtype=object)
    if bad_pair.any():
        fail(bad_pair, "pair", "; the sides {system_left!r} and {system_right!r} make the pair "
             "'a|b' with the names in sorted order")
    chosen = np.select([clean["choice"] == "left", clean["choice"] == "right"],
                       [clean["system_left"], clean["system_right"]], default=TIE)
    bad_preferred = clean["preferred"].to_numpy() != chosen
    if bad_preferred.any():
        fail(bad_preferred, "preferred", "but choice is {choice!r} with {system_left!r} on the left and "
             "{system_right!r} on the right; preferred must name the chosen side's system, or tie")
    is_control = clean["is_control"].to_numpy()
    no_target = is_control & clean["control_target"].isna().to_numpy()
    if no_target.any():
        fail(no_target, "control_target", "but is_control is true; a control pair must name the "
             "criterion its control side is built to lose on")
    clean["control_target"] = clean["control_target"].str.lower().where(clean["is_control"], None)
    duplicated = clean.duplicated(["study", "annotator", "context_id", "pair", "criterion"], keep=False)
    if duplicated.any():
        rows = np.flatnonzero(duplicated.to_numpy())[:4] + 1
        first = clean.loc[duplicated].iloc[0]
        raise JudgmentError(f"{source}: annotator {first['annotator']!r} judged pair {first['pair']!r} on context "
                            f"{first['context_id']} for {first['criterion']!r} more than once (rows "
                            f"{', '.join(map(str, rows))}); re-export from the store, whose ingestion is idempotent")
    return clean


def _seconds(values: Any, column: str, source: str) -> Any:
    """An optional column of non-negative seconds as floats (NaN where empty); JudgmentError naming the first row
    that is not a number of seconds."""
    import numpy as np
    import pandas as pd

    text = values.astype(object).where(values.notna(), "").astype(str).str.strip()
    numbers = pd.to_numeric(text.where(text != "", None), errors="coerce").astype(float)
    bad = (text != "") & (numbers.isna() | ~np.isfinite(numbers.fillna(0)) | (numbers < 0))
    if bad.any():
        row = int(np.flatnonzero(bad.to_numpy())[0])
        raise JudgmentError(f"{source}: row {row + 1}, column {column!r} is {values.iloc[row]!r}; expected a number "
                            "of seconds (0 or more), or an empty cell when not measured")
    return numbers


def judgment_rows(specs: Any, *, annotator: str = "ann-1", study: str = "ab", criteria: tuple[str, ...] = ("empathy",),
                  assignment_id: int = 1, is_control: bool = False, control_target: str | None = None,
                  late: bool = False) -> list[dict]:
    """Contract rows from compact specs, for hand-made tables (tests, examples): each spec is
    ``(context_id, system_left, system_right, choice)`` or the same plus an annotator, and gives one row per
    criterion with that choice; positions count the specs from 0.

    Returns
    -------
    rows : list of dict
        One dict per spec and criterion, with the keys ``JUDGMENT_COLUMNS``.

    Examples
    --------
    >>> row = judgment_rows([(4, "moel", "gold", "right", "ann-2")])[0]
    >>> row["pair"], row["preferred"], row["annotator"]
    ('gold|moel', 'gold', 'ann-2')
    """
    rows = []
    for position, spec in enumerate(specs):
        context_id, left, right, choice = spec[:4]
        who = spec[4] if len(spec) > 4 else annotator
        preferred = {"left": left, "right": right}.get(choice, TIE)
        for criterion in criteria:
            rows.append({"study": study, "assignment_id": assignment_id, "annotator": who, "context_id": context_id,
                         "criterion": criterion, "pair": pair_name(left, right), "system_left": left,
                         "system_right": right, "choice": choice, "preferred": preferred, "position": position,
                         "is_control": is_control, "control_target": control_target if is_control else None,
                         "late": late})
    return rows


def read_judgments(path: Any) -> pd.DataFrame:
    """Read a judgment table written by ``empeval export`` for a pairwise study (``.csv``, or ``.jsonl`` /
    ``.ndjson``, one row per judgment) and return it validated by ``validate_judgments``.

    CSV is read as text (empty cells stay empty: no control target), so the validator parses every value.

    Returns
    -------
    judgments : pandas.DataFrame
        As ``validate_judgments`` returns it.

    Examples
    --------
    >>> import pathlib, tempfile
    >>> text = ("study,assignment_id,annotator,context_id,criterion,pair,system_left,system_right,choice,"
    ...         "preferred,position,is_control,control_target,late\\n"
    ...         "ab,1,ann-1,7,empathy,gold|moel,moel,gold,right,gold,0,false,,false\\n")
    >>> with tempfile.TemporaryDirectory() as folder:
    ...     path = pathlib.Path(folder) / "ab.csv"
    ...     _ = path.write_text(text)
    ...     judgments = read_judgments(path)
    >>> judgments[["context_id", "preferred", "is_control", "control_target"]].values.tolist()
    [[7, 'gold', False, None]]
    """
    return read_table_file(path, validate_judgments, JudgmentError, what="judgment")
