"""Freeing an abandoned assignment before it expires (`empeval assignments release ID`), by the hand-out's own
release: the assignment goes back to the pool as it was and the seen rows its claim wrote go with it (its work was
never stored, so no response can get two ratings from the rater who abandoned it)."""
from __future__ import annotations

from typing import NamedTuple

from sqlalchemy import Engine, select

from empeval.server.annotation.handout import release
from empeval.server.errors import BadInput, NotFound
from empeval.server.store.engine import unit_of_work
from empeval.server.store.models import Annotator, Assignment, Study
from empeval.server.store.queries import iso_utc
from empeval.server.store.statuses import AssignmentStatus


class Released(NamedTuple):
    assignment_id: int
    study: str
    annotator: str  # the pseudonym of the rater who held it


def release_assignment(engine: Engine, assignment_id: int) -> Released:
    """Put the in-progress assignment `assignment_id` back in the pool now. BadInput, saying why, when it is not in
    progress (submitted, never handed out, or expired); NotFound when there is no such assignment."""
    with unit_of_work(engine) as session:
        row = session.execute(
            select(Assignment, Study.name, Annotator.pseudonym)
            .join(Study, Study.id == Assignment.study_id)
            .outerjoin(Annotator, Annotator.id == Assignment.annotator_id)
            .where(Assignment.id == assignment_id).with_for_update(of=Assignment)
        ).first()
        if row is None:
            raise NotFound(f"no assignment {assignment_id}: `empeval annotators list STUDY` shows the assignments "
                           f"in progress")
        assignment, study, pseudonym = row
        _refuse_unless_in_progress(session, assignment, study)
        holder = assignment.annotator_id
        if holder is None or not release(session, assignment.id, holder):
            raise BadInput(f"assignment {assignment_id} of study {study!r} changed while it was being released "
                           f"(just submitted or expired): run `empeval annotators list {study}` and try again")
        return Released(assignment.id, study, pseudonym)


def _refuse_unless_in_progress(session, assignment: Assignment, study: str) -> None:
    if assignment.status == AssignmentStatus.ASSIGNED:
        return
    what = f"assignment {assignment.id} of study {study!r}"
    if assignment.status == AssignmentStatus.SUBMITTED:
        raise BadInput(f"{what} was submitted at {iso_utc(assignment.submitted_at)}: its ratings are stored, so "
                       f"it cannot go back to the pool. To take a participant's work out of the study use "
                       f"`empeval annotators forget NAME --study {study}`")
    if assignment.status == AssignmentStatus.OPEN:
        raise BadInput(f"{what} is not handed out to anyone: it is in the pool already, nothing to release")
    copy = session.scalar(select(Assignment.id).where(Assignment.replaces_id == assignment.id))
    raise BadInput(f"{what} has expired already and assignment {copy}, a copy of it, replaced it in the pool: "
                   f"nothing to release")
