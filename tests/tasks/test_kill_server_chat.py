"""Fault test for chat studies: `empeval serve --workers 2` is killed with SIGKILL, master and workers at once, while
raters are talking live with the systems; it is started again and the raters go on where the store says they are.
Every acknowledged turn (a reply the rater was shown) is stored, with its rater turn before it; after the restart a
rater utterance stored without its reply is answered when the page resends it, and no index holds two turns. The
Likert twin is test_kill_server.py, whose server helpers this reuses."""
from __future__ import annotations

import os
import threading
import time
import uuid

import pytest
import requests
from sqlalchemy import select
from sqlalchemy.orm import Session

from empeval.server.annotation.annotators import invite
from empeval.server.store.kinds.chat import ChatTurn
from empeval.tasks.study_create import create_study
from empeval.tasks.study_file import parse_study
from tests.tasks.test_kill_server import Served, free_port

RATERS = 4
KILL_AFTER = 12  # acknowledged replies before the kill
DEADLINE = 60.0


def chat_study(engine) -> None:
    create_study(engine, parse_study({
        "name": "talk", "kind": "chat", "seed": 2, "contexts": {"split": "test", "count": 8},
        "systems": {"names": ["control-generic", "control-mismatched"], "controls": []},
        "chat": {"conversations_per_system": 4, "min_utterances": 2, "max_utterances": 40,
                 "min_reply_seconds": 0}}))


def talker(base: str, token: str, acknowledged: list, failures: list, stop: threading.Event, deadline: float):
    """Send turns in the first conversation, resuming from what the server says after any error (as the page does:
    the payload's turns, resending a last rater turn that has no reply)."""
    session = requests.Session()
    headers = {"Authorization": f"Bearer {token}"}
    while not stop.is_set() and time.monotonic() < deadline:
        try:
            page = session.get(f"{base}/api/annotate/next", headers=headers, timeout=5).json()["assignment"]
            item = page["items"][0]
            turns = item["turns"]
            if turns and turns[-1]["speaker"] == "rater":  # stored, never answered: resend it as it was
                index, text = turns[-1]["index"], turns[-1]["text"]
            else:
                index, text = len(turns), f"turn {len(turns)} of {token[-6:]}"
            if index + 1 >= 40:
                return
            reply = session.post(f"{base}/api/assignments/{page['assignment_id']}/conversations/0/turns",
                                 json={"index": index, "text": text}, headers=headers, timeout=5)
            if reply.status_code == 200:
                acknowledged.append((page["assignment_id"], index, text, reply.json()["index"], reply.json()["text"]))
            elif reply.status_code < 500:
                failures.append(f"{reply.status_code} {reply.text[:200]}")
                return
        except (requests.RequestException, ValueError, KeyError):  # down, restarting, or cut mid-answer by the kill
            time.sleep(0.05)  # try again, as the page's Retry does


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_acknowledged_chat_turns_survive_sigkill_and_a_stored_turn_is_answered_on_resend(sample_engine, monkeypatch):
    deadline = time.monotonic() + DEADLINE
    chat_study(sample_engine)
    secret = uuid.uuid4().hex * 2
    monkeypatch.setenv("EMPEVAL_SECRET_KEY", secret)
    tokens = [invite(sample_engine, f"talker{i}", "talk")[1] for i in range(RATERS)]
    url = sample_engine.url.render_as_string(hide_password=False)
    server = Served(url=url, port=free_port(), env={**os.environ, "EMPEVAL_SECRET_KEY": secret})
    base = f"http://127.0.0.1:{server.port}"
    acknowledged: list = []
    failures: list = []
    stop = threading.Event()
    threads = [threading.Thread(target=talker, args=(base, t, acknowledged, failures, stop, deadline))
               for t in tokens]
    try:
        server.start(deadline)
        for t in threads:
            t.start()
        while time.monotonic() < deadline and len(acknowledged) < KILL_AFTER and not failures:
            time.sleep(0.01)
        server.kill()
        at_kill = len(acknowledged)
        assert at_kill >= KILL_AFTER and failures == []
        server.start(deadline)
        while time.monotonic() < deadline and len(acknowledged) < at_kill + KILL_AFTER and not failures:
            time.sleep(0.02)
    finally:
        stop.set()
        for t in threads:
            t.join(timeout=15)
        server.kill()
    assert failures == []
    assert len(acknowledged) >= at_kill + KILL_AFTER, "the raters did not go on after the restart"
    with Session(sample_engine) as session:
        stored = {(a, i): (speaker, text) for a, i, speaker, text in session.execute(
            select(ChatTurn.assignment_id, ChatTurn.idx, ChatTurn.speaker, ChatTurn.text))}
    for assignment_id, index, text, reply_index, reply in acknowledged:
        assert stored[assignment_id, index] == ("rater", text)
        assert stored[assignment_id, reply_index] == ("system", reply)
    # No gaps: each assignment's indexes run 0..n-1, rater and system alternating (the store's check).
    by_assignment: dict[int, list[int]] = {}
    for assignment_id, index in stored:
        by_assignment.setdefault(assignment_id, []).append(index)
    assert all(sorted(ix) == list(range(len(ix))) for ix in by_assignment.values())
