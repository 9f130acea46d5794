"""Two submissions of one assignment at the same moment (a double click, a retry racing the original), on SQLite
and PostgreSQL: one set of ratings is stored, the same submission gets the same receipt twice, a different one a
conflict. Which path answers the loser is forced, not left to luck:

- both pass the first check, then run their transactions one after the other: the loser is answered by the
  re-check inside its transaction (the storing UPDATE's WHERE), before it writes anything;
- the first is inside its storing transaction when the second tries: the second waits (SQLite: one write
  transaction at a time, BEGIN IMMEDIATE; PostgreSQL: the first's row lock) and is then answered without writing.
The unique constraints stay as the last line: a submission id reused for another assignment is answered from
the constraint it runs into.
"""

from __future__ import annotations

import threading
from collections import defaultdict

import pytest
from sqlalchemy import event, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

import empeval.server.annotation.submission as submit_module
from empeval.server.annotation.annotators import invite
from empeval.server.annotation.handout import assignment_payload, next_assignment
from empeval.server.annotation.kinds import annotation_kind
from empeval.server.annotation.submission import submit_assignment
from empeval.server.errors import Conflict
from empeval.server.store.kinds.likert import Rating
from empeval.server.store.models import Assignment
from empeval.server.store.queries import now_utc
from tests.annotation.conftest import new_submission_id

CRITERIA = ("empathy", "relevance", "fluency")
WAIT = 10  # seconds any thread waits for another before the test fails (never reached when all is well)


@pytest.fixture
def alice(study_engine):
    annotator, _ = invite(study_engine, "alice", "pilot")
    assignment_id = next_assignment(study_engine, "pilot", annotator.id)
    return annotator.id, assignment_id


def _payload(engine, assignment_id: int, submission_id: str, score: int) -> dict:
    items = assignment_payload(engine, assignment_id)["items"]
    return {"submission_id": submission_id,
            "ratings": [{"item_id": i["item_id"], "scores": dict.fromkeys(CRITERIA, score)} for i in items]}


class RatingInserts:
    """Which threads sent an INSERT INTO rating."""

    def __init__(self, engine):
        self.by_thread: dict[str, int] = defaultdict(int)
        self.engine = engine
        event.listen(engine, "before_cursor_execute", self._seen)

    def _seen(self, conn, cursor, statement, parameters, context, executemany):
        if statement.lstrip().upper().startswith("INSERT INTO RATING"):
            self.by_thread[threading.current_thread().name] += 1

    def close(self):
        event.remove(self.engine, "before_cursor_execute", self._seen)


@pytest.fixture
def inserts(study_engine):
    recorder = RatingInserts(study_engine)
    yield recorder
    recorder.close()


def _together(calls: dict[str, callable]) -> dict[str, object]:
    """Run each call in its own thread (named by its key) and return each result or the exception it raised."""
    results: dict[str, object] = {}

    def run(name, call):
        try:
            results[name] = call()
        except Exception as error:  # noqa: BLE001 - handed back to the test
            results[name] = error

    threads = [threading.Thread(target=run, args=(name, call), name=name) for name, call in calls.items()]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(WAIT * 2)
        assert not thread.is_alive(), f"{thread.name} still running: a submission is stuck"
    return results


def _stored(engine, assignment_id: int) -> tuple[list[int], str | None, str]:
    with Session(engine) as session:
        scores = session.scalars(select(Rating.score).where(Rating.assignment_id == assignment_id)).all()
        assignment = session.get(Assignment, assignment_id)
        return sorted(scores), assignment.submission_id, assignment.status


def _after_validation(monkeypatch, hold):
    """Run `hold(thread name)` in each submitting thread right after its body was validated: after the first
    'already submitted' check, before the storing transaction."""
    validate = submit_module.validate_submission

    def validate_then_hold(*args):
        valid = validate(*args)
        hold(threading.current_thread().name)
        return valid

    monkeypatch.setattr(submit_module, "validate_submission", validate_then_hold)


def _inside_the_transaction(monkeypatch, hold):
    """Run `hold(thread name)` inside the storing transaction, after the UPDATE that marked the assignment
    submitted and before the ratings are written (only a thread whose UPDATE went through gets there)."""
    likert = annotation_kind("likert")
    store = likert.store

    def hold_then_store(*args, **kwargs):
        hold(threading.current_thread().name)
        return store(*args, **kwargs)

    monkeypatch.setattr(likert, "store", hold_then_store)


