"""A pairwise (A/B) study on the crowd, without Mephisto: its job's units carry the contexts of their pairs and
their control pairs with the label the control is shown under, its HIT text asks for choices, and ingest stores a
result's judgments as choices (idempotently), refuses a bad one whole, and refuses a context the worker was shown
in the Likert study it is linked to."""
from __future__ import annotations

import json

import pytest
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from empeval.server.store.kinds.pairwise import AssignmentPair, Choice, PairItem
from empeval.server.store.models import Assignment
from empeval.tasks.crowd import contract, jobs
from empeval.tasks.crowd.ingest import ingest
from empeval.tasks.kinds.pairwise import LISTING
from empeval.tasks.study_create import create_study
from empeval.tasks.study_file import parse_study
from tests.crowd.conftest import fake_result


@pytest.fixture
def ab_store(crowd_store):
    """Beside the Likert study `pilot`: `ab`, A/B on the same 4 contexts (same seed and count), no ties, one control
    pair per assignment, compare_with = pilot."""
    create_study(crowd_store, parse_study({
        "name": "ab", "kind": "pairwise", "seed": 3, "compare_with": "pilot",
        "contexts": {"split": "test", "count": 4},
        "systems": {"names": ["sys-a", "sys-b"], "controls": ["control-generic"]},
        "design": {"judgments_per_pair": 2, "items_per_assignment": 3, "control_rate": 0.34, "ties": False,
                   "assignment_minutes": 30},
        "pay": {"per_assignment": 0.5, "currency": "USD"}}))
    return crowd_store


def ab_result(unit: contract.CrowdUnit, worker: str, unit_id: int, choice: str = "A", **outputs) -> dict:
    """A results.jsonl line as the runner writes it for a pairwise page: one choice per pair and criterion."""
    line = fake_result(unit, worker, "job-ab", unit_id, study="ab")
    line["outputs"] = {"judgments": [{"item_id": item["item_id"], "seconds": 3.0,
                                      "choices": {c: choice for c in ("empathy", "relevance", "fluency")}}
                                     for item in unit.payload["items"]], **outputs}
    return line


def write_results(job_dir, *lines) -> None:
    (job_dir / contract.RESULTS_FILE).write_text("".join(json.dumps(line) + "\n" for line in lines))


def choices_of(engine, assignment_id: int) -> list[tuple[int, str, str]]:
    with Session(engine) as session:
        return sorted(session.execute(select(Choice.pair_item_id, Choice.criterion, Choice.choice)
                                      .where(Choice.assignment_id == assignment_id)).all())


def test_a_pairwise_jobs_units_carry_their_pairs_contexts_and_controls_and_its_text_asks_for_choices(
        crowd_dir, ab_store):
    job_dir, _ = jobs.create_job(ab_store, "ab", provider="mock")
    job = contract.read_job(job_dir)
    assert (job.title, job.description) == (LISTING["title"], LISTING["description"])
    assert "rate" not in job.description.lower() and "1-5" not in job.description
    units = contract.read_items(job_dir)
    controls = 0
    with Session(ab_store) as session:
        for unit in units.values():
            rows = session.execute(
                select(PairItem.id, PairItem.context_id, PairItem.is_control, PairItem.control_target,
                       PairItem.control_side, AssignmentPair.shown_left)
                .join(AssignmentPair, AssignmentPair.pair_item_id == PairItem.id)
                .where(AssignmentPair.assignment_id == unit.assignment_id)).all()
            assert unit.context_ids == sorted({row.context_id for row in rows}) and unit.context_ids
            # Passes when the real response is chosen: B when the control is shown as A (left), else A.
            expected = [contract.Control(item_id=row.id, target=row.control_target, rule="one-of",
                                         entries="judgments", field="choices",
                                         passing=("B",) if row.control_side == row.shown_left else ("A",))
                        for row in rows if row.is_control]
            assert sorted(unit.controls, key=lambda c: c.item_id) == expected
            controls += len(expected)
    assert controls  # the study has control pairs, shown on both sides over the job
    assert {c.passing for u in units.values() for c in u.controls} == {("A",), ("B",)}


