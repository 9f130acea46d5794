"""The two pieces crowd ingest shares with local hand-out, defined once in server.annotation: claiming an
assignment (handout.claim) and getting or creating an annotator (annotators.get_or_create_annotator)."""
from __future__ import annotations

import threading
from contextlib import contextmanager
from datetime import timedelta

from sqlalchemy import func, insert, select
from sqlalchemy.orm import Session

from empeval.server.annotation import annotators, handout
from empeval.server.annotation.annotators import get_or_create_annotator, invite
from empeval.server.annotation.handout import assignment_kind, claim, release
from empeval.server.store.engine import unit_of_work
from empeval.server.store.models import Annotator, Assignment
from empeval.server.store.queries import now_utc
from empeval.tasks.crowd import ingest


def open_assignment(engine) -> int:
    with Session(engine) as session:
        return session.scalar(select(Assignment.id).where(Assignment.status == "open").order_by(Assignment.id))


def run_together(n: int, work) -> list:
    """Run work(i) on n threads released at the same moment; their results in order."""
    barrier = threading.Barrier(n)
    results: list = [None] * n

    def go(i):
        barrier.wait(timeout=30)
        results[i] = work(i)

    threads = [threading.Thread(target=go, args=(i,)) for i in range(n)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert not any(thread.is_alive() for thread in threads)
    return results


def test_crowd_ingest_and_local_hand_out_use_the_same_claim_and_the_same_get_or_create():
    assert ingest.claim is handout.claim and ingest.get_or_create_annotator is annotators.get_or_create_annotator
    assert "update(Assignment)" not in open(ingest.__file__).read()


def test_of_several_claims_at_once_exactly_one_wins(crowd_store):
    assignment_id = open_assignment(crowd_store)
    people = [get_or_create_annotator(crowd_store, "mock", f"mock-racer{i}").id for i in range(6)]

    def try_claim(i):
        with unit_of_work(crowd_store) as session:
            return claim(session, assignment_kind(session, assignment_id), assignment_id, people[i], now=now_utc(),
                         minutes=None)

    won = run_together(len(people), try_claim)
    assert sum(won) == 1
    with Session(crowd_store) as session:
        held = session.get(Assignment, assignment_id)
    assert held.status == "assigned" and held.annotator_id == people[won.index(True)]


def test_a_local_claim_expires_after_the_studys_minutes_and_a_crowd_claim_has_no_local_deadline(crowd_store):
    now = now_utc()
    local, crowd = get_or_create_annotator(crowd_store, "local", "a"), get_or_create_annotator(crowd_store, "mock", "b")
    first = open_assignment(crowd_store)
    with unit_of_work(crowd_store) as session:
        assert claim(session, assignment_kind(session, first), first, local.id, now=now, minutes=30)
        second = session.scalar(select(Assignment.id).where(Assignment.status == "open").order_by(Assignment.id))
        assert claim(session, assignment_kind(session, second), second, crowd.id, now=now, minutes=None)
        assert not claim(session, assignment_kind(session, first), first, crowd.id, now=now, minutes=None)  # taken
    with Session(crowd_store) as session:
        assert (session.get(Assignment, first).expires_at.replace(tzinfo=None)
                == (now + timedelta(minutes=30)).replace(tzinfo=None))
        assert session.get(Assignment, second).expires_at is None


def test_release_gives_back_only_the_claimers_unsubmitted_assignment(crowd_store):
    mine = get_or_create_annotator(crowd_store, "mock", "me")
    other = get_or_create_annotator(crowd_store, "mock", "you")
    assignment_id = open_assignment(crowd_store)
    with unit_of_work(crowd_store) as session:
        claim(session, assignment_kind(session, assignment_id), assignment_id, mine.id, now=now_utc(), minutes=None)
        assert not release(session, assignment_id, other.id)
        assert release(session, assignment_id, mine.id)
        assert not release(session, assignment_id, mine.id)  # nothing left to release
    with Session(crowd_store) as session:
        held = session.get(Assignment, assignment_id)
    assert (held.status, held.annotator_id, held.started_at, held.expires_at) == ("open", None, None, None)


def test_creating_the_same_annotator_from_many_threads_at_once_leaves_one_row(crowd_store):
    ids = run_together(8, lambda i: get_or_create_annotator(crowd_store, "mock", "mock-same-worker").id)
    assert len(set(ids)) == 1
    with Session(crowd_store) as session:
        assert session.scalar(select(func.count(Annotator.id)).where(Annotator.pseudonym == "mock-same-worker")) == 1


def test_an_annotator_created_by_someone_else_between_the_check_and_the_insert_is_read_back(crowd_store,
                                                                                          monkeypatch):
    raced = []

    @contextmanager
    def create_meanwhile(engine):
        # Another connection wins the race after the check, before the inserting transaction (on SQLite that
        # transaction holds the write lock from its start, so the race cannot happen inside it).
        if not raced:
            with crowd_store.begin() as connection:
                raced.append(connection.execute(insert(Annotator).values(provider="mock", pseudonym="mock-raced")
                                                .returning(Annotator.id)).scalar_one())
        with unit_of_work(engine) as session:
            yield session

    monkeypatch.setattr(annotators, "unit_of_work", create_meanwhile)
    annotator = get_or_create_annotator(crowd_store, "mock", "mock-raced")
    assert raced and annotator.id == raced[0]


def test_an_invited_name_stays_one_annotator_with_its_display_name(crowd_store):
    first, _ = invite(crowd_store, "rita", "pilot")
    again, _ = invite(crowd_store, "rita", "pilot")
    assert first.id == again.id and again.display_name == "rita" and again.provider == "local"
