"""Fault test: `empeval serve --workers 2` (gunicorn) is killed with SIGKILL, master and workers at once, while
raters are asking for work and submitting it over HTTP; it is started again and the raters finish. Whatever was
in flight, every acknowledged submission is stored exactly once, no assignment is stored in part, nobody holds
two active assignments and nobody rated a context twice. Bounded: the whole test takes well under a minute."""
from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

import pytest
import requests
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from empeval.server.annotation.annotators import invite
from empeval.server.store.kinds.likert import AssignmentItem, Rating, StudyItem
from empeval.server.store.models import Assignment, Response
from tests.annotation.conftest import add_responses, make_study
from tests.conftest import REPO

RATERS = 6
KILL_AFTER = 8  # acknowledged submissions before the kill
DEADLINE = 50.0  # seconds for the whole run, both servers included
CRITERIA = ("empathy", "relevance", "fluency")
# What a client meets when the server dies on its request: no connection, no answer in time, or an answer cut off
# mid-body (the status line and headers were sent, the body was not; requests raises ChunkedEncodingError then).
CUT_SHORT = (requests.ConnectionError, requests.Timeout, requests.exceptions.ChunkedEncodingError)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class Served:
    """One `empeval serve` in its own process group, so that SIGKILL reaches gunicorn's master and workers."""

    url: str
    port: int
    env: dict[str, str]
    process: subprocess.Popen | None = None
    log: list[str] = field(default_factory=list)

    def start(self, deadline: float) -> None:
        command = [sys.executable, "-m", "empeval.cli", "--database-url", self.url, "serve", "--workers", "2",
                   "--host", "127.0.0.1", "--port", str(self.port)]
        self.process = subprocess.Popen(command, cwd=REPO, env=self.env, start_new_session=True,
                                        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise AssertionError(f"the server exited with {self.process.returncode}: "
                                     f"{self.process.stderr.read() if self.process.stderr else ''}")
            try:
                if requests.get(f"http://127.0.0.1:{self.port}/healthz", timeout=1).status_code == 200:
                    return
            except (requests.ConnectionError, requests.Timeout):
                pass
            time.sleep(0.1)
        raise AssertionError("the server did not answer /healthz in time")

    def kill(self) -> None:
        """SIGKILL to the whole process group: no worker finishes a request, no transaction commits late."""
        if self.process is None:
            return
        try:
            os.killpg(self.process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.process.wait(timeout=10)
        if self.process.stderr:
            self.process.stderr.close()
        self.process = None


@dataclass
class Ledger:
    """What the raters were told: every 200 receipt, by assignment id."""

    acknowledged: dict[int, tuple[str, int]] = field(default_factory=dict)  # -> (submission id, ratings)
    failures: list[str] = field(default_factory=list)
    unanswered: Counter = field(default_factory=Counter)  # requests the dead server left unanswered, by kind
    finished: int = 0  # raters that ran out of work (rather than out of time or into an error)
    lock: threading.Lock = field(default_factory=threading.Lock)


def likert_body(assignment: dict) -> dict:
    """A whole Likert submission for the assignment: every item scored on every criterion."""
    return {"submission_id": uuid.uuid4().hex,
            "ratings": [{"item_id": i["item_id"], "scores": {c: 1 + i["item_id"] % 5 for c in CRITERIA}}
                        for i in assignment["items"]]}


def rate(base: str, token: str, ledger: Ledger, stop: threading.Event, deadline: float, *,
         body_for: Callable[[dict], dict] = likert_body, counted: str = "ratings") -> None:
    """Ask for work and submit `body_for(assignment)` until none is left; the receipt's `counted` field is what
    the ledger keeps. A submission the dead server never answered is sent again, with the same submission id,
    once the server is back (as the task page retries); a `next` it never answered is asked again (and resumes
    the assignment if the claim had committed)."""
    headers = {"Authorization": f"Bearer {token}"}
    current: tuple[int, dict] | None = None  # the assignment in hand and the body to send for it
    while not stop.is_set() and time.monotonic() < deadline:
        try:
            if current is None:
                answer = requests.get(f"{base}/api/annotate/next", headers=headers, timeout=10)
                if answer.status_code != 200:
                    raise AssertionError(f"next -> {answer.status_code} {answer.text[:200]}")
                assignment = answer.json()["assignment"]
                if assignment is None:
                    with ledger.lock:
                        ledger.finished += 1
                    return
                current = (assignment["assignment_id"], body_for(assignment))
            assignment_id, body = current
            sent = requests.post(f"{base}/api/assignments/{assignment_id}/submit", json=body, headers=headers,
                                 timeout=10)
            if sent.status_code != 200:
                raise AssertionError(f"submit -> {sent.status_code} {sent.text[:200]}")
            receipt = sent.json()
            assert receipt["submission_id"] == body["submission_id"]
            with ledger.lock:
                ledger.acknowledged[assignment_id] = (receipt["submission_id"], receipt[counted])
            current = None
        except CUT_SHORT:
            with ledger.lock:
                ledger.unanswered["submit" if current is not None else "next"] += 1
            time.sleep(0.1)  # the server is down: poll until it is back
        except Exception as error:  # noqa: BLE001 - anything else ends this rater and must fail the test
            with ledger.lock:
                ledger.failures.append(f"{type(error).__name__}: {error}")
            return


@pytest.mark.timeout(90)
def test_acknowledged_submissions_survive_sigkill_of_the_server_exactly_once_and_whole(sample_engine, tmp_path,
                                                                                       monkeypatch):
    started = time.monotonic()
    deadline = started + DEADLINE
    add_responses(sample_engine, ["sys-a", "sys-b", "sys-c"], 40)
    make_study(sample_engine, count=40, k=2, per_assignment=4, controls=[])
    secret = uuid.uuid4().hex * 2
    monkeypatch.setenv("EMPEVAL_SECRET_KEY", secret)
    tokens = [invite(sample_engine, f"rater{i}", "pilot")[1] for i in range(RATERS)]
    url = sample_engine.url.render_as_string(hide_password=False)
    env = {**os.environ, "EMPEVAL_SECRET_KEY": secret, "PYTHONUNBUFFERED": "1"}
    server = Served(url=url, port=free_port(), env=env)
    ledger, stop = Ledger(), threading.Event()
    base = f"http://127.0.0.1:{server.port}"
    raters = [threading.Thread(target=rate, args=(base, token, ledger, stop, deadline)) for token in tokens]
    try:
        server.start(deadline)
        for rater in raters:
            rater.start()
        while time.monotonic() < deadline and len(ledger.acknowledged) < KILL_AFTER:
            time.sleep(0.02)
        at_kill = len(ledger.acknowledged)
        server.kill()
        killed_at = time.monotonic() - started
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

    per_assignment = 4 * len(CRITERIA)
    with Session(sample_engine) as session:
        stored = {a.id: a for a in session.scalars(select(Assignment))}
        ratings = dict(session.execute(select(Rating.assignment_id, func.count()).group_by(Rating.assignment_id)).all())
        by_submission = dict(session.execute(select(Rating.submission_id, func.count())
                                             .group_by(Rating.submission_id)).all())
        items = dict(session.execute(select(AssignmentItem.assignment_id, func.count())
                                     .group_by(AssignmentItem.assignment_id)).all())
        shown = Counter(session.execute(
            select(Assignment.annotator_id, Response.context_id)
            .join(AssignmentItem, AssignmentItem.assignment_id == Assignment.id)
            .join(StudyItem, StudyItem.id == AssignmentItem.item_id)
            .join(Response, Response.id == StudyItem.response_id)
            .where(Assignment.annotator_id.is_not(None))).all())
    # Every acknowledged submission is stored, once, whole.
    for assignment_id, (submission_id, count) in ledger.acknowledged.items():
        assert stored[assignment_id].status == "submitted"
        assert stored[assignment_id].submission_id == submission_id
        assert count == ratings[assignment_id] == by_submission[submission_id] == per_assignment
    # Nothing is stored in part, nothing is submitted without its ratings, nothing rated is left unsubmitted.
    for assignment_id, assignment in stored.items():
        if assignment.status == "submitted":
            assert ratings.get(assignment_id) == items[assignment_id] * len(CRITERIA)
        else:
            assert assignment_id not in ratings
    submitted = [a for a in stored.values() if a.status == "submitted"]
    assert len(submitted) == len(ledger.acknowledged)  # every rater finished: all were acknowledged in the end
    active = Counter(a.annotator_id for a in stored.values() if a.status == "assigned")
    assert not active, "work was left in progress although every rater finished"
    assert max(shown.values()) == 1, "someone was shown a context twice"
    elapsed = time.monotonic() - started
    print(f"\nkill test ({sample_engine.dialect.name}): {at_kill} acknowledged at the kill ({killed_at:.1f}s), "
          f"{len(ledger.acknowledged)} acknowledged and {len(submitted)} stored in all, {sum(ratings.values())} "
          f"ratings, {elapsed:.1f}s; unanswered requests {dict(ledger.unanswered)}")
    assert elapsed < 60
