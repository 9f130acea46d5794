"""The researcher's preview of a study's task: the page a rater would see, built from the study's first assignment
in design order without claiming it. Nothing is written: no claim, no seen context, no deadline.

The contract with the task page: served at /admin/studies/<name>/preview (admin session), the page reads
`{"assignment": ...}` from /api/studies/<name>/preview instead of /api/annotate/next. The payload has the shape of
/api/annotate/next's assignment, with `"preview": true`, `"status": "preview"` and `"assignment_id": 0` (no
assignment has id 0, so a submit the page might still send is refused by the submit route as "you have no
assignment 0"); the assignment it shows is named in `"previewed_assignment"`. The page shows a banner and never
posts.
"""
from __future__ import annotations

from typing import Any

from sqlalchemy import Engine, select
from sqlalchemy.orm import Session

from empeval.server.annotation.handout import assignment_payload
from empeval.server.errors import NotFound
from empeval.server.store.models import Assignment
from empeval.server.store.queries import study_by_name

PREVIEW_ASSIGNMENT_ID = 0


def preview_payload(engine: Engine, study: str) -> dict[str, Any]:
    """What the task page shows of the study's first assignment (design order), marked as a preview: two reads,
    no write. NotFound for an unknown study or one without assignments."""
    with Session(engine) as session:
        study_id = study_by_name(session, study).id
        first = session.scalar(select(Assignment.id).where(Assignment.study_id == study_id)
                               .order_by(Assignment.design_index, Assignment.id).limit(1))
    if first is None:
        raise NotFound(f"study {study!r} has no assignment to preview: was it created with `empeval study create`?")
    payload = assignment_payload(engine, first)
    return {**payload, "assignment_id": PREVIEW_ASSIGNMENT_ID, "status": "preview", "expires_at": None,
            "preview": True, "previewed_assignment": first}
