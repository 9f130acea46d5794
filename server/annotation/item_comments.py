"""Per-item comments (`[design] item_comments = true` in the study file): the optional comment a rater writes under
one item of a Likert or A/B assignment, sent as the item's entry's `comment` with the submission and stored in
`item_comment` (server/store/item_comment_tables.py), one row per (assignment, item).

An entry's comment is checked as the assignment's is (a string of at most MAX_ITEM_COMMENT characters the store
can hold); an empty or blank one is no comment. A study without item comments refuses an entry that carries one,
saying so, before anything is stored. The comments are written in the submission's own write transaction, so a
retry of the same submission (answered from what is stored) stores nothing twice; the export shows each on every
row of its item (the kinds' export_rows, column `item_comment`), and `annotators forget` deletes them
(server/annotation/withdraw.py).
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, insert, select
from sqlalchemy.orm import Session

from empeval.server.annotation.submission_schema import MAX_COMMENT, STORABLE_TEXT_PATTERN, STORABLE_TEXT_RULE
from empeval.server.errors import BadInput
from empeval.server.store.item_comment_tables import ItemComment
from empeval.server.store.storable import text_problem
from empeval.server.store.study_config import StudyConfig

MAX_ITEM_COMMENT = MAX_COMMENT  # capped as the assignment's comment is

# The `comment` property of an entry, as the submission's JSON schema states it.
COMMENT_SCHEMA: dict[str, Any] = {
    "type": ["string", "null"], "maxLength": MAX_ITEM_COMMENT, "pattern": STORABLE_TEXT_PATTERN,
    "description": f"optional: the rater's comment on this unit, only when the study takes item comments "
                   f"(design.item_comments); {STORABLE_TEXT_RULE}"}


def entry_comment(entry: dict, where: str) -> str | None:
    """An entry's `comment`, checked: None when absent, null, empty or blank; else the text as sent. BadInput
    naming the entry when it is not a string of at most MAX_ITEM_COMMENT characters the store can hold.

    >>> entry_comment({"comment": "  "}, "ratings[0]"), entry_comment({"comment": "too vague"}, "ratings[0]")
    (None, 'too vague')
    """
    comment = entry.get("comment")
    if comment is None:
        return None
    if not isinstance(comment, str) or len(comment) > MAX_ITEM_COMMENT:
        raise BadInput(f"{where}.comment must be a string of at most {MAX_ITEM_COMMENT} characters")
    if problem := text_problem(comment):
        raise BadInput(f"{where}.comment {problem}")
    return comment if comment.strip() else None


def comments_of(answers: Any) -> dict[int, str]:
    """Unit id -> comment, of a kind's validated answers (a mapping of unit id to answer); answers without a
    `comment` (another kind's, or none given) have none."""
    if not isinstance(answers, Mapping):
        return {}
    return {item: comment for item, answer in answers.items() if (comment := getattr(answer, "comment", None))}


def refuse_unless_taken(config: StudyConfig, comments: Mapping[int, str], entries: str) -> None:
    """BadInput when the submission carries item comments and the study takes none."""
    if comments and not config.design.item_comments:
        raise BadInput(f"study {config.name!r} takes no comments on single items (design.item_comments is off): "
                       f"send {entries} without 'comment', and any remark as the submission's 'comment'")


def store_comments(connection: Connection, assignment_id: int, comments: Mapping[int, str], now: datetime) -> None:
    """Insert the comments of one assignment (one statement, nothing when there are none)."""
    if comments:
        rows = [{"assignment_id": assignment_id, "item_id": item, "comment": text, "submitted_at": now}
                for item, text in comments.items()]
        connection.execute(insert(ItemComment), rows)


def comments_by_unit(session: Session, assignment_ids: Iterable[int]) -> dict[tuple[int, int], str]:
    """(assignment id, unit id) -> comment, for the given assignments (an export's)."""
    wanted = sorted(set(assignment_ids))
    found: dict[tuple[int, int], str] = {}
    for start in range(0, len(wanted), 500):  # bounded IN lists
        for assignment_id, item_id, comment in session.execute(
                select(ItemComment.assignment_id, ItemComment.item_id, ItemComment.comment)
                .where(ItemComment.assignment_id.in_(wanted[start:start + 500]))):
            found[(assignment_id, item_id)] = comment
    return found
