"""A claim's walk starts after the rater's last claim (handout._claim_first_fitting): the same assignment as a walk
from the start whenever nothing was opened again behind her, the design-order first when her hint is stale, a
walk by index either way, and flat for a rater far ahead of the others."""
from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.orm import Session

from empeval.server.annotation import handout, hot_sql
from empeval.server.annotation.annotators import invite
from empeval.server.annotation.handout import next_assignment
from empeval.server.annotation.kinds import annotation_kind
from empeval.server.annotation.submission import submit_assignment
from empeval.server.store.kinds.likert import AssignmentItem
from empeval.server.store.models import Study
from tests.annotation.conftest import add_responses, make_study, new_submission_id

SYSTEMS3 = ["sys-a", "sys-b", "sys-c"]


def _rate(engine, assignment_id: int, annotator: int) -> None:
    with Session(engine) as session:
        items = session.scalars(select(AssignmentItem.item_id).where(AssignmentItem.assignment_id == assignment_id))
        ratings = [{"item_id": item, "scores": {"empathy": 3, "relevance": 3, "fluency": 3}} for item in items]
    submit_assignment(engine, assignment_id, annotator, {"submission_id": new_submission_id(), "ratings": ratings})


def _first_from_the_start(engine, study_id: int, annotator: int) -> int | None:
    """What a walk from the start (no hint) would claim for her now."""
    sqlite_sql, postgresql_sql = hot_sql.first_fitting_sql(annotation_kind("likert"))
    sql = hot_sql._pyformat(postgresql_sql) if engine.dialect.name == "postgresql" else sqlite_sql
    with engine.connect() as connection:
        return connection.exec_driver_sql(sql, {"study": study_id, "annotator": annotator}).scalar()


def _study(engine, name: str = "hints") -> int:
    add_responses(engine, SYSTEMS3, 40)
    make_study(engine, name=name, count=40, k=3, per_assignment=4, controls=[])
    with Session(engine) as session:
        return session.scalar(select(Study.id).where(Study.name == name))


def test_a_hinted_claim_is_the_claim_a_walk_from_the_start_would_make(sample_engine):
    # One rater far ahead (three claims for each of the others'), two behind: her hint skips the copies the others
    # have not taken yet; whatever it skips must be what a walk from the start would pass over too.
    study_id = _study(sample_engine)
    people = [invite(sample_engine, name, "hints")[0].id for name in ("fast", "slow", "slower")]
    claims, round_ = 0, 0
    while True:
        turn = [people[0]] * 3 + people[1:] if round_ % 2 == 0 else [people[0]] * 3 + people[1:2]
        handed_any = False
        for person in turn:
            expected = _first_from_the_start(sample_engine, study_id, person)
            got = next_assignment(sample_engine, "hints", person)
            assert got == expected, (claims, person)
            if got is not None:
                _rate(sample_engine, got, person)
                claims, handed_any = claims + 1, True
        round_ += 1
        if not handed_any:
            break
    assert claims > 20  # the study was worked through (each rater sees a context once), not one round


def test_a_stale_hint_still_hands_out_the_first_fitting_assignment(sample_engine):
    # As a release in another process leaves it: her hint lies after everything that fits her.
    study_id = _study(sample_engine)
    rater = invite(sample_engine, "stale", "hints")[0].id
    first = next_assignment(sample_engine, "hints", rater)
    _rate(sample_engine, first, rater)
    handout._walk_hints[(sample_engine.url, rater)][study_id] = (2**40, 0)  # the key store_of gives
    expected = _first_from_the_start(sample_engine, study_id, rater)
    assert expected is not None
    assert next_assignment(sample_engine, "hints", rater) == expected


def test_the_walk_after_her_last_claim_goes_by_index(sample_engine):
    study_id = _study(sample_engine)
    rater = invite(sample_engine, "indexed", "hints")[0].id
    _rate(sample_engine, next_assignment(sample_engine, "hints", rater), rater)
    sqlite_sql, postgresql_sql = hot_sql.first_fitting_sql(annotation_kind("likert"), after_her_last_claim=True)
    parameters = {"study": study_id, "annotator": rater, "from_index": 3, "from_id": 0}
    with sample_engine.connect() as connection:
        if sample_engine.dialect.name == "postgresql":
            connection.exec_driver_sql("SET enable_seqscan = off")  # a 40-context study is small enough to scan
            plan = connection.exec_driver_sql("EXPLAIN (FORMAT JSON) " + hot_sql._pyformat(postgresql_sql),
                                              parameters).scalar()[0]["Plan"]
            text = str(plan)
            assert "ix_assignment_study_status_order" in text and "design_index >=" in text, plan
        else:
            steps = [row[3] for row in connection.exec_driver_sql("EXPLAIN QUERY PLAN " + sqlite_sql, parameters)]
            assert any("ix_assignment_study_status_order" in step and "design_index>?" in step
                       for step in steps), steps
