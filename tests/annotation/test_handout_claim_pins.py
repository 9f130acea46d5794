"""Pins of the one-statement claim (issue 12's rewrite): another rater's seen contexts never block her and a direct
claim stamps when she started (each found by a mutant that survived the hand-out's tests), and resuming keeps her
deadline while someone else's runs out."""
from __future__ import annotations

from datetime import datetime, timedelta

from sqlalchemy.orm import Session

from empeval.server.annotation.annotators import invite
from empeval.server.annotation.handout import assignment_kind, claim, next_assignment, next_assignment_payload
from empeval.server.store.engine import unit_of_work
from empeval.server.store.models import Assignment
from empeval.server.store.queries import as_utc, now_utc
from tests.annotation.conftest import make_study


def test_contexts_another_rater_saw_do_not_keep_her_from_their_second_rating(sample_engine):
    """k = 2 and a single block: the second rater must get the copy of the contexts the first one holds."""
    from tests.annotation.conftest import CONTROLS, SYSTEMS, add_responses

    add_responses(sample_engine, SYSTEMS + CONTROLS, 40)
    make_study(sample_engine, name="one-block", count=2, k=2, per_assignment=10, systems=SYSTEMS[:2], controls=[])
    first, _ = invite(sample_engine, "first", "one-block")
    second, _ = invite(sample_engine, "second", "one-block")
    assert next_assignment(sample_engine, "one-block", first.id) is not None
    assert next_assignment(sample_engine, "one-block", second.id) is not None


def test_contexts_another_rater_saw_do_not_keep_her_from_a_pairwise_study_either(sample_engine):
    """The A/B twin: two contexts, every assignment holds both; the second rater must still get one."""
    from tests.annotation.pairwise_fixtures import make_ab_study

    make_ab_study(sample_engine, name="ab-one-couple", count=2, k=2, per_assignment=2, control_rate=0.0)
    first, _ = invite(sample_engine, "first", "ab-one-couple")
    second, _ = invite(sample_engine, "second", "ab-one-couple")
    assert next_assignment(sample_engine, "ab-one-couple", first.id) is not None
    assert next_assignment(sample_engine, "ab-one-couple", second.id) is not None


def test_a_direct_claim_stamps_when_she_started(study_engine):
    annotator, _ = invite(study_engine, "crowd-worker", "pilot")
    now = now_utc()
    with Session(study_engine) as session:
        open_id = session.query(Assignment.id).filter(Assignment.status == "open").order_by(Assignment.id).first()[0]
    with unit_of_work(study_engine) as session:
        assert claim(session, assignment_kind(session, open_id), open_id, annotator.id, now=now, minutes=None)
    with Session(study_engine) as session:
        assert as_utc(session.get(Assignment, open_id).started_at) == now


def test_resuming_keeps_the_deadline_she_was_given_also_when_someone_elses_expires_meanwhile(study_engine):
    rita, _ = invite(study_engine, "rita", "pilot")
    bo, _ = invite(study_engine, "bo", "pilot")
    start = now_utc()
    late_one = next_assignment_payload(study_engine, "pilot", bo.id, now=start)
    first = next_assignment_payload(study_engine, "pilot", rita.id, now=start + timedelta(minutes=20))
    bo_deadline = datetime.fromisoformat(late_one["expires_at"])
    # bo's assignment is overdue now, rita's not: her resume goes through the expiry of his.
    again = next_assignment_payload(study_engine, "pilot", rita.id, now=bo_deadline + timedelta(minutes=1))
    assert first["assignment_id"] == again["assignment_id"]
    assert first["expires_at"] is not None and again["expires_at"] == first["expires_at"]
