"""Crowd ingest claims through hand-out's claim, so it writes the same seen-context rows: a record for a context
the worker was already shown in the study is rejected and reported, never stored, even when the pre-check is
raced. Records of a closed study or a revoked worker are refused the same way."""
from __future__ import annotations

import json

import pytest
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from empeval.server.annotation.annotators import revoke
from empeval.server.annotation.handout import close_study
from empeval.server.errors import Conflict
from empeval.server.store.kinds.likert import AssignmentItem, Rating, StudyItem
from empeval.server.store.models import Annotator, Assignment, Response, SeenContext
from empeval.tasks.crowd import contract, jobs
from empeval.tasks.crowd import ingest as ingest_module
from empeval.tasks.crowd.ingest import ingest
from tests.crowd.conftest import fake_result


def contexts_of(engine, assignment_id: int) -> set[int]:
    with Session(engine) as session:
        return set(session.scalars(
            select(Response.context_id).join(StudyItem, StudyItem.response_id == Response.id)
            .join(AssignmentItem, AssignmentItem.item_id == StudyItem.id)
            .where(AssignmentItem.assignment_id == assignment_id)))


@pytest.fixture
def units(crowd_dir, crowd_store):
    """Units of the pilot study as a crowd job hands them out: (first, overlapping, another), where
    `overlapping` shares a context with `first` and `another` is a third unit."""
    job_dir, _cost = jobs.create_job(crowd_store, "pilot", provider="mock", units=4)
    every = list(contract.read_items(job_dir).values())
    first = every[0]
    overlapping = next(u for u in every[1:] if contexts_of(crowd_store, u.assignment_id)
                       & contexts_of(crowd_store, first.assignment_id))
    another = next(u for u in every[1:] if u != overlapping)
    return job_dir, first, overlapping, another


def write_results(job_dir, *records) -> str:
    path = job_dir / "results.jsonl"
    path.write_text("".join(json.dumps(record) + "\n" for record in records))
    return str(path)


def ratings_of(engine, assignment_id: int) -> int:
    with Session(engine) as session:
        return session.scalar(select(func.count(Rating.id)).where(Rating.assignment_id == assignment_id))


def held(engine, assignment_id: int) -> tuple[str, int | None]:
    with Session(engine) as session:
        assignment = session.get_one(Assignment, assignment_id)
        return assignment.status, assignment.annotator_id


def test_a_record_for_a_context_the_worker_was_already_shown_is_reported_and_never_stored(units, crowd_store):
    job_dir, first, overlapping, _ = units
    shared = sorted(contexts_of(crowd_store, first.assignment_id) & contexts_of(crowd_store, overlapping.assignment_id))
    path = write_results(job_dir, fake_result(first, "w1", "job-test-1", 1),
                         fake_result(overlapping, "w1", "job-test-1", 2))
    report = ingest(crowd_store, job_dir)
    assert report.counts["stored"] == 1 and report.counts["seen context"] == 1 and report.rejected == 1
    assert report.problems == [
        f"{path}:2: unit 2 (assignment {overlapping.assignment_id}): the worker was already shown "
        + ", ".join(f"context {c} (in assignment {first.assignment_id})" for c in shared)
        + " in study 'pilot'; a rater rates each context once per study"]
    assert "1 stored, 1 seen context" in report.describe()
    assert ratings_of(crowd_store, overlapping.assignment_id) == 0
    assert held(crowd_store, overlapping.assignment_id) == ("open", None)
    # Another worker may do it; re-ingesting stores nothing twice and reports the same line again.
    write_results(job_dir, fake_result(first, "w1", "job-test-1", 1), fake_result(overlapping, "w1", "job-test-1", 2),
                  fake_result(overlapping, "w2", "job-test-1", 3))
    again = ingest(crowd_store, job_dir)
    assert (again.counts["already"], again.counts["seen context"], again.counts["stored"]) == (1, 1, 1)


def test_when_the_pre_check_is_raced_the_database_refuses_the_claim_and_the_line_is_reported(units, crowd_store,
                                                                                            monkeypatch):
    job_dir, first, overlapping, _ = units
    real = ingest_module.contexts_seen_before
    calls = []

    def blind_first_time(*args):
        calls.append(args)
        return [] if len(calls) == 2 else real(*args)  # the second line's pre-check sees nothing

    monkeypatch.setattr(ingest_module, "contexts_seen_before", blind_first_time)
    write_results(job_dir, fake_result(first, "w1", "job-test-1", 1), fake_result(overlapping, "w1", "job-test-1", 2))
    report = ingest(crowd_store, job_dir)
    assert report.counts["stored"] == 1 and report.counts["seen context"] == 1, report.problems
    assert held(crowd_store, overlapping.assignment_id) == ("open", None)
    assert ratings_of(crowd_store, overlapping.assignment_id) == 0


def test_a_submission_that_fails_after_the_claim_takes_its_seen_rows_back_with_the_claim(units, crowd_store,
                                                                                        monkeypatch):
    job_dir, first, _, _ = units

    def refused(*args, **kwargs):
        raise Conflict("stored meanwhile by someone else")

    monkeypatch.setattr(ingest_module, "submit_assignment", refused)
    write_results(job_dir, fake_result(first, "w1", "job-test-1", 1))
    assert ingest(crowd_store, job_dir).counts["conflict"] == 1
    with Session(crowd_store) as session:
        assert session.scalar(select(func.count(SeenContext.id))) == 0


def test_a_closed_studys_records_are_refused_and_stored_ones_stay_already_stored(units, crowd_store):
    job_dir, first, _, another = units
    write_results(job_dir, fake_result(first, "w1", "job-test-1", 1))
    assert ingest(crowd_store, job_dir).counts["stored"] == 1
    close_study(crowd_store, "pilot")
    path = write_results(job_dir, fake_result(first, "w1", "job-test-1", 1),
                         fake_result(another, "w9", "job-test-1", 2))
    report = ingest(crowd_store, job_dir)
    assert report.counts["already"] == 1 and report.counts["refused"] == 1
    assert report.problems == [f"{path}:2: unit 2 (assignment {another.assignment_id}): study 'pilot' is closed and "
                               f"takes no more ratings"]
    assert held(crowd_store, another.assignment_id) == ("open", None)
    with Session(crowd_store) as session:
        assert session.scalar(select(func.count(Annotator.id)).where(Annotator.provider == "mock")) == 1


def test_a_revoked_workers_records_are_refused(units, crowd_store):
    job_dir, first, _, another = units
    write_results(job_dir, fake_result(first, "w1", "job-test-1", 1))
    assert ingest(crowd_store, job_dir).counts["stored"] == 1
    assert revoke(crowd_store, "w1", study="pilot", provider="mock").expired == 0
    path = write_results(job_dir, fake_result(another, "w1", "job-test-1", 2))
    report = ingest(crowd_store, job_dir)
    assert report.counts["refused"] == 1
    assert report.problems == [f"{path}:1: unit 2 (assignment {another.assignment_id}): the worker was revoked in "
                               f"study 'pilot'"]
    assert held(crowd_store, another.assignment_id) == ("open", None)
