"""Each rule of taking a submission, pinned on its own: the whole message of every refusal (what was wrong and
where), the receipt, retries and conflicts, what is stored (comment, seconds, late), whose assignment it is, and
a study closed or a rater revoked between the first check and the storing transaction."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session

import empeval.server.annotation.submission as submit_module
from empeval.server.annotation.annotators import invite, revoke
from empeval.server.annotation.handout import AccessRevoked, StudyClosed, close_study, next_assignment
from empeval.server.annotation.kinds.likert import ExpectedRatings
from empeval.server.annotation.submission import submit_assignment
from empeval.server.annotation.submission_schema import MAX_COMMENT, MAX_SECONDS
from empeval.server.errors import BadInput, Conflict, NotFound
from empeval.server.store.kinds.likert import AssignmentItem, Rating
from empeval.server.store.models import Assignment
from empeval.server.store.queries import as_utc, now_utc
from tests.annotation.conftest import make_study, new_submission_id, placed_items
from tests.annotation.kind_submits import validate_likert as validate_submission

CRITERIA = ("empathy", "relevance", "fluency")
EXPECTED = ExpectedRatings(item_ids=(12, 7, 30), criteria=CRITERIA, low=1, high=5)
ID_RULE = "a string of 8-100 letters, digits, '_', '.', ':' or '-'"


def _body(**changes) -> dict:
    body = {"submission_id": "retry-safe-0001", "comment": "fine",
            "ratings": [{"item_id": item, "scores": {"empathy": 4, "relevance": 5, "fluency": 3}, "seconds": 9.5}
                        for item in EXPECTED.item_ids]}
    body.update(changes)
    return body


def _entry(i: int = 0, **changes) -> dict:
    body = _body()
    body["ratings"][i].update(changes)
    return body


def _scores(i: int = 0, **changes) -> dict:
    body = _body()
    body["ratings"][i]["scores"].update(changes)
    return body


def _without(key: str, i: int | None = None, score: str | None = None) -> dict:
    body = _body()
    if i is None:
        body.pop(key)
    elif score is None:
        body["ratings"][i].pop(key)
    else:
        body["ratings"][i]["scores"].pop(score)
    return body


REFUSALS = {
    "not an object": ([], "body must be a JSON object with submission_id and ratings"),
    "null body": (None, "body must be a JSON object with submission_id and ratings"),
    "unknown fields": (_body(zeta=1, coment="x"),
                       "unknown field 'coment'; expected submission_id, ratings, comment"),
    "submission id missing": (_without("submission_id"), f"submission_id must be {ID_RULE}"),
    "submission id too short": (_body(submission_id="1234567"), f"submission_id must be {ID_RULE}"),
    "submission id of 101 characters": (_body(submission_id="a" * 101), f"submission_id must be {ID_RULE}"),
    "comment a number": (_body(comment=5), f"comment must be a string of at most {MAX_COMMENT} characters"),
    "comment too long": (_body(comment="x" * (MAX_COMMENT + 1)),
                         f"comment must be a string of at most {MAX_COMMENT} characters"),
    "comment with a NUL": (_body(comment="ok\x00"),
                           "comment contains a NUL character (at position 2), which text cannot hold"),
    "ratings missing": (_without("ratings"), "ratings must be a list with one entry per item of the assignment"),
    "ratings an object": (_body(ratings={"12": 4}), "ratings must be a list with one entry per item of the assignment"),
    "entry not an object": (_body(ratings=[4]), "ratings[0] must be an object with item_id and scores"),
    "entry with unknown fields": (_entry(1, position=3, extra=1),
                                  "ratings[1]: unknown field 'extra'; expected item_id, scores, seconds, comment"),
    "item id true": (_entry(item_id=True), "ratings[0].item_id must be an integer"),
    "item id false": (_entry(2, item_id=False), "ratings[2].item_id must be an integer"),
    "item id missing": (_without("item_id", 1), "ratings[1].item_id must be an integer"),
    "foreign item": (_entry(1, item_id=1), "ratings[1]: item 1 is not part of this assignment"),
    "item twice": (_entry(2, item_id=12), "ratings[2]: item 12 is rated twice"),
    "scores missing": (_without("scores", 0), "ratings[0].scores must be an object with one score per criterion"),
    "scores a list": (_entry(scores=[4, 5, 3]), "ratings[0].scores must be an object with one score per criterion"),
    "two scores missing": (_body(ratings=[{"item_id": 12, "scores": {"relevance": 4}}]),
                           "ratings[0]: item 12 has no score for 'empathy'"),
    "unknown criteria": (_scores(1, zest=2, humour=3),
                         "ratings[1]: unknown criterion 'humour'; expected empathy, relevance, fluency"),
    "score true": (_scores(empathy=True), "ratings[0]: empathy score True for item 12 must be an integer from 1 to 5"),
    "score below": (_scores(2, fluency=0), "ratings[2]: fluency score 0 for item 30 must be an integer from 1 to 5"),
    "score above": (_scores(1, relevance=6), "ratings[1]: relevance score 6 for item 7 must be an integer from 1 to 5"),
    "score fractional": (_scores(empathy=2.5), "ratings[0]: empathy score 2.5 for item 12 must be an integer from 1 "
                                               "to 5"),
    "seconds negative": (_entry(1, seconds=-1), f"ratings[1].seconds must be a number from 0 to {MAX_SECONDS}"),
    "seconds over a day": (_entry(seconds=MAX_SECONDS + 0.5),
                           f"ratings[0].seconds must be a number from 0 to {MAX_SECONDS}"),
    "seconds true": (_entry(seconds=True), f"ratings[0].seconds must be a number from 0 to {MAX_SECONDS}"),
    "seconds a string": (_entry(2, seconds="3"), f"ratings[2].seconds must be a number from 0 to {MAX_SECONDS}"),
    "two items without rating": (_body(ratings=_body()["ratings"][1:2]),
                                 "item 12 of this assignment has no rating (2 of 3 items missing)"),
    "no ratings": (_body(ratings=[]), "item 12 of this assignment has no rating (3 of 3 items missing)"),
}


@pytest.mark.parametrize("case", REFUSALS)
def test_every_refusal_says_exactly_what_was_wrong_and_where(case):
    body, message = REFUSALS[case]
    with pytest.raises(BadInput, match=f"^{re.escape(message)}$"):
        validate_submission(body, EXPECTED)


def test_the_scale_of_the_study_bounds_the_scores():
    seven_point = ExpectedRatings(item_ids=(3,), criteria=("empathy",), low=0, high=6)
    valid = validate_submission({"submission_id": "abcdefgh", "ratings": [{"item_id": 3, "scores": {"empathy": 0}}]},
                                seven_point)
    assert valid.answers[3].scores == {"empathy": 0}
    for score in (-1, 7):
        body = {"submission_id": "abcdefgh", "ratings": [{"item_id": 3, "scores": {"empathy": score}}]}
        with pytest.raises(BadInput, match=f"empathy score {score} for item 3 must be an integer from 0 to 6$"):
            validate_submission(body, seven_point)
    at_the_top = validate_submission({"submission_id": "abcdefgh",
                                      "ratings": [{"item_id": 3, "scores": {"empathy": 6}}]}, seven_point)
    assert at_the_top.answers[3].scores == {"empathy": 6}


def test_a_valid_submission_hands_back_everything_it_was_sent():
    valid = validate_submission(_body(comment="odd item 2"), EXPECTED)
    assert valid.submission_id == "retry-safe-0001" and valid.comment == "odd item 2"
    assert valid.answers[7].scores == {"empathy": 4, "relevance": 5, "fluency": 3}
    assert [rating.seconds for rating in valid.answers.values()] == [9.5, 9.5, 9.5]
    without = validate_submission(_without("seconds", 0), EXPECTED)
    assert without.answers[12].seconds is None and without.comment == "fine"
    assert validate_submission(_without("comment"), EXPECTED).comment is None


# --- through the store ----------------------------------------------------------------------------------


@pytest.fixture
def rater(study_engine):
    annotator, _ = invite(study_engine, "dora", "pilot")
    assignment_id = next_assignment(study_engine, "pilot", annotator.id)
    with Session(study_engine) as session:
        items = session.scalars(select(AssignmentItem.item_id).where(AssignmentItem.assignment_id == assignment_id)
                                .order_by(AssignmentItem.position)).all()
        expires_at = as_utc(session.get(Assignment, assignment_id).expires_at)
    return annotator.id, assignment_id, list(items), expires_at


def _payload(items, *, submission_id=None, score=4, seconds=2.0, comment=None) -> dict:
    body = {"submission_id": submission_id or new_submission_id(),
            "ratings": [{"item_id": item, "scores": dict.fromkeys(CRITERIA, score), "seconds": seconds}
                        for item in items]}
    if comment is not None:
        body["comment"] = comment
    return body


def _stored_assignment(engine, assignment_id):
    with Session(engine) as session:
        assignment = session.get(Assignment, assignment_id)
        seconds = {link.item_id: link.seconds_on_item for link in placed_items(session, assignment_id)}
        ratings = session.scalars(select(Rating).where(Rating.assignment_id == assignment_id)).all()
        session.expunge_all()
        return assignment, seconds, ratings


def test_the_receipt_says_what_was_stored(study_engine, rater):
    annotator_id, assignment_id, items, expires_at = rater
    now = expires_at - timedelta(minutes=5)
    payload = _payload(items)
    receipt = submit_assignment(study_engine, assignment_id, annotator_id, payload, now=now)
    assert receipt == {"status": "stored", "assignment_id": assignment_id, "submission_id": payload["submission_id"],
                       "ratings": 3 * len(items), "late": False, "submitted_at": now.isoformat()}
    assignment, _, ratings = _stored_assignment(study_engine, assignment_id)
    assert assignment.status == "submitted" and as_utc(assignment.submitted_at) == now
    assert {(r.item_id, r.criterion) for r in ratings} == {(item, c) for item in items for c in CRITERIA}
    assert all(r.annotator_id == annotator_id and r.submission_id == payload["submission_id"]
               and as_utc(r.submitted_at) == now for r in ratings)


def test_a_retry_after_the_submission_was_stored_gets_the_same_receipt(study_engine, rater):
    annotator_id, assignment_id, items, _ = rater
    payload = _payload(items)
    first = submit_assignment(study_engine, assignment_id, annotator_id, payload)
    again = submit_assignment(study_engine, assignment_id, annotator_id, payload, now=now_utc() + timedelta(hours=1))
    assert again == first
    assert len(_stored_assignment(study_engine, assignment_id)[2]) == 3 * len(items)


def test_another_submission_after_one_was_stored_is_a_conflict(study_engine, rater):
    annotator_id, assignment_id, items, _ = rater
    submit_assignment(study_engine, assignment_id, annotator_id, _payload(items, score=2))
    message = f"assignment {assignment_id} was already submitted (with another submission id)"
    for body in (_payload(items, score=5), [], {"ratings": []}):
        with pytest.raises(Conflict, match=f"^{re.escape(message)}$"):
            submit_assignment(study_engine, assignment_id, annotator_id, body)
    assert {r.score for r in _stored_assignment(study_engine, assignment_id)[2]} == {2}


def test_the_comment_is_stored_as_sent_and_an_empty_one_as_none(study_engine, rater):
    annotator_id, assignment_id, items, _ = rater
    comment = "  Item 2 <b>was</b> odd — 😀\nsecond line "
    submit_assignment(study_engine, assignment_id, annotator_id, _payload(items, comment=comment))
    assert _stored_assignment(study_engine, assignment_id)[0].comment == comment
    second = next_assignment(study_engine, "pilot", annotator_id)
    with Session(study_engine) as session:
        second_items = session.scalars(select(AssignmentItem.item_id)
                                       .where(AssignmentItem.assignment_id == second)).all()
    submit_assignment(study_engine, second, annotator_id, _payload(second_items, comment=""))
    assert _stored_assignment(study_engine, second)[0].comment is None


def test_seconds_are_stored_per_item_and_missing_ones_as_null(study_engine, rater):
    annotator_id, assignment_id, items, _ = rater
    payload = _payload(items, seconds=7.25)
    payload["ratings"][0]["seconds"] = 0
    payload["ratings"][1].pop("seconds")
    submit_assignment(study_engine, assignment_id, annotator_id, payload)
    seconds = _stored_assignment(study_engine, assignment_id)[1]
    assert seconds == {items[0]: 0.0, items[1]: None, **{item: 7.25 for item in items[2:]}}


@pytest.mark.parametrize("after, late", [(timedelta(0), False), (timedelta(seconds=1), True),
                                         (timedelta(seconds=-1), False)])
def test_a_submission_after_the_deadline_is_kept_and_flagged_late(study_engine, rater, after, late):
    annotator_id, assignment_id, items, expires_at = rater
    receipt = submit_assignment(study_engine, assignment_id, annotator_id, _payload(items), now=expires_at + after)
    assert receipt["late"] is late and receipt["status"] == "stored"
    assert _stored_assignment(study_engine, assignment_id)[0].late is late


def test_someone_elses_assignment_is_not_found_like_one_that_does_not_exist(study_engine, rater):
    annotator_id, assignment_id, items, _ = rater
    other, _ = invite(study_engine, "eve", "pilot")
    for who, which in ((other.id, assignment_id), (annotator_id, 10**6)):
        with pytest.raises(NotFound, match=f"^you have no assignment {which}$"):
            submit_assignment(study_engine, which, who, _payload(items))
    assert _stored_assignment(study_engine, assignment_id)[0].status == "assigned"


def test_an_assignment_of_another_study_is_not_found(study_engine, rater):
    annotator_id, assignment_id, items, _ = rater
    make_study(study_engine, name="second", count=6)
    with pytest.raises(NotFound, match=f"^you have no assignment {assignment_id}$"):
        submit_assignment(study_engine, assignment_id, annotator_id, _payload(items), study="second")
    receipt = submit_assignment(study_engine, assignment_id, annotator_id, _payload(items), study="pilot")
    assert receipt["status"] == "stored"


def test_a_retry_of_a_stored_submission_from_another_study_is_not_found(study_engine, rater):
    annotator_id, assignment_id, items, _ = rater
    payload = _payload(items)
    submit_assignment(study_engine, assignment_id, annotator_id, payload)
    make_study(study_engine, name="second", count=6)
    with pytest.raises(NotFound):
        submit_assignment(study_engine, assignment_id, annotator_id, payload, study="second")


def _between_the_checks(monkeypatch, action):
    """Run `action` after the first checks and validation, before the storing transaction."""
    validate = submit_module.validate_submission

    def validate_then_act(*args):
        valid = validate(*args)
        action()
        return valid

    monkeypatch.setattr(submit_module, "validate_submission", validate_then_act)


def test_a_study_closed_before_the_submission_is_stored_takes_nothing(study_engine, rater, monkeypatch):
    annotator_id, assignment_id, items, _ = rater
    _between_the_checks(monkeypatch, lambda: close_study(study_engine, "pilot"))
    with pytest.raises(StudyClosed):
        submit_assignment(study_engine, assignment_id, annotator_id, _payload(items))
    assignment, _, ratings = _stored_assignment(study_engine, assignment_id)
    assert ratings == [] and assignment.status == "assigned"


def test_a_rater_revoked_before_the_submission_is_stored_stores_nothing(study_engine, rater, monkeypatch):
    annotator_id, assignment_id, items, _ = rater
    _between_the_checks(monkeypatch, lambda: revoke(study_engine, "dora", study="pilot"))
    with pytest.raises(AccessRevoked):
        submit_assignment(study_engine, assignment_id, annotator_id, _payload(items))
    assert _stored_assignment(study_engine, assignment_id)[2] == []


def test_a_closed_study_refuses_a_new_submission_but_a_stored_one_still_gets_its_receipt(study_engine, rater):
    annotator_id, assignment_id, items, _ = rater
    payload = _payload(items)
    first = submit_assignment(study_engine, assignment_id, annotator_id, payload)
    close_study(study_engine, "pilot")
    assert submit_assignment(study_engine, assignment_id, annotator_id, payload) == first


def test_a_revoked_rater_is_told_so_whatever_she_sends(study_engine, rater):
    annotator_id, assignment_id, _, _ = rater
    revoke(study_engine, "dora", study="pilot")
    with pytest.raises(AccessRevoked):
        submit_assignment(study_engine, assignment_id, annotator_id, {"ratings": "not even a list"})


def test_a_missing_rating_is_named_in_the_order_the_items_are_shown(study_engine, rater):
    annotator_id, assignment_id, items, _ = rater
    # Shown order is the stored position, whatever order the rows were written in: move the last item first.
    with Session(study_engine) as session, session.begin():
        links = session.scalars(select(AssignmentItem).where(AssignmentItem.assignment_id == assignment_id)
                                .order_by(AssignmentItem.position)).all()
        first, last = links[0], links[-1]
        last_position = last.position
        first.position = 10_000
        session.flush()
        last.position = 0
        session.flush()
        first.position = last_position
        shown_first = last.item_id
    message = f"item {shown_first} of this assignment has no rating ({len(items)} of {len(items)} items missing)"
    with pytest.raises(BadInput, match=f"^{re.escape(message)}$"):
        submit_assignment(study_engine, assignment_id, annotator_id, {"submission_id": new_submission_id(),
                                                                      "ratings": []})


def test_an_assignment_already_expired_is_late_whatever_the_submitters_clock_says(study_engine, rater):
    # Another worker process expired it (its clock past the deadline); this one's clock is a second behind.
    annotator_id, assignment_id, items, expires_at = rater
    other, _ = invite(study_engine, "emil", "pilot")
    next_assignment(study_engine, "pilot", other.id, now=expires_at + timedelta(seconds=1))
    assert _stored_assignment(study_engine, assignment_id)[0].status == "expired"
    receipt = submit_assignment(study_engine, assignment_id, annotator_id, _payload(items),
                                now=expires_at - timedelta(seconds=1))
    assert receipt["late"] is True and _stored_assignment(study_engine, assignment_id)[0].late is True
