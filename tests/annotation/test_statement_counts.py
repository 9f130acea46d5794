"""How many SQL statements `next` and `submit` cost, counted at the engine the app uses: at most six each, the
same with 3 or 30 items per assignment (no lazy load per item, no INSERT per rating). The count includes every
check the call makes (closed study, revoked rater, seen contexts); BEGIN, COMMIT and PRAGMA are left out."""
from __future__ import annotations

import pytest
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from empeval.server.annotation.annotators import invite
from empeval.server.store.engine import counting_statements
from empeval.server.store.kinds.likert import AssignmentItem, Rating
from empeval.server.web import create_app
from tests.annotation.conftest import CONTROLS, SYSTEMS, add_responses, make_study, new_submission_id

MAX_STATEMENTS = 6


def auth(token):
    return {"Authorization": f"Bearer {token}"}


def ratings_for(assignment):
    return [{"item_id": item["item_id"], "scores": {"empathy": 4, "relevance": 3, "fluency": 5}, "seconds": 2.0}
            for item in assignment["items"]]


@pytest.fixture(params=[3, 30], ids=["3-items", "30-items"])
def counted_app(request, sample_engine):
    """A study of `items` items per assignment, the app over it, and the engine that app talks through."""
    add_responses(sample_engine, SYSTEMS + CONTROLS, 300)
    make_study(sample_engine, count=300, k=3, per_assignment=request.param)
    app = create_app({"DATABASE_URL": sample_engine.url.render_as_string(hide_password=False), "TESTING": True})
    return app, app.extensions["empeval.engine"], request.param


def test_next_and_submit_cost_at_most_six_statements_whatever_the_items(counted_app, sample_engine):
    app, engine, items = counted_app
    client = app.test_client()
    _, token = invite(sample_engine, "counted", "pilot")
    # Some history first: one assignment done, so the seen-context checks have rows to consult.
    first = client.get("/api/annotate/next", headers=auth(token)).get_json()["assignment"]
    assert client.post(f"/api/assignments/{first['assignment_id']}/submit", headers=auth(token),
                       json={"submission_id": new_submission_id(), "ratings": ratings_for(first)}).status_code == 200

    with counting_statements(engine) as claiming:
        claimed = client.get("/api/annotate/next", headers=auth(token)).get_json()["assignment"]
    with counting_statements(engine) as resuming:
        resumed = client.get("/api/annotate/next", headers=auth(token)).get_json()["assignment"]
    submission = {"submission_id": new_submission_id(), "ratings": ratings_for(claimed)}
    with counting_statements(engine) as submitting:
        receipt = client.post(f"/api/assignments/{claimed['assignment_id']}/submit", headers=auth(token),
                              json=submission)
    with counting_statements(engine) as resubmitting:
        again = client.post(f"/api/assignments/{claimed['assignment_id']}/submit", headers=auth(token),
                            json=submission)

    # The calls did their work: a new assignment with its items and turns, resumed, stored in full.
    assert claimed["assignment_id"] != first["assignment_id"] and resumed == claimed
    assert len(claimed["items"]) >= min(items, 10) and all(item["context"] for item in claimed["items"])
    assert receipt.status_code == 200 and again.get_json() == receipt.get_json()
    with Session(sample_engine) as session:
        stored = session.scalar(select(func.count()).select_from(Rating)
                                .where(Rating.assignment_id == claimed["assignment_id"]))
        timed = session.scalars(select(AssignmentItem.seconds_on_item)
                                .where(AssignmentItem.assignment_id == claimed["assignment_id"])).all()
    assert stored == 3 * len(claimed["items"]) and set(timed) == {2.0}

    counts = {"claim": len(claiming), "resume": len(resuming), "submit": len(submitting),
              "resubmit": len(resubmitting)}
    assert max(counts.values()) <= MAX_STATEMENTS, (counts, claiming.statements, submitting.statements)
