"""The ACUTE-Eval judgment contract: one row per judgment, per question, of one pair of conversations.

Defined once, here: the store's ACUTE exporter writes exactly these columns and the report reads them through
``validate_acute``. The table carries every column of the A/B judgment table (``analysis.kinds.pairwise.schema``),
with the same meaning, so that the A/B analysis runs on it unchanged (``judgment_view``), and its own: which pair of
conversations was judged (``comparison_id``), the two conversations as the chat study's export names them, their
prompts, and the rater's justification. A rater picks the listener on the left or the one on the right: ACUTE-Eval
has no tie, so ``choice`` is never ``tie``.

``context_id`` is the prompt the two conversations share, or for a pair on two prompts the lower of the two
(``context_left``, ``context_right`` say which). The unit the A/B analysis tests, resamples and agrees on is the
pair of conversations: ``judgment_view`` puts ``comparison_id`` in the A/B table's ``context_id``.

The column definitions import nothing; the validator imports numpy and pandas when called.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from empeval.analysis.kinds import ExportFileError
from empeval.analysis.kinds.columns import booleans, integers, read_table_file, required_text
from empeval.analysis.kinds.pairwise.schema import JUDGMENT_COLUMNS, JUDGMENT_SCHEMA, JudgmentColumn, pair_name

if TYPE_CHECKING:
    import pandas as pd

_CONTEXT = JudgmentColumn("context_id", "integer", True,
                          "the prompt both conversations are about (for a pair on two prompts, the lower of the two)")
ACUTE_SCHEMA: tuple[JudgmentColumn, ...] = (
    *(_CONTEXT if column.name == "context_id" else column for column in JUDGMENT_SCHEMA),
    JudgmentColumn("comparison_id", "integer", True, "the pair of conversations judged (the unit)"),
    JudgmentColumn("conversation_left", "integer", True,
                   "the conversation shown on the left: its conversation_id in the chat study's export"),
    JudgmentColumn("conversation_right", "integer", True, "the conversation shown on the right, likewise"),
    JudgmentColumn("chat_assignment_left", "integer", True,
                   "the chat session the left conversation was talked in (its assignment_id in the chat export)"),
    JudgmentColumn("chat_assignment_right", "integer", True, "the chat session of the right conversation"),
    JudgmentColumn("context_left", "integer", True, "the prompt of the left conversation"),
    JudgmentColumn("context_right", "integer", True, "the prompt of the right conversation"),
    JudgmentColumn("same_prompt", "boolean", True, "whether both conversations are about the same prompt"),
    JudgmentColumn("justification", "text", True, "why the rater picked that side, as she wrote it"),
)
ACUTE_COLUMNS: tuple[str, ...] = tuple(column.name for column in ACUTE_SCHEMA)
OWN_COLUMNS: tuple[str, ...] = ACUTE_COLUMNS[len(JUDGMENT_COLUMNS):]
SIDES: tuple[str, ...] = ("left", "right")


class AcuteExportError(ExportFileError):
    """The ACUTE judgment table does not follow the contract; the message names the row, the column and the fix."""


def validate_acute(judgments: Any, *, source: str = "acute judgments") -> pd.DataFrame:
    """Check an ACUTE judgment table (a DataFrame or records) against the contract and return it with clean dtypes.

    The A/B columns are checked by ``analysis.kinds.pairwise.schema.validate_judgments`` (one judgment per annotator,
    pair of conversations and question); then: ``choice`` is left or right; ``same_prompt`` says whether the two
    prompts are one; ``context_id`` is the lower of them; the justification is not empty. Rows are numbered from 1.

    Returns
    -------
    judgments : pandas.DataFrame
        The columns ``ACUTE_COLUMNS`` in order, typed as the A/B table's (``validate_judgments``), the ids as int64,
        ``same_prompt`` as bool, ``justification`` as text.

    Examples
    --------
    >>> rows = acute_rows([(9, 3, "a", 4, 5, "b", 4, "left")])
    >>> table = validate_acute(rows)
    >>> table[["context_id", "preferred", "same_prompt", "justification"]].values.tolist()
    [[4, 'a', True, 'The left listener cared more.']]
    >>> validate_acute([{**rows[0], "choice": "tie", "preferred": "tie"}])
    Traceback (most recent call last):
    ...
    empeval.analysis.kinds.acute.schema.AcuteExportError: acute judgments: row 1, column 'choice' is 'tie'; ...
    """
    import numpy as np
    import pandas as pd

    from empeval.analysis.kinds.pairwise.schema import validate_judgments

    table = judgments.copy() if isinstance(judgments, pd.DataFrame) else pd.DataFrame.from_records(list(judgments))
    missing = [c for c in ACUTE_COLUMNS if c not in table.columns]
    if missing:
        raise AcuteExportError(f"{source} is missing column(s) {', '.join(repr(c) for c in missing)}; the ACUTE "
                               f"judgment contract has: {', '.join(ACUTE_COLUMNS)}")
    table = table.loc[:, list(ACUTE_COLUMNS)].reset_index(drop=True)
    own = pd.DataFrame(index=table.index)
    for column in ACUTE_SCHEMA[len(JUDGMENT_COLUMNS):]:
        values = table[column.name]
        if column.kind == "integer":
            own[column.name] = integers(values, column.name, source, AcuteExportError)
        elif column.kind == "boolean":
            own[column.name] = booleans(values, column.name, source, AcuteExportError)
        else:
            own[column.name] = required_text(values, column.name, source, AcuteExportError)
    context = integers(table["context_id"], "context_id", source, AcuteExportError)

    def fail(mask: Any, column: str, why: str) -> None:
        row = int(np.flatnonzero(np.asarray(mask))[0])
        raise AcuteExportError(f"{source}: row {row + 1}, column {column!r} is {table[column].iloc[row]!r}; {why}")

    choice = table["choice"].astype(str).str.strip().str.lower()
    if (~choice.isin(SIDES)).any():
        fail(~choice.isin(SIDES), "choice", "expected left or right (ACUTE-Eval has no tie)")
    twice = own.assign(study=table["study"], annotator=table["annotator"], criterion=table["criterion"].str.lower())
    duplicated = twice.duplicated(["study", "annotator", "comparison_id", "criterion"], keep=False)
    if duplicated.any():
        first = twice.loc[duplicated].iloc[0]
        raise AcuteExportError(f"{source}: annotator {first['annotator']!r} judged pair of conversations "
                               f"{first['comparison_id']} on {first['criterion']!r} more than once (rows "
                               f"{', '.join(map(str, np.flatnonzero(duplicated.to_numpy())[:4] + 1))}); re-export "
                               "from the store, whose ingestion is idempotent")
    same = (own["context_left"] == own["context_right"]).to_numpy()
    if (own["same_prompt"].to_numpy() != same).any():
        fail(own["same_prompt"].to_numpy() != same, "same_prompt",
             "it must say whether context_left and context_right are the same prompt")
    lower = np.minimum(own["context_left"].to_numpy(), own["context_right"].to_numpy())
    if (context.to_numpy() != lower).any():
        fail(context.to_numpy() != lower, "context_id", "it must be the lower of context_left and context_right")
    # The A/B contract, with the pair of conversations as its unit (its duplicate check is then per pair).
    clean = validate_judgments(table.loc[:, list(JUDGMENT_COLUMNS)].assign(context_id=own["comparison_id"]),
                               source=source)
    clean["context_id"] = context
    for name in OWN_COLUMNS:
        clean[name] = own[name]
    return clean.loc[:, list(ACUTE_COLUMNS)]


def judgment_view(judgments: pd.DataFrame) -> pd.DataFrame:
    """The ACUTE table as the A/B analysis reads it: its A/B columns, with the pair of conversations
    (``comparison_id``) as the unit in ``context_id`` (the per-pair sign test, the bootstrap of the ranking,
    agreement and position bias then count pairs of conversations).

    Returns
    -------
    judgments : pandas.DataFrame
        The columns ``JUDGMENT_COLUMNS`` (analysis.kinds.pairwise.schema), ``context_id`` holding ``comparison_id``.

    Examples
    --------
    >>> view = judgment_view(validate_acute(acute_rows([(9, 3, "a", 4, 5, "b", 4, "right")])))
    >>> view[["context_id", "pair", "preferred"]].values.tolist()
    [[9, 'a|b', 'b']]
    """
    return judgments.loc[:, list(JUDGMENT_COLUMNS)].assign(context_id=judgments["comparison_id"].to_numpy())


def acute_rows(specs: Any, *, annotator: str = "ann-1", study: str = "acute",
               criteria: tuple[str, ...] = ("empathy",), assignment_id: int = 1, is_control: bool = False,
               control_target: str | None = None, late: bool = False,
               justification: str = "The {side} listener cared more.") -> list[dict]:
    """Contract rows from compact specs, for hand-made tables (tests, examples): each spec is
    ``(comparison_id, conversation_left, system_left, context_left, conversation_right, system_right, context_right,
    choice)`` or the same plus an annotator, and gives one row per question with that choice; positions count the
    specs from 0, chat assignments are the conversations' ids plus 1000.

    Returns
    -------
    rows : list of dict
        One dict per spec and question, with the keys ``ACUTE_COLUMNS``.

    Examples
    --------
    >>> row = acute_rows([(1, 10, "moel", 3, 11, "gold", 3, "right", "ann-2")])[0]
    >>> row["pair"], row["preferred"], row["annotator"], row["same_prompt"]
    ('gold|moel', 'gold', 'ann-2', True)
    """
    rows = []
    for position, spec in enumerate(specs):
        comparison, left_id, left, left_context, right_id, right, right_context, choice = spec[:8]
        who = spec[8] if len(spec) > 8 else annotator
        for criterion in criteria:
            rows.append({
                "study": study, "assignment_id": assignment_id, "annotator": who,
                "context_id": min(left_context, right_context), "criterion": criterion, "pair": pair_name(left, right),
                "system_left": left, "system_right": right, "choice": choice,
                "preferred": left if choice == "left" else right, "position": position, "is_control": is_control,
                "control_target": control_target if is_control else None, "late": late, "comparison_id": comparison,
                "conversation_left": left_id, "conversation_right": right_id,
                "chat_assignment_left": left_id + 1000, "chat_assignment_right": right_id + 1000,
                "context_left": left_context, "context_right": right_context,
                "same_prompt": left_context == right_context, "justification": justification.format(side=choice)})
    return rows


def read_acute(path: Any) -> pd.DataFrame:
    """Read an ACUTE judgment table written by ``empeval export`` (``.csv``, or ``.jsonl`` / ``.ndjson``) and return
    it validated by ``validate_acute``.

    Returns
    -------
    judgments : pandas.DataFrame
        As ``validate_acute`` returns it.
    """
    return read_table_file(path, validate_acute, AcuteExportError, what="ACUTE judgment")
