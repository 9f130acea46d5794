"""The best-worst choice contract: one row per answer, per criterion, about one tuple of responses to one context.

Defined once, here: the store's best-worst exporter writes exactly these columns and
``analysis.kinds.best_worst.tables`` reads them through ``validate_choices``. A rater shown the responses of a
tuple of systems to one dialogue context (labelled A, B, ... in the order shown) picks, per criterion, the best and
the worst. ``best`` and ``worst`` name the systems picked (never the letters: the order shown differs from one
placement to the next and is kept in ``shown`` for the position check).

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
class ChoiceColumn:
    """One column of the best-worst table: its name, the kind of value it holds, and what it means."""

    name: str
    kind: str  # text, integer, boolean
    required: bool
    meaning: str


BEST_WORST_SCHEMA: tuple[ChoiceColumn, ...] = (
    ChoiceColumn("study", "text", True, "the study's name"),
    ChoiceColumn("assignment_id", "integer", True, "the assignment the answer was given in"),
    ChoiceColumn("annotator", "text", True, "the annotator's pseudonym"),
    ChoiceColumn("context_id", "integer", True, "the dialogue context every response of the tuple answers"),
    ChoiceColumn("criterion", "text", True, "the criterion judged (e.g. empathy)"),
    ChoiceColumn("tuple", "text", True, "the tuple's systems as 'a|b|c|d', in sorted order"),
    ChoiceColumn("shown", "text", True, "the tuple's systems in the order shown, joined by '|' (the first was "
                                        "labelled A)"),
    ChoiceColumn("best", "text", True, "the system whose response was picked as the best"),
    ChoiceColumn("worst", "text", True, "the system whose response was picked as the worst"),
    ChoiceColumn("position", "integer", True, "the tuple's position within its assignment (0-based)"),
    ChoiceColumn("is_control", "boolean", True, "whether one response is a control built to be the worst"),
    ChoiceColumn("control_system", "text", False, "for controls, the control's system (empty otherwise)"),
    ChoiceColumn("control_target", "text", False,
                 "for controls, the criterion the control is built to be the worst on (empty otherwise)"),
    ChoiceColumn("late", "boolean", True, "submitted after the assignment had expired"),
)

BEST_WORST_COLUMNS: tuple[str, ...] = tuple(column.name for column in BEST_WORST_SCHEMA)
SEPARATOR = "|"


class BestWorstError(ExportFileError):
    """The best-worst table does not follow the contract; the message names the column, the row and the fix."""


def tuple_name(systems: Any) -> str:
    """The ``tuple`` value of some systems: their names in sorted order, joined by ``|``.

    >>> tuple_name(["moel", "gold", "mime"])
    'gold|mime|moel'
    """
    return SEPARATOR.join(sorted(systems))


def validate_choices(choices: Any, *, source: str = "best-worst choices") -> pd.DataFrame:
    """Check a best-worst table (a DataFrame or records) against the contract and return it with clean dtypes.

    Checks: every contract column is present; text columns are non-empty (the control columns only for
    controls); integer columns are whole numbers; ``is_control`` and ``late`` are booleans or true/false text;
    ``shown`` lists distinct systems and ``tuple`` is them sorted; ``best`` and ``worst`` are two different systems
    of the tuple; a control's system is one of its tuple's; no annotator answers the same tuple on the same context
    and criterion twice. Rows are numbered from 1; criterion names are lower-cased; other columns are dropped.

    Returns
    -------
    choices : pandas.DataFrame
        The columns ``BEST_WORST_COLUMNS`` in order: text as ``object``, ``assignment_id``, ``context_id`` and
        ``position`` as int64, ``is_control`` and ``late`` as bool, the control columns None for non-controls.

    Examples
    --------
    >>> row = {"study": "bws", "assignment_id": 1, "annotator": "ann-1", "context_id": 7, "criterion": "Empathy",
    ...        "tuple": "gold|mime|moel", "shown": "moel|gold|mime", "best": "gold", "worst": "mime",
    ...        "position": 0, "is_control": "false", "control_system": "", "control_target": "", "late": False}
    >>> print(validate_choices([row])[["criterion", "best", "worst", "is_control"]].to_string(index=False))
    criterion best worst  is_control
      empathy gold  mime       False
    >>> validate_choices([{**row, "worst": "gold"}])
    Traceback (most recent call last):
    ...
    empeval.analysis.kinds.best_worst.schema.BestWorstError: best-worst choices: row 1, column 'worst' is 'gold', ...
    """
    import numpy as np
    import pandas as pd

    table = choices.copy() if isinstance(choices, pd.DataFrame) else pd.DataFrame.from_records(list(choices))
    missing = [c for c in BEST_WORST_COLUMNS if c not in table.columns]
    if missing:
        raise BestWorstError(f"{source} is missing column(s) {', '.join(repr(c) for c in missing)}; the best-worst "
                             f"contract has: {', '.join(BEST_WORST_COLUMNS)}")
    table = table.loc[:, list(BEST_WORST_COLUMNS)].reset_index(drop=True)
    clean = pd.DataFrame(index=table.index)
    for column in BEST_WORST_SCHEMA:
        values = table[column.name]
        if column.kind == "text" and column.required:
            clean[column.name] = required_text(values, column.name, source, BestWorstError)
        elif column.kind == "integer":
            clean[column.name] = integers(values, column.name, source, BestWorstError)
        elif column.kind == "boolean":
            clean[column.name] = booleans(values, column.name, source, BestWorstError)
        else:
            clean[column.name] = optional_text(values)
    clean["criterion"] = clean["criterion"].str.lower()

    def fail(mask: Any, column: str, why: str) -> None:
        row = int(np.flatnonzero(np.asarray(mask))[0])
        raise BestWorstError(f"{source}: row {row + 1}, column {column!r} is {table[column].iloc[row]!r}"
                             + why.format(**clean.iloc[row].to_dict()))

    shown = [value.split(SEPARATOR) for value in clean["shown"]]
    repeated = np.array([len(set(systems)) != len(systems) or len(systems) < 2 for systems in shown])
    if repeated.any():
        fail(repeated, "shown", "; a tuple shows at least two different systems, each once")
    bad_tuple = clean["tuple"].to_numpy() != np.array([tuple_name(systems) for systems in shown], dtype=object)
    if bad_tuple.any():
        fail(bad_tuple, "tuple", "; the systems shown ({shown!r}) make the tuple of their names sorted, joined by '|'")
    members = [set(systems) for systems in shown]
    for pick in ("best", "worst"):
        outside = np.array([value not in tuple_members for value, tuple_members in zip(clean[pick], members,
                                                                                         strict=True)])
        if outside.any():
            fail(outside, pick, " but the tuple shown holds {shown!r}; pick one of its systems")
    same = (clean["best"] == clean["worst"]).to_numpy()
    if same.any():
        fail(same, "worst", ", the same as best; the best and the worst response are two different ones")
    is_control = clean["is_control"].to_numpy()
    for named in ("control_system", "control_target"):
        lacking = is_control & clean[named].isna().to_numpy()
        if lacking.any():
            fail(lacking, named, " but is_control is true; a control tuple names its control's system and the "
                 "criterion it is built to be the worst on")
    foreign = np.array([bool(control) and system not in tuple_members for control, system, tuple_members in
                        zip(is_control, clean["control_system"], members, strict=True)])
    if foreign.any():
        fail(foreign, "control_system", " but the tuple shown holds {shown!r}")
    clean["control_system"] = clean["control_system"].where(clean["is_control"], None)
    clean["control_target"] = clean["control_target"].str.lower().where(clean["is_control"], None)
    duplicated = clean.duplicated(["study", "annotator", "context_id", "tuple", "criterion"], keep=False)
    if duplicated.any():
        rows = np.flatnonzero(duplicated.to_numpy())[:4] + 1
        first = clean.loc[duplicated].iloc[0]
        raise BestWorstError(f"{source}: annotator {first['annotator']!r} answered tuple {first['tuple']!r} on "
                             f"context {first['context_id']} for {first['criterion']!r} more than once (rows "
                             f"{', '.join(map(str, rows))}); re-export from the store, whose ingestion is idempotent")
    return clean


def choice_rows(specs: Any, *, annotator: str = "ann-1", study: str = "bws", criteria: tuple[str, ...] = ("empathy",),
                assignment_id: int = 1, late: bool = False) -> list[dict]:
    """Contract rows from compact specs, for hand-made tables (tests, examples): each spec is
    ``(context_id, shown systems, best, worst)`` or the same plus an annotator, and gives one row per criterion;
    positions count the specs from 0.

    >>> row = choice_rows([(4, ("moel", "gold", "mime"), "gold", "moel", "ann-2")])[0]
    >>> row["tuple"], row["shown"], row["annotator"]
    ('gold|mime|moel', 'moel|gold|mime', 'ann-2')
    """
    rows = []
    for position, spec in enumerate(specs):
        context_id, shown, best, worst = spec[:4]
        who = spec[4] if len(spec) > 4 else annotator
        for criterion in criteria:
            rows.append({"study": study, "assignment_id": assignment_id, "annotator": who, "context_id": context_id,
                         "criterion": criterion, "tuple": tuple_name(shown), "shown": SEPARATOR.join(shown),
                         "best": best, "worst": worst, "position": position, "is_control": False,
                         "control_system": None, "control_target": None, "late": late})
    return rows


def read_choices(path: Any) -> pd.DataFrame:
    """Read a best-worst table written by ``empeval export`` (``.csv``, or ``.jsonl`` / ``.ndjson``) and return it
    validated by ``validate_choices``.

    >>> import pathlib, tempfile
    >>> text = ("study,assignment_id,annotator,context_id,criterion,tuple,shown,best,worst,position,is_control,"
    ...         "control_system,control_target,late\\n"
    ...         "bws,1,ann-1,7,empathy,gold|mime|moel,mime|moel|gold,gold,moel,0,false,,,false\\n")
    >>> with tempfile.TemporaryDirectory() as folder:
    ...     path = pathlib.Path(folder) / "bws.csv"
    ...     _ = path.write_text(text)
    ...     choices = read_choices(path)
    >>> choices[["context_id", "best", "worst", "control_system"]].values.tolist()
    [[7, 'gold', 'moel', None]]
    """
    return read_table_file(path, validate_choices, BestWorstError, what="best-worst")