def _one_after_the_other(monkeypatch, first_done: threading.Event):
    both_checked = threading.Barrier(2, timeout=WAIT)

    def hold(name):
        both_checked.wait()
        if name == "second":
            assert first_done.wait(WAIT), "the first submission never finished"

    _after_validation(monkeypatch, hold)


# --- the same submission twice --------------------------------------------------------------------------


def test_the_same_submission_sent_twice_at_once_is_stored_once(study_engine, alice, monkeypatch):
    annotator_id, assignment_id = alice
    payload = _payload(study_engine, assignment_id, new_submission_id(), 4)
    both_checked = threading.Barrier(2, timeout=WAIT)
    _after_validation(monkeypatch, lambda name: both_checked.wait())
    results = _together({name: lambda: submit_assignment(study_engine, assignment_id, annotator_id, payload)
                         for name in ("first", "second")})
    assert results["first"] == results["second"], results
    assert results["first"]["status"] == "stored"
    scores, submission_id, status = _stored(study_engine, assignment_id)
    assert scores == [4] * results["first"]["ratings"] and len(scores) == 3 * len(payload["ratings"])
    assert (submission_id, status) == (payload["submission_id"], "submitted")


def test_the_loser_of_a_race_is_answered_by_the_re_check_without_writing(study_engine, alice, monkeypatch, inserts):
    annotator_id, assignment_id = alice
    payload = _payload(study_engine, assignment_id, new_submission_id(), 3)
    first_done = threading.Event()
    _one_after_the_other(monkeypatch, first_done)

    def first():
        try:
            return submit_assignment(study_engine, assignment_id, annotator_id, payload)
        finally:
            first_done.set()

    results = _together({"first": first,
                         "second": lambda: submit_assignment(study_engine, assignment_id, annotator_id, payload)})
    assert results["second"] == results["first"] and results["first"]["status"] == "stored"
    assert inserts.by_thread["first"] > 0 and inserts.by_thread["second"] == 0
    assert _stored(study_engine, assignment_id)[0] == [3] * (3 * len(payload["ratings"]))


# --- two different submissions --------------------------------------------------------------------------


def _one_stored_one_refused(results, engine, assignment_id, payloads):
    receipts = {name: r for name, r in results.items() if isinstance(r, dict)}
    refused = {name: r for name, r in results.items() if isinstance(r, Conflict)}
    assert len(receipts) == 1 and len(refused) == 1, results
    (winner, receipt), = receipts.items()
    (loser, conflict), = refused.items()
    assert str(conflict) == f"assignment {assignment_id} was already submitted (with another submission id)"
    scores, submission_id, status = _stored(engine, assignment_id)
    winning = payloads[winner]
    assert submission_id == winning["submission_id"] == receipt["submission_id"] and status == "submitted"
    assert scores == [winning["ratings"][0]["scores"]["empathy"]] * (3 * len(winning["ratings"]))
    return winner, loser


def test_two_different_submissions_at_once_store_one_and_refuse_the_other(study_engine, alice, monkeypatch):
    annotator_id, assignment_id = alice
    payloads = {"first": _payload(study_engine, assignment_id, new_submission_id(), 2),
                "second": _payload(study_engine, assignment_id, new_submission_id(), 5)}
    both_checked = threading.Barrier(2, timeout=WAIT)
    _after_validation(monkeypatch, lambda name: both_checked.wait())
    results = _together({name: (lambda p=p: submit_assignment(study_engine, assignment_id, annotator_id, p))
                         for name, p in payloads.items()})
    _one_stored_one_refused(results, study_engine, assignment_id, payloads)


def test_a_different_submission_that_lost_the_race_is_refused_by_the_re_check_without_writing(
        study_engine, alice, monkeypatch, inserts):
    annotator_id, assignment_id = alice
    payloads = {"first": _payload(study_engine, assignment_id, new_submission_id(), 1),
                "second": _payload(study_engine, assignment_id, new_submission_id(), 4)}
    first_done = threading.Event()
    _one_after_the_other(monkeypatch, first_done)

    def first():
        try:
            return submit_assignment(study_engine, assignment_id, annotator_id, payloads["first"])
        finally:
            first_done.set()

    results = _together({"first": first, "second": lambda: submit_assignment(
        study_engine, assignment_id, annotator_id, payloads["second"])})
    assert _one_stored_one_refused(results, study_engine, assignment_id, payloads) == ("first", "second")
    assert inserts.by_thread["second"] == 0


