"""Ingesting results.jsonl into the store: idempotent, every line checked before its assignment is claimed,
every rejected line reported as `file:line: reason`, and `crowd ingest` failing (exit 2) when any was."""
from __future__ import annotations

import json

import pytest
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from empeval.server.annotation.annotators import get_or_create_annotator, pseudonym_for
from empeval.server.annotation.handout import assignment_kind, claim
from empeval.server.errors import Conflict
from empeval.server.store.engine import unit_of_work
from empeval.server.store.kinds.likert import Rating
from empeval.server.store.models import Annotator, Assignment, Study
from empeval.server.store.queries import now_utc
from empeval.tasks.crowd import contract, jobs
from empeval.tasks.crowd import ingest as ingest_module
from empeval.tasks.crowd.ingest import ingest
from tests.annotation.conftest import make_study
from tests.crowd.conftest import empeval, fake_result


@pytest.fixture
def mock_job(crowd_dir, crowd_store):
    job_dir, cost = jobs.create_job(crowd_store, "pilot", provider="mock", units=2)
    return job_dir, list(contract.read_items(job_dir).values())


def write_results(job_dir, *records) -> str:
    path = job_dir / "results.jsonl"
    path.write_text("".join(json.dumps(record) + "\n" for record in records))
    return str(path)


def rating_count(engine) -> int:
    with Session(engine) as session:
        return session.scalar(select(func.count(Rating.id)))


def assignment(engine, assignment_id) -> Assignment:
    with Session(engine) as session:
        return session.get(Assignment, assignment_id)


def mock_annotators(engine) -> list[str]:
    with Session(engine) as session:
        return list(session.scalars(select(Annotator.pseudonym).where(Annotator.provider == "mock")))


def test_reingesting_the_same_results_never_duplicates_a_rating(mock_job, crowd_store):
    job_dir, units = mock_job
    write_results(job_dir, fake_result(units[0], "w1", "job-test-1", 1), fake_result(units[1], "w2", "job-test-1", 2))
    first = ingest(crowd_store, job_dir)
    second = ingest(crowd_store, job_dir)
    assert first.counts["stored"] == 2 and second.counts["already"] == 2 and not second.counts["stored"]
    assert first.rejected == second.rejected == 0
    assert rating_count(crowd_store) == 2 * 3 * 3
    pseudonyms = mock_annotators(crowd_store)
    assert sorted(p[:5] for p in pseudonyms) == ["mock-", "mock-"] and not {"w1", "w2"} & set(pseudonyms)
    assert {assignment(crowd_store, u.assignment_id).expires_at for u in units} == {None}  # crowd: no local deadline


def test_a_line_cut_short_by_a_crash_is_left_out_and_said_so_but_not_rejected(mock_job, crowd_store):
    job_dir, units = mock_job
    whole = json.dumps(fake_result(units[0], "w1", "job-test-1", 1)) + "\n"
    torn = json.dumps(fake_result(units[1], "w2", "job-test-1", 2))[:50]
    (job_dir / "results.jsonl").write_text(whole + torn)
    report = ingest(crowd_store, job_dir)
    assert report.counts["stored"] == 1 and report.rejected == 0 and report.problems == []
    assert "1 results: 1 stored (an unfinished last line" in report.describe()


def test_work_on_an_assignment_someone_else_holds_is_reported_not_stored(mock_job, crowd_store):
    job_dir, units = mock_job
    with unit_of_work(crowd_store) as session:
        session.get(Assignment, units[0].assignment_id).status = "submitted"
    path = write_results(job_dir, fake_result(units[0], "w1", "job-test-1", 1))
    report = ingest(crowd_store, job_dir)
    assert report.counts["conflict"] == 1 and report.rejected == 1
    assert report.problems[0].startswith(f"{path}:1: unit 1 (assignment {units[0].assignment_id}): assignment ")
    assert "for another annotator" in report.problems[0]


