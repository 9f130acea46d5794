"""What the task page needs to show a pairwise (A/B) assignment: per pair, the conversation and the two responses
as the rater sees them, A on the left and B on the right.

A is the response the placement logged as shown on the left (`assignment_pair.shown_left`), B the other one. The
payload carries text only: no system name, no response or system id, and nothing that says which pair is a
control (a rater who could tell would judge the control, not the responses). The criteria are the study's
questions; "tie" is offered only when the study allows ties.

Cost: one statement for the assignment with its study, one for every pair with both responses and the context's
turns (a row per turn), however many pairs.
"""
from __future__ import annotations

from dataclasses import asdict
from datetime import datetime
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from empeval.server.annotation import hot_sql
from empeval.server.annotation.hot_sql import Executor, StudyView
from empeval.server.errors import BadInput, NotFound
from empeval.server.store.models import Assignment, Study
from empeval.server.store.queries import iso_utc

PAIRWISE = "pairwise"
DEFAULT_TITLE = "Compare responses in conversations"

def pairwise_items(connection: Executor, assignment_id: int) -> list[dict[str, Any]]:
    """The assignment's pairs in stored order: `item_id` (the pair item), `position`, `context` (its turns) and
    `response_a` / `response_b`, the texts shown left and right. One statement, however many pairs."""
    items: list[dict[str, Any]] = []
    for row in hot_sql.run(connection, hot_sql.PAIRS, {"assignment": assignment_id}):
        position, pair_item_id, left, right, role, text = tuple(row)
        if not items or items[-1]["position"] != position:
            items.append({"item_id": pair_item_id, "position": position, "context": [],
                          "response_a": left, "response_b": right})
        if role is not None:
            items[-1]["context"].append({"role": role, "text": text})
    return items


def pairwise_payload(study: Study | StudyView, assignment_id: int, status: str, expires_at: datetime | None,
                     items: list[dict[str, Any]]) -> dict[str, Any]:
    """The page's payload for a pairwise assignment, in the Likert payload's shape where they share a meaning
    (assignment_id, status, expires_at, study, criteria, items) plus `kind` and `ties`, and no scale."""
    config = study.config
    return {
        "kind": PAIRWISE,
        "assignment_id": assignment_id,
        "status": status,
        "expires_at": iso_utc(expires_at),
        "study": {"name": study.name, "title": config.title or DEFAULT_TITLE, "instructions": config.instructions},
        "criteria": [asdict(c) for c in config.criteria],
        "ties": bool(config.pairwise.ties) if config.pairwise is not None else True,
        "items": items,
    }


def pairwise_assignment_payload(session: Session, assignment_id: int) -> dict[str, Any]:
    """The payload of a pairwise assignment read in `session`: NotFound when there is no such assignment,
    BadInput when it belongs to a Likert study (its page is the Likert one)."""
    row = session.execute(select(Assignment.status, Assignment.expires_at, Study)
                                 .join(Study, Study.id == Assignment.study_id)
                                 .where(Assignment.id == assignment_id)).first()
    if row is None:
        raise NotFound(f"no assignment {assignment_id}")
    status, expires_at, study = row
    if not study.config.is_pairwise:
        raise BadInput(f"assignment {assignment_id} is of the Likert study {study.name!r}, not a pairwise one")
    return pairwise_payload(study, assignment_id, status, expires_at, pairwise_items(session, assignment_id))
