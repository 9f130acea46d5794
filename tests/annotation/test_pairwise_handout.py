"""A pairwise (A/B) study through the shared hand-out, submit and API: a claim records the contexts of its pairs as
seen (so nobody judges a context twice in the study), an expired assignment's copy keeps every pair on the side it
was shown, the next-assignment call answers the pairwise payload and the one submit route stores choices."""
from __future__ import annotations

from collections import Counter
from datetime import timedelta

import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session

from empeval.server.annotation.annotators import invite
from empeval.server.annotation.handout import (
    assignment_payload,
    expire_overdue,
    next_assignment,
    next_assignment_payload,
)
from empeval.server.store.engine import counting_statements
from empeval.server.store.kinds.pairwise import AssignmentPair, Choice
from empeval.server.store.models import Assignment, SeenContext
from empeval.server.store.queries import now_utc
from empeval.server.web import create_app
from tests.annotation.conftest import new_submission_id
from tests.annotation.pairwise_fixtures import AB_CRITERIA, make_ab_study, placements


def test_a_claim_records_the_contexts_of_its_pairs_as_seen(sample_engine):
    make_ab_study(sample_engine)
    rita, _ = invite(sample_engine, "rita", "ab")
    assignment_id = next_assignment(sample_engine, "ab", rita.id)
    placed = placements(sample_engine, assignment_id)
    assert placed
    with Session(sample_engine) as session:
        seen = session.execute(select(SeenContext.context_id, SeenContext.assignment_id)
                               .where(SeenContext.annotator_id == rita.id)).all()
    assert sorted(seen) == sorted({(p.context_id, assignment_id) for p in placed})


def test_nobody_is_handed_a_context_twice_in_a_pairwise_study(sample_engine):
    make_ab_study(sample_engine, count=8, k=3, per_assignment=3)
    rita, _ = invite(sample_engine, "rita", "ab")
    contexts: Counter[int] = Counter()
    handed = []
    for _ in range(50):
        assignment_id = next_assignment(sample_engine, "ab", rita.id)
        if assignment_id is None:
            break
        handed.append(assignment_id)
        contexts.update(p.context_id for p in placements(sample_engine, assignment_id))
        with Session(sample_engine) as session, session.begin():  # done with it: she may take the next
            session.get_one(Assignment, assignment_id).status = "submitted"
    assert len(handed) > 1 and contexts and max(contexts.values()) == 1


def test_an_expired_assignments_copy_keeps_its_pairs_on_the_sides_shown(sample_engine):
    make_ab_study(sample_engine)
    rita, _ = invite(sample_engine, "rita", "ab")
    assignment_id = next_assignment(sample_engine, "ab", rita.id)
    with Session(sample_engine) as session, session.begin():
        expired = expire_overdue(session, session.get_one(Assignment, assignment_id).study_id,
                                 now_utc() + timedelta(days=1))
    assert expired == 1
    with Session(sample_engine) as session:
        copy = session.scalar(select(Assignment.id).where(Assignment.replaces_id == assignment_id))
        rows = {a: session.execute(select(AssignmentPair.position, AssignmentPair.pair_item_id,
                                          AssignmentPair.shown_left)
                                   .where(AssignmentPair.assignment_id == a)
                                   .order_by(AssignmentPair.position)).all()
                for a in (assignment_id, copy)}
    assert rows[copy] == rows[assignment_id] and {side for *_, side in rows[copy]} <= {"a", "b"} and rows[copy]


def test_the_next_assignment_is_the_pairwise_payload_for_the_page(sample_engine):
    make_ab_study(sample_engine)
    rita, _ = invite(sample_engine, "rita", "ab")
    page = next_assignment_payload(sample_engine, "ab", rita.id)
    assert page["kind"] == "pairwise" and page == assignment_payload(sample_engine, page["assignment_id"])
    assert [item["response_a"] for item in page["items"]] == \
        [p.left[1] for p in placements(sample_engine, page["assignment_id"])]


def test_the_api_hands_out_pairs_and_takes_choices_through_the_one_submit_route(sample_engine):
    make_ab_study(sample_engine)
    _, token = invite(sample_engine, "rita", "ab")
    app = create_app({"DATABASE_URL": sample_engine.url.render_as_string(hide_password=False), "TESTING": True})
    client = app.test_client()
    headers = {"Authorization": f"Bearer {token}"}
    page = client.get("/api/annotate/next", headers=headers).get_json()["assignment"]
    assert page["kind"] == "pairwise"
    body = {"submission_id": new_submission_id(), "judgments": [
        {"item_id": item["item_id"], "choices": {c: "B" for c in AB_CRITERIA}} for item in page["items"]]}
    url = f"/api/assignments/{page['assignment_id']}/submit"
    first = client.post(url, json=body, headers=headers)
    assert first.status_code == 200, first.get_json()
    assert client.post(url, json=body, headers=headers).get_json() == first.get_json()
    refused = client.post(url, json={**body, "submission_id": new_submission_id()}, headers=headers)
    assert refused.status_code == 409
    with Session(sample_engine) as session:
        choices = session.scalars(select(Choice.choice).where(Choice.assignment_id == page["assignment_id"])).all()
    assert len(choices) == 3 * len(page["items"]) == first.get_json()["choices"] and set(choices) == {"right"}
    wrong = client.post(url, json={"submission_id": new_submission_id(), "ratings": []}, headers=headers)
    assert wrong.status_code in (400, 409)


@pytest.mark.parametrize("per_assignment", [2, 8])
def test_pairwise_next_and_submit_cost_the_likert_budget_whatever_the_pairs(sample_engine, per_assignment):
    """At most six SQL statements for claiming, resuming, submitting and resubmitting, as for a Likert study
    (tests/annotation/test_statement_counts.py), the same with 2 or 8 pairs per assignment."""
    # Two slots leave no room for a control (0.25 x 2 rounds to none, which study create refuses).
    make_ab_study(sample_engine, count=16, per_assignment=per_assignment,
                  control_rate=0.0 if per_assignment == 2 else 0.25)
    app = create_app({"DATABASE_URL": sample_engine.url.render_as_string(hide_password=False), "TESTING": True})
    engine, client = app.extensions["empeval.engine"], app.test_client()
    _, token = invite(sample_engine, "counted", "ab")
    headers = {"Authorization": f"Bearer {token}"}
    with counting_statements(engine) as claiming:
        claimed = client.get("/api/annotate/next", headers=headers).get_json()["assignment"]
    with counting_statements(engine) as resuming:
        assert client.get("/api/annotate/next", headers=headers).get_json()["assignment"] == claimed
    body = {"submission_id": new_submission_id(), "judgments": [
        {"item_id": item["item_id"], "choices": {c: "A" for c in AB_CRITERIA}, "seconds": 2.0}
        for item in claimed["items"]]}
    url = f"/api/assignments/{claimed['assignment_id']}/submit"
    with counting_statements(engine) as submitting:
        receipt = client.post(url, json=body, headers=headers)
    with counting_statements(engine) as resubmitting:
        again = client.post(url, json=body, headers=headers)
    assert len(claimed["items"]) >= per_assignment - 1 and receipt.status_code == 200
    assert again.get_json() == receipt.get_json() and receipt.get_json()["choices"] == 3 * len(claimed["items"])
    counts = {"claim": len(claiming), "resume": len(resuming), "submit": len(submitting),
              "resubmit": len(resubmitting)}
    assert max(counts.values()) <= 6, (counts, submitting.statements)