# --- one storing transaction at a time ------------------------------------------------------------------


def _second_waits_for_the_first(monkeypatch) -> list[str]:
    """The first thread inside its storing transaction waits there for the second, which never comes: the second
    is waiting for the write lock (SQLite) or the row lock (PostgreSQL). When the wait times out the first
    commits. Returns the names of the threads that got inside, in order."""
    inside = threading.Barrier(2, timeout=2)
    arrived: list[str] = []

    def hold(name):
        arrived.append(name)
        try:
            inside.wait()
        except threading.BrokenBarrierError:
            pass

    _inside_the_transaction(monkeypatch, hold)
    return arrived


def test_the_second_submission_waits_for_the_first_storing_transaction_and_writes_nothing(
        study_engine, alice, monkeypatch, inserts):
    annotator_id, assignment_id = alice
    payload = _payload(study_engine, assignment_id, new_submission_id(), 4)
    arrived = _second_waits_for_the_first(monkeypatch)
    # As the API calls it, with the invite's study: the second is answered from the assignment it then reads.
    results = _together({name: lambda: submit_assignment(study_engine, assignment_id, annotator_id, payload,
                                                         study="pilot")
                         for name in ("first", "second")})
    assert results["first"] == results["second"] and results["first"]["status"] == "stored"
    assert len(arrived) == 1 and [name for name, count in inserts.by_thread.items() if count] == arrived
    assert _stored(study_engine, assignment_id)[0] == [4] * (3 * len(payload["ratings"]))


def test_a_different_second_submission_waits_for_the_first_and_is_refused(study_engine, alice, monkeypatch):
    annotator_id, assignment_id = alice
    payloads = {"first": _payload(study_engine, assignment_id, new_submission_id(), 2),
                "second": _payload(study_engine, assignment_id, new_submission_id(), 3)}
    arrived = _second_waits_for_the_first(monkeypatch)
    results = _together({name: (lambda p=p: submit_assignment(study_engine, assignment_id, annotator_id, p))
                         for name, p in payloads.items()})
    winner, _ = _one_stored_one_refused(results, study_engine, assignment_id, payloads)
    assert arrived == [winner]


# --- an integrity error that is no race -----------------------------------------------------------------


def test_a_submission_id_already_used_for_another_assignment_is_a_conflict(study_engine, alice):
    annotator_id, first_assignment = alice
    reused = new_submission_id()
    submit_assignment(study_engine, first_assignment, annotator_id, _payload(study_engine, first_assignment, reused, 4))
    second_assignment = next_assignment(study_engine, "pilot", annotator_id)
    with pytest.raises(Conflict, match=f"^submission id {reused!r} was already used for another assignment"):
        submit_assignment(study_engine, second_assignment, annotator_id,
                          _payload(study_engine, second_assignment, reused, 2))
    scores, submission_id, status = _stored(study_engine, second_assignment)
    assert scores == [] and submission_id is None and status != "submitted"


def test_an_integrity_error_that_is_no_lost_race_is_not_swallowed(study_engine, alice, monkeypatch):
    # A rating the database refuses for another reason (here: the store's one-rating-per-item-and-annotator key,
    # held by a rating planted under another assignment) is raised, not answered as a retry.
    annotator_id, assignment_id = alice
    payload = _payload(study_engine, assignment_id, new_submission_id(), 4)
    item_id = payload["ratings"][0]["item_id"]
    with Session(study_engine) as session, session.begin():
        other = session.scalar(select(Assignment.id).where(Assignment.id != assignment_id).order_by(Assignment.id))
        session.add(Rating(assignment_id=other, item_id=item_id, annotator_id=annotator_id, criterion="empathy",
                           score=1, submitted_at=now_utc(), submission_id="planted-0001"))
    with pytest.raises(IntegrityError):
        submit_assignment(study_engine, assignment_id, annotator_id, payload)
    assert _stored(study_engine, assignment_id)[2] != "submitted"
