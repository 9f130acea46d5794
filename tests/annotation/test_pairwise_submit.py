"""Taking a pairwise (A/B) submission: every refusal's whole message (what was wrong, which entry, item and
criterion), A/B/T stored as left/right/tie, a tie refused when the study allows none, retries answered the same and
storing nothing twice, another submission a conflict, nothing half-written when the database refuses a choice, the
late flag, and whose assignment it is."""
from __future__ import annotations

import re
from datetime import timedelta

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from empeval.server.annotation.annotators import invite
from empeval.server.annotation.handout import StudyClosed, close_study
from empeval.server.annotation.kinds.pairwise import ExpectedChoices
from empeval.server.annotation.submission import submit_assignment as submit_pairwise
from empeval.server.annotation.submission_schema import MAX_COMMENT, MAX_SECONDS
from empeval.server.errors import BadInput, Conflict, NotFound
from empeval.server.store.kinds.pairwise import AssignmentPair, Choice
from empeval.server.store.models import Assignment
from empeval.server.store.queries import now_utc
from tests.annotation.conftest import make_study
from tests.annotation.json_bodies import bodies, fits, shown, why_not
from tests.annotation.kind_submits import pairwise_schema as pairwise_submission_schema
from tests.annotation.kind_submits import validate_pairwise as validate_pairwise_submission
from tests.annotation.pairwise_fixtures import AB_CRITERIA, assignment_ids, give, make_ab_study, placements

EXPECTED = ExpectedChoices(item_ids=(12, 7, 30), criteria=AB_CRITERIA, ties=True)
ID_RULE = "a string of 8-100 letters, digits, '_', '.', ':' or '-'"


def _body(**changes) -> dict:
    body = {"submission_id": "retry-safe-0001", "comment": "fine",
            "judgments": [{"item_id": item, "choices": {"empathy": "A", "relevance": "B", "fluency": "T"},
                           "seconds": 9.5} for item in EXPECTED.item_ids]}
    body.update(changes)
    return body


def _entry(i: int = 0, **changes) -> dict:
    body = _body()
    body["judgments"][i].update(changes)
    return body


def _choices(i: int = 0, **changes) -> dict:
    body = _body()
    body["judgments"][i]["choices"].update(changes)
    return body


def _without(key: str, i: int | None = None, criterion: str | None = None) -> dict:
    body = _body()
    if i is None:
        body.pop(key)
    elif criterion is None:
        body["judgments"][i].pop(key)
    else:
        body["judgments"][i]["choices"].pop(criterion)
    return body


REFUSALS = {
    "not an object": (["judgments"], "body must be a JSON object with submission_id and judgments"),
    "unknown field": (_body(ratings=[]), "unknown field 'ratings'; expected submission_id, judgments, comment"),
    "no submission id": (_without("submission_id"), f"submission_id must be {ID_RULE}"),
    "short submission id": (_body(submission_id="short"), f"submission_id must be {ID_RULE}"),
    "comment too long": (_body(comment="x" * (MAX_COMMENT + 1)),
                         f"comment must be a string of at most {MAX_COMMENT} characters"),
    "no judgments": (_without("judgments"), "judgments must be a list with one entry per pair of the assignment"),
    "entry not an object": (_body(judgments=[12]), "judgments[0] must be an object with item_id and choices"),
    "unknown entry field": (_entry(1, scores={}), "judgments[1]: unknown field 'scores'; expected item_id, choices, "
                                                  "seconds, comment"),
    "boolean item id": (_entry(0, item_id=True), "judgments[0].item_id must be an integer"),
    "item of another assignment": (_entry(2, item_id=99), "judgments[2]: item 99 is not part of this assignment"),
    "item twice": (_entry(1, item_id=12), "judgments[1]: item 12 is judged twice"),
    "choices not an object": (_entry(0, choices=["A", "B", "T"]),
                              "judgments[0].choices must be an object with one choice per criterion"),
    "criterion missing": (_without("choices", 1, "relevance"), "judgments[1]: item 7 has no choice for 'relevance'"),
    "unknown criterion": (_choices(0, humour="A"),
                          "judgments[0]: unknown criterion 'humour' for item 12; expected empathy, relevance, fluency"),
    "unknown answer": (_choices(2, fluency="C"),
                       "judgments[2]: fluency choice 'C' for item 30 must be A, B or T (tie)"),
    "lower-case answer": (_choices(0, empathy="a"),
                          "judgments[0]: empathy choice 'a' for item 12 must be A, B or T (tie)"),
    "screen side instead of label": (_choices(0, empathy="left"),
                                      "judgments[0]: empathy choice 'left' for item 12 must be A, B or T (tie)"),
    "boolean answer": (_choices(1, empathy=True), "judgments[1]: empathy choice True for item 7 must be A, B or T "
                                                  "(tie)"),
    "number answer": (_choices(1, empathy=1), "judgments[1]: empathy choice 1 for item 7 must be A, B or T (tie)"),
    "list answer": (_choices(1, empathy=["A"]), "judgments[1]: empathy choice ['A'] for item 7 must be A, B or T "
                                                "(tie)"),
    "negative seconds": (_entry(0, seconds=-1), f"judgments[0].seconds must be a number from 0 to {MAX_SECONDS}"),
    "boolean seconds": (_entry(0, seconds=True), f"judgments[0].seconds must be a number from 0 to {MAX_SECONDS}"),
    "item missing": (_body(judgments=_body()["judgments"][:1]),
                     "item 7 of this assignment has no judgment (2 of 3 pairs missing)"),
}


