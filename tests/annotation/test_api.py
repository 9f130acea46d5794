"""The annotation API: a whole assignment round trip, and every kind of bad request answered 4xx with the
database unchanged."""

from __future__ import annotations

import json

import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session

from empeval.server.annotation.annotators import invite
from empeval.server.store.kinds.likert import AssignmentItem, Rating
from tests.annotation.conftest import CONTROLS, SYSTEMS, new_submission_id
from tests.store.helpers import snapshot


def auth(token):
    return {"Authorization": f"Bearer {token}"}


@pytest.fixture
def annotator(study_engine, client_factory):
    _, token = invite(study_engine, "alice", "pilot")
    client = client_factory()
    body = client.get("/api/annotate/next", headers=auth(token)).get_json()
    return client, token, body["assignment"]


def full_ratings(assignment, score=4):
    return [
        {"item_id": item["item_id"], "scores": {"empathy": score, "relevance": score, "fluency": score}, "seconds": 3.5}
        for item in assignment["items"]
    ]


def test_next_assignment_shows_contexts_and_responses_but_never_system_names(annotator):
    _, _, assignment = annotator
    assert assignment["status"] == "assigned"
    assert [c["key"] for c in assignment["criteria"]] == ["empathy", "relevance", "fluency"]
    assert assignment["scale"]["labels"][0].startswith("1")
    assert [i["position"] for i in assignment["items"]] == list(range(len(assignment["items"])))
    text = json.dumps(assignment)
    for name in SYSTEMS + CONTROLS:
        assert f'"{name}"' not in text
    first = assignment["items"][0]
    assert first["context"][0]["role"] == "speaker" and first["response"]


def test_asking_again_resumes_the_same_assignment(annotator):
    client, token, assignment = annotator
    again = client.get("/api/annotate/next", headers=auth(token)).get_json()["assignment"]
    assert again["assignment_id"] == assignment["assignment_id"]


def test_submit_stores_every_rating_with_its_item_and_position(annotator, study_engine):
    client, token, assignment = annotator
    ratings = full_ratings(assignment)
    ratings[0]["scores"]["empathy"] = 1
    answer = client.post(
        f"/api/assignments/{assignment['assignment_id']}/submit",
        headers=auth(token),
        json={"submission_id": new_submission_id(), "ratings": ratings, "comment": "fine"},
    )
    assert answer.status_code == 200, answer.get_json()
    assert answer.get_json()["ratings"] == 3 * len(ratings)
    with Session(study_engine) as s:
        stored = s.execute(
            select(Rating.item_id, Rating.criterion, Rating.score, AssignmentItem.position)
            .join(
                AssignmentItem,
                (AssignmentItem.item_id == Rating.item_id) & (AssignmentItem.assignment_id == Rating.assignment_id),
            )
            .where(Rating.assignment_id == assignment["assignment_id"])
        ).all()
    expected = {
        (i["item_id"], c, 1 if (n == 0 and c == "empathy") else 4, i["position"])
        for n, i in enumerate(assignment["items"])
        for c in ("empathy", "relevance", "fluency")
    }
    assert set(stored) == expected


def test_double_submit_stores_nothing_twice_and_answers_the_same(annotator, study_engine):
    client, token, assignment = annotator
    body = {"submission_id": new_submission_id(), "ratings": full_ratings(assignment)}
    url = f"/api/assignments/{assignment['assignment_id']}/submit"
    first = client.post(url, headers=auth(token), json=body)
    before = snapshot(study_engine)
    second = client.post(url, headers=auth(token), json=body)
    assert second.status_code == 200 and second.get_json() == first.get_json()
    assert snapshot(study_engine) == before
    other = client.post(url, headers=auth(token), json={**body, "submission_id": new_submission_id()})
    assert other.status_code == 409 and "already submitted" in other.get_json()["message"]
    assert snapshot(study_engine) == before


def test_submitting_someone_elses_assignment_is_404_as_for_one_that_does_not_exist(annotator, study_engine,
                                                                                  client_factory):
    _, _, assignment = annotator
    _, bob = invite(study_engine, "bob", "pilot")
    before = snapshot(study_engine)
    answer = client_factory().post(
        f"/api/assignments/{assignment['assignment_id']}/submit",
        headers=auth(bob),
        json={"submission_id": new_submission_id(), "ratings": full_ratings(assignment)},
    )
    assert answer.status_code == 404
    assert answer.get_json()["message"] == f"you have no assignment {assignment['assignment_id']}"
    assert snapshot(study_engine) == before


