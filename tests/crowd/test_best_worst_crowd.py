"""A best-worst scaling study on the crowd: its job's listing asks for the best and the worst reply, its units carry
the contexts of their tuples and each control tuple with the letter the control is shown under (it passes when
marked the worst on its target); ingest stores a result's picks once and refuses a bad one whole; and a real
Mephisto mock run, a browser worker answering by keyboard, lands the systems she picked in SQL."""
from __future__ import annotations

import json
import urllib.request

import pytest
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from empeval.server.store.kinds.best_worst import AssignmentTuple, BestWorstChoice, TupleItem
from empeval.server.store.models import Assignment
from empeval.tasks.crowd import contract, jobs
from empeval.tasks.crowd.ingest import ingest
from empeval.tasks.kinds.best_worst import LISTING
from empeval.tasks.study_create import create_study
from empeval.tasks.study_file import parse_study
from tests.annotation.best_worst_fixtures import stored_picks, tuple_placements
from tests.annotation.conftest import add_responses
from tests.browser import chromium_page
from tests.crowd.conftest import empeval, fake_result, free_port, leftovers, wait_until
from tests.crowd.workers import do_unit, wait_for_task_or_block

CRITERIA = ("empathy", "relevance", "fluency")


@pytest.fixture
def bws_store(crowd_store):
    """Beside the Likert study `pilot`: `bws`, tuples of 3 of sys-a, sys-b, sys-c on the same 4 contexts, one
    control tuple per assignment, compare_with = pilot."""
    add_responses(crowd_store, ["sys-c"], 12)
    create_study(crowd_store, parse_study({
        "name": "bws", "kind": "best_worst", "seed": 3, "compare_with": "pilot",
        "contexts": {"split": "test", "count": 4},
        "systems": {"names": ["sys-a", "sys-b", "sys-c"], "controls": ["control-generic"]},
        "design": {"judgments_per_tuple": 2, "items_per_assignment": 3, "control_rate": 0.34,
                   "assignment_minutes": 30},
        "pay": {"per_assignment": 0.6, "currency": "USD"}}))
    return crowd_store


def bws_result(unit: contract.CrowdUnit, worker: str, unit_id: int, best: str = "A", worst: str = "C",
               **outputs) -> dict:
    """A results.jsonl line as the runner writes it for a best-worst page."""
    line = fake_result(unit, worker, "job-bws", unit_id, study="bws")
    line["outputs"] = {"best_worst": [{"item_id": item["item_id"], "seconds": 3.0,
                                       "best": {c: best for c in CRITERIA}, "worst": {c: worst for c in CRITERIA}}
                                      for item in unit.payload["items"]], **outputs}
    return line


def write_results(job_dir, *lines) -> None:
    (job_dir / contract.RESULTS_FILE).write_text("".join(json.dumps(line) + "\n" for line in lines))


def test_a_best_worst_jobs_listing_asks_for_best_and_worst_and_its_units_carry_their_controls(crowd_dir, bws_store):
    job_dir, _ = jobs.create_job(bws_store, "bws", provider="mock")
    job = contract.read_job(job_dir)
    assert (job.title, job.description, job.tags) == (LISTING["title"], LISTING["description"], LISTING["tags"])
    units = contract.read_items(job_dir)
    controls = 0
    for unit in units.values():
        placed = tuple_placements(bws_store, unit.assignment_id)
        assert unit.context_ids == sorted({p.context_id for p in placed})
        expected = [contract.Control(item_id=p.tuple_item_id, target=p.control_target, rule="one-of",
                                     entries="best_worst", field="worst", passing=(p.letter_of(p.control_system),))
                    for p in placed if p.is_control]
        assert sorted(unit.controls, key=lambda c: c.item_id) == sorted(expected, key=lambda c: c.item_id)
        controls += len(expected)
    assert controls
    assert {c.passing[0] for u in units.values() for c in u.controls} <= {"A", "B", "C"}


def test_a_control_tuple_passes_when_its_control_is_marked_worst_on_its_target():
    controls = [contract.Control(item_id=1, target="empathy", rule="one-of", entries="best_worst", field="worst",
                                 passing=("B",)),
                contract.Control(item_id=2, target="fluency", rule="one-of", entries="best_worst", field="worst",
                                 passing=("A",))]
    outputs = {"best_worst": [{"item_id": 1, "best": {"empathy": "A"}, "worst": {"empathy": "B"}},
                              {"item_id": 2, "best": {"fluency": "A"}, "worst": {"fluency": "C"}}]}
    assert contract.control_outcomes(outputs, controls) == {1: True, 2: False}
    assert contract.score_controls(outputs, controls) == contract.ControlScore(n=2, passed=1)


