"""The file contract between the app and the runner, and the rules around it, without starting Mephisto."""
from __future__ import annotations

import importlib.util
import json

import pytest
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from server.store.models import Annotator, Assignment, Rating
from tasks.crowd import jobs
from tasks.crowd.ingest import ingest
from tests.conftest import REPO
from tests.crowd.conftest import empeval

spec = importlib.util.spec_from_file_location("likert_runner", REPO / "tasks" / "likert" / "runner.py")
runner = importlib.util.module_from_spec(spec)
spec.loader.exec_module(runner)  # the runner's module level is standard library only


def fake_result(unit: dict, worker: str, job_id: str, unit_id: int, score: int = 3) -> dict:
    ratings = [{"item_id": item["item_id"], "scores": {"empathy": score, "relevance": score, "fluency": score},
                "seconds": 4.0} for item in unit["payload"]["items"]]
    return {"submission_id": f"{job_id}.u{unit_id}", "unit_id": unit_id, "assignment_id": unit["assignment_id"],
            "worker_name": worker, "outputs": {"ratings": ratings, "comment": "ok"},
            "controls": {"n": 0, "passed": 0}, "passed_controls": True}


@pytest.fixture
def mock_job(crowd_dir, crowd_store):
    job_dir, cost = jobs.create_job(crowd_store, "pilot", provider="mock", units=2)
    units = [json.loads(line) for line in (job_dir / "items.jsonl").read_text().splitlines()]
    return job_dir, units


def test_the_job_files_carry_each_unit_as_the_task_ui_expects_without_system_names(mock_job):
    job_dir, units = mock_job
    job = json.loads((job_dir / "job.json").read_text())
    assert job["provider"] == "mock" and job["onboarding"]["questions"]
    assert len(units) == 2
    for unit in units:
        assert unit["payload"]["assignment_id"] == unit["assignment_id"]
        assert len(unit["payload"]["items"]) == 3 and len(unit["controls"]) == 1
        assert all(set(item) == {"item_id", "position", "response", "context"} for item in unit["payload"]["items"])


def test_reingesting_the_same_results_never_duplicates_a_rating(mock_job, crowd_store):
    job_dir, units = mock_job
    lines = [fake_result(units[0], "w1", "job-test-1", 1), fake_result(units[1], "w2", "job-test-1", 2)]
    (job_dir / "results.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    first = ingest(crowd_store, job_dir, "mock")
    second = ingest(crowd_store, job_dir, "mock")
    assert first.counts["stored"] == 2 and second.counts["already"] == 2 and not second.counts["stored"]
    with Session(crowd_store) as session:
        assert session.scalar(select(func.count(Rating.id))) == 2 * 3 * 3
        pseudonyms = session.scalars(select(Annotator.pseudonym).where(Annotator.provider == "mock")).all()
    assert sorted(p[:5] for p in pseudonyms) == ["mock-", "mock-"] and not {"w1", "w2"} & set(pseudonyms)


def test_a_line_cut_short_by_a_crash_is_skipped_by_ingest_and_dropped_by_the_runner(mock_job, crowd_store):
    job_dir, units = mock_job
    whole = json.dumps(fake_result(units[0], "w1", "job-test-1", 1)) + "\n"
    torn = json.dumps(fake_result(units[1], "w2", "job-test-1", 2))[:50]
    (job_dir / "results.jsonl").write_text(whole + torn)
    assert ingest(crowd_store, job_dir, "mock").counts["stored"] == 1
    results = runner.ResultsFile(job_dir / "results.jsonl")
    assert len(results) == 1 and (job_dir / "results.jsonl").read_text() == whole
    assert results.append(fake_result(units[1], "w2", "job-test-1", 2)) and not results.append(fake_result(units[1], "w2", "job-test-1", 2))
    assert len((job_dir / "results.jsonl").read_text().splitlines()) == 2


def test_work_on_an_assignment_someone_else_holds_is_reported_not_stored(mock_job, crowd_store):
    job_dir, units = mock_job
    with Session(crowd_store) as session:
        session.get(Assignment, units[0]["assignment_id"]).status = "submitted"
        session.commit()
    (job_dir / "results.jsonl").write_text(json.dumps(fake_result(units[0], "w1", "job-test-1", 1)) + "\n")
    report = ingest(crowd_store, job_dir, "mock")
    assert report.counts["conflict"] == 1 and "another annotator" in report.problems[0]


def test_a_control_passes_when_scored_below_the_workers_real_items_on_its_criterion():
    controls = [{"item_id": 9, "target": "empathy"}]
    ratings = lambda control: {"ratings": [{"item_id": 1, "scores": {"empathy": 4}}, {"item_id": 2, "scores": {"empathy": 5}},
                                           {"item_id": 9, "scores": {"empathy": control}}]}
    assert runner.score_controls(ratings(1), controls, min_pass_rate=0.5) == {"n": 1, "passed": 1, "ok": True}
    assert runner.score_controls(ratings(5), controls, min_pass_rate=0.5) == {"n": 1, "passed": 0, "ok": False}
    assert runner.score_controls(ratings(5), [], min_pass_rate=0.5)["ok"]


def test_onboarding_needs_the_known_answers():
    onboarding = json.loads((REPO / "tasks" / "likert" / "onboarding.json").read_text())
    right = {q["key"]: q["answer"] for q in onboarding["questions"]}
    assert runner.onboarding_passed(right, onboarding)
    assert not runner.onboarding_passed({**right, "q1": "A"}, onboarding)


def test_live_mturk_prints_the_cost_and_launches_nothing_without_confirmation(crowd_dir, crowd_store, crowd_python):
    result = empeval("crowd", "launch", "pilot", "--provider", "mturk", "--public-url", "https://tasks.example.org",
                     "--aws-profile", "lab", input="n\n")
    assert "cost: 4 units x 0.50 USD reward + 20% fees = 2.40 USD" in result.output
    assert result.exit_code == 2 and "not launched" in result.output
    assert not list(crowd_dir.glob("pilot/*/"))


def test_mturk_without_a_public_url_is_refused_with_what_to_do(crowd_dir, crowd_store, crowd_python):
    result = empeval("crowd", "launch", "pilot", "--provider", "mturk_sandbox", "--aws-profile", "lab")
    assert result.exit_code == 2 and "public HTTPS URL" in result.output


def test_a_rejection_needs_a_reason_and_approved_work_cannot_be_rejected(mock_job):
    from tasks.crowd.review import check_actions

    job_dir, units = mock_job
    record = {**fake_result(units[0], "w1", "job-test-1", 1), "passed_controls": False}
    (job_dir / "results.jsonl").write_text(json.dumps(record) + "\n")
    with pytest.raises(jobs.CrowdError, match="reason"):
        check_actions(job_dir, [{"unit_id": "1", "action": "reject", "reason": "bad"}])
    (job_dir / "review.jsonl").write_text(json.dumps({"unit_id": "1", "action": "approve", "ok": True}) + "\n")
    with pytest.raises(jobs.CrowdError, match="approved already"):
        check_actions(job_dir, [{"unit_id": "1", "action": "reject", "reason": "Every item got the same score."}])