def test_a_score_outside_the_scale_is_rejected_before_the_assignment_is_claimed(mock_job, crowd_store):
    job_dir, units = mock_job
    path = write_results(job_dir, fake_result(units[0], "w1", "job-test-1", 1, score=9))
    report = ingest(crowd_store, job_dir)
    assert report.counts["invalid"] == 1
    assert report.problems[0].startswith(f"{path}:1: unit 1 (assignment {units[0].assignment_id}): ratings[0]: "
                                         f"empathy score 9 for item ")
    held = assignment(crowd_store, units[0].assignment_id)
    assert (held.status, held.annotator_id) == ("open", None)
    assert mock_annotators(crowd_store) == [] and rating_count(crowd_store) == 0


def test_an_item_not_in_the_assignment_is_rejected_before_the_assignment_is_claimed(mock_job, crowd_store):
    job_dir, units = mock_job
    record = fake_result(units[0], "w1", "job-test-1", 1)
    record["outputs"]["ratings"][0]["item_id"] = 987654
    path = write_results(job_dir, record)
    report = ingest(crowd_store, job_dir)
    assert report.counts["invalid"] == 1
    assert report.problems == [f"{path}:1: unit 1 (assignment {units[0].assignment_id}): ratings[0]: item 987654 is "
                               f"not part of this assignment"]
    assert assignment(crowd_store, units[0].assignment_id).status == "open"


def test_a_result_of_another_study_is_refused(mock_job, crowd_store):
    job_dir, units = mock_job
    make_study(crowd_store, name="second", count=4, k=1, per_assignment=3, systems=["sys-a", "sys-b"], controls=[])
    with Session(crowd_store) as session:
        foreign_assignment = session.scalar(select(Assignment.id).join(Study, Study.id == Assignment.study_id)
                                            .where(Study.name == "second").limit(1))
    says_other = fake_result(units[0], "w1", "job-test-1", 1, study="second")
    lies_about_it = {**fake_result(units[1], "w2", "job-test-1", 2), "assignment_id": foreign_assignment}
    path = write_results(job_dir, says_other, lies_about_it)
    report = ingest(crowd_store, job_dir)
    assert report.counts["other study"] == 1 and report.counts["invalid"] == 1 and not report.counts["stored"]
    assert report.problems == [
        f"{path}:1: unit 1 (assignment {units[0].assignment_id}) is a result of study 'second', not of this job's "
        f"study 'pilot'",
        f"{path}:2: unit 2 (assignment {foreign_assignment}): assignment {foreign_assignment} is not one of study "
        f"'pilot''s"]
    assert assignment(crowd_store, foreign_assignment).status == "open"


def test_a_record_missing_its_assignment_or_worker_or_with_a_non_integer_id_is_reported_not_a_crash(
        mock_job, crowd_store):
    job_dir, units = mock_job
    no_assignment = fake_result(units[0], "w1", "job-test-1", 1)
    del no_assignment["assignment_id"]
    no_worker = fake_result(units[0], "w1", "job-test-1", 3)
    del no_worker["worker_name"]
    text_id = {**fake_result(units[0], "w1", "job-test-1", 4), "assignment_id": str(units[0].assignment_id)}
    path = write_results(job_dir, no_assignment, no_worker, text_id, fake_result(units[1], "w2", "job-test-1", 2))
    report = ingest(crowd_store, job_dir)
    assert report.lines == 4 and report.counts["stored"] == 1 and report.counts["invalid"] == 3
    assert report.problems == [f"{path}:1: assignment_id: is required", f"{path}:2: worker_name: is required",
                               f"{path}:3: assignment_id: expected an integer, got '{units[0].assignment_id}'"]


