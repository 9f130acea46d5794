"""What the prepared statements of the hot path (server.annotation.hot_sql) must keep from the ORM path they
replaced: moments stored exactly as SQLAlchemy stores them (SQLite compares them as text), a study's
configuration never read stale from the parse cache, and payloads that their callers may change freely."""
from __future__ import annotations

import dataclasses
import re
from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import DateTime, create_engine, event, func, select
from sqlalchemy.orm import Session

from empeval.server.annotation import hot_sql
from empeval.server.annotation.annotators import invite
from empeval.server.annotation.handout import expire_overdue, next_assignment_payload
from empeval.server.annotation.kinds import annotation_kind
from empeval.server.annotation.submission import submit_assignment
from empeval.server.store.engine import unit_of_work
from empeval.server.store.kinds.likert import Rating
from empeval.server.store.models import Assignment, Response, SeenContext, Study
from empeval.server.store.queries import as_utc
from tests.annotation.conftest import SYSTEMS, add_responses, make_study, new_submission_id

MOMENTS = [datetime(2026, 3, 1, 9, 5, 7, 123456, tzinfo=UTC), datetime(2026, 3, 1, 9, 5, 7, tzinfo=UTC),
           datetime(999, 1, 2, 3, 4, 5, 6, tzinfo=UTC)]


@pytest.mark.parametrize("value", MOMENTS, ids=["microseconds", "whole-second", "year-999"])
def test_a_moment_goes_into_sqlite_as_the_text_sqlalchemy_writes_and_comes_back_the_same(tmp_path, value):
    engine = create_engine(f"sqlite:///{tmp_path / 'moments.db'}")
    written_by_sqlalchemy = DateTime(timezone=True).dialect_impl(engine.dialect).bind_processor(engine.dialect)
    with engine.connect() as connection:
        assert hot_sql.moment(connection, value) == written_by_sqlalchemy(value)
        assert hot_sql.moment(connection, None) is None
        assert as_utc(hot_sql.read_moment(hot_sql.moment(connection, value))) == value
    assert hot_sql.read_moment(value) is value and hot_sql.read_moment(None) is None


def test_a_claim_and_a_submit_store_moments_the_orm_reads_and_compares_as_the_same_instants(study_engine):
    rater, _ = invite(study_engine, "mona", "pilot")
    start = datetime(2026, 3, 1, 9, 0, 0, 250000, tzinfo=UTC)
    payload = next_assignment_payload(study_engine, "pilot", rater.id, now=start)
    assert payload["expires_at"] == (start + timedelta(minutes=30)).isoformat()
    with Session(study_engine) as session:
        claimed = session.get_one(Assignment, payload["assignment_id"])
        assert (as_utc(claimed.started_at), as_utc(claimed.expires_at)) == (start, start + timedelta(minutes=30))
    with unit_of_work(study_engine) as session:  # the ORM's comparison with what the hot path stored
        assert expire_overdue(session, claimed.study_id, start + timedelta(minutes=30)) == 0
    late = start + timedelta(minutes=30, microseconds=1)
    ratings = [{"item_id": item["item_id"], "scores": {"empathy": 3, "relevance": 3, "fluency": 3}}
               for item in payload["items"]]
    receipt = submit_assignment(study_engine, payload["assignment_id"], rater.id,
                                {"submission_id": new_submission_id(), "ratings": ratings}, now=late)
    assert receipt["late"] is True and receipt["submitted_at"] == late.isoformat()
    with Session(study_engine) as session:
        stored = session.scalars(select(Rating.submitted_at).where(Rating.assignment_id == payload["assignment_id"]))
        assert {as_utc(moment) for moment in stored} == {late}


def test_a_changed_study_configuration_is_read_fresh_by_the_next_hand_out(study_engine):
    rater, _ = invite(study_engine, "nils", "pilot")
    first = next_assignment_payload(study_engine, "pilot", rater.id)
    with unit_of_work(study_engine) as session:
        study = session.scalar(select(Study).where(Study.name == "pilot"))
        study.config = dataclasses.replace(study.config, title="Rate these replies, second edition")
    resumed = next_assignment_payload(study_engine, "pilot", rater.id)
    assert first["assignment_id"] == resumed["assignment_id"]
    assert first["study"]["title"] != resumed["study"]["title"] == "Rate these replies, second edition"