def test_ingest_stores_a_pairwise_results_judgments_as_choices_once(crowd_dir, ab_store):
    job_dir, _ = jobs.create_job(ab_store, "ab", provider="mock")
    unit = next(iter(contract.read_items(job_dir).values()))
    write_results(job_dir, ab_result(unit, "w1", 1, "B", comment="fine"))
    report = ingest(ab_store, job_dir)
    assert report.counts["stored"] == 1, report.problems
    pairs = [item["item_id"] for item in unit.payload["items"]]
    assert choices_of(ab_store, unit.assignment_id) == sorted(
        (p, c, "right") for p in pairs for c in ("empathy", "relevance", "fluency"))
    with Session(ab_store) as session:
        assert session.get_one(Assignment, unit.assignment_id).status == "submitted"
    again = ingest(ab_store, job_dir)
    assert again.counts["already"] == 1 and again.rejected == 0
    with Session(ab_store) as session:
        assert session.scalar(select(func.count(Choice.id))) == len(pairs) * 3


def test_a_pairwise_result_the_study_refuses_is_reported_and_claims_nothing(crowd_dir, ab_store):
    job_dir, _ = jobs.create_job(ab_store, "ab", provider="mock")
    first, second = list(contract.read_items(job_dir).values())[:2]
    ratings_instead = fake_result(second, "w2", "job-ab", 2, study="ab")  # a Likert page's outputs
    write_results(job_dir, ab_result(first, "w1", 1, "T"), ratings_instead)
    report = ingest(ab_store, job_dir)
    assert report.counts["invalid"] == 2 and report.counts["stored"] == 0
    assert "'T' (tie)" in report.problems[0] and "not allowed" in report.problems[0]
    assert "judgments must be a list" in report.problems[1]
    with Session(ab_store) as session:
        assert {session.get_one(Assignment, u.assignment_id).status for u in (first, second)} == {"open"}


def test_a_worker_shown_a_context_in_the_linked_likert_study_is_refused_it_in_the_ab_study(crowd_dir, ab_store):
    likert_dir, _ = jobs.create_job(ab_store, "pilot", provider="mock")
    likert_unit = next(iter(contract.read_items(likert_dir).values()))
    write_results(likert_dir, fake_result(likert_unit, "w1", "job-likert", 1))
    assert ingest(ab_store, likert_dir).counts["stored"] == 1
    ab_dir, _ = jobs.create_job(ab_store, "ab", provider="mock")
    units = list(contract.read_items(ab_dir).values())
    shared = next(u for u in units if set(u.context_ids) & set(likert_unit.context_ids))
    write_results(ab_dir, ab_result(shared, "w1", 1), ab_result(shared, "w2", 2))
    report = ingest(ab_store, ab_dir)
    assert report.counts["seen context"] == 1 and report.counts["stored"] == 1, report.problems
    assert f"(in assignment {likert_unit.assignment_id})" in report.problems[0]


def test_a_crowd_job_knows_what_each_worker_saw_in_the_linked_studys_jobs(crowd_dir, ab_store):
    # The runner keeps a worker from a unit whose context she judged in an earlier job of the study, or of a
    # study linked to it either way (ingest would refuse that work: it would be paid for and lost).
    likert_dir, _ = jobs.create_job(ab_store, "pilot", provider="mock")
    likert_unit = next(iter(contract.read_items(likert_dir).values()))
    write_results(likert_dir, fake_result(likert_unit, "w1", "job-likert", 1))
    ab_dir, _ = jobs.create_job(ab_store, "ab", provider="mock")
    assert contract.read_job(ab_dir).seen_contexts == {"w1": sorted(likert_unit.context_ids)}
    ab_unit = next(iter(contract.read_items(ab_dir).values()))
    write_results(ab_dir, ab_result(ab_unit, "w2", 1))
    again, _ = jobs.create_job(ab_store, "pilot", provider="mock")  # and the other way: pilot is named by ab
    assert contract.read_job(again).seen_contexts == {"w1": sorted(likert_unit.context_ids),
                                                      "w2": sorted(ab_unit.context_ids)}


def test_pairwise_controls_are_scored_as_the_analysis_scores_them():
    def control(item_id, target, real):  # a control pair whose real response is shown as `real`
        return contract.Control(item_id=item_id, target=target, rule="one-of", entries="judgments", field="choices",
                                passing=(real,))

    controls = [control(1, "empathy", "B"), control(2, "empathy", "A"), control(3, "fluency", "B")]
    outputs = {"judgments": [{"item_id": 1, "choices": {"empathy": "B", "fluency": "A"}},  # the real one: passed
                             {"item_id": 2, "choices": {"empathy": "B"}},  # the control: failed
                             {"item_id": 3, "choices": {"fluency": "T"}}]}  # a tie: failed
    assert contract.control_outcomes(outputs, controls) == {1: True, 2: False, 3: False}
    assert contract.score_controls(outputs, controls) == contract.ControlScore(n=3, passed=1)
    assert not contract.score_controls(outputs, controls).ok(min_pass_rate=0.5)
