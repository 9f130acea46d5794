"""The hand-out's and the submission's promises when their writes share a group commit (server/store/group_commit.py)
on SQLite: claims and submissions of many threads (several tabs of one rater, many raters) forced into one batch,
then many threads working freely. Each unit sees the ones before it in its batch, so a rater's second tab still gets
her first tab's assignment, nobody is shown a context twice, an assignment goes to one rater, a submission sent twice
is stored once with one receipt, and every acknowledged rating is stored."""
from __future__ import annotations

import random
import threading
import time

import pytest
from sqlalchemy import func, select
from sqlalchemy.orm import Session

import empeval.server.store.group_commit as group_commit
from empeval.server.annotation.annotators import invite
from empeval.server.annotation.handout import next_assignment_payload
from empeval.server.annotation.submission import submit_assignment
from empeval.server.errors import Conflict
from empeval.server.store import make_engine, unit_of_work
from empeval.server.store.group_commit import write_group
from empeval.server.store.kinds.likert import AssignmentItem, Rating, StudyItem
from empeval.server.store.models import Assignment, Response
from tests.annotation.conftest import CONTROLS, SYSTEMS, add_responses, make_study, new_submission_id

WAIT = 20  # seconds a thread may take before the test fails (never reached when all is well)


@pytest.fixture(autouse=True)
def signing_secret(monkeypatch):
    monkeypatch.setenv("EMPEVAL_SECRET_KEY", "group-commit-handout-tests-" + "k" * 32)


@pytest.fixture
def engine(sqlite_url, sample_templates, monkeypatch):
    monkeypatch.setattr(group_commit, "MAX_BATCH_SECONDS", WAIT)  # a loaded machine must not cut a forced batch
    sample_templates.fill(sqlite_url)
    engine = make_engine(sqlite_url)
    add_responses(engine, SYSTEMS + CONTROLS, 40)
    make_study(engine, count=12, k=3, per_assignment=5)
    yield engine
    engine.dispose()


def _together(engine, calls: dict[str, object], *, writers: int) -> dict[str, object]:
    """Each call in its own thread while the writer gate is held, until `writers` of them have queued a write
    (one leads, waiting at the gate); then let go: those writes run as one batch. Each result or exception."""
    results: dict[str, object] = {}
    group = write_group(engine)
    batches = group.batches

    def run(name, call):
        try:
            results[name] = call()
        except Exception as error:  # noqa: BLE001 - handed back to the test
            results[name] = error

    threads = [threading.Thread(target=run, args=item) for item in calls.items()]
    with unit_of_work(engine):
        for thread in threads:
            thread.start()
        deadline = time.monotonic() + WAIT
        while not (group.leading and len(group.queue) == writers - 1):
            assert time.monotonic() < deadline, "the writes did not queue"
            time.sleep(0.005)
    for thread in threads:
        thread.join(WAIT)
        assert not thread.is_alive(), "a request is stuck"
    assert group.batches == batches + 1, "not one batch"
    return results


def _answers(payload: dict, score: int) -> list[dict]:
    return [{"item_id": item["item_id"], "scores": dict.fromkeys(("empathy", "relevance", "fluency"), score)}
            for item in payload["items"]]


def _promises_hold(engine) -> tuple[int, int]:
    """Nobody was handed a context in two assignments, every assignment has one rater, nobody holds two: (ratings
    stored, submitted assignments)."""
    with Session(engine) as session:
        shown = session.execute(
            select(Assignment.annotator_id, Response.context_id, Assignment.id)
            .join(AssignmentItem, AssignmentItem.assignment_id == Assignment.id)
            .join(StudyItem, StudyItem.id == AssignmentItem.item_id)
            .join(Response, Response.id == StudyItem.response_id)
            .where(Assignment.annotator_id.is_not(None))).all()
        pairs = [(annotator, context) for annotator, context, _ in set(shown)]
        assert len(pairs) == len(set(pairs)), "someone was handed a context in two assignments"
        held = session.execute(select(Assignment.annotator_id, func.count()).where(Assignment.status == "assigned")
                               .group_by(Assignment.annotator_id).having(func.count() > 1)).all()
        assert held == [], "someone holds two assignments"
        rated_by_two = session.execute(select(Rating.assignment_id).group_by(Rating.assignment_id)
                                       .having(func.count(func.distinct(Rating.annotator_id)) > 1)).all()
        assert rated_by_two == []
        submitted = session.scalar(select(func.count()).where(Assignment.status == "submitted"))
        return session.scalar(select(func.count(Rating.id))) or 0, submitted or 0


