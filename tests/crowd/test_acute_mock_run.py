"""An ACUTE-Eval study through a real Mephisto mock run: its conversations are those of a chat study talked by the
demo's simulated speakers (tasks.kinds.chat_simulate: live replies from the backend's cheap systems); Mephisto's
page serves the ACUTE task with the job's ACUTE listing for its preview; two browser workers compare every pair of
their unit, a careful one who picks the real partner in her control pair and a careless one who picks the control
partner; the runner scores each control pair; `crowd ingest` stores their sides and trimmed justifications, which
the export reads as the systems they saw on those sides; the ACUTE analysis flags the careless worker; and a second
ingest stores nothing twice."""
from __future__ import annotations

import json
import random
import urllib.request

import pytest
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from empeval.analysis.kinds.acute.part import acute_tables
from empeval.server.annotation.annotators import invite, pseudonym_for
from empeval.server.annotation.handout import next_assignment_payload
from empeval.server.annotation.kinds import annotation_kind
from empeval.server.annotation.secrets import secret_key
from empeval.server.annotation.submission import submit_assignment
from empeval.server.store import make_engine
from empeval.server.store.kinds.acute import AcuteChoice, AcutePair
from empeval.server.store.kinds.chat import AssignmentConversation
from empeval.server.store.models import Annotator, Assignment
from empeval.tasks.crowd import contract, jobs
from empeval.tasks.kinds import task_kind
from empeval.tasks.kinds.acute import LISTING
from empeval.tasks.simulate import CrowdModel, draw_crowd
from tests.annotation.acute_fixtures import (
    ACUTE,
    CHAT,
    CONTROL,
    PARTNERS,
    make_acute,
    make_chat,
    placements,
    stored_pairs,
)
from tests.browser import chromium_page
from tests.crowd.conftest import empeval, free_port, leftovers, wait_until
from tests.crowd.workers import wait_for_task_or_block

QUESTIONS = ("empathy", "talk_to")
SIDES = ("left", "right")
# The two workers: who picks the real partner on a control pair's target question, and who picks the control.
CAREFUL, CARELESS = "w1", "w2"


def simulated_speakers_talk(engine, annotator_ids: list[int], *, seed: int = 1) -> list[dict]:
    """A session of the chat study `talk` (tests.annotation.acute_fixtures: three prompts, each session a
    conversation with every partner) talked, ended and submitted for each of `annotator_ids` by the demo's simulated
    speakers (their lines the ED speaker turns of each prompt, the replies live from the backend); the receipts."""
    answer = task_kind("chat").simulated_answers(engine, CHAT, CrowdModel(), seed)
    speakers = draw_crowd(len(annotator_ids), CrowdModel(), seed, bad=0, prefix="speaker")
    receipts = []
    for number, (speaker, annotator_id) in enumerate(zip(speakers, annotator_ids, strict=True)):
        page = next_assignment_payload(engine, CHAT, annotator_id)
        body = answer(speaker, random.Random(f"{seed}-{speaker.name}"), page)
        receipts.append(submit_assignment(engine, page["assignment_id"], annotator_id,
                                          {"submission_id": f"speaker-{number:04d}", **body}, study=CHAT))
    return receipts


def finished_conversations(engine) -> int:
    """Conversations of the chat study that ended and did not fail."""
    with Session(engine) as session:
        return session.scalar(select(func.count()).where(AssignmentConversation.ended_at.is_not(None),
                                                         AssignmentConversation.failed.is_(False)))


@pytest.fixture
def acute_crowd_store(tmp_path, monkeypatch, sample_templates):
    """A SQLite store with the bundled sample, the chat study `talk` talked by three simulated speakers (9 finished
    conversations on 3 prompts) and the ACUTE study `judge` over it (2 judgments per pair, 3 pairs per assignment,
    a control pair in each); the app's commands read it through the environment."""
    url = f"sqlite:///{tmp_path / 'acute-crowd.db'}"
    sample_templates.fill(url)
    engine = make_engine(url)
    make_chat(engine)
    receipts = simulated_speakers_talk(engine, [invite(engine, f"speaker-{i}", CHAT)[0].id for i in range(3)])
    assert [r["status"] for r in receipts] == ["stored"] * 3
    assert finished_conversations(engine) == 9  # every conversation ended, none failed: all nine can be compared
    make_acute(engine, pay={"per_assignment": 0.8, "currency": "USD"})
    monkeypatch.setenv("EMPEVAL_DATABASE_URL", url)
    monkeypatch.setenv("EMPEVAL_SECRET_KEY", "crowd-test-secret")
    yield engine
    engine.dispose()