def test_ingest_stores_a_best_worst_results_picks_once_and_refuses_a_bad_one_whole(crowd_dir, bws_store):
    job_dir, _ = jobs.create_job(bws_store, "bws", provider="mock")
    first, second = list(contract.read_items(job_dir).values())[:2]
    same_letter = bws_result(second, "w2", 2, best="B", worst="B")
    write_results(job_dir, bws_result(first, "w1", 1, comment="fine"), same_letter)
    report = ingest(bws_store, job_dir)
    assert report.counts["stored"] == 1 and report.counts["invalid"] == 1, report.problems
    assert "'B' as both the best and the worst" in report.problems[0]
    placed = tuple_placements(bws_store, first.assignment_id)
    assert stored_picks(bws_store, first.assignment_id) == {(p.tuple_item_id, c): (p.systems[0], p.systems[2])
                                                            for p in placed for c in CRITERIA}
    with Session(bws_store) as session:
        assert session.get_one(Assignment, first.assignment_id).status == "submitted"
        assert session.get_one(Assignment, second.assignment_id).status == "open"
    again = ingest(bws_store, job_dir)
    assert again.counts["already"] == 1
    with Session(bws_store) as session:
        assert session.scalar(select(func.count(BestWorstChoice.id))) == 3 * len(placed)


@pytest.mark.slow
def test_a_browser_worker_does_a_best_worst_unit_in_a_mephisto_mock_run_and_her_picks_land_in_sql(
        crowd_python, crowd_dir, bws_store):
    port = free_port()
    result = empeval("crowd", "launch", "bws", "--provider", "mock", "--units", "1", "--port", str(port),
                     "--timeout", "240", "--no-onboarding")
    assert result.exit_code == 0, result.output
    job_dir = next(crowd_dir.glob("bws/*/"))
    (unit,) = contract.read_items(job_dir).values()
    keys = ("C", "A", "B", "C", "A", "B")  # per tuple: empathy best C, worst A; relevance B, C; fluency A, B
    try:
        wait_until(lambda: jobs.read_status(job_dir).state == contract.RUNNING, 120, "the run to go live")
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/task_config.json", timeout=30) as answer:
            served = json.loads(answer.read())
        assert (served["preview_title"], served["preview_text"]) == (LISTING["title"], LISTING["description"])
        with chromium_page() as page:
            page.goto(f"http://127.0.0.1:{port}/?worker_id=w1&assignment_id=a1")
            assert wait_for_task_or_block(page) == "task"
            shown = do_unit(page, scores=lambda i: keys, comment="clear tuples")
        assert sorted(shown) == sorted(item["item_id"] for item in unit.payload["items"])
        wait_until(lambda: len(contract.read_results(job_dir / contract.RESULTS_FILE)) == 1, 30, "the result line")
        final = wait_until(lambda: (s := jobs.read_status(job_dir)).state in jobs.ENDED and s, 90,
                           "the run to end by itself")
    finally:
        if jobs.read_status(job_dir).live:
            jobs.stop(job_dir, wait=30)
    assert final.state == "completed" and final.units_done == 1
    ingested = empeval("crowd", "ingest", "bws")
    assert "1 results: 1 stored" in ingested.output, ingested.output
    placed = tuple_placements(bws_store, unit.assignment_id)
    letters = dict(zip(CRITERIA, zip(keys[::2], keys[1::2], strict=True), strict=True))
    assert stored_picks(bws_store, unit.assignment_id) == {
        (p.tuple_item_id, c): (p.systems["ABC".index(best)], p.systems["ABC".index(worst)])
        for p in placed for c, (best, worst) in letters.items()}
    with Session(bws_store) as session:
        assert session.get_one(Assignment, unit.assignment_id).comment == "clear tuples"
        assert session.scalar(select(func.count()).select_from(AssignmentTuple).join(TupleItem)
                              .where(AssignmentTuple.assignment_id == unit.assignment_id,
                                     AssignmentTuple.seconds_on_item.is_not(None))) == len(placed)
    controls = [p for p in placed if p.is_control]
    passed = sum(letters[p.control_target][1] == p.letter_of(p.control_system) for p in controls)
    (record,) = contract.read_results(job_dir / contract.RESULTS_FILE).records
    assert controls and record.controls == contract.ControlScore(n=len(controls), passed=passed)
    assert leftovers() == []