@pytest.mark.parametrize("case", REFUSALS)
def test_each_refusal_says_what_and_where(case):
    body, message = REFUSALS[case]
    with pytest.raises(BadInput, match=f"^{re.escape(message)}$"):
        validate_pairwise_submission(body, EXPECTED)


def test_a_tie_is_refused_naming_item_and_criterion_when_the_study_allows_none():
    no_ties = EXPECTED._replace(ties=False)
    with pytest.raises(BadInput, match=r"^judgments\[0\]: fluency choice 'T' \(tie\) for item 12 is not allowed in "
                                       r"this study; choose A or B$"):
        validate_pairwise_submission(_body(), no_ties)
    with pytest.raises(BadInput, match=r"must be A or B \(this study allows no tie\)$"):
        validate_pairwise_submission(_choices(0, empathy="X"), no_ties)
    body = _body()
    for entry in body["judgments"]:
        entry["choices"]["fluency"] = "B"
    valid = validate_pairwise_submission(body, no_ties)
    assert {s for j in valid.answers.values() for s in j.sides.values()} == {"left", "right"}


def test_a_b_and_t_become_left_right_and_tie():
    valid = validate_pairwise_submission(_body(), EXPECTED)
    assert valid.answers[12].sides == {"empathy": "left", "relevance": "right", "fluency": "tie"}
    assert valid.answers[30].seconds == 9.5 and valid.comment == "fine"


def verdict(body, expected: ExpectedChoices) -> str | None:
    try:
        validate_pairwise_submission(body, expected)
    except BadInput as error:
        return error.message
    return None


@pytest.mark.parametrize("case", REFUSALS)
def test_the_generated_schema_refuses_each_body_the_validator_refuses(case):
    body, _ = REFUSALS[case]
    assert not fits(pairwise_submission_schema(EXPECTED), body)


def test_the_generated_schema_accepts_a_whole_submission_and_refuses_a_tie_where_none_is_allowed():
    import jsonschema_rs

    for expected in (None, EXPECTED, EXPECTED._replace(ties=False)):
        assert jsonschema_rs.meta.is_valid(pairwise_submission_schema(expected))
    assert fits(pairwise_submission_schema(EXPECTED), _body()) and fits(pairwise_submission_schema(), _body())
    assert not fits(pairwise_submission_schema(EXPECTED._replace(ties=False)), _body())


@pytest.mark.parametrize("ties", [True, False], ids=["ties", "no-ties"])
def test_validator_and_generated_schema_agree_on_generated_bodies(ties):
    """Bodies fitting the assignment's schema, bodies mutated not to, and bodies fitting only the generic schema:
    the validator accepts exactly those the assignment's schema admits."""
    expected = EXPECTED._replace(ties=ties)
    schema, generic = pairwise_submission_schema(expected), pairwise_submission_schema()

    @given(body=st.one_of(bodies(schema), bodies(schema, fitting=False), bodies(generic)))
    @settings(max_examples=80, deadline=None, suppress_health_check=list(HealthCheck), database=None)
    def agree(body):
        refusal = verdict(body, expected)
        if fits(schema, body):
            assert refusal is None, f"the schema admits this body but the validator says: {refusal}\n{shown(body)}"
            assert fits(generic, body), why_not(generic, body)
        else:
            assert refusal is not None, (f"the validator accepts a body the schema refuses "
                                         f"({why_not(schema, body)})\n{shown(body)}")

    agree()


