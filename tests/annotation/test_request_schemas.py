"""The submission's JSON schema and its validator say the same thing: one fails when the other changes alone.

Three nets: bodies drawn from the schema (fitting and not) get the validator's verdict the schema gives; a
corpus of bad bodies that both must refuse; a corpus of bodies at the limits that both must accept. Then
the round trip through the app: what the validator accepts is what the store keeps.
"""
from __future__ import annotations

import copy

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import select
from sqlalchemy.orm import Session

from empeval.server.annotation.annotators import invite
from empeval.server.annotation.kinds.likert import ExpectedRatings
from empeval.server.annotation.submission_schema import MAX_COMMENT, MAX_SECONDS
from empeval.server.errors import BadInput
from empeval.server.store.kinds.likert import Rating
from empeval.server.store.models import Assignment
from tests.annotation.conftest import new_submission_id, placed_items
from tests.annotation.json_bodies import bodies, fits, shown, why_not
from tests.annotation.kind_submits import likert_schema as submission_schema
from tests.annotation.kind_submits import validate_likert as validate_submission
from tests.store.helpers import snapshot

ED_LIKERT = ExpectedRatings(item_ids=(12, 7, 30), criteria=("empathy", "relevance", "fluency"), low=1, high=5)
ASSIGNMENTS = {
    "ed-likert": ED_LIKERT,
    "one-item-seven-point": ExpectedRatings(item_ids=(2**40,), criteria=("empathy",), low=0, high=6),
    "negative-scale": ExpectedRatings(item_ids=(1, 2), criteria=("fluency", "préférence"), low=-2, high=2),
}


def verdict(body, expected: ExpectedRatings) -> str | None:
    """None if the validator accepts the body, else its message."""
    try:
        validate_submission(body, expected)
    except BadInput as error:
        return error.message
    return None


def good_body() -> dict:
    return {"submission_id": "3f2c9a1b-retry-safe", "comment": "fine",
            "ratings": [{"item_id": item, "scores": {"empathy": 4, "relevance": 5, "fluency": 3}, "seconds": 9.5}
                        for item in ED_LIKERT.item_ids]}


def test_the_openapi_document_serves_the_generated_schema():
    import jsonschema_rs

    import empeval.server.web.annotate_api  # noqa: F401 (registers its paths and schemas)
    from empeval.server.annotation.kinds import annotation_kinds
    from empeval.server.web import openapi
    from tests.annotation.kind_submits import pairwise_schema as pairwise_submission_schema

    schemas = openapi.document()["components"]["schemas"]
    assert schemas["LikertSubmission"] == submission_schema()
    assert schemas["PairwiseSubmission"] == pairwise_submission_schema()
    names = {kind.name: "".join(part.capitalize() for part in kind.name.split("_")) + "Submission"
             for kind in annotation_kinds()}
    assert names["best_worst"] == "BestWorstSubmission" and set(names.values()) <= set(schemas)
    assert schemas["Submission"] == {"oneOf": [{"$ref": f"#/components/schemas/{name}"} for name in names.values()]}
    # One body is never both: each kind requires its own list and refuses the other's.
    likert = {"submission_id": "abcdefgh", "ratings": []}
    pairwise = {"submission_id": "abcdefgh", "judgments": []}
    assert jsonschema_rs.is_valid(submission_schema(), likert) and not jsonschema_rs.is_valid(
        pairwise_submission_schema(), likert)
    assert jsonschema_rs.is_valid(pairwise_submission_schema(), pairwise) and not jsonschema_rs.is_valid(
        submission_schema(), pairwise)
    for expected in [None, *ASSIGNMENTS.values()]:
        assert jsonschema_rs.meta.is_valid(submission_schema(expected))


@pytest.mark.parametrize("name", ASSIGNMENTS)
def test_validator_and_schema_agree_on_generated_bodies(name):
    """Bodies fitting the assignment's schema, bodies mutated not to, and bodies fitting only the generic
    document schema (mostly with other items): the validator accepts exactly those the assignment's schema
    admits, and whatever it accepts also fits the generic schema the OpenAPI document serves."""
    expected = ASSIGNMENTS[name]
    schema, generic = submission_schema(expected), submission_schema()

    @given(body=st.one_of(bodies(schema), bodies(schema, fitting=False), bodies(generic)))
    @settings(max_examples=100, deadline=None, suppress_health_check=list(HealthCheck), database=None)
    def agree(body):
        refusal = verdict(body, expected)
        if fits(schema, body):
            assert refusal is None, f"the schema admits this body but the validator says: {refusal}\n{shown(body)}"
            assert fits(generic, body), why_not(generic, body)
        else:
            assert refusal is not None, (f"the validator accepts a body the schema refuses "
                                         f"({why_not(schema, body)})\n{shown(body)}")

    agree()


def _with(change):
    body = good_body()
    change(body)
    return body


def _first_entry(**fields):
    return lambda body: body["ratings"][0].update(fields)


def _first_scores(**scores):
    return lambda body: body["ratings"][0]["scores"].update(scores)


