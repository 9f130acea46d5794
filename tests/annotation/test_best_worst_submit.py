"""Taking a best-worst submission: every refusal's whole message (what was wrong, which entry, tuple and criterion),
letters read through the order each tuple was shown in and stored as the slots they showed, the validator and the
generated schema agreeing, retries answered the same and storing nothing twice, another submission a conflict,
nothing half-written when the database refuses an answer, and the database's own keys (best is not worst, both
members of the tuple, a placement of this very assignment)."""
from __future__ import annotations

import re

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import insert, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from empeval.server.annotation.annotators import invite
from empeval.server.annotation.kinds.best_worst import ExpectedPicks
from empeval.server.annotation.submission import submit_assignment
from empeval.server.errors import BadInput, Conflict
from empeval.server.store.kinds.best_worst import AssignmentTuple, BestWorstChoice
from empeval.server.store.models import Assignment
from empeval.server.store.queries import now_utc
from tests.annotation.best_worst_fixtures import (
    BWS_CRITERIA,
    make_bws_study,
    picks_body,
    stored_picks,
    tuple_placements,
)
from tests.annotation.json_bodies import bodies, fits, shown, why_not
from tests.annotation.kind_submits import best_worst_schema, validate_best_worst
from tests.annotation.pairwise_fixtures import assignment_ids, give

# Three tuples of four, shown in different orders: the letters a rater picks mean different slots in each.
EXPECTED = ExpectedPicks(item_ids=(12, 7, 30), criteria=BWS_CRITERIA, shown={12: "0123", 7: "3120", 30: "2301"})


def _body(**changes) -> dict:
    body = {"submission_id": "retry-safe-0001", "comment": "fine",
            "best_worst": [{"item_id": item, "best": {"empathy": "A", "relevance": "B", "fluency": "C"},
                            "worst": {"empathy": "D", "relevance": "A", "fluency": "B"}, "seconds": 9.5}
                           for item in EXPECTED.item_ids]}
    body.update(changes)
    return body


def _entry(i: int = 0, **changes) -> dict:
    body = _body()
    body["best_worst"][i].update(changes)
    return body


def _pick(pick: str, i: int = 0, **changes) -> dict:
    body = _body()
    body["best_worst"][i][pick].update(changes)
    return body


def _without(pick: str, i: int, criterion: str | None = None) -> dict:
    body = _body()
    if criterion is None:
        body["best_worst"][i].pop(pick)
    else:
        body["best_worst"][i][pick].pop(criterion)
    return body


REFUSALS = {
    "not an object": (["best_worst"], "body must be a JSON object with submission_id and best_worst"),
    "another kind's entries": (_body(judgments=[]), "unknown field 'judgments'; expected submission_id, best_worst, "
                                                    "comment"),
    "no entries": (_body(best_worst=None), "best_worst must be a list with one entry per tuple of the assignment"),
    "entry not an object": (_body(best_worst=[12]), "best_worst[0] must be an object with item_id and best and "
                                                    "worst"),
    "unknown entry field": (_entry(1, choices={}), "best_worst[1]: unknown field 'choices'; expected item_id, best, "
                                                   "worst, seconds"),
    "item of another assignment": (_entry(2, item_id=99), "best_worst[2]: item 99 is not part of this assignment"),
    "item twice": (_entry(1, item_id=12), "best_worst[1]: item 12 is answered twice"),
    "no worst": (_without("worst", 0), "best_worst[0].worst must be an object with one letter per criterion"),
    "best not an object": (_entry(0, best="A"), "best_worst[0].best must be an object with one letter per criterion"),
    "criterion missing": (_without("best", 1, "relevance"), "best_worst[1]: tuple 7 has no best response for "
                                                           "'relevance'"),
    "unknown criterion": (_pick("worst", 0, humour="A"), "best_worst[0]: unknown criterion 'humour' in worst for "
                                                         "tuple 12; expected empathy, relevance, fluency"),
    "letter beyond the tuple": (_pick("best", 2, fluency="E"), "best_worst[2]: best fluency response 'E' for tuple "
                                                               "30 must be one of A, B, C, D"),
    "lower-case letter": (_pick("best", 0, empathy="a"), "best_worst[0]: best empathy response 'a' for tuple 12 must "
                                                          "be one of A, B, C, D"),
    "two letters": (_pick("worst", 0, empathy="AB"), "best_worst[0]: worst empathy response 'AB' for tuple 12 must "
                                                      "be one of A, B, C, D"),
    "a slot number instead of a letter": (_pick("best", 1, empathy=0), "best_worst[1]: best empathy response 0 for "
                                                                        "tuple 7 must be one of A, B, C, D"),
    "list answer": (_pick("best", 1, empathy=["A"]), "best_worst[1]: best empathy response ['A'] for tuple 7 must "
                                                     "be one of A, B, C, D"),
    "best is worst": (_pick("worst", 1, relevance="B"), "best_worst[1]: tuple 7 has 'B' as both the best and the "
                                                        "worst on 'relevance'; pick two different responses"),
    "negative seconds": (_entry(0, seconds=-1), "best_worst[0].seconds must be a number from 0 to 86400"),
    "tuple missing": (_body(best_worst=_body()["best_worst"][:2]),
                      "item 30 of this assignment has no best-worst answer (1 of 3 tuples missing)"),
}


