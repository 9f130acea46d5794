"""The hand-out's smaller rules, each pinned: the deadline to the microsecond, the copy an expiry puts back,
what the task page is given (and never given), the refusals and their messages, and what closing a study
answers."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from sqlalchemy import select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from empeval.server.annotation import handout
from empeval.server.annotation.annotators import invite, revoke
from empeval.server.annotation.handout import (
    AccessRevoked,
    StudyClosed,
    assignment_kind,
    assignment_payload,
    close_study,
    contexts_seen_before,
    next_assignment,
    release,
)
from empeval.server.annotation.submission import submit_assignment
from empeval.server.errors import NotFound
from empeval.server.store.engine import unit_of_work
from empeval.server.store.kinds.likert import AssignmentItem, StudyItem
from empeval.server.store.models import Assignment, Context, Response, SeenContext, Study
from empeval.server.store.queries import as_utc, now_utc
from tests.annotation.conftest import make_study, new_submission_id, placed_items


@pytest.fixture
def rater(study_engine):
    annotator, _ = invite(study_engine, "frank", "pilot")
    return annotator.id


def _assignment(engine, assignment_id):
    with Session(engine) as session:
        assignment = session.get(Assignment, assignment_id)
        items = sorted(session.execute(select(AssignmentItem.position, AssignmentItem.item_id)
                                       .where(AssignmentItem.assignment_id == assignment_id)).all())
        session.expunge(assignment)
        return assignment, items


def test_an_assignment_is_kept_until_its_deadline_and_expires_right_after(study_engine, rater):
    start = now_utc()
    first = next_assignment(study_engine, "pilot", rater, now=start)
    deadline = as_utc(_assignment(study_engine, first)[0].expires_at)
    assert deadline == start + timedelta(minutes=30)
    assert next_assignment(study_engine, "pilot", rater, now=deadline) == first
    assert _assignment(study_engine, first)[0].status == "assigned"
    later = next_assignment(study_engine, "pilot", rater, now=deadline + timedelta(microseconds=1))
    assert later != first and _assignment(study_engine, first)[0].status == "expired"


def test_an_expired_assignment_goes_back_as_a_faithful_copy(study_engine, rater):
    start = now_utc()
    first = next_assignment(study_engine, "pilot", rater, now=start)
    with Session(study_engine) as session, session.begin():  # a later round and place than the very first one
        assignment = session.get(Assignment, first)
        assignment.round, assignment.design_index = 1, 1_000
    old, old_items = _assignment(study_engine, first)
    other, _ = invite(study_engine, "gina", "pilot")
    next_assignment(study_engine, "pilot", other.id, now=start + timedelta(minutes=31))
    with Session(study_engine) as session:
        copy = session.scalar(select(Assignment).where(Assignment.replaces_id == first))
        assert copy is not None
        copy_items = sorted((link.position, link.item_id) for link in placed_items(session, copy.id))
        assert (copy.study_id, copy.round, copy.design_index) == (old.study_id, old.round, old.design_index)
        assert copy.status in ("open", "assigned") and copy.annotator_id in (None, other.id)
        # the rater who let it expire keeps the contexts she saw
        seen = session.scalars(select(SeenContext.assignment_id).where(SeenContext.annotator_id == rater)).all()
    assert copy_items == old_items
    assert set(seen) == {first}


def test_the_task_page_gets_the_study_the_scale_and_each_item_in_order_but_no_system(study_engine, rater):
    assignment_id = next_assignment(study_engine, "pilot", rater)
    payload = assignment_payload(study_engine, assignment_id)
    assert set(payload) == {"kind", "assignment_id", "status", "expires_at", "study", "criteria", "scale", "items"}
    assert payload["assignment_id"] == assignment_id and payload["status"] == "assigned"
    assignment, items = _assignment(study_engine, assignment_id)
    assert payload["expires_at"] == as_utc(assignment.expires_at).isoformat()
    assert payload["study"] == {"name": "pilot", "title": "Rate responses in conversations", "instructions": ""}
    assert [c["key"] for c in payload["criteria"]] == ["empathy", "relevance", "fluency"]
    assert all(set(c) >= {"key", "question"} for c in payload["criteria"])
    assert payload["scale"]["min"] == 1 and payload["scale"]["max"] == 5
    assert isinstance(payload["scale"]["labels"], list) and len(payload["scale"]["labels"]) == 5
    assert [(i["position"], i["item_id"]) for i in payload["items"]] == items
    assert all(set(i) == {"item_id", "position", "response", "context"} for i in payload["items"])


def test_each_item_shows_its_context_up_to_the_turn_before_the_response(study_engine, rater):
    assignment_id = next_assignment(study_engine, "pilot", rater)
    payload = assignment_payload(study_engine, assignment_id)
    with Session(study_engine) as session:
        for item in payload["items"]:
            context = session.scalar(select(Context).join(Response, Response.context_id == Context.id)
                                     .join(StudyItem, StudyItem.response_id == Response.id)
                                     .where(StudyItem.id == item["item_id"]))
            turns = [t for t in context.dialogue.turns if t.idx <= context.n_turns]
            assert item["context"] == [{"role": t.role, "text": t.text} for t in turns]
            assert len(context.dialogue.turns) > context.n_turns  # the response's own turn is not shown
            assert item["context"][-1]["role"] == "speaker"


def test_an_unknown_assignment_is_not_found_with_its_id(study_engine):
    with pytest.raises(NotFound, match=r"^no assignment 987654$"):
        assignment_payload(study_engine, 987654)


def test_an_unknown_study_is_not_found_by_name(study_engine, rater):
    with pytest.raises(NotFound, match=r"^no study named 'pilott'$"):
        next_assignment(study_engine, "pilott", rater)


def test_a_closed_study_says_so_and_closing_twice_says_it_was_closed_already(study_engine, rater):
    next_assignment(study_engine, "pilot", rater)
    closing = close_study(study_engine, "pilot")
    assert closing.was_open is True
    assert closing.counts["assigned"] == 1 and closing.counts["submitted"] == 0
    assert sum(closing.counts.values()) == closing.counts["open"] + 1
    again = close_study(study_engine, "pilot")
    assert again.was_open is False and again.counts == closing.counts
    message = "study 'pilot' is closed and takes no more ratings. Thank you for your help!"
    with pytest.raises(StudyClosed, match=f"^{re.escape(message)}$"):
        next_assignment(study_engine, "pilot", rater)


def test_a_revoked_rater_is_told_so(study_engine, rater):
    revoke(study_engine, "frank", study="pilot")
    message = ("your access to study 'pilot' was revoked by the researcher; ask them if you think this is a "
               "mistake")
    with pytest.raises(AccessRevoked, match=f"^{re.escape(message)}$"):
        next_assignment(study_engine, "pilot", rater)


def test_a_rater_revoked_everywhere_gets_nothing_anywhere(study_engine, rater):
    revoke(study_engine, "frank")
    with pytest.raises(AccessRevoked):
        next_assignment(study_engine, "pilot", rater)


# --- release, contexts seen before, revoking --------------------------------------------------------------


def _contexts_of(engine, assignment_id) -> set[int]:
    with Session(engine) as session:
        return set(session.scalars(
            select(Response.context_id).join(StudyItem, StudyItem.response_id == Response.id)
            .join(AssignmentItem, AssignmentItem.item_id == StudyItem.id)
            .where(AssignmentItem.assignment_id == assignment_id)))


def test_release_puts_back_only_the_one_assignment_and_resets_it_entirely(study_engine, rater):
    make_study(study_engine, name="second", count=6)
    invite(study_engine, "frank", "second")
    mine = next_assignment(study_engine, "pilot", rater)
    elsewhere = next_assignment(study_engine, "second", rater)
    with unit_of_work(study_engine) as session:
        assert release(session, mine, rater) is True
    released, _ = _assignment(study_engine, mine)
    assert (released.status, released.annotator_id, released.started_at, released.expires_at) == (
        "open", None, None, None)
    kept, _ = _assignment(study_engine, elsewhere)
    assert kept.status == "assigned" and kept.annotator_id == rater
    with Session(study_engine) as session:
        seen_in = set(session.scalars(select(SeenContext.assignment_id).where(SeenContext.annotator_id == rater)))
    assert seen_in == {elsewhere}


def test_release_leaves_a_submitted_assignment_alone(study_engine, rater):
    mine = next_assignment(study_engine, "pilot", rater)
    with Session(study_engine) as session:
        items = session.scalars(select(AssignmentItem.item_id).where(AssignmentItem.assignment_id == mine)).all()
    submit_assignment(study_engine, mine, rater, {"submission_id": new_submission_id(), "ratings": [
        {"item_id": item, "scores": {"empathy": 3, "relevance": 3, "fluency": 3}} for item in items]})
    with unit_of_work(study_engine) as session:
        assert release(session, mine, rater) is False
    assert _assignment(study_engine, mine)[0].status == "submitted"
    with Session(study_engine) as session:
        assert set(session.scalars(select(SeenContext.assignment_id).where(SeenContext.annotator_id == rater))) == {
            mine}


def test_contexts_seen_before_names_each_overlapping_context_and_where_it_was_seen(study_engine, rater):
    first = next_assignment(study_engine, "pilot", rater)
    seen = _contexts_of(study_engine, first)
    other, _ = invite(study_engine, "hana", "pilot")
    with Session(study_engine) as session:
        open_ids = session.scalars(select(Assignment.id).where(Assignment.status == "open")
                                   .order_by(Assignment.id)).all()
        overlapping = [a for a in open_ids if _contexts_of(study_engine, a) & seen]
        apart = [a for a in open_ids if not _contexts_of(study_engine, a) & seen]
        assert overlapping and apart
        target = overlapping[0]
        expected = sorted((context, first) for context in _contexts_of(study_engine, target) & seen)
        assert contexts_seen_before(session, assignment_kind(session, target), target, rater) == expected
        assert contexts_seen_before(session, assignment_kind(session, apart[0]), apart[0], rater) == []
        # her own assignment is not "before"
        assert contexts_seen_before(session, assignment_kind(session, first), first, rater) == []
        # somebody else saw nothing
        assert contexts_seen_before(session, assignment_kind(session, target), target, other.id) == []
    # The same contexts seen in another study do not count in this one.
    make_study(study_engine, name="second", count=12)
    invite(study_engine, "hana", "second")
    elsewhere = next_assignment(study_engine, "second", other.id)
    assert elsewhere is not None
    with Session(study_engine) as session:
        assert contexts_seen_before(session, assignment_kind(session, target), target, other.id) == []


def test_revoking_one_rater_expires_only_her_active_assignment(study_engine, rater):
    hers = next_assignment(study_engine, "pilot", rater)
    other, _ = invite(study_engine, "ivan", "pilot")
    his = next_assignment(study_engine, "pilot", other.id)
    revoke(study_engine, "frank", study="pilot")
    assert _assignment(study_engine, hers)[0].status == "expired"
    assert _assignment(study_engine, his)[0].status == "assigned"


def test_expiring_an_assignment_no_longer_active_does_nothing(study_engine, rater):
    mine = next_assignment(study_engine, "pilot", rater)
    with Session(study_engine) as session:
        items = session.scalars(select(AssignmentItem.item_id).where(AssignmentItem.assignment_id == mine)).all()
    submit_assignment(study_engine, mine, rater, {"submission_id": new_submission_id(), "ratings": [
        {"item_id": item, "scores": {"empathy": 3, "relevance": 3, "fluency": 3}} for item in items]})
    with unit_of_work(study_engine) as session:
        assert handout._expire_all(session, [mine], now_utc()) == set()
    with Session(study_engine) as session:
        assert session.get(Assignment, mine).status == "submitted"
        assert session.scalar(select(Assignment.id).where(Assignment.replaces_id == mine)) is None


def test_the_task_page_lists_items_by_their_stored_position(study_engine, rater):
    assignment_id = next_assignment(study_engine, "pilot", rater)
    with Session(study_engine) as session, session.begin():  # move the last item first
        links = session.scalars(select(AssignmentItem).where(AssignmentItem.assignment_id == assignment_id)
                                .order_by(AssignmentItem.position)).all()
        first, last = links[0], links[-1]
        last_position = last.position
        first.position = 10_000
        session.flush()
        last.position = 0
        session.flush()
        first.position = last_position
        moved = last.item_id
    items = assignment_payload(study_engine, assignment_id)["items"]
    assert items[0]["item_id"] == moved and [i["position"] for i in items] == list(range(len(items)))


def test_a_claim_the_database_refuses_is_tried_again(study_engine, rater, monkeypatch):
    # The database refuses a claim when the same rater's other claim won (one active assignment, one seen row per
    # context); the next attempt reads the winner back or claims anew, never gives up at the first refusal.
    original, refusals = handout._record_seen, []

    def refuse_once(session, kind, assignment_id, annotator_id, now):
        if not refusals:
            refusals.append(assignment_id)
            raise IntegrityError("INSERT INTO seen_context ...", {}, Exception("duplicate key"))
        return original(session, kind, assignment_id, annotator_id, now)

    monkeypatch.setattr(handout, "_record_seen", refuse_once)
    assignment_id = next_assignment(study_engine, "pilot", rater)
    assert refusals and assignment_id is not None
    assert _assignment(study_engine, assignment_id)[0].annotator_id == rater


def test_may_work_checks_the_study_and_both_kinds_of_revocation_for_this_rater_only(study_engine, rater):
    other, _ = invite(study_engine, "gita", "pilot")
    make_study(study_engine, name="second", seed=5)

    def check(study_name, annotator_id):
        with Session(study_engine) as session:
            handout.ensure_may_work(session, session.scalar(select(Study).where(Study.name == study_name)),
                                    annotator_id)

    check("pilot", rater)  # nothing to refuse
    revoke(study_engine, "frank", study="second")
    check("pilot", rater)  # revoked in another study only
    with pytest.raises(AccessRevoked, match="'second' was revoked"):
        check("second", rater)
    check("second", other.id)  # her revocation, not his
    revoke(study_engine, "frank")
    with pytest.raises(AccessRevoked, match="'pilot' was revoked"):
        check("pilot", rater)
    check("pilot", other.id)
    close_study(study_engine, "pilot")
    with pytest.raises(StudyClosed, match="'pilot' is closed"):
        check("pilot", other.id)


def test_expire_overdue_expires_only_active_assignments_past_their_deadline_and_copies_each(study_engine, rater):
    start = now_utc()
    mine = next_assignment(study_engine, "pilot", rater, now=start)
    other, _ = invite(study_engine, "hugo", "pilot")
    his = next_assignment(study_engine, "pilot", other.id, now=start + timedelta(minutes=10))
    with unit_of_work(study_engine) as session:
        study_id = session.get_one(Assignment, mine).study_id
        assert handout.expire_overdue(session, study_id, start + timedelta(minutes=30)) == 0  # due, not past
        assert handout.expire_overdue(session, study_id, start + timedelta(minutes=35)) == 1
    assert _assignment(study_engine, mine)[0].status == "expired"
    assert _assignment(study_engine, his)[0].status == "assigned"
    with Session(study_engine) as session:
        copy = session.scalar(select(Assignment).where(Assignment.replaces_id == mine))
        assert copy.status == "open" and copy.annotator_id is None
    assert _assignment(study_engine, copy.id)[1] == _assignment(study_engine, mine)[1]
