"""The completion code: a Prolific participant's receipt carries it after a valid submit (and its retry), with
Prolific's completion URL; nothing she is sent before (her assignment, a refused submit) holds it, and nobody but
a Prolific participant of a Prolific study ever gets it."""
from __future__ import annotations

import json
import uuid

from empeval.server.annotation.annotators import invite
from empeval.server.annotation.handout import close_study
from empeval.server.web import create_app
from tests.annotation.pairwise_fixtures import make_ab_study
from tests.prolific.conftest import COMPLETION_CODE, CSRF, PROLIFIC_STUDY_ID, ids, link_path

COMPLETION = {"code": COMPLETION_CODE, "url": f"https://app.prolific.com/submissions/complete?cc={COMPLETION_CODE}"}


def participant(app, engine):
    """A test client that came through the study link, and the assignment the task page would show her."""
    client = app.test_client()
    assert client.get(link_path(engine), query_string=ids()).status_code == 303
    answer = client.get("/api/annotate/next", headers=CSRF)
    assert COMPLETION_CODE not in answer.get_data(as_text=True)  # not before she has submitted
    return client, answer.get_json()["assignment"]


def ratings(assignment, score=4):
    return [{"item_id": item["item_id"], "scores": {c["key"]: score for c in assignment["criteria"]}, "seconds": 3.0}
            for item in assignment["items"]]


def submit(client, assignment, body, headers=CSRF):
    return client.post(f"/api/assignments/{assignment['assignment_id']}/submit", headers=headers, json=body)


def test_a_valid_submit_by_a_prolific_participant_answers_with_the_completion_code(prolific_app, prolific_engine):
    client, assignment = participant(prolific_app, prolific_engine)
    body = {"submission_id": uuid.uuid4().hex, "ratings": ratings(assignment)}
    receipt = submit(client, assignment, body)
    assert receipt.status_code == 200 and receipt.get_json()["status"] == "stored"
    assert receipt.get_json()["completion"] == COMPLETION
    retried = submit(client, assignment, body)  # the same submission again (a retry after a lost answer)
    assert retried.status_code == 200 and retried.get_json()["completion"] == COMPLETION


def test_an_invalid_submit_gets_no_completion_code(prolific_app, prolific_engine):
    client, assignment = participant(prolific_app, prolific_engine)
    half = ratings(assignment)[:-1]
    out_of_scale = ratings(assignment, score=9)
    for body in ({"submission_id": uuid.uuid4().hex, "ratings": half},
                 {"submission_id": uuid.uuid4().hex, "ratings": out_of_scale},
                 {"submission_id": "x", "ratings": ratings(assignment)},
                 {"ratings": ratings(assignment)}, [], {"submission_id": uuid.uuid4().hex, "ratings": "all 4"}):
        refused = submit(client, assignment, body)
        assert refused.status_code == 400, body
        assert COMPLETION_CODE not in refused.get_data(as_text=True)
    # Nor does a submit without the cookie's CSRF header, nor one for an assignment that is not hers.
    assert COMPLETION_CODE not in submit(client, assignment, {}, headers={}).get_data(as_text=True)
    other = client.post("/api/assignments/999/submit", headers=CSRF,
                        json={"submission_id": uuid.uuid4().hex, "ratings": ratings(assignment)})
    assert other.status_code == 404 and COMPLETION_CODE not in other.get_data(as_text=True)


def test_a_submit_to_a_closed_study_gets_no_completion_code(prolific_app, prolific_engine):
    client, assignment = participant(prolific_app, prolific_engine)
    close_study(prolific_engine, "pilot")
    refused = submit(client, assignment, {"submission_id": uuid.uuid4().hex, "ratings": ratings(assignment)})
    assert refused.status_code == 403 and COMPLETION_CODE not in refused.get_data(as_text=True)


def test_an_invited_volunteer_in_the_same_study_gets_no_completion_code(prolific_app, prolific_engine):
    _, token = invite(prolific_engine, "volunteer", "pilot")
    auth = {"Authorization": f"Bearer {token}"}
    client = prolific_app.test_client()
    assignment = client.get("/api/annotate/next", headers=auth).get_json()["assignment"]
    receipt = submit(client, assignment, {"submission_id": uuid.uuid4().hex, "ratings": ratings(assignment)},
                     headers=auth)
    assert receipt.status_code == 200 and "completion" not in receipt.get_json()
    assert COMPLETION_CODE not in json.dumps(receipt.get_json())


def test_a_pairwise_study_on_prolific_hands_out_the_code_after_a_valid_submit_too(sample_engine):
    make_ab_study(sample_engine, control_rate=0, recruitment={
        "platform": "prolific", "prolific_study_id": PROLIFIC_STUDY_ID, "completion_code": COMPLETION_CODE})
    app = create_app({"DATABASE_URL": sample_engine.url.render_as_string(hide_password=False), "TESTING": True})
    client = app.test_client()
    assert client.get(link_path(sample_engine, "ab"), query_string=ids()).status_code == 303
    assignment = client.get("/api/annotate/next", headers=CSRF).get_json()["assignment"]
    judgments = [{"item_id": item["item_id"], "choices": {"empathy": "A", "relevance": "B", "fluency": "T"}}
                 for item in assignment["items"]]
    refused = submit(client, assignment, {"submission_id": uuid.uuid4().hex, "judgments": judgments[:-1]})
    assert refused.status_code == 400 and COMPLETION_CODE not in refused.get_data(as_text=True)
    receipt = submit(client, assignment, {"submission_id": uuid.uuid4().hex, "judgments": judgments})
    assert receipt.status_code == 200 and receipt.get_json()["completion"] == COMPLETION


def test_after_her_submit_the_link_gives_her_the_code_again_and_no_more_work(prolific_app, prolific_engine):
    client, assignment = participant(prolific_app, prolific_engine)
    assert submit(client, assignment, {"submission_id": uuid.uuid4().hex, "ratings": ratings(assignment)}) \
        .status_code == 200
    again = prolific_app.test_client()  # e.g. she opens the study from Prolific once more, in another browser
    answer = again.get(link_path(prolific_engine), query_string=ids())
    assert answer.status_code == 200 and answer.get_json() == {"status": "completed", "completion": COMPLETION}
    assert again.get_cookie("empeval_invite") is None
    page = again.get(link_path(prolific_engine), query_string=ids(), headers={"Accept": "text/html"})
    text = page.get_data(as_text=True)
    assert page.status_code == 200 and page.mimetype == "text/html"
    assert f'id="completion-code">{COMPLETION_CODE}<' in text and f'href="{COMPLETION["url"]}"' in text
    # Another participant, who has not submitted, is sent to the task page as usual.
    assert prolific_app.test_client().get(link_path(prolific_engine), query_string=ids(pid="e5" * 12)) \
        .status_code == 303


def test_the_documented_receipt_declares_every_field_a_prolific_receipt_carries(prolific_app, prolific_engine):
    """Drift test: the OpenAPI Receipt schema names each field of a real receipt, the completion included."""
    import jsonschema

    client, assignment = participant(prolific_app, prolific_engine)
    receipt = submit(client, assignment, {"submission_id": uuid.uuid4().hex, "ratings": ratings(assignment)})
    document = client.get("/openapi.json").get_json()
    schema = document["components"]["schemas"]["Receipt"]
    assert set(receipt.get_json()) <= set(schema["properties"]), set(receipt.get_json()) - set(schema["properties"])
    jsonschema.validate(receipt.get_json(), {**schema, "additionalProperties": False})
    assert json.loads(json.dumps(schema["properties"]["completion"]["required"])) == ["code", "url"]