@pytest.mark.parametrize("case", REFUSALS)
def test_each_refusal_says_what_and_where(case):
    body, message = REFUSALS[case]
    with pytest.raises(BadInput, match=f"^{re.escape(message)}$"):
        validate_best_worst(body, EXPECTED)


def test_letters_become_the_slots_each_tuple_showed_them_at():
    """Tuple 7 was shown in the order of slots 3, 1, 2, 0: its A is slot 3 and its D slot 0."""
    valid = validate_best_worst(_body(), EXPECTED)
    assert valid.answers[12].picks == {"empathy": (0, 3), "relevance": (1, 0), "fluency": (2, 1)}
    assert valid.answers[7].picks == {"empathy": (3, 0), "relevance": (1, 3), "fluency": (2, 1)}
    assert valid.answers[30].picks["empathy"] == (2, 1) and valid.answers[30].seconds == 9.5


def verdict(body, expected: ExpectedPicks) -> str | None:
    try:
        validate_best_worst(body, expected)
    except BadInput as error:
        return error.message
    return None


@pytest.mark.parametrize("case", REFUSALS)
def test_the_generated_schema_refuses_each_body_the_validator_refuses(case):
    body, _ = REFUSALS[case]
    assert not fits(best_worst_schema(EXPECTED), body)


def test_the_generated_schemas_are_valid_and_take_a_whole_submission():
    import jsonschema_rs

    for expected in (None, EXPECTED):
        assert jsonschema_rs.meta.is_valid(best_worst_schema(expected))
    assert fits(best_worst_schema(EXPECTED), _body()) and fits(best_worst_schema(), _body())


def test_validator_and_generated_schema_agree_on_generated_bodies():
    """Bodies fitting the assignment's schema, bodies mutated not to, and bodies fitting only the generic schema:
    the validator accepts exactly those the assignment's schema admits (best and worst differing included)."""
    schema, generic = best_worst_schema(EXPECTED), best_worst_schema()

    @given(body=st.one_of(bodies(schema), bodies(schema, fitting=False), bodies(generic)))
    @settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck), database=None)
    def agree(body):
        refusal = verdict(body, EXPECTED)
        if fits(schema, body):
            assert refusal is None, f"the schema admits this body but the validator says: {refusal}\n{shown(body)}"
            assert fits(generic, body), why_not(generic, body)
        else:
            assert refusal is not None, (f"the validator accepts a body the schema refuses "
                                         f"({why_not(schema, body)})\n{shown(body)}")

    agree()


# --- against the store -------------------------------------------------------------------------------------------

@pytest.fixture
def bws(sample_engine):
    """A best-worst study (tuples of 3 of 4 systems); rita holds its first assignment. (engine, id, rita's id)."""
    make_bws_study(sample_engine)
    rita, _ = invite(sample_engine, "rita", "bws")
    assignment_id = assignment_ids(sample_engine, "bws")[0]
    give(sample_engine, assignment_id, rita.id)
    return sample_engine, assignment_id, rita.id