def test_claims_and_submissions_in_one_batch_keep_every_promise(engine):
    alice, _ = invite(engine, "alice", "pilot")
    others = [invite(engine, f"rater-{n}", "pilot")[0].id for n in range(6)]
    calls = {f"alice-tab-{tab}": (lambda: next_assignment_payload(engine, "pilot", alice.id)) for tab in range(3)}
    calls |= {f"rater-{n}": (lambda r=rater: next_assignment_payload(engine, "pilot", r))
              for n, rater in enumerate(others)}
    claimed = _together(engine, calls, writers=len(calls))
    assert not [error for error in claimed.values() if isinstance(error, Exception)], claimed
    tabs = {claimed[f"alice-tab-{tab}"]["assignment_id"] for tab in range(3)}
    assert len(tabs) == 1, "her tabs were handed different assignments"  # the 2nd and 3rd saw the 1st's claim
    handed = [claimed[f"rater-{n}"]["assignment_id"] for n in range(len(others))]
    assert len(set(handed) | tabs) == len(others) + 1, "an assignment went to two raters"
    _promises_hold(engine)

    # Alice's three tabs submit: two send the same submission, one another; the others submit once each.
    mine = claimed["alice-tab-0"]
    same, different = new_submission_id(), new_submission_id()
    submits = {"alice-same-1": (lambda: submit_assignment(engine, mine["assignment_id"], alice.id, {
                   "submission_id": same, "ratings": _answers(mine, 4)})),
               "alice-same-2": (lambda: submit_assignment(engine, mine["assignment_id"], alice.id, {
                   "submission_id": same, "ratings": _answers(mine, 4)})),
               "alice-different": (lambda: submit_assignment(engine, mine["assignment_id"], alice.id, {
                   "submission_id": different, "ratings": _answers(mine, 2)}))}
    submits |= {f"rater-{n}": (lambda r=rater, p=claimed[f"rater-{n}"]: submit_assignment(
                    engine, p["assignment_id"], r, {"submission_id": new_submission_id(), "ratings": _answers(p, 3)}))
                for n, rater in enumerate(others)}
    receipts = _together(engine, submits, writers=len(submits))
    stored_ids = {receipts[name]["submission_id"] for name in ("alice-same-1", "alice-same-2", "alice-different")
                  if isinstance(receipts[name], dict)}
    refused = [name for name in ("alice-same-1", "alice-same-2", "alice-different")
               if isinstance(receipts[name], Conflict)]
    # Whichever came first in the batch is stored; the same submission again gets its receipt, another a conflict.
    assert len(stored_ids) == 1 and len(refused) == (1 if stored_ids == {same} else 2), receipts
    if stored_ids == {same}:
        assert receipts["alice-same-1"] == receipts["alice-same-2"]
    acknowledged = sum(receipt["ratings"] for name, receipt in receipts.items()
                       if name.startswith("rater-") and isinstance(receipt, dict))
    acknowledged += next(receipt["ratings"] for receipt in receipts.values() if isinstance(receipt, dict)
                         and receipt["assignment_id"] == mine["assignment_id"])
    assert _promises_hold(engine) == (acknowledged, len(others) + 1)


def test_many_threads_working_freely_keep_every_promise(engine):
    """Raters with two tabs each claim and submit in a loop, unforced: whatever batches form, the promises hold and
    what was acknowledged is stored."""
    raters = [invite(engine, f"free-{n}", "pilot")[0].id for n in range(5)]
    acknowledged, failures, lock = [0], [], threading.Lock()

    def work(rater: int, seed: int) -> None:
        rng = random.Random(seed)
        for _ in range(6):
            try:
                payload = next_assignment_payload(engine, "pilot", rater)
                if payload is None:
                    return
                receipt = submit_assignment(engine, payload["assignment_id"], rater, {
                    "submission_id": new_submission_id(), "ratings": _answers(payload, rng.randint(1, 5))})
                with lock:
                    acknowledged[0] += receipt["ratings"]
            except Conflict:  # her other tab submitted it first
                continue
            except Exception as error:  # noqa: BLE001 - handed back to the test
                failures.append(error)
                return

    threads = [threading.Thread(target=work, args=(rater, 10 * rater + tab)) for rater in raters for tab in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(WAIT * 3)
        assert not thread.is_alive(), "a request is stuck"
    assert failures == []
    stored, _ = _promises_hold(engine)
    assert stored == acknowledged[0] > 0