def control_targets(engine) -> dict[int, str]:
    """Control pair id -> the question it is scored on."""
    with Session(engine) as session:
        return dict(session.execute(select(AcutePair.id, AcutePair.control_target).where(AcutePair.is_control)).all())


def planned_answers(engine, assignment_id: int, worker: str) -> dict[tuple[int, str], tuple[str, str]]:
    """What `worker` will answer in the assignment: (pair id, question) -> (side, justification as typed, blanks
    around it). On a control pair's target question the careful worker picks the real partner's side and the
    careless one the control's; elsewhere the sides alternate over positions and questions."""
    pairs, targets = stored_pairs(engine), control_targets(engine)
    planned = {}
    for position, pair_id, shown_left in placements(engine, assignment_id):
        pair = pairs[pair_id]
        for q, question in enumerate(QUESTIONS):
            side = SIDES[(position + q + (worker == CARELESS)) % 2]
            if pair.is_control and targets[pair_id] == question:
                control_left = pair.control_side == shown_left
                real_side = "right" if control_left else "left"
                side = real_side if worker == CAREFUL else ("left" if real_side == "right" else "right")
            why = f"  {worker}: listener {SIDES.index(side) + 1} answered her on {question} (pair {position + 1}).\n "
            planned[pair_id, question] = (side, why)
    return planned


def shown_turns(page, side: str) -> tuple[tuple[str, str], ...]:
    """(speaker, text) of the turns of the conversation the page shows on `side`."""
    return tuple((role, text) for role, text in page.locator(f"#item .acute-side[data-side='{side}'] .turn")
                 .evaluate_all("ts => ts.map(t => [t.dataset.role, t.childNodes[1].textContent])"))


def compare_every_pair(page, engine, units: dict[int, contract.CrowdUnit], worker: str, comment: str
                       ) -> tuple[int, dict[tuple[int, str], tuple[str, str]]]:
    """Consent, instructions, then every pair of the unit Mephisto gave `worker` (known by its first pair, which the
    two units of this design do not share), each checked to show the chat study's two conversations on the sides its
    placement says, answered as planned_answers plans; review, comment, submit. Returns (assignment id, what she
    answered)."""
    page.click("#consent-accept")
    page.click("#start")
    page.wait_for_selector("#item")
    first = int(page.locator("#item").get_attribute("data-item-id"))
    (assignment_id,) = [a for a, unit in units.items() if unit.payload["items"][0]["item_id"] == first]
    planned = planned_answers(engine, assignment_id, worker)
    pairs = stored_pairs(engine)
    for _, pair_id, shown_left in placements(engine, assignment_id):
        assert int(page.locator("#item").get_attribute("data-item-id")) == pair_id
        a, b = pairs[pair_id].turns
        assert (shown_turns(page, "left"), shown_turns(page, "right")) == ((a, b) if shown_left == "a" else (b, a))
        assert not any(name in page.locator("#item").inner_text() for name in PARTNERS)
        for question in QUESTIONS:
            side, why = planned[pair_id, question]
            page.check(f"input[name='{question}'][value='{side}']")
            page.fill(f"#why-{question}", why)
        page.click("#next")
    page.wait_for_selector("#review")
    page.fill("#comment", comment)
    page.click("#submit")
    page.wait_for_selector("#submitted", timeout=30000)
    return assignment_id, planned


