"""A chat unit through a real Mephisto mock run, live: the page Mephisto's router serves talks across origins to
`empeval`'s app (its unit token, no cookie), whose real partners answer each turn; a reload mid-conversation
resumes from what the app holds; the worker ends and rates each conversation and submits to Mephisto; the runner
records the unit and `crowd ingest` stores it on the claim her first turn made, under the annotator it names from
Mephisto's own record of her. SQL then holds what the page showed."""
from __future__ import annotations

import pytest
from sqlalchemy.orm import Session

from empeval.server.annotation.annotators import pseudonym_for
from empeval.server.annotation.secrets import secret_key
from empeval.server.store.models import Annotator, Assignment
from empeval.tasks.crowd import contract, jobs
from tests.annotation.chat_fixtures import (
    CHAT_CRITERIA,
    CHAT_PARTNERS,
    CHAT_STUDY,
    chat_serving,
    chat_store,
    stored_session,
)
from tests.annotation.test_chat_browser import names_in, rate, say, shown_turns, tick
from tests.browser import chromium_page
from tests.crowd.conftest import empeval, free_port, leftovers, wait_until
from tests.crowd.workers import wait_for_task_or_block

pytestmark = pytest.mark.slow
WORKER = "w1"


@pytest.fixture
def chat_crowd_store(tmp_path, monkeypatch, sample_templates, crowd_dir):
    monkeypatch.setenv("EMPEVAL_SECRET_KEY", "crowd-chat-secret")
    engine, _ = chat_store(tmp_path, sample_templates, raters=())
    monkeypatch.setenv("EMPEVAL_DATABASE_URL", str(engine.url))
    return engine


def talk_and_rate(page, position_order: list[int], expected: dict, *, reload_after_first: bool) -> None:
    """Every conversation of the session on screen: two messages, each reply ticked, End, the ratings, Next."""
    n = int(page.locator("#progress-text").inner_text().split(" of ")[1].split()[0])
    assert n == len(CHAT_PARTNERS)
    for c in range(n):
        position = int(page.locator("#item").get_attribute("data-position"))
        position_order.append(position)
        ticked = {}
        for e in range(2):
            reply = say(page, f"Crowd conversation {c + 1}, message {e + 1}: it still bothers me.", by_keyboard=False)
            tick(page, reply, ["made_sense"])
            ticked[reply] = frozenset({"made_sense"})
            if reload_after_first and c == 0 and e == 0:
                # The page reopens with Mephisto's copy of the unit, written before any turn: the conversation
                # comes back from the app, the ticks from the draft, and she is where she was (consent given).
                page.reload()
                page.wait_for_selector(f"#chat-log .chat-turn[data-speaker='system'][data-index='{reply}']")
                assert [t[:2] for t in shown_turns(page)] == [(0, "rater"), (1, "system")]
                assert page.locator(f"fieldset.ticks[data-index='{reply}'] input[value='made_sense']").is_checked()
        turns = shown_turns(page)
        assert not names_in(page.content())
        page.click("#end-conversation")
        page.wait_for_selector("#rating")
        scores = {criterion: 1 + (c + q) % 5 for q, criterion in enumerate(CHAT_CRITERIA)}
        rate(page, scores)
        expected[position] = {"turns": tuple(turns), "ticks": ticked, "ratings": scores}
        page.click("#next-conversation")


def test_a_browser_worker_chats_live_through_a_mephisto_unit_and_ingest_stores_it(crowd_python, chat_crowd_store):
    engine = chat_crowd_store
    port = free_port()
    with chat_serving(engine) as base:
        result = empeval("crowd", "launch", CHAT_STUDY, "--provider", "mock", "--units", "1", "--port", str(port),
                         "--timeout", "300", "--no-onboarding", "--reward", "0.5", "--live-url", base)
        assert result.exit_code == 0, result.output
        job_dir = next(jobs.crowd_root().glob(f"{CHAT_STUDY}/*/"))
        (unit,) = contract.read_items(job_dir).values()
        assert unit.payload["live"]["url"] == base
        expected: dict = {}
        order: list[int] = []
        try:
            wait_until(lambda: jobs.read_status(job_dir).state == contract.RUNNING, 120, "the run to go live")
            with chromium_page() as page:
                page.goto(f"http://127.0.0.1:{port}/?worker_id={WORKER}&assignment_id=a1")
                assert wait_for_task_or_block(page) == "task"
                page.click("#consent-accept")
                page.click("#start")
                page.wait_for_selector("#chat-input")
                talk_and_rate(page, order, expected, reload_after_first=True)
                page.wait_for_selector("#review")
                page.fill("#comment", "Kind partners.")
                page.click("#submit")
                page.wait_for_selector("#submitted", timeout=30000)
            wait_until(lambda: len(contract.read_results(job_dir / contract.RESULTS_FILE)) == 1, 30, "the result")
            final = wait_until(lambda: (s := jobs.read_status(job_dir)).state in jobs.ENDED and s, 90,
                               "the run to end by itself")
        finally:
            if jobs.read_status(job_dir).live:
                jobs.stop(job_dir, wait=30)
    assert final.state == "completed" and final.units_done == 1

    (record,) = contract.read_results(job_dir / contract.RESULTS_FILE).records
    # Mephisto's name for the worker is the page's id with the provider's suffix: the rule the unit token carries.
    assert record.worker_name == WORKER + contract.RECORDED_NAME_SUFFIX["mock"]
    ingested = empeval("crowd", "ingest", CHAT_STUDY)
    assert "1 results: 1 stored" in ingested.output, ingested.output
    with Session(engine) as session:
        assignment = session.get_one(Assignment, unit.assignment_id)
        annotator = session.get_one(Annotator, assignment.annotator_id)
        assert (assignment.status, assignment.comment) == ("submitted", "Kind partners.")
        assert (annotator.provider, annotator.pseudonym) == (
            "mock", pseudonym_for(secret_key(engine), "mock", record.worker_name))
    stored = {s.position: s for s in stored_session(engine, unit.assignment_id)}
    assert sorted(stored) == sorted(order) and set(stored) == set(expected)
    for position, shown in expected.items():
        s = stored[position]
        assert s.ended and not s.failed
        assert s.turns == shown["turns"]  # her messages as typed, the replies as the page showed them
        assert s.ticks == shown["ticks"]
        assert s.ratings == shown["ratings"]
    assert {s.system for s in stored.values()} == set(CHAT_PARTNERS)
    again = empeval("crowd", "ingest", CHAT_STUDY)
    assert "1 already" in again.output, again.output
    assert leftovers() == []