def test_a_payload_changed_by_its_caller_leaves_the_next_one_as_it_was(study_engine):
    rater, _ = invite(study_engine, "olga", "pilot")
    first = next_assignment_payload(study_engine, "pilot", rater.id)
    untouched = next_assignment_payload(study_engine, "pilot", rater.id)
    first["criteria"][0]["label"] = "changed"
    first["criteria"].append({"key": "extra"})
    first["scale"]["labels"].append("six")
    first["scale"]["max"] = 6
    assert next_assignment_payload(study_engine, "pilot", rater.id) == untouched


def _rate(engine, study: str, rater_id: int, assignments: int) -> None:
    """The rater claims and rates `assignments` assignments of `study`, one after the other."""
    for _ in range(assignments):
        payload = next_assignment_payload(engine, study, rater_id)
        ratings = [{"item_id": item["item_id"], "scores": {"empathy": 3, "relevance": 3, "fluency": 3}}
                   for item in payload["items"]]
        submit_assignment(engine, payload["assignment_id"], rater_id,
                          {"submission_id": new_submission_id(), "ratings": ratings})


def _plan_nodes(node: dict) -> list[dict]:
    """Every node of a PostgreSQL JSON plan, depth first."""
    return [node] + [below for child in node.get("Plans", []) for below in _plan_nodes(child)]


def test_the_seen_check_runs_per_candidate_however_much_the_rater_has_seen(sample_engine):
    """The candidate choice walks the open assignments in design order and checks each one's contexts against her
    seen rows, stopping at the first that fits. PostgreSQL, left to itself, turned that NOT EXISTS into an
    anti-join planned from her seen rows outwards (every item of every response of every context she had seen, per
    claim), so a claim cost more the more she had rated: 12-15 submissions/s under 32 raters."""
    add_responses(sample_engine, SYSTEMS, 120)
    make_study(sample_engine, name="history", count=120, k=3, per_assignment=5, controls=[])
    rater, _ = invite(sample_engine, "hanna", "history")
    _rate(sample_engine, "history", rater.id, 12)  # a rater with history: 12 assignments, up to 60 contexts seen
    with Session(sample_engine) as session:
        study_id = session.scalar(select(Study.id).where(Study.name == "history"))
    sqlite_sql, postgresql_sql = hot_sql.first_fitting_sql(annotation_kind("likert"))
    parameters = {"study": study_id, "annotator": rater.id}
    with sample_engine.connect() as connection:
        if sample_engine.dialect.name == "postgresql":
            connection.exec_driver_sql("ANALYZE")
            sql = hot_sql._pyformat(postgresql_sql)
            plan = connection.exec_driver_sql("EXPLAIN (FORMAT JSON) " + sql, parameters).scalar()[0]["Plan"]
            nodes = _plan_nodes(plan)
            assert not [n for n in nodes if n.get("Join Type") == "Anti"], "the seen check became an anti-join"
            walk = [n for n in nodes if n.get("Index Name") == "ix_assignment_study_status_order"]
            assert walk and "SubPlan" in walk[0].get("Filter", ""), plan
        else:
            steps = [row[3] for row in connection.exec_driver_sql("EXPLAIN QUERY PLAN " + sqlite_sql, parameters)]
            assert any("ix_assignment_study_status_order" in step for step in steps), steps
            assert any("CORRELATED" in step for step in steps), steps
            assert not any(step.startswith("SCAN seen_context") for step in steps), steps


def _numbered(sql: str) -> tuple[str, list[str]]:
    """`sql` with its :name parameters as PostgreSQL's $1, $2... (for PREPARE), and the names in that order."""
    names: list[str] = []

    def number(match: re.Match) -> str:
        if match.group(1) not in names:
            names.append(match.group(1))
        return f"${names.index(match.group(1)) + 1}"

    return re.sub(r"(?<![:\w]):(\w+)", number, sql), names