REFUSED = {
    "body is a list": ([good_body()], "JSON object"),
    "unknown field": (_with(lambda b: b.update(coment="typo")), "unknown field 'coment'"),
    "unknown entry field": (_with(_first_entry(position=0)), "ratings[0]: unknown field 'position'"),
    "missing submission_id": (_with(lambda b: b.pop("submission_id")), "submission_id must be"),
    "submission_id too short": (_with(lambda b: b.update(submission_id="abc")), "submission_id must be"),
    "submission_id with a final newline": (_with(lambda b: b.update(submission_id="abcdefgh\n")),
                                           "submission_id must be"),
    "submission_id with a space": (_with(lambda b: b.update(submission_id="abcd efgh")), "submission_id must be"),
    "submission_id a number": (_with(lambda b: b.update(submission_id=12345678)), "submission_id must be"),
    "comment too long": (_with(lambda b: b.update(comment="x" * (MAX_COMMENT + 1))), f"at most {MAX_COMMENT}"),
    "comment not a string": (_with(lambda b: b.update(comment=["hi"])), "comment must be a string"),
    "ratings missing": (_with(lambda b: b.pop("ratings")), "ratings must be a list"),
    "ratings an object": (_with(lambda b: b.update(ratings={"12": {"empathy": 4}})), "ratings must be a list"),
    "ratings a string": (_with(lambda b: b.update(ratings="4,5,3")), "ratings must be a list"),
    "entry a list": (_with(lambda b: b["ratings"].__setitem__(0, [12, 4, 5, 3])), "ratings[0] must be an object"),
    "entry a number": (_with(lambda b: b["ratings"].__setitem__(1, 7)), "ratings[1] must be an object"),
    "entry null": (_with(lambda b: b["ratings"].__setitem__(2, None)), "ratings[2] must be an object"),
    "item_id true": (_with(_first_entry(item_id=True)), "ratings[0].item_id must be an integer"),
    "item_id a string": (_with(_first_entry(item_id="12")), "ratings[0].item_id must be an integer"),
    "item_id fractional": (_with(_first_entry(item_id=12.5)), "ratings[0].item_id must be an integer"),
    "item_id missing": (_with(lambda b: b["ratings"][0].pop("item_id")), "ratings[0].item_id must be an integer"),
    "foreign item": (_with(_first_entry(item_id=999)), "item 999 is not part of this assignment"),
    "item rated twice": (_with(lambda b: b["ratings"].__setitem__(2, copy.deepcopy(b["ratings"][0]))),
                         "ratings[2]: item 12 is rated twice"),
    "item without rating": (_with(lambda b: b["ratings"].pop(1)), "item 7 of this assignment has no rating"),
    "no ratings at all": (_with(lambda b: b.update(ratings=[])), "(3 of 3 items missing)"),
    "scores a list": (_with(_first_entry(scores=[4, 5, 3])), "ratings[0].scores must be an object"),
    "score true": (_with(_first_scores(empathy=True)), "empathy score True for item 12 must be an integer from 1 to 5"),
    "score false": (_with(_first_scores(fluency=False)), "fluency score False"),
    "score fractional": (_with(_first_scores(empathy=3.5)), "empathy score 3.5"),
    "score a string": (_with(_first_scores(relevance="4")), "relevance score '4'"),
    "score null": (_with(_first_scores(relevance=None)), "relevance score None"),
    "score below the scale": (_with(_first_scores(empathy=0)), "empathy score 0"),
    "score above the scale": (_with(_first_scores(fluency=6)), "fluency score 6"),
    "score missing": (_with(lambda b: b["ratings"][0]["scores"].pop("fluency")), "no score for 'fluency'"),
    "unknown criterion": (_with(_first_scores(humour=3)), "unknown criterion 'humour'"),
    "seconds negative": (_with(_first_entry(seconds=-0.5)),
                         f"ratings[0].seconds must be a number from 0 to {MAX_SECONDS}"),
    "seconds over a day": (_with(_first_entry(seconds=MAX_SECONDS + 1)), "ratings[0].seconds must be a number"),
    "seconds huge": (_with(_first_entry(seconds=10**400)), "ratings[0].seconds must be a number"),
    "seconds true": (_with(_first_entry(seconds=True)), "ratings[0].seconds must be a number"),
    "seconds a string": (_with(_first_entry(seconds="9.5")), "ratings[0].seconds must be a number"),
}


@pytest.mark.parametrize("case", REFUSED)
def test_both_refuse_each_bad_body_and_the_validator_says_where(case):
    body, message = REFUSED[case]
    schema = submission_schema(ED_LIKERT)
    assert not fits(schema, body), f"the schema admits {case!r}"
    refusal = verdict(body, ED_LIKERT)
    assert refusal is not None, f"the validator accepts {case!r}"
    assert message in refusal


