"""server/store/bulk.py on both backends: the ids come back in the order of the rows given (the placements of a
study are written against them), the columns' Python defaults are applied as for a mapped object, nothing is sent
for no rows, and a row that breaks a constraint fails the statement without leaving the others."""
from __future__ import annotations

import pytest
from sqlalchemy import event, func, select
from sqlalchemy.exc import IntegrityError

from empeval.server.store import unit_of_work
from empeval.server.store.bulk import insert_returning_ids, insert_rows
from empeval.server.store.models import Assignment, Study
from empeval.server.store.statuses import AssignmentStatus, StudyStatus
from empeval.tasks.study_file import parse_study


def _study(session) -> int:
    spec = parse_study({"name": "bulk", "seed": 1, "contexts": {"split": "test", "count": 2},
                        "systems": {"names": ["a", "b"]}, "design": {"ratings_per_response": 1},
                        "pay": {"per_assignment": 0.5, "currency": "USD"}})
    study = Study(name="bulk", config=spec, seed=1, status=StudyStatus.OPEN)
    session.add(study)
    session.flush()
    return study.id


def test_ids_come_back_in_the_order_of_the_rows_with_defaults_applied(empty_store):
    order = [7, 2, 9, 0, 5, 1, 8, 3, 6, 4]  # design positions, not sorted: ids must follow the rows, not the values
    with unit_of_work(empty_store) as session:
        study_id = _study(session)
        ids = insert_returning_ids(session, Assignment, [
            {"study_id": study_id, "round": 1, "design_index": index} for index in order])
    assert len(set(ids)) == len(order)
    with unit_of_work(empty_store) as session:
        stored = {a.id: a for a in session.scalars(select(Assignment))}
    assert [stored[i].design_index for i in ids] == order
    # status, created_at and late were not given: their defaults are, as for Assignment(...)
    assert {(a.status, a.late, a.round) for a in stored.values()} == {(AssignmentStatus.OPEN, False, 1)}
    assert all(a.created_at is not None for a in stored.values())


def test_no_rows_send_no_statement(empty_store):
    sent = []
    event.listen(empty_store, "before_cursor_execute", lambda *args: sent.append(args[2]))
    with unit_of_work(empty_store) as session:
        assert insert_returning_ids(session, Assignment, []) == []
        insert_rows(session, Assignment, [])
    assert not [s for s in sent if s.lstrip().upper().startswith("INSERT")]


def test_a_row_that_breaks_a_constraint_fails_the_whole_write(empty_store):
    with unit_of_work(empty_store) as session:
        study_id = _study(session)
    rows = [{"study_id": study_id, "design_index": i} for i in range(3)]
    rows[1]["submission_id"] = rows[2]["submission_id"] = "twice"  # unique: the third row breaks it
    rows[0]["submission_id"] = "once"
    with pytest.raises(IntegrityError), unit_of_work(empty_store) as session:
        insert_rows(session, Assignment, rows)
    with unit_of_work(empty_store) as session:
        assert session.scalar(select(func.count()).select_from(Assignment)) == 0
