"""The annotators' comments on their assignments and on single items, for the report.

The export's optional ``comment`` column holds the comment an annotator left on an assignment, repeated on each
of the assignment's rows; the report lists each assignment's comment once. Its optional ``item_comment`` column
(studies with design.item_comments) holds her comment on one item, repeated on each rating of it; the report lists
each once with its item (``item_comments``) and writes them to tables/item_comments.csv (``comments_section``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pandas as pd

if TYPE_CHECKING:
    from empeval.analysis.report.sections import Section

COMMENT_COLUMNS = ("annotator", "assignment", "comment")
ITEM_COMMENT_COLUMNS = ("item", "context", "system", "annotator", "assignment", "item_comment")


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


def _folded(values: pd.Series) -> pd.Series:
    """Text with whitespace runs (newlines included) folded to one space; missing as empty."""
    return values.where(values.notna(), "").astype(str).str.split().str.join(" ")


def item_comments(ratings: pd.DataFrame) -> pd.DataFrame:
    """One row per annotator's non-empty comment on an item (the tidy table's ``item_comment``, on each rating of the
    item): ``ITEM_COMMENT_COLUMNS`` (item, context, system, annotator, assignment, the comment with whitespace runs
    folded to one space), sorted by item then annotator. Empty without the column (an export from before it) or any
    such comment.

    >>> rows = pd.DataFrame({"item": ["7:moel", "7:moel", "7:moel", "8:gold"], "context": ["7", "7", "7", "8"],
    ...                      "system": ["moel", "moel", "moel", "gold"], "annotator": ["a", "a", "b", "a"],
    ...                      "assignment": ["1", "1", "2", "1"],
    ...                      "item_comment": ["Too\\n short", "Too\\n short", "", None]})
    >>> item_comments(rows).iloc[0].tolist()
    ['7:moel', '7', 'moel', 'a', '1', 'Too short']
    >>> len(item_comments(rows))
    1
    """
    if "item_comment" not in ratings.columns:
        return pd.DataFrame(columns=list(ITEM_COMMENT_COLUMNS))
    text = _folded(ratings["item_comment"])
    found = ratings.assign(item_comment=text).loc[text != "", list(ITEM_COMMENT_COLUMNS)]
    found = found.astype({"item": str, "context": str, "assignment": str})
    return (found.drop_duplicates(["item", "annotator", "assignment"])
            .sort_values(["item", "annotator", "assignment"], kind="stable").reset_index(drop=True))


def comments_section(ratings: pd.DataFrame, *, name: str = "comments") -> Section | None:
    """The report's Comments section of a tidy table: the comments left on assignments (``assignment_comments``) and
    those left on single items (``item_comments``), each counted and listed as written (free text: nothing in it is
    read as markup), the item comments also a CSV (tables/item_comments.csv); None when there is neither.

    >>> rows = pd.DataFrame({"item": ["7:moel"], "context": ["7"], "system": ["moel"], "annotator": ["a"],
    ...                      "assignment": ["1"], "comment": ["All fine"], "item_comment": ["**Rude**"]})
    >>> from empeval.analysis.report.document import Document, to_markdown
    >>> section = comments_section(rows)
    >>> text = to_markdown(Document("r", section.blocks))
    >>> "1 comment left on assignments" in text, "1 comment on 1 item by 1 annotator" in text
    (True, True)
    >>> [line for line in text.splitlines() if "item 7:moel" in line]  # the stars escaped, not read as bold
    ['- a, assignment 1, item 7:moel (moel, context 7): \\\\*\\\\*Rude\\\\*\\\\*']
    >>> list(section.tables)
    ['item_comments']
    """
    from empeval.analysis.report.document import Block, BulletList, Heading, Paragraph
    from empeval.analysis.report.sections import Section

    on_assignments, on_items = assignment_comments(ratings), item_comments(ratings)
    if on_assignments.empty and on_items.empty:
        return None
    blocks: list[Block] = [Heading("Comments")]
    if not on_assignments.empty:
        blocks += [Paragraph(f"{_count(len(on_assignments), 'comment')} left on assignments (annotator, assignment: "
                             "comment), as written:"),
                   BulletList([f"{c.annotator}, assignment {c.assignment}: {c.comment}"
                               for c in on_assignments.itertuples(index=False)], literal=True)]
    tables = {}
    if not on_items.empty:
        blocks += [Paragraph(f"{_count(len(on_items), 'comment')} on {_count(on_items['item'].nunique(), 'item')} by "
                             f"{_count(on_items['annotator'].nunique(), 'annotator')}, as written (annotator, "
                             "assignment, item (system, context): comment; also in tables/item_comments.csv):"),
                   BulletList([f"{c.annotator}, assignment {c.assignment}, item {c.item} ({c.system}, context "
                               f"{c.context}): {c.item_comment}" for c in on_items.itertuples(index=False)],
                              literal=True)]
        tables["item_comments"] = on_items
    return Section(name, blocks, tables=tables)


def _count(n: int, singular: str) -> str:
    return f"{n} {singular}{'' if n == 1 else 's'}"