ACCEPTED = {
    "as the task page sends it": good_body(),
    "no comment": _with(lambda b: b.pop("comment")),
    "comment null": _with(lambda b: b.update(comment=None)),
    "comment empty": _with(lambda b: b.update(comment="")),
    "comment at the limit": _with(lambda b: b.update(comment="é" * MAX_COMMENT)),
    "entries in any order": _with(lambda b: b["ratings"].reverse()),
    "no seconds": _with(lambda b: b["ratings"][0].pop("seconds")),
    "seconds null": _with(_first_entry(seconds=None)),
    "seconds zero": _with(_first_entry(seconds=0)),
    "seconds a whole day": _with(_first_entry(seconds=MAX_SECONDS)),
    "scores at both ends of the scale": _with(_first_scores(empathy=1, fluency=5)),
    # JSON Schema's integer is any number without a fractional part, so 4.0 is the integer 4.
    "score written 4.0": _with(_first_scores(empathy=4.0)),
    "item_id written 12.0": _with(_first_entry(item_id=12.0)),
    "submission_id of 100 characters": _with(lambda b: b.update(submission_id="a:b_c.d-" * 12 + "0123")),
    "submission_id of 8 characters": _with(lambda b: b.update(submission_id="01234567")),
}


@pytest.mark.parametrize("case", ACCEPTED)
def test_both_accept_each_body_at_the_limits(case):
    body = ACCEPTED[case]
    schema = submission_schema(ED_LIKERT)
    assert fits(schema, body), why_not(schema, body)
    assert verdict(body, ED_LIKERT) is None


def test_the_validator_hands_back_integers_and_seconds_as_numbers():
    body = _with(_first_scores(empathy=4.0))
    body["ratings"][0]["item_id"] = 12.0
    submission = validate_submission(body, ED_LIKERT)
    assert submission.answers[12].scores == {"empathy": 4, "relevance": 5, "fluency": 3}
    assert all(type(score) is int for rating in submission.answers.values() for score in rating.scores.values())
    assert list(submission.answers) == [12, 7, 30] and submission.answers[7].seconds == 9.5


# Through the app and into the store.

def auth(token):
    return {"Authorization": f"Bearer {token}"}


@pytest.fixture
def annotator(study_engine, client_factory):
    _, token = invite(study_engine, "carol", "pilot")
    client = client_factory()
    assignment = client.get("/api/annotate/next", headers=auth(token)).get_json()["assignment"]
    return client, token, assignment


def _ratings(assignment, score=4, seconds=2.5):
    return [{"item_id": item["item_id"], "scores": {"empathy": score, "relevance": score, "fluency": score},
             "seconds": seconds} for item in assignment["items"]]


def test_the_comment_and_seconds_are_stored_as_sent(annotator, study_engine):
    client, token, assignment = annotator
    comment = "  Item 3 was odd — \"I'm fine\" <b>isn't</b> empathy 😀\nSecond line.  "
    ratings = _ratings(assignment)
    ratings[0]["seconds"], ratings[0]["scores"]["empathy"] = 0.1, 2.0
    answer = client.post(f"/api/assignments/{assignment['assignment_id']}/submit", headers=auth(token),
                         json={"submission_id": new_submission_id(), "ratings": ratings, "comment": comment})
    assert answer.status_code == 200, answer.get_json()
    with Session(study_engine) as session:
        stored = session.get(Assignment, assignment["assignment_id"])
        assert stored is not None and stored.comment == comment
        seconds = {link.item_id: link.seconds_on_item for link in placed_items(session, stored.id)}
        first = ratings[0]["item_id"]
        assert seconds == {r["item_id"]: (0.1 if r["item_id"] == first else 2.5) for r in ratings}
        score = session.scalar(select(Rating.score).where(Rating.assignment_id == stored.id, Rating.item_id == first,
                                                          Rating.criterion == "empathy"))
        assert score == 2 and type(score) is int


@pytest.mark.parametrize("mutate, message", [
    (lambda body: body.update(ratings={"not": "a list"}), "ratings must be a list"),
    (lambda body: body.update(ratings="[]"), "ratings must be a list"),
    (lambda body: body["ratings"].__setitem__(0, "4,4,4"), "ratings[0] must be an object"),
    (lambda body: body["ratings"].__setitem__(0, None), "ratings[0] must be an object"),
    (lambda body: body["ratings"][0]["scores"].update(empathy=True), "empathy score True"),
    (lambda body: body["ratings"][0].update(item_id=True), "item_id must be an integer"),
    (lambda body: body["ratings"][0].update(seconds=-1), "seconds must be a number"),
    (lambda body: body["ratings"][0].update(seconds=1e9), "seconds must be a number"),
    (lambda body: body.update(extra=1), "unknown field 'extra'"),
    (lambda body: body.update(comment="x" * (MAX_COMMENT + 1)), f"at most {MAX_COMMENT} characters"),
])
def test_bad_bodies_get_a_400_that_says_what_and_where_and_store_nothing(annotator, study_engine, mutate, message):
    client, token, assignment = annotator
    body = {"submission_id": new_submission_id(), "ratings": _ratings(assignment)}
    mutate(body)
    before = snapshot(study_engine)
    answer = client.post(f"/api/assignments/{assignment['assignment_id']}/submit", headers=auth(token), json=body)
    assert answer.status_code == 400 and answer.is_json
    assert message in answer.get_json()["message"]
    assert snapshot(study_engine) == before

