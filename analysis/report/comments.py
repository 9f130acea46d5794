"""The annotators' comments on their assignments, for the report.

The export's optional ``comment`` column holds the comment an annotator left on an assignment, repeated on each
of the assignment's rows; the report lists each assignment's comment once.
"""

from __future__ import annotations

import pandas as pd

COMMENT_COLUMNS = ("annotator", "assignment", "comment")


def assignment_comments(ratings: pd.DataFrame) -> pd.DataFrame:
    """One row per assignment with a non-empty comment: annotator, assignment, comment (whitespace runs,
    newlines included, folded to one space), sorted by annotator then assignment. Empty when the table has no
    ``comment`` column (an export from before it existed) or no comment.

    >>> rows = pd.DataFrame({"annotator": ["a", "a", "b"], "assignment": ["1", "1", "2"],
    ...                      "comment": ["too  long\\nfor me", "too  long\\nfor me", ""]})
    >>> assignment_comments(rows).to_dict("records")
    [{'annotator': 'a', 'assignment': '1', 'comment': 'too long for me'}]
    """
    if "comment" not in ratings.columns:
        return pd.DataFrame(columns=list(COMMENT_COLUMNS))
    text = ratings["comment"].where(ratings["comment"].notna(), "").astype(str).str.split().str.join(" ")
    found = ratings.assign(comment=text).loc[text != "", list(COMMENT_COLUMNS)]
    found = found.assign(assignment=found["assignment"].astype(str)).drop_duplicates(["assignment"])
    by_number = {"assignment": lambda ids: ids.str.zfill(20), "annotator": lambda names: names}  # "2" before "10"
    return (found.sort_values(["annotator", "assignment"], key=lambda column: by_number[str(column.name)](column),
                              kind="stable").reset_index(drop=True))


def with_export_comments(tidy: pd.DataFrame, export: pd.DataFrame) -> pd.DataFrame:
    """The tidy table (``analysis.kinds.likert.load``) with the export's ``comment`` column, matched by assignment,
    when the
    export has the column and the tidy table does not (the export contract drops columns it does not name)."""
    if "comment" in tidy.columns or "comment" not in export.columns:
        return tidy
    ids = export["assignment_id"].map(lambda v: str(v).strip())
    by_assignment = dict(zip(ids, export["comment"].where(export["comment"].notna(), ""), strict=True))
    return tidy.assign(comment=tidy["assignment"].astype(str).map(by_assignment).fillna(""))
