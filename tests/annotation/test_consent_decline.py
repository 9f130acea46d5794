"""Consent before claim (issue 30, item 1): asking what she holds claims nothing, so the page can ask for her consent
first; declining holds nothing afterwards, whether she had been given work (the consent opened again) or not (the
consent before her claim), seen rows and her place in the pool included; on both backends, for an invite and for the
Prolific link."""
from __future__ import annotations

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from empeval.server.annotation.annotators import invite
from empeval.server.store.models import Assignment, SeenContext
from empeval.server.store.statuses import AssignmentStatus
from empeval.server.web import create_app
from empeval.tasks.study_create import create_study
from empeval.tasks.study_file import parse_study


def auth(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def holdings(engine, annotator_id: int) -> tuple[int, int]:
    """(assignments she holds, seen rows she has) in any study."""
    with Session(engine) as session:
        assigned = session.scalar(select(func.count()).select_from(Assignment).where(
            Assignment.annotator_id == annotator_id, Assignment.status == AssignmentStatus.ASSIGNED))
        seen = session.scalar(select(func.count()).select_from(SeenContext)
                              .where(SeenContext.annotator_id == annotator_id))
        return assigned, seen


def test_asking_what_she_holds_claims_nothing_and_declining_then_holds_nothing(study_engine, client_factory):
    rater, token = invite(study_engine, "dora", "pilot")
    client = client_factory()
    current = client.get("/api/annotate/next?claim=no", headers=auth(token))
    assert current.status_code == 200
    body = current.get_json()
    assert body["assignment"] is None and body["study"] == {"name": "pilot", "title": "", "kind": "likert"}
    assert holdings(study_engine, rater.id) == (0, 0)
    declined = client.post("/api/annotate/decline", headers=auth(token))
    assert declined.status_code == 200 and declined.get_json() == {"released": []}
    assert holdings(study_engine, rater.id) == (0, 0)


def test_declining_after_a_claim_puts_her_assignment_back_as_if_never_claimed(study_engine, client_factory):
    rater, token = invite(study_engine, "emil", "pilot")
    client = client_factory()
    assignment = client.get("/api/annotate/next", headers=auth(token)).get_json()["assignment"]
    assert client.get("/api/annotate/next?claim=no", headers=auth(token)).get_json()["assignment"] == assignment
    assert holdings(study_engine, rater.id)[0] == 1
    declined = client.post("/api/annotate/decline", headers=auth(token))
    assert declined.get_json() == {"released": [assignment["assignment_id"]]}
    assert holdings(study_engine, rater.id) == (0, 0)
    with Session(study_engine) as session:
        row = session.get_one(Assignment, assignment["assignment_id"])
        assert (row.status, row.annotator_id, row.started_at) == (AssignmentStatus.OPEN, None, None)
    # Another rater can take it now: it is the first in design order again.
    other, other_token = invite(study_engine, "fenna", "pilot")
    again = client_factory().get("/api/annotate/next", headers=auth(other_token)).get_json()["assignment"]
    assert again["assignment_id"] == assignment["assignment_id"]


def test_declining_needs_her_invite_and_releases_nobody_elses_work(study_engine, client_factory):
    first, first_token = invite(study_engine, "gus", "pilot")
    second, second_token = invite(study_engine, "hana", "pilot")
    client = client_factory()
    client.get("/api/annotate/next", headers=auth(first_token))
    assert client.post("/api/annotate/decline").status_code == 401
    assert client.post("/api/annotate/decline", headers=auth(second_token)).get_json() == {"released": []}
    assert holdings(study_engine, first.id)[0] == 1


def test_a_prolific_participant_who_declines_holds_nothing(sample_engine):
    from tests.annotation.conftest import add_responses
    from tests.prolific.conftest import CSRF, SYSTEMS, ids, link_path, study_file

    add_responses(sample_engine, SYSTEMS, 12)
    create_study(sample_engine, parse_study(study_file()))
    prolific_engine = sample_engine
    app = create_app({"DATABASE_URL": prolific_engine.url.render_as_string(hide_password=False), "TESTING": True})
    client = app.test_client()
    assert client.get(link_path(prolific_engine), query_string=ids()).status_code == 303
    with Session(prolific_engine) as session:
        assert session.scalar(select(func.count()).select_from(Assignment)
                              .where(Assignment.status == AssignmentStatus.ASSIGNED)) == 0
    assert client.get("/api/annotate/next?claim=no", headers=CSRF).get_json()["assignment"] is None
    assert client.post("/api/annotate/decline", headers=CSRF).get_json() == {"released": []}
    with Session(prolific_engine) as session:
        assert session.scalar(select(func.count()).select_from(Assignment)
                              .where(Assignment.status == AssignmentStatus.ASSIGNED)) == 0


def test_claim_must_be_yes_or_no_and_says_so(study_engine, client_factory):
    rater, token = invite(study_engine, "ines", "pilot")
    refused = client_factory().get("/api/annotate/next?claim=maybe", headers=auth(token))
    assert refused.status_code == 400 and "claim must be yes or no" in refused.get_json()["message"]
    assert holdings(study_engine, rater.id) == (0, 0)