@pytest.mark.parametrize("bad_id", [0, -1, 2**31, 2**70])
def test_an_assignment_id_the_store_cannot_hold_is_reported_as_not_of_the_study_not_a_crash(
        mock_job, crowd_store, bad_id):
    job_dir, units = mock_job
    record = {**fake_result(units[0], "w1", "job-test-1", 1), "assignment_id": bad_id}
    path = write_results(job_dir, record, fake_result(units[1], "w2", "job-test-1", 2))
    report = ingest(crowd_store, job_dir)
    assert report.counts["invalid"] == 1 and report.counts["stored"] == 1
    assert report.problems == [f"{path}:1: unit 1 (assignment {bad_id}): assignment {bad_id} is not one of study "
                               f"'pilot''s"]


def test_a_submission_id_stored_for_another_assignment_is_a_conflict_and_claims_nothing(mock_job, crowd_store):
    job_dir, units = mock_job
    first = fake_result(units[0], "w1", "job-test-1", 1)
    same_id = {**fake_result(units[1], "w2", "job-test-1", 2), "submission_id": first["submission_id"]}
    path = write_results(job_dir, first, same_id)
    report = ingest(crowd_store, job_dir)
    assert report.counts["stored"] == 1 and report.counts["conflict"] == 1
    assert report.problems == [f"{path}:2: unit 2 (assignment {units[1].assignment_id}): submission job-test-1.u1 is "
                               f"stored already, for assignment {units[0].assignment_id}"]
    assert assignment(crowd_store, units[1].assignment_id).status == "open"


def test_a_submission_that_fails_after_the_claim_gives_the_assignment_back(mock_job, crowd_store, monkeypatch):
    job_dir, units = mock_job

    def refused(*args, **kwargs):
        raise Conflict("stored meanwhile by someone else")

    monkeypatch.setattr(ingest_module, "submit_assignment", refused)
    write_results(job_dir, fake_result(units[0], "w1", "job-test-1", 1))
    report = ingest(crowd_store, job_dir)
    assert report.counts["conflict"] == 1 and "stored meanwhile by someone else" in report.problems[0]
    held = assignment(crowd_store, units[0].assignment_id)
    assert (held.status, held.annotator_id, held.started_at) == ("open", None, None)


def test_an_assignment_claimed_by_the_same_worker_before_a_crash_is_stored_on_the_next_ingest(mock_job, crowd_store):
    job_dir, units = mock_job
    from empeval.server.annotation.secrets import secret_key

    worker = get_or_create_annotator(crowd_store, "mock", pseudonym_for(secret_key(crowd_store), "mock", "w1"))
    with unit_of_work(crowd_store) as session:
        first = units[0].assignment_id
        assert claim(session, assignment_kind(session, first), first, worker.id, now=now_utc(), minutes=None)
    write_results(job_dir, fake_result(units[0], "w1", "job-test-1", 1))
    report = ingest(crowd_store, job_dir)
    assert report.counts["stored"] == 1 and report.rejected == 0
    assert assignment(crowd_store, units[0].assignment_id).annotator_id == worker.id


def test_crowd_ingest_lists_every_rejected_line_and_exits_2_after_storing_the_rest(mock_job, crowd_store, crowd_python):
    job_dir, units = mock_job
    path = job_dir / "results.jsonl"
    path.write_text(json.dumps(fake_result(units[0], "w1", "job-test-1", 1)) + "\n{broken\n"
                    + json.dumps(fake_result(units[1], "w2", "job-test-1", 2, score=0)) + "\n")
    result = empeval("crowd", "ingest", "pilot")
    assert result.exit_code == 2, result.output
    assert "3 results: 1 stored, 2 invalid" in result.output
    assert f"{path}:2: not valid JSON" in result.output
    assert f"{path}:3: unit 2 (assignment {units[1].assignment_id}): ratings[0]: empathy score 0" in result.output
    assert "2 of 3 result lines were rejected" in result.output
    assert rating_count(crowd_store) == 9

    path.write_text(json.dumps(fake_result(units[0], "w1", "job-test-1", 1)) + "\n")
    again = empeval("crowd", "ingest", "pilot")
    assert again.exit_code == 0 and "1 results: 1 already" in again.output
