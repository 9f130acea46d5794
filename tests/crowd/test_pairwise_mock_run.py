"""A pairwise (A/B) unit through a real Mephisto mock run: the page Mephisto serves gets the job's A/B text for its
preview, a browser worker compares every pair by keyboard, the runner scores the control pair, ingest stores the
choices, and SQL holds them on the sides the worker saw. The study is a model-assisted one (design.human_share,
issue 28): the crowd is given the pairs of the sampled contexts only, never a pair left to the judge."""
from __future__ import annotations

import json
import urllib.request

import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session

from empeval.server.store.kinds.likert import StudyContext
from empeval.server.store.kinds.pairwise import AssignmentPair, Choice, PairItem
from empeval.server.store.models import Assignment, Study
from empeval.tasks.crowd import contract, jobs
from empeval.tasks.kinds.pairwise import LISTING
from empeval.tasks.study_create import create_study
from empeval.tasks.study_file import parse_study
from tests.browser import chromium_page
from tests.crowd.conftest import empeval, free_port, leftovers, wait_until
from tests.crowd.workers import do_unit, wait_for_task_or_block

pytestmark = pytest.mark.slow
KEYS = {"empathy": "B", "relevance": "A", "fluency": "B"}  # the worker's answer on every pair
SIDE_OF = {"A": "left", "B": "right"}


@pytest.fixture
def ab_store(crowd_store):
    """Beside `pilot`: `ab`, A/B on 8 contexts of which people judge a seeded half (human_share 0.5), no ties,
    one control pair per assignment; the other 4 contexts' pairs are stored for a judge of differences alone."""
    create_study(crowd_store, parse_study({
        "name": "ab", "kind": "pairwise", "seed": 3,
        "contexts": {"split": "test", "count": 8},
        "systems": {"names": ["sys-a", "sys-b"], "controls": ["control-generic"]},
        "design": {"judgments_per_pair": 2, "items_per_assignment": 3, "control_rate": 0.34, "ties": False,
                   "assignment_minutes": 30, "human_share": 0.5, "human_share_seed": 11},
        "pay": {"per_assignment": 0.5, "currency": "USD"}}))
    return crowd_store


def test_a_browser_worker_does_a_pairwise_unit_and_its_choices_land_in_sql(crowd_python, crowd_dir,
                                                                           ab_store):
    with Session(ab_store) as session:
        sampled = dict(session.execute(select(StudyContext.context_id, StudyContext.human_rated)
                                       .join(Study).where(Study.name == "ab")).all())
        judge_only_pairs = set(session.scalars(select(PairItem.id).join(Study).where(
            Study.name == "ab", PairItem.context_id.in_([c for c, human in sampled.items() if not human]))))
    assert len(sampled) == 8 and sum(sampled.values()) == 4 and judge_only_pairs
    port = free_port()
    result = empeval("crowd", "launch", "ab", "--provider", "mock", "--units", "1", "--port", str(port),
                     "--timeout", "240", "--no-onboarding")
    assert result.exit_code == 0, result.output
    job_dir = next(crowd_dir.glob("ab/*/"))
    (unit,) = contract.read_items(job_dir).values()
    try:
        # The job's units are the sampled contexts' assignments: no unit holds a pair left to the judge.
        assert not {item["item_id"] for item in unit.payload["items"]} & judge_only_pairs
        wait_until(lambda: jobs.read_status(job_dir).state == contract.RUNNING, 120, "the run to go live")
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/task_config.json", timeout=30) as answer:
            served = json.loads(answer.read())
        # What the preview page shows: choices between two replies, not ratings on a scale.
        assert (served["preview_title"], served["preview_text"]) == (LISTING["title"], LISTING["description"])
        with chromium_page() as page:
            page.goto(f"http://127.0.0.1:{port}/?worker_id=w1&assignment_id=a1")
            assert wait_for_task_or_block(page) == "task"
            shown = do_unit(page, scores=lambda i: tuple(KEYS.values()), comment="clear pairs")
        assert sorted(shown) == sorted(item["item_id"] for item in unit.payload["items"])
        wait_until(lambda: len(contract.read_results(job_dir / contract.RESULTS_FILE)) == 1, 30, "the result line")
        final = wait_until(lambda: (s := jobs.read_status(job_dir)).state in jobs.ENDED and s, 90,
                           "the run to end by itself")
    finally:
        if jobs.read_status(job_dir).live:
            jobs.stop(job_dir, wait=30)
    assert final.state == "completed" and final.units_done == 1

    ingested = empeval("crowd", "ingest", "ab")
    assert "1 results: 1 stored" in ingested.output, ingested.output
    with Session(ab_store) as session:
        assignment = session.get_one(Assignment, unit.assignment_id)
        assert (assignment.status, assignment.comment) == ("submitted", "clear pairs")
        stored = set(session.execute(select(Choice.pair_item_id, Choice.criterion, Choice.choice)
                                     .where(Choice.assignment_id == unit.assignment_id)).all())
        pairs = session.execute(
            select(PairItem.id, PairItem.is_control, PairItem.control_target, PairItem.control_side,
                   AssignmentPair.shown_left)
            .join(AssignmentPair, AssignmentPair.pair_item_id == PairItem.id)
            .where(AssignmentPair.assignment_id == unit.assignment_id)).all()
    assert stored == {(pair.id, criterion, SIDE_OF[key]) for pair in pairs for criterion, key in KEYS.items()}
    with Session(ab_store) as session:
        judged_contexts = set(session.scalars(select(PairItem.context_id).join(Choice)
                                              .where(~PairItem.is_control)))
        handed_out = set(session.scalars(select(AssignmentPair.pair_item_id).join(Assignment).join(Study)
                                         .where(Study.name == "ab")))
    assert judged_contexts and all(sampled[c] for c in judged_contexts)  # people judged sampled contexts only
    assert not handed_out & judge_only_pairs  # and no assignment of the study holds a judge-only pair
    # The control pair scored by the runner: passed when the worker chose the label the control was not shown
    # under, on the criterion it targets (from SQL: the control's side against the side shown left).
    controls = [pair for pair in pairs if pair.is_control]
    assert controls
    passed = sum(KEYS[pair.control_target] != ("A" if pair.control_side == pair.shown_left else "B")
                 for pair in controls)
    (record,) = contract.read_results(job_dir / contract.RESULTS_FILE).records
    assert record.controls == contract.ControlScore(n=len(controls), passed=passed)
    assert leftovers() == []