@pytest.mark.slow
def test_two_browser_workers_compare_conversations_in_a_mephisto_mock_run_and_ingest_stores_their_choices_once(
        crowd_python, crowd_dir, acute_crowd_store):
    engine = acute_crowd_store
    port = free_port()
    result = empeval("crowd", "launch", ACUTE, "--provider", "mock", "--units", "2", "--port", str(port),
                     "--timeout", "240", "--no-onboarding")
    assert result.exit_code == 0, result.output
    job_dir = next(crowd_dir.glob(f"{ACUTE}/*/"))
    units = contract.read_items(job_dir)
    assert len(units) == 2
    answered: dict[str, tuple[int, dict]] = {}
    try:
        wait_until(lambda: jobs.read_status(job_dir).state == contract.RUNNING, 120, "the run to go live")
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/task_config.json", timeout=30) as answer:
            served = json.loads(answer.read())
        # The preview says what an ACUTE unit asks: comparing two conversations, not rating replies.
        assert (served["preview_title"], served["preview_text"]) == (LISTING["title"], LISTING["description"])
        for number, worker in enumerate((CAREFUL, CARELESS), start=1):
            with chromium_page() as page:
                page.goto(f"http://127.0.0.1:{port}/?worker_id={worker}&assignment_id=a{number}")
                assert wait_for_task_or_block(page) == "task"
                assert page.locator("main[data-kind='acute']").count() == 1  # Mephisto's page shows AcuteTask
                answered[worker] = compare_every_pair(page, engine, units, worker, comment=f"done by {worker}")
        wait_until(lambda: len(contract.read_results(job_dir / contract.RESULTS_FILE)) == 2, 30, "the result lines")
        final = wait_until(lambda: (s := jobs.read_status(job_dir)).state in jobs.ENDED and s, 90,
                           "the run to end by itself")
    finally:
        if jobs.read_status(job_dir).live:
            jobs.stop(job_dir, wait=30)
    assert final.state == "completed" and final.units_done == 2
    assert {a for a, _ in answered.values()} == set(units)

    # The runner scored each unit's control pair as the analysis does: passed when the real partner was picked on
    # the control's target question.
    records = {r.worker_name.removesuffix("_sandbox"): r
               for r in contract.read_results(job_dir / contract.RESULTS_FILE).records}
    targets = control_targets(engine)
    for worker, (assignment_id, _) in answered.items():
        controls = [pair_id for _, pair_id, _ in placements(engine, assignment_id) if pair_id in targets]
        assert len(controls) == 1, "each unit of this design holds one control pair"
        passed = int(worker == CAREFUL)
        assert records[worker].assignment_id == assignment_id
        assert records[worker].controls == contract.ControlScore(n=1, passed=passed)
        assert records[worker].passed_controls is bool(passed)

    ingested = empeval("crowd", "ingest", ACUTE)
    assert "2 results: 2 stored" in ingested.output, ingested.output
    pairs = stored_pairs(engine)
    secret = secret_key(engine)
    with Session(engine) as session:
        for worker, (assignment_id, planned) in answered.items():
            assignment = session.get_one(Assignment, assignment_id)
            assert (assignment.status, assignment.comment) == ("submitted", f"done by {worker}")
            annotator = session.get_one(Annotator, assignment.annotator_id)
            assert (annotator.provider, annotator.pseudonym) == (
                "mock", pseudonym_for(secret, "mock", records[worker].worker_name))
            stored = {(c.acute_pair_id, c.criterion): (c.choice, c.justification) for c in session.scalars(
                select(AcuteChoice).where(AcuteChoice.assignment_id == assignment_id))}
            # The sides she picked, and her justifications as she typed them less the blanks around them.
            assert stored == {key: (side, why.strip()) for key, (side, why) in planned.items()}

    # The export names the systems on the sides she saw: the side picked is the system preferred.
    rows = annotation_kind("acute").export_rows(engine, ACUTE)
    assert len(rows) == sum(len(planned) for _, planned in answered.values())
    shown = {(a, pair_id): shown_left for a, _ in answered.values() for _, pair_id, shown_left in placements(engine, a)}
    for row in rows:
        pair = pairs[row["comparison_id"]]
        left, right = pair.systems if shown[row["assignment_id"], row["comparison_id"]] == "a" else pair.systems[::-1]
        assert (row["system_left"], row["system_right"]) == (left, right)
        assert row["preferred"] == (left if row["choice"] == "left" else right)
        assert row["is_control"] == pair.is_control and (CONTROL in pair.systems) == pair.is_control

    # The ACUTE analysis flags the worker who picked the control partner, and only her.
    careless = pseudonym_for(secret, "mock", records[CARELESS].worker_name)
    assert acute_tables(rows, n_boot=10).flagged == [careless]

    again = empeval("crowd", "ingest", ACUTE)
    assert "2 results: 2 already" in again.output, again.output
    with Session(engine) as session:
        assert session.scalar(select(func.count(AcuteChoice.id))) == len(rows)
        assert session.scalar(select(func.count(Annotator.id)).where(Annotator.provider == "mock")) == 2
    assert leftovers() == []
