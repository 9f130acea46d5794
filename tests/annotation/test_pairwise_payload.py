"""The task page's payload for a pairwise (A/B) assignment: A is the response the placement shows on the left, B
the other; the conversation is the pair's context; no system name, id or control flag reaches the rater; the
questions are the study's; "tie" is offered as the study says; two statements whatever the number of pairs."""
from __future__ import annotations

import json

import pytest
from sqlalchemy.orm import Session

from empeval.server.annotation.handout import assignment_payload
from empeval.server.errors import NotFound
from empeval.server.store.kinds.pairwise import DEFAULT_PAIRWISE_CRITERIA
from empeval.server.store.models import Context
from tests.annotation.conftest import CONTROLS, SYSTEMS, make_study
from tests.annotation.pairwise_fixtures import StatementCounter, assignment_ids, make_ab_study, placements


def payload(engine, assignment_id):
    return assignment_payload(engine, assignment_id)


def test_a_is_the_response_shown_left_and_b_the_other_in_position_order(sample_engine):
    make_ab_study(sample_engine)
    sides_seen = set()
    for assignment_id in assignment_ids(sample_engine, "ab"):
        page = payload(sample_engine, assignment_id)
        placed = placements(sample_engine, assignment_id)
        assert [item["position"] for item in page["items"]] == [p.position for p in placed] == list(range(len(placed)))
        for item, p in zip(page["items"], placed, strict=True):
            assert item["item_id"] == p.pair_item_id
            assert (item["response_a"], item["response_b"]) == (p.left[1], p.right[1])
            sides_seen.add(p.shown_left)
    assert sides_seen == {"a", "b"}  # both ways round occur, so a swap of A and B could not pass


def test_the_conversation_is_the_pairs_own_context_in_turn_order(sample_engine):
    make_ab_study(sample_engine)
    assignment_id = assignment_ids(sample_engine, "ab")[0]
    page = payload(sample_engine, assignment_id)
    with Session(sample_engine) as session:
        for item, p in zip(page["items"], placements(sample_engine, assignment_id), strict=True):
            context = session.get_one(Context, p.context_id)
            turns = [t for t in context.dialogue.turns if t.idx <= context.n_turns]
            assert item["context"] == [{"role": t.role, "text": t.text} for t in turns]
            assert len(item["context"]) == context.n_turns >= 1


def test_no_system_name_id_or_control_flag_reaches_the_rater(sample_engine):
    make_ab_study(sample_engine, control_rate=0.25)
    pages = [payload(sample_engine, a) for a in assignment_ids(sample_engine, "ab")]
    controls = [p for a in assignment_ids(sample_engine, "ab") for p in placements(sample_engine, a) if p.is_control]
    assert controls, "the study must hold control pairs for this test to mean anything"
    text = json.dumps(pages)
    for name in SYSTEMS + CONTROLS:
        assert name not in text
    for page in pages:
        assert set(page) == {"kind", "assignment_id", "status", "expires_at", "study", "criteria", "ties", "items"}
        for item in page["items"]:
            assert set(item) == {"item_id", "position", "context", "response_a", "response_b"}


def test_the_questions_are_the_studys_and_tie_is_offered_as_it_says(sample_engine):
    make_ab_study(sample_engine, ties=False, title="Which reply is better?")
    page = payload(sample_engine, assignment_ids(sample_engine, "ab")[0])
    assert page["kind"] == "pairwise" and page["ties"] is False
    assert page["study"] == {"name": "ab", "title": "Which reply is better?", "instructions": ""}
    assert [c["key"] for c in page["criteria"]] == ["empathy", "relevance", "fluency"]
    assert [c["question"] for c in page["criteria"]] == [c.question for c in DEFAULT_PAIRWISE_CRITERIA]
    make_ab_study(sample_engine, name="ab-ties", with_responses=False)
    assert payload(sample_engine, assignment_ids(sample_engine, "ab-ties")[0])["ties"] is True


@pytest.mark.parametrize("per_assignment", [2, 8])
def test_two_statements_whatever_the_number_of_pairs(sample_engine, per_assignment):
    # Two slots leave no room for a control (0.25 x 2 rounds to none, which study create refuses).
    make_ab_study(sample_engine, count=16, per_assignment=per_assignment,
                  control_rate=0.0 if per_assignment == 2 else 0.25)
    assignment_id = assignment_ids(sample_engine, "ab")[0]
    with StatementCounter(sample_engine) as counter:
        page = payload(sample_engine, assignment_id)
    assert len(page["items"]) >= per_assignment - 1
    assert len(counter.statements) == 2, counter.statements


def test_an_unknown_assignment_is_refused_and_each_kind_gets_its_own_payload(sample_engine):
    make_ab_study(sample_engine)
    make_study(sample_engine, name="pilot", count=4, k=1, per_assignment=4, controls=[])
    with pytest.raises(NotFound, match="no assignment 99999"):
        payload(sample_engine, 99999)
    likert = payload(sample_engine, assignment_ids(sample_engine, "pilot")[0])
    pair = payload(sample_engine, assignment_ids(sample_engine, "ab")[0])
    assert (likert["kind"], pair["kind"]) == ("likert", "pairwise")
    assert "scale" in likert and "response" in likert["items"][0] and "ties" not in likert
    assert "scale" not in pair and "response_a" in pair["items"][0] and "ties" in pair