def test_picks_are_stored_as_the_systems_shown_under_the_letters(bws):
    engine, assignment_id, rita = bws
    receipt = submit_assignment(engine, assignment_id, rita, picks_body(engine, assignment_id, best="B",
                                                                        comment="clear"))
    placed = tuple_placements(engine, assignment_id)
    assert receipt["status"] == "stored" and receipt["choices"] == 3 * len(placed) and receipt["late"] is False
    assert stored_picks(engine, assignment_id) == {(p.tuple_item_id, c): (p.systems[1], p.systems[-1])
                                                   for p in placed for c in BWS_CRITERIA}
    with Session(engine) as session:
        assignment = session.get_one(Assignment, assignment_id)
        assert (assignment.status, assignment.comment) == ("submitted", "clear")
        seconds = dict(session.execute(select(AssignmentTuple.position, AssignmentTuple.seconds_on_item)
                                       .where(AssignmentTuple.assignment_id == assignment_id)).all())
    assert seconds == {p.position: 2.0 + p.position for p in placed}


def test_the_same_submission_again_answers_the_same_and_another_is_a_conflict(bws):
    engine, assignment_id, rita = bws
    body = picks_body(engine, assignment_id)
    first = submit_assignment(engine, assignment_id, rita, body)
    assert submit_assignment(engine, assignment_id, rita, body) == first
    before = stored_picks(engine, assignment_id)
    assert len(before) == first["choices"]
    with pytest.raises(Conflict, match=f"assignment {assignment_id} was already submitted"):
        submit_assignment(engine, assignment_id, rita, picks_body(engine, assignment_id, best="B",
                                                                  submission_id="bws-submit-0002"))
    assert stored_picks(engine, assignment_id) == before


def test_an_answer_the_database_refuses_leaves_nothing_half_written(sample_engine):
    """Rita answered a tuple in one assignment; another assignment holding the same tuple cannot store her answers
    about it again (one per tuple, annotator and criterion): the whole submission is rolled back."""
    make_bws_study(sample_engine, k=2)
    rita, _ = invite(sample_engine, "rita", "bws")
    by_tuple: dict[int, list[int]] = {}
    for a in assignment_ids(sample_engine, "bws"):
        for p in tuple_placements(sample_engine, a):
            by_tuple.setdefault(p.tuple_item_id, []).append(a)
    first, second = next(assignments for assignments in by_tuple.values() if len(assignments) == 2)
    give(sample_engine, first, rita.id)
    submit_assignment(sample_engine, first, rita.id, picks_body(sample_engine, first))
    give(sample_engine, second, rita.id)
    with pytest.raises(IntegrityError):
        submit_assignment(sample_engine, second, rita.id, picks_body(sample_engine, second,
                                                                     submission_id="bws-submit-0002"))
    assert stored_picks(sample_engine, second) == {}
    with Session(sample_engine) as session:
        assert session.get_one(Assignment, second).status == "assigned"
        assert set(session.scalars(select(AssignmentTuple.seconds_on_item)
                                   .where(AssignmentTuple.assignment_id == second))) == {None}


@pytest.mark.parametrize("row, constraint", [
    ({"best_slot": 1, "worst_slot": 1}, "best is the worst"),
    ({"best_slot": 0, "worst_slot": 5}, "a slot the tuple does not have"),
    ({"best_slot": 0, "worst_slot": 1, "placement": "another assignment's"}, "a tuple not placed in the assignment"),
])
def test_the_database_refuses_what_the_validator_would_never_let_through(bws, row, constraint):
    """By construction, not by the validator: a check and composite foreign keys."""
    engine, assignment_id, rita = bws
    row = dict(row)  # the parameters are shared by the runs on both databases
    placed = tuple_placements(engine, assignment_id)
    item = placed[0].tuple_item_id
    if row.pop("placement", None):
        mine = {p.tuple_item_id for p in placed}
        other = next(a for a in assignment_ids(engine, "bws") if a != assignment_id)
        item = next(p.tuple_item_id for p in tuple_placements(engine, other) if p.tuple_item_id not in mine)
    with pytest.raises(IntegrityError), Session(engine) as session, session.begin():
        session.execute(insert(BestWorstChoice).values(
            assignment_id=assignment_id, tuple_item_id=item, annotator_id=rita, criterion="empathy",
            submitted_at=now_utc(), submission_id="by-hand-0001", **row))
