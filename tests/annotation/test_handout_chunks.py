"""Hand-out past the first chunk of open assignments: in a study of a few hundred assignments every one is
offered and claimed, in design order, and nobody gets a context twice."""
from __future__ import annotations

from sqlalchemy import select

from empeval.server.annotation.annotators import invite
from empeval.server.annotation.handout import assignment_payload, next_assignment, release
from empeval.server.annotation.secrets import read_invite, secret_key
from empeval.server.annotation.submission import submit_assignment
from empeval.server.store.engine import unit_of_work
from empeval.server.store.kinds.likert import AssignmentItem
from empeval.server.store.models import Assignment
from tests.annotation.conftest import add_responses, make_study, new_submission_id

# Hand-out once looked at open assignments 50 at a time; it now asks SQL for the first that fits, and the
# positions that were chunk edges stay pinned here.
CHUNK = 50


def test_every_assignment_is_handed_out_across_several_chunks_in_design_order(sample_engine):
    add_responses(sample_engine, ["sys-a", "sys-b"], 170)
    summary = make_study(sample_engine, count=170, k=1, per_assignment=2, systems=["sys-a", "sys-b"], controls=[])
    assert summary.assignments > 3 * CHUNK  # the chunk loop must run several times
    secret = secret_key(sample_engine)
    people = [read_invite(secret, invite(sample_engine, name, "pilot")[1])[0] for name in ("ada", "bo", "cy")]
    claimed: dict[int, list[int]] = {person: [] for person in people}
    busy = True
    while busy:
        busy = False
        for person in people:
            assignment_id = next_assignment(sample_engine, "pilot", person)
            if assignment_id is None:
                continue
            busy = True
            claimed[person].append(assignment_id)
            payload = assignment_payload(sample_engine, assignment_id)
            ratings = [{"item_id": i["item_id"], "scores": {"empathy": 3, "relevance": 3, "fluency": 3}}
                       for i in payload["items"]]
            submit_assignment(sample_engine, assignment_id, person,
                              {"submission_id": new_submission_id(), "ratings": ratings})
    with unit_of_work(sample_engine) as session:
        rows = session.execute(select(Assignment.id, Assignment.status, Assignment.design_index)).all()
    assert {status for _, status, _ in rows} == {"submitted"}
    assert sum(map(len, claimed.values())) == summary.assignments
    index = {assignment_id: design_index for assignment_id, _, design_index in rows}
    for person, ids in claimed.items():
        assert [index[i] for i in ids] == sorted(index[i] for i in ids), f"{person} was not served in design order"


def test_the_one_assignment_left_for_a_rater_is_found_wherever_it_sits_in_the_open_list(sample_engine):
    """Four contexts, one system, one item per assignment, 50 rounds. Once the rater has rated three of the
    contexts, every open assignment of those is barred for her (147 of them); the one open assignment of the
    fourth is found at every position of the open list, the chunks' edges included."""
    add_responses(sample_engine, ["sys-a"], 4)
    make_study(sample_engine, count=4, k=50, per_assignment=1, systems=["sys-a"], controls=[])
    secret = secret_key(sample_engine)
    ada = read_invite(secret, invite(sample_engine, "ada", "pilot")[1])[0]
    seen = set()
    for _ in range(3):
        claimed = next_assignment(sample_engine, "pilot", ada)
        payload = assignment_payload(sample_engine, claimed)
        seen.add(payload["items"][0]["item_id"])
        submit_assignment(sample_engine, claimed, ada, {"submission_id": new_submission_id(), "ratings": [
            {"item_id": payload["items"][0]["item_id"], "scores": {"empathy": 3, "relevance": 3, "fluency": 3}}]})
    with unit_of_work(sample_engine) as session:
        rows = session.execute(select(Assignment.id, Assignment.design_index).where(Assignment.status == "open")
                               .order_by(Assignment.design_index, Assignment.id)).all()
        items = dict(session.execute(select(AssignmentItem.assignment_id, AssignmentItem.item_id)).all())
    barred = [a for a, _ in rows if items[a] in seen]
    free = [a for a, _ in rows if items[a] not in seen]
    assert len(barred) > 2 * CHUNK and free
    for position in (0, CHUNK - 1, CHUNK, 2 * CHUNK - 1, len(barred)):
        # Only one assignment of B stays open, placed after `position` barred ones in design order.
        with unit_of_work(sample_engine) as session:
            for order, assignment_id in enumerate(barred):
                session.get(Assignment, assignment_id).design_index = order if order < position else 10_000 + order
            for assignment_id in free:
                assignment = session.get(Assignment, assignment_id)
                assignment.status, assignment.design_index = "expired", 20_000
            session.get(Assignment, free[0]).status = "open"
            session.get(Assignment, free[0]).design_index = position if position < len(barred) else 9_999
        assert next_assignment(sample_engine, "pilot", ada) == free[0], f"not found at position {position}"
        with unit_of_work(sample_engine) as session:  # give it back (and her seen rows) for the next position
            assert release(session, free[0], ada)
