"""Fault test for pairwise (A/B) studies: `empeval serve --workers 2` is killed with SIGKILL, master and workers
at once, while raters are asking for pairs and submitting their choices over HTTP; it is started again and the
raters finish. Whatever was in flight, every acknowledged submission is stored exactly once and whole (a choice
per pair and criterion), no assignment is stored in part, nobody holds work at the end and nobody was shown a
context twice. The Likert twin is test_kill_server.py, whose server and timing helpers this reuses."""
from __future__ import annotations

import os
import threading
import time
import uuid
from collections import Counter

import pytest
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from empeval.server.annotation.annotators import invite
from empeval.server.store.kinds.pairwise import AssignmentPair, Choice, PairItem
from empeval.server.store.models import Assignment
from tests.annotation.pairwise_fixtures import AB_CRITERIA, make_ab_study
from tests.tasks.test_kill_server import DEADLINE, KILL_AFTER, Ledger, Served, free_port, rate

RATERS = 6
PAIRS_PER_ASSIGNMENT = 4


def pairwise_body(assignment: dict) -> dict:
    """A whole A/B submission: every pair judged on every criterion (A, B or T by item and criterion)."""
    if assignment.get("kind") != "pairwise":
        raise AssertionError(f"next handed out a {assignment.get('kind')!r} assignment")
    return {"submission_id": uuid.uuid4().hex,
            "judgments": [{"item_id": i["item_id"],
                           "choices": {c: "ABT"[(i["item_id"] + j) % 3] for j, c in enumerate(AB_CRITERIA)}}
                          for i in assignment["items"]]}


def judge(base: str, token: str, ledger: Ledger, stop: threading.Event, deadline: float) -> None:
    """The Likert kill test's rater loop, sending A/B judgments and keeping the receipts' choice counts."""
    rate(base, token, ledger, stop, deadline, body_for=pairwise_body, counted="choices")


@pytest.mark.slow
@pytest.mark.timeout(90)
def test_acknowledged_pairwise_submissions_survive_sigkill_exactly_once_and_whole(sample_engine, monkeypatch):
    started = time.monotonic()
    deadline = started + DEADLINE
    # 16 contexts x 2 real pairs (anchor against two others) x k = 2, four pairs and one control per assignment.
    make_ab_study(sample_engine, count=16, k=2, per_assignment=PAIRS_PER_ASSIGNMENT + 1, control_rate=0.2)
    secret = uuid.uuid4().hex * 2
    monkeypatch.setenv("EMPEVAL_SECRET_KEY", secret)
    tokens = [invite(sample_engine, f"judge{i}", "ab")[1] for i in range(RATERS)]
    url = sample_engine.url.render_as_string(hide_password=False)
    env = {**os.environ, "EMPEVAL_SECRET_KEY": secret, "PYTHONUNBUFFERED": "1"}
    server = Served(url=url, port=free_port(), env=env)
    ledger, stop = Ledger(), threading.Event()
    base = f"http://127.0.0.1:{server.port}"
    raters = [threading.Thread(target=judge, args=(base, token, ledger, stop, deadline)) for token in tokens]
    try:
        server.start(deadline)
        for rater in raters:
            rater.start()
        while time.monotonic() < deadline and len(ledger.acknowledged) < KILL_AFTER and not ledger.failures:
            time.sleep(0.02)
        at_kill = len(ledger.acknowledged)
        server.kill()
        assert ledger.failures == []
        assert at_kill >= KILL_AFTER, "the raters were too slow to load the server before the deadline"
        server.start(deadline)
        for rater in raters:
            rater.join(timeout=max(0.0, deadline - time.monotonic()))
        assert not any(rater.is_alive() for rater in raters), "the raters did not finish before the deadline"
    finally:
        stop.set()
        server.kill()
        for rater in raters:
            if rater.is_alive():
                rater.join(timeout=15)
    assert ledger.failures == []
    assert ledger.finished == RATERS, "a rater stopped before running out of work"

    with Session(sample_engine) as session:
        stored = {a.id: a for a in session.scalars(select(Assignment))}
        choices = dict(session.execute(select(Choice.assignment_id, func.count()).group_by(Choice.assignment_id)).all())
        placed = dict(session.execute(select(AssignmentPair.assignment_id, func.count())
                                      .group_by(AssignmentPair.assignment_id)).all())
        shown = Counter(session.execute(
            select(Assignment.annotator_id, PairItem.context_id)
            .join(AssignmentPair, AssignmentPair.assignment_id == Assignment.id)
            .join(PairItem, PairItem.id == AssignmentPair.pair_item_id)
            .where(Assignment.annotator_id.is_not(None))).all())
    # Every acknowledged submission is stored, once, whole: a choice per pair and criterion.
    for assignment_id, (submission_id, count) in ledger.acknowledged.items():
        assert stored[assignment_id].status == "submitted"
        assert stored[assignment_id].submission_id == submission_id
        assert count == choices[assignment_id] == placed[assignment_id] * len(AB_CRITERIA)
    # Nothing stored in part; nothing submitted without its choices.
    for assignment_id, assignment in stored.items():
        if assignment.status == "submitted":
            assert choices.get(assignment_id) == placed[assignment_id] * len(AB_CRITERIA)
        else:
            assert assignment_id not in choices
    submitted = [a for a in stored.values() if a.status == "submitted"]
    assert len(submitted) == len(ledger.acknowledged)
    assert not [a for a in stored.values() if a.status == "assigned"], "work was left in progress"
    assert max(shown.values()) == 1, "someone was shown a context twice"
    print(f"\npairwise kill test ({sample_engine.dialect.name}): {at_kill} acknowledged at the kill, "
          f"{len(submitted)} stored, {sum(choices.values())} choices, {time.monotonic() - started:.1f}s; "
          f"unanswered {dict(ledger.unanswered)}")