# --- against the store -------------------------------------------------------------------------------------------

@pytest.fixture
def ab(sample_engine):
    """A pairwise study; rita holds its first assignment. (engine, assignment id, rita's id)."""
    make_ab_study(sample_engine)
    rita, _ = invite(sample_engine, "rita", "ab")
    assignment_id = assignment_ids(sample_engine, "ab")[0]
    give(sample_engine, assignment_id, rita.id)
    return sample_engine, assignment_id, rita.id


def body_for(engine, assignment_id, answers=("A", "B", "T"), submission_id="pairwise-0001", **extra) -> dict:
    """Every pair of the assignment judged: criterion c of the pair at position p gets answers[(p + c) % 3]."""
    return {"submission_id": submission_id, **extra, "judgments": [
        {"item_id": p.pair_item_id, "seconds": 1.5 + p.position,
         "choices": {c: answers[(p.position + j) % len(answers)] for j, c in enumerate(AB_CRITERIA)}}
        for p in placements(engine, assignment_id)]}


def stored(engine, assignment_id):
    with Session(engine) as session:
        return {(pair, criterion): choice for pair, criterion, choice in session.execute(
            select(Choice.pair_item_id, Choice.criterion, Choice.choice).where(Choice.assignment_id == assignment_id))}


def test_choices_are_stored_as_screen_sides_with_the_seconds_on_each_pair(ab):
    engine, assignment_id, rita = ab
    receipt = submit_pairwise(engine, assignment_id, rita, body_for(engine, assignment_id, comment="clear"))
    placed = placements(engine, assignment_id)
    assert receipt["status"] == "stored" and receipt["choices"] == 3 * len(placed) and receipt["late"] is False
    side = {"A": "left", "B": "right", "T": "tie"}
    assert stored(engine, assignment_id) == {
        (p.pair_item_id, c): side[("A", "B", "T")[(p.position + j) % 3]]
        for p in placed for j, c in enumerate(AB_CRITERIA)}
    with Session(engine) as session:
        assignment = session.get_one(Assignment, assignment_id)
        assert (assignment.status, assignment.comment, assignment.submission_id) == ("submitted", "clear",
                                                                                     "pairwise-0001")
        seconds = dict(session.execute(select(AssignmentPair.position, AssignmentPair.seconds_on_item)
                                       .where(AssignmentPair.assignment_id == assignment_id)).all())
    assert seconds == {p.position: 1.5 + p.position for p in placed}


def test_the_same_submission_again_answers_the_same_and_stores_nothing_twice(ab):
    engine, assignment_id, rita = ab
    body = body_for(engine, assignment_id)
    first = submit_pairwise(engine, assignment_id, rita, body)
    again = submit_pairwise(engine, assignment_id, rita, body)
    assert again == first
    with Session(engine) as session:
        assert len(session.scalars(select(Choice.id).where(Choice.assignment_id == assignment_id)).all()) == \
            first["choices"]


def test_another_submission_for_a_submitted_assignment_is_a_conflict(ab):
    engine, assignment_id, rita = ab
    submit_pairwise(engine, assignment_id, rita, body_for(engine, assignment_id))
    before = stored(engine, assignment_id)
    with pytest.raises(Conflict, match=f"assignment {assignment_id} was already submitted"):
        submit_pairwise(engine, assignment_id, rita, body_for(engine, assignment_id, answers=("B",),
                                                              submission_id="pairwise-0002"))
    assert stored(engine, assignment_id) == before


def test_a_tie_in_a_study_without_ties_is_refused_and_nothing_is_stored(sample_engine):
    make_ab_study(sample_engine, ties=False)
    rita, _ = invite(sample_engine, "rita", "ab")
    assignment_id = assignment_ids(sample_engine, "ab")[0]
    give(sample_engine, assignment_id, rita.id)
    first_pair = placements(sample_engine, assignment_id)[0].pair_item_id
    with pytest.raises(BadInput, match=rf"^judgments\[0\]: fluency choice 'T' \(tie\) for item {first_pair} is not "
                                       r"allowed in this study; choose A or B$"):
        submit_pairwise(sample_engine, assignment_id, rita.id, body_for(sample_engine, assignment_id,
                                                                        answers=("A", "B", "T")))
    assert stored(sample_engine, assignment_id) == {}
    receipt = submit_pairwise(sample_engine, assignment_id, rita.id, body_for(sample_engine, assignment_id,
                                                                              answers=("A", "B")))
    assert set(stored(sample_engine, assignment_id).values()) == {"left", "right"} and receipt["choices"] > 0


