"""A Prolific study with a qualification: a participant who fails it is given the study's screened-out completion code
(the failed-checks one when the study says so), in the reply that fails her and whenever she opens the study link
again, and never real work or the completed code; one who passes does the real work and gets the completed code
after her submit, as without a qualification."""
from __future__ import annotations

import uuid

import pytest

from empeval.server.web import create_app
from empeval.tasks.study_create import create_study
from empeval.tasks.study_file import parse_study
from tests.annotation.conftest import add_responses
from tests.annotation.qualification_fixtures import LIKERT_GOLD, LIKERT_RIGHT, LIKERT_WRONG, likert_file
from tests.prolific.conftest import COMPLETION_CODE, CSRF, PID, PROLIFIC_STUDY_ID, ids, link_path

SCREENED_OUT, FAILED_CHECKS = "S0C1D2E3", "F4A5B6C7"
OTHER_PID = "5e9d8c7b6a5f4e3d2c1b0a98"


def url(code: str) -> str:
    return f"https://app.prolific.com/submissions/complete?cc={code}"


@pytest.fixture
def make_app(sample_engine):
    add_responses(sample_engine, ["sys-a", "sys-b"], 12)

    def make(**qualification):
        create_study(sample_engine, parse_study(likert_file(
            name="qual", recruitment={"platform": "prolific", "prolific_study_id": PROLIFIC_STUDY_ID,
                                      "completion_code": COMPLETION_CODE, "screened_out_code": SCREENED_OUT,
                                      "failed_checks_code": FAILED_CHECKS},
            qualification={"min_correct": 2, "items": LIKERT_GOLD, **qualification})))
        app = create_app({"DATABASE_URL": sample_engine.url.render_as_string(hide_password=False), "TESTING": True})
        return app, sample_engine

    return make


def participant(app, engine, pid: str = PID):
    client = app.test_client()
    admitted = client.get(link_path(engine, "qual"), query_string=ids(pid))
    assert admitted.status_code == 303
    return client


def go_through(client, answers) -> dict:
    reply = {}
    for item, scores in enumerate(answers):
        sent = client.post("/api/annotate/qualification/answers", headers=CSRF,
                           json={"item": item, "attempt": 1, "answer": scores})
        assert sent.status_code == 200, sent.get_json()
        assert "completion" not in sent.get_json()["state"] or item == len(answers) - 1
        reply = sent.get_json()
    return reply


def test_a_participant_who_fails_gets_the_screened_out_code_now_and_whenever_she_comes_back(make_app):
    app, engine = make_app()
    client = participant(app, engine)
    state = client.get("/api/annotate/qualification", headers=CSRF).get_json()
    assert state["status"] == "pending" and "completion" not in state
    failed = go_through(client, LIKERT_WRONG)["state"]
    assert failed["status"] == "failed"
    assert failed["completion"] == {"code": SCREENED_OUT, "url": url(SCREENED_OUT), "outcome": "screened_out"}
    assert COMPLETION_CODE not in str(failed)
    assert client.get("/api/annotate/next", headers=CSRF).status_code == 403
    again = app.test_client().get(link_path(engine, "qual"), query_string=ids(), headers={"Accept": "application/json"})
    assert again.status_code == 200
    assert again.get_json() == {"status": "screened_out", "completion": {
        "code": SCREENED_OUT, "url": url(SCREENED_OUT), "outcome": "screened_out"}}
    page = app.test_client().get(link_path(engine, "qual"), query_string=ids(), headers={"Accept": "text/html"})
    text = page.get_data(as_text=True)
    assert page.status_code == 200 and 'id="not-qualified"' in text and SCREENED_OUT in text
    assert COMPLETION_CODE not in text and "You submitted your ratings already" not in text


def test_the_study_may_give_its_failed_checks_code_instead(make_app):
    app, engine = make_app(code_on_failure="failed_checks")
    failed = go_through(participant(app, engine), LIKERT_WRONG)["state"]
    assert failed["completion"]["code"] == FAILED_CHECKS and failed["completion"]["outcome"] == "failed_checks"


def test_a_participant_who_passes_does_the_real_work_and_gets_the_completed_code(make_app):
    app, engine = make_app()
    client = participant(app, engine, OTHER_PID)
    passed = go_through(client, LIKERT_RIGHT)["state"]
    assert passed["status"] == "passed" and "completion" not in passed
    assignment = client.get("/api/annotate/next", headers=CSRF).get_json()["assignment"]
    assert assignment["kind"] == "likert" and assignment["items"]
    body = {"submission_id": uuid.uuid4().hex, "ratings": [
        {"item_id": item["item_id"], "scores": {c["key"]: 4 for c in assignment["criteria"]}, "seconds": 3.0}
        for item in assignment["items"]]}
    receipt = client.post(f"/api/assignments/{assignment['assignment_id']}/submit", headers=CSRF, json=body)
    assert receipt.status_code == 200
    assert receipt.get_json()["completion"] == {"code": COMPLETION_CODE, "url": url(COMPLETION_CODE)}
    back = app.test_client().get(link_path(engine, "qual"), query_string=ids(OTHER_PID),
                                 headers={"Accept": "application/json"})
    assert back.get_json()["status"] == "completed" and back.get_json()["completion"]["code"] == COMPLETION_CODE