def test_the_seen_check_probes_one_context_at_a_time_whatever_the_statistics_say(sample_engine):
    """Statistics taken while seen_context was empty (a new study, until autovacuum analyzes it again) made
    PostgreSQL plan the seen check from her seen rows outwards, re-reading the candidate's items for each of them:
    under 32 raters a claim read 140,000 buffers and took 13 ms. The check is written as one probe per context of
    the candidate, by seen_context's unique key, which no plan can turn around: with stale statistics, as a
    prepared statement's generic or custom plan, every read of seen_context is by context."""
    add_responses(sample_engine, SYSTEMS, 120)
    make_study(sample_engine, name="stale", count=120, k=3, per_assignment=5, controls=[])
    with sample_engine.connect() as connection:
        if sample_engine.dialect.name == "postgresql":
            connection.exec_driver_sql("ANALYZE")  # seen_context is empty: the statistics say so from now on
    rater, _ = invite(sample_engine, "hanna", "stale")
    others = [invite(sample_engine, f"other-{i}", "stale")[0].id for i in range(40)]
    with Session(sample_engine) as session:
        study_id = session.scalar(select(Study.id).where(Study.name == "stale"))
        first_assignment = session.scalar(select(func.min(Assignment.id)))
        contexts = session.scalars(select(Response.context_id).distinct()).all()
    with unit_of_work(sample_engine) as session:  # 40 raters who have seen every context: a table of many pages
        session.add_all(SeenContext(study_id=study_id, annotator_id=other, context_id=context,
                                    assignment_id=first_assignment, seen_at=datetime.now(UTC))
                        for other in others for context in contexts)
    _rate(sample_engine, "stale", rater.id, 12)  # and her history: 12 assignments, up to 60 contexts
    sqlite_sql, postgresql_sql = hot_sql.first_fitting_sql(annotation_kind("likert"))
    values = {"study": study_id, "annotator": rater.id}
    with sample_engine.connect() as connection:
        if sample_engine.dialect.name != "postgresql":
            steps = [row[3] for row in connection.exec_driver_sql("EXPLAIN QUERY PLAN " + sqlite_sql, values)]
            seen = [step for step in steps if "seen_context" in step]
            assert seen and all(step.startswith("SEARCH") and "context_id=?" in step for step in seen), steps
            return
        numbered, names = _numbered(postgresql_sql)
        connection.exec_driver_sql(f"PREPARE choice ({', '.join('integer' for _ in names)}) AS {numbered}")
        arguments = ", ".join(str(values[name]) for name in names)
        for plan_mode in ("auto", "force_generic_plan", "force_custom_plan"):
            connection.exec_driver_sql(f"SET plan_cache_mode = {plan_mode}")
            plan = connection.exec_driver_sql(f"EXPLAIN (FORMAT JSON) EXECUTE choice ({arguments})").scalar()[0]["Plan"]
            seen = [node for node in _plan_nodes(plan) if node.get("Relation Name") == "seen_context"]
            assert seen and all("context_id" in node.get("Index Cond", "") for node in seen), (plan_mode, seen)


def test_a_claim_a_resume_and_a_submit_each_take_one_connection_from_the_pool(study_engine):
    # Each read and write of a request used to take its own connection (three for a claim), and a checkout and
    # its check-in (with the pool's rollback) cost about as much CPU as a statement.
    rater, _ = invite(study_engine, "olga", "pilot")
    checkouts: list[object] = []
    record = lambda *_args: checkouts.append(object())  # noqa: E731
    event.listen(study_engine, "checkout", record)
    try:
        taken = []
        for _ in range(2):  # a claim, then a resume of the same assignment
            checkouts.clear()
            payload = next_assignment_payload(study_engine, "pilot", rater.id)
            taken.append(len(checkouts))
        ratings = [{"item_id": item["item_id"], "scores": {"empathy": 4, "relevance": 4, "fluency": 4}}
                   for item in payload["items"]]
        checkouts.clear()
        receipt = submit_assignment(study_engine, payload["assignment_id"], rater.id,
                                    {"submission_id": new_submission_id(), "ratings": ratings}, study="pilot")
        taken.append(len(checkouts))
    finally:
        event.remove(study_engine, "checkout", record)
    assert receipt["status"] == "stored" and taken == [1, 1, 1]
