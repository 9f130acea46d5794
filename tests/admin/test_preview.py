"""The researcher's task preview: the study's first assignment as a rater would see it, marked `preview: true`,
built without claiming anything; nothing is written to the store, and a submit to it is refused."""
from __future__ import annotations

import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session

from empeval.server.annotation.annotators import invite
from empeval.server.annotation.handout import assignment_payload
from empeval.server.annotation.preview import preview_payload
from empeval.server.annotation.secrets import admin_token, secret_key
from empeval.server.store.models import Assignment, Study
from tests.admin.conftest import app_on
from tests.annotation.conftest import make_study, new_submission_id
from tests.store.helpers import snapshot


def first_assignment(engine, study: str) -> int:
    with Session(engine) as session:
        return session.scalars(select(Assignment.id).join(Study).where(Study.name == study)
                               .order_by(Assignment.design_index, Assignment.id)).first()


@pytest.mark.parametrize("study", ["pilot", "ab"])
def test_the_preview_payload_is_the_first_assignment_marked_as_a_preview_with_id_0(store, app, bearer, study):
    answer = app.test_client().get(f"/api/studies/{study}/preview", headers=bearer)
    assert answer.status_code == 200, answer.get_json()
    shown = answer.get_json()["assignment"]
    first = first_assignment(store, study)
    real = assignment_payload(store, first)
    assert shown["preview"] is True and shown["status"] == "preview"
    assert shown["assignment_id"] == 0 and shown["previewed_assignment"] == first
    assert shown["expires_at"] is None
    assert shown["items"] == real["items"] and shown["items"]  # the same items, in the same order, as a rater's
    assert {k: v for k, v in shown.items() if k not in ("assignment_id", "status", "expires_at", "preview",
                                                        "previewed_assignment")} == \
        {k: v for k, v in real.items() if k not in ("assignment_id", "status", "expires_at")}
    assert "sys-a" not in answer.get_data(as_text=True)  # as raters see it: no system name


@pytest.mark.parametrize("study", ["pilot", "ab"])
def test_previewing_writes_nothing_to_the_store(any_store, study):
    app = app_on(any_store)
    client = app.test_client()
    bearer = {"Authorization": f"Bearer {admin_token(secret_key(any_store))}"}
    before = snapshot(any_store)
    for _ in range(2):
        assert client.get(f"/api/studies/{study}/preview", headers=bearer).status_code == 200
        assert client.get(f"/admin/studies/{study}/preview", headers=bearer).status_code == 200
    assert snapshot(any_store) == before  # every row of every table, not only the counts


def test_a_submit_to_the_preview_is_refused_whoever_sends_it(store, app, bearer):
    client = app.test_client()
    shown = client.get("/api/studies/pilot/preview", headers=bearer).get_json()["assignment"]
    _, token = invite(store, "rita", "pilot")
    before = snapshot(store)
    body = {"submission_id": new_submission_id(),
            "ratings": [{"item_id": i["item_id"], "scores": {"empathy": 3, "relevance": 3, "fluency": 3}}
                        for i in shown["items"]]}
    as_rater = client.post(f"/api/assignments/{shown['assignment_id']}/submit", json=body,
                           headers={"Authorization": f"Bearer {token}"})
    assert as_rater.status_code == 404 and as_rater.get_json()["message"] == "you have no assignment 0"
    as_researcher = client.post(f"/api/assignments/{shown['assignment_id']}/submit", json=body, headers=bearer)
    assert as_researcher.status_code == 403  # the admin token is no invite
    assert snapshot(store) == before


def test_the_preview_page_serves_the_task_page_and_only_to_the_researcher(store, app, bearer):
    client = app.test_client()
    page = client.get("/admin/studies/pilot/preview", headers=bearer)
    assert page.status_code == 200 and page.mimetype == "text/html"
    assert page.get_data(as_text=True) == client.get("/annotate").get_data(as_text=True)  # the one task page
    _, token = invite(store, "rita", "pilot")
    for path in ("/admin/studies/pilot/preview", "/api/studies/pilot/preview"):
        assert client.get(path).status_code == 401
        assert client.get(path, headers={"Authorization": f"Bearer {token}"}).status_code == 403  # an invite
        assert client.get(path, headers={"Authorization": "Bearer wrong"}).status_code == 403


def test_previewing_an_unknown_study_or_one_without_assignments_says_so(store, app, bearer):
    client = app.test_client()
    for path in ("/admin/studies/nope/preview", "/api/studies/nope/preview"):
        answer = client.get(path, headers=bearer)
        assert answer.status_code == 404 and answer.get_json()["message"] == "no study named 'nope'"
    with Session(store) as session, session.begin():  # a study whose assignments are all gone
        study = session.scalar(select(Study).where(Study.name == "pilot"))
        for assignment in session.scalars(select(Assignment).where(Assignment.study_id == study.id)):
            session.delete(assignment)
    answer = client.get("/api/studies/pilot/preview", headers=bearer)
    assert answer.status_code == 404
    assert answer.get_json()["message"].startswith("study 'pilot' has no assignment to preview")


def test_the_preview_does_not_claim_the_assignment_a_rater_is_then_handed(store, bearer):
    make_study(store, name="solo", count=4, k=1, per_assignment=4, systems=["sys-a", "sys-b"], controls=[])
    shown = preview_payload(store, "solo")
    from empeval.server.annotation.handout import next_assignment

    rita, _ = invite(store, "rita", "solo")
    assert next_assignment(store, "solo", rita.id) == shown["previewed_assignment"]  # still open for her