def _mutations(assignment):
    ratings = full_ratings(assignment)
    first = ratings[0]["item_id"]
    return {
        "score_above_scale": (
            [{**r, "scores": {**r["scores"], "fluency": 6}} if i == 0 else r for i, r in enumerate(ratings)],
            "fluency score 6",
        ),
        "score_zero": (
            [{**r, "scores": {**r["scores"], "empathy": 0}} if i == 0 else r for i, r in enumerate(ratings)],
            "empathy score 0",
        ),
        "score_float": (
            [{**r, "scores": {**r["scores"], "empathy": 3.5}} if i == 0 else r for i, r in enumerate(ratings)],
            "empathy score 3.5",
        ),
        "score_string": (
            [{**r, "scores": {**r["scores"], "empathy": "4"}} if i == 0 else r for i, r in enumerate(ratings)],
            "empathy score '4'",
        ),
        "missing_criterion": (
            [{**r, "scores": {"empathy": 3, "relevance": 3}} if i == 0 else r for i, r in enumerate(ratings)],
            "no score for 'fluency'",
        ),
        "unknown_criterion": (
            [{**r, "scores": {**r["scores"], "humour": 3}} if i == 0 else r for i, r in enumerate(ratings)],
            "unknown criterion 'humour'",
        ),
        "missing_item": (ratings[1:], f"item {first} of this assignment has no rating"),
        "foreign_item": (ratings + [{"item_id": 999999, "scores": ratings[0]["scores"]}], "item 999999 is not part"),
        "item_twice": (ratings + [ratings[0]], "rated twice"),
    }


@pytest.mark.parametrize(
    "case",
    [
        "score_above_scale",
        "score_zero",
        "score_float",
        "score_string",
        "missing_criterion",
        "unknown_criterion",
        "missing_item",
        "foreign_item",
        "item_twice",
    ],
)
def test_invalid_ratings_are_refused_with_a_clear_400_and_store_nothing(annotator, study_engine, case):
    client, token, assignment = annotator
    ratings, message = _mutations(assignment)[case]
    before = snapshot(study_engine)
    answer = client.post(
        f"/api/assignments/{assignment['assignment_id']}/submit",
        headers=auth(token),
        json={"submission_id": new_submission_id(), "ratings": ratings},
    )
    assert answer.status_code == 400
    assert message in answer.get_json()["message"]
    assert snapshot(study_engine) == before


@pytest.mark.parametrize(
    "body, content_type, status, message",
    [
        (b"{not json", "application/json", 400, "not valid JSON"),
        (b"[1, 2]", "application/json", 400, "JSON object"),
        (b'{"ratings": []}', "application/json", 400, "submission_id"),
        (b"rating=5", "application/x-www-form-urlencoded", 415, "as JSON"),
        (b'{"submission_id": "' + b"x" * (2 << 20) + b'"}', "application/json", 413, ""),
    ],
)
def test_malformed_or_oversized_bodies_get_json_4xx(annotator, study_engine, body, content_type, status, message):
    client, token, assignment = annotator
    before = snapshot(study_engine)
    answer = client.post(
        f"/api/assignments/{assignment['assignment_id']}/submit",
        headers=auth(token),
        data=body,
        content_type=content_type,
    )
    assert answer.status_code == status
    assert answer.is_json and message in answer.get_json()["message"]
    assert snapshot(study_engine) == before


@pytest.mark.parametrize("headers, status", [({}, 401), ({"Authorization": "Bearer forged.token"}, 403)])
def test_requests_without_a_valid_invite_are_refused(client_factory, headers, status):
    answer = client_factory().get("/api/annotate/next", headers=headers)
    assert answer.status_code == status and answer.is_json


def test_unknown_assignment_is_404(annotator):
    client, token, _ = annotator
    answer = client.post(
        "/api/assignments/999999/submit",
        headers=auth(token),
        json={"submission_id": new_submission_id(), "ratings": []},
    )
    assert answer.status_code == 404


def test_export_needs_the_admin_token_and_has_one_row_per_rating(annotator, study_engine, client_factory):
    from empeval.server.annotation.secrets import admin_token, secret_key

    client, token, assignment = annotator
    client.post(
        f"/api/assignments/{assignment['assignment_id']}/submit",
        headers=auth(token),
        json={"submission_id": new_submission_id(), "ratings": full_ratings(assignment)},
    )
    admin = client_factory()
    assert admin.get("/api/studies/pilot/export").status_code == 401
    assert admin.get("/api/studies/pilot/export", headers=auth("wrong")).status_code == 403
    good = auth(admin_token(secret_key(study_engine)))
    csv_text = admin.get("/api/studies/pilot/export?format=csv", headers=good).get_data(as_text=True)
    lines = csv_text.strip().splitlines()
    assert lines[0].startswith("study,item_id,context_id,system,annotator,criterion,score,position")
    assert len(lines) - 1 == 3 * len(assignment["items"])
    rows = [
        json.loads(line)
        for line in admin.get("/api/studies/pilot/export?format=jsonl", headers=good)
        .get_data(as_text=True)
        .splitlines()
    ]
    assert {r["annotator"] for r in rows} == {rows[0]["annotator"]} and rows[0]["annotator"].startswith("local-")
    assert "alice" not in csv_text  # pseudonyms only
    assert admin.get("/api/studies/pilot/export?format=xml", headers=good).status_code == 400
    assert admin.get("/api/studies/nope/export", headers=good).status_code == 404
    progress = admin.get("/api/studies/pilot/progress", headers=good).get_json()
    assert progress["assignments"]["submitted"] == 1 and progress["ratings"] == len(rows)
    page = admin.get("/admin", headers=good)
    assert page.status_code == 200 and b"pilot" in page.data