def test_a_choice_the_database_refuses_leaves_nothing_half_written(sample_engine):
    """Rita already judged a pair in one assignment; an assignment holding the same pair again cannot store its
    choices (one per pair, annotator and criterion): the whole submission is rolled back, the assignment is still
    hers to fix, and no choice of it is kept."""
    make_ab_study(sample_engine, k=2)
    rita, _ = invite(sample_engine, "rita", "ab")
    by_pair: dict[int, list[int]] = {}
    for a in assignment_ids(sample_engine, "ab"):
        for p in placements(sample_engine, a):
            by_pair.setdefault(p.pair_item_id, []).append(a)
    first, second = next(assignments for assignments in by_pair.values() if len(assignments) == 2)
    give(sample_engine, first, rita.id)
    submit_pairwise(sample_engine, first, rita.id, body_for(sample_engine, first))
    give(sample_engine, second, rita.id)
    with pytest.raises(IntegrityError):
        submit_pairwise(sample_engine, second, rita.id, body_for(sample_engine, second, submission_id="pairwise-0002"))
    assert stored(sample_engine, second) == {}
    with Session(sample_engine) as session:
        assignment = session.get_one(Assignment, second)
        assert (assignment.status, assignment.submission_id) == ("assigned", None)
        assert session.scalars(select(AssignmentPair.seconds_on_item)
                               .where(AssignmentPair.assignment_id == second)).all() == \
            [None] * len(placements(sample_engine, second))


@pytest.mark.parametrize("how", ["deadline passed", "expired"])
def test_a_submission_after_the_deadline_is_kept_and_flagged_late(ab, how):
    engine, assignment_id, rita = ab
    with Session(engine) as session, session.begin():
        values = {"expires_at": now_utc() - timedelta(minutes=1)} if how == "deadline passed" else {"status": "expired"}
        session.execute(update(Assignment).where(Assignment.id == assignment_id).values(**values))
    receipt = submit_pairwise(engine, assignment_id, rita, body_for(engine, assignment_id))
    assert receipt["late"] is True and len(stored(engine, assignment_id)) == receipt["choices"] > 0
    with Session(engine) as session:
        assert session.get_one(Assignment, assignment_id).late is True


def test_only_the_holder_may_submit_and_a_closed_study_takes_nothing(ab):
    engine, assignment_id, rita = ab
    other, _ = invite(engine, "otto", "ab")
    with pytest.raises(NotFound, match=f"^you have no assignment {assignment_id}$"):
        submit_pairwise(engine, assignment_id, other.id, body_for(engine, assignment_id))
    with pytest.raises(NotFound, match=f"^you have no assignment {assignment_id}$"):
        submit_pairwise(engine, assignment_id, rita, body_for(engine, assignment_id), study="pilot")
    close_study(engine, "ab")
    with pytest.raises(StudyClosed):
        submit_pairwise(engine, assignment_id, rita, body_for(engine, assignment_id))
    assert stored(engine, assignment_id) == {}


def test_a_likert_assignment_is_not_taken_as_pairwise(ab):
    engine, _, rita = ab
    make_study(engine, name="pilot", count=4, k=1, per_assignment=4, controls=[])
    likert = assignment_ids(engine, "pilot")[0]
    give(engine, likert, rita)
    with pytest.raises(BadInput, match=f"^assignment {likert} is of the Likert study 'pilot': send ratings$"):
        submit_pairwise(engine, likert, rita, {"submission_id": "pairwise-0001", "judgments": []})


def test_a_pairwise_submit_through_the_api_entry_takes_one_connection_and_stores_as_submit_pairwise(ab):
    # submit_assignment used to close its connection and let submit_pairwise read the assignment again on a
    # second one, then write on a third.
    from sqlalchemy import event

    from empeval.server.annotation.submission import submit_assignment

    engine, assignment_id, rita = ab
    body = body_for(engine, assignment_id)
    checkouts: list[object] = []
    record = lambda *_args: checkouts.append(object())  # noqa: E731
    event.listen(engine, "checkout", record)
    try:
        receipt = submit_assignment(engine, assignment_id, rita, body)
    finally:
        event.remove(engine, "checkout", record)
    assert receipt["status"] == "stored" and receipt["choices"] == 3 * len(placements(engine, assignment_id))
    assert len(checkouts) == 1
    assert submit_assignment(engine, assignment_id, rita, body) == receipt
