"""A best-worst scaling study through the shared hand-out, payload, submit route, export and dashboard: the payload
shows each tuple's responses in the order its placement logged and no system name, id or control flag; a claim
records the tuple's context as seen, so nobody answers a context twice; an expired assignment's copy keeps every
order shown; the one submit route stores the picks, within the statement budget of a Likert submit; the export
names the systems picked as the contract says and `empeval export` writes it; the dashboard counts tuples."""
from __future__ import annotations

import csv
import io
import json
from collections import Counter
from datetime import timedelta

import pytest
from click.testing import CliRunner
from sqlalchemy import select
from sqlalchemy.orm import Session

from empeval.analysis.kinds.best_worst.schema import BEST_WORST_COLUMNS, validate_choices
from empeval.cli import cli
from empeval.server.annotation.annotators import invite
from empeval.server.annotation.export import export_rows, rows_to_csv
from empeval.server.annotation.handout import (
    assignment_payload,
    expire_overdue,
    next_assignment,
    next_assignment_payload,
)
from empeval.server.annotation.kinds import annotation_kind
from empeval.server.annotation.submission import submit_assignment
from empeval.server.store.engine import counting_statements
from empeval.server.store.kinds.best_worst import AssignmentTuple
from empeval.server.store.models import Assignment, Context, SeenContext, Study
from empeval.server.store.queries import now_utc
from empeval.server.web import create_app
from tests.annotation.best_worst_fixtures import (
    BWS_CRITERIA,
    BWS_SYSTEMS,
    make_bws_study,
    picks_body,
    tuple_placements,
)
from tests.annotation.conftest import CONTROLS, new_submission_id
from tests.annotation.pairwise_fixtures import assignment_ids, give


def test_the_payload_shows_each_tuples_responses_in_the_order_shown_and_nothing_else(sample_engine):
    make_bws_study(sample_engine, control_rate=0.25)
    pages = {a: assignment_payload(sample_engine, a) for a in assignment_ids(sample_engine, "bws")}
    orders = set()
    for assignment_id, page in pages.items():
        placed = tuple_placements(sample_engine, assignment_id)
        assert set(page) == {"kind", "assignment_id", "status", "expires_at", "study", "criteria", "items"}
        assert page["kind"] == "best_worst" and [c["key"] for c in page["criteria"]] == list(BWS_CRITERIA)
        assert [item["item_id"] for item in page["items"]] == [p.tuple_item_id for p in placed]
        for item, p in zip(page["items"], placed, strict=True):
            assert set(item) == {"item_id", "position", "context", "responses"}
            assert item["responses"] == list(p.texts) and len(item["responses"]) == 3
            orders.add(p.shown_order)
    assert len(orders) > 3  # the orders differ, so a page in slot order could not pass
    assert any(p.is_control for a in pages for p in tuple_placements(sample_engine, a))
    text = json.dumps(list(pages.values()))
    for name in BWS_SYSTEMS + CONTROLS:
        assert name not in text


def test_the_conversation_is_the_tuples_own_context(sample_engine):
    make_bws_study(sample_engine)
    assignment_id = assignment_ids(sample_engine, "bws")[0]
    page = assignment_payload(sample_engine, assignment_id)
    with Session(sample_engine) as session:
        for item, p in zip(page["items"], tuple_placements(sample_engine, assignment_id), strict=True):
            context = session.get_one(Context, p.context_id)
            assert item["context"] == [{"role": t.role, "text": t.text} for t in context.dialogue.turns
                                       if t.idx <= context.n_turns]


def test_a_claim_records_its_contexts_and_nobody_is_handed_a_context_twice(sample_engine):
    make_bws_study(sample_engine, count=8, k=3, per_assignment=3, control_rate=0.0)
    rita, _ = invite(sample_engine, "rita", "bws")
    first = next_assignment(sample_engine, "bws", rita.id)
    with Session(sample_engine) as session:
        seen = session.scalars(select(SeenContext.context_id).where(SeenContext.assignment_id == first)).all()
    assert sorted(seen) == sorted(p.context_id for p in tuple_placements(sample_engine, first))
    contexts: Counter[int] = Counter(seen)
    handed = [first]
    with Session(sample_engine) as session, session.begin():
        session.get_one(Assignment, first).status = "submitted"
    for _ in range(30):
        assignment_id = next_assignment(sample_engine, "bws", rita.id)
        if assignment_id is None:
            break
        handed.append(assignment_id)
        contexts.update(p.context_id for p in tuple_placements(sample_engine, assignment_id))
        with Session(sample_engine) as session, session.begin():
            session.get_one(Assignment, assignment_id).status = "submitted"
    assert len(handed) > 1 and max(contexts.values()) == 1


def test_an_expired_assignments_copy_shows_every_tuple_in_the_same_order(sample_engine):
    make_bws_study(sample_engine)
    rita, _ = invite(sample_engine, "rita", "bws")
    assignment_id = next_assignment(sample_engine, "bws", rita.id)
    with Session(sample_engine) as session, session.begin():
        assert expire_overdue(session, session.get_one(Assignment, assignment_id).study_id,
                              now_utc() + timedelta(days=1)) == 1
    with Session(sample_engine) as session:
        copy = session.scalar(select(Assignment.id).where(Assignment.replaces_id == assignment_id))
        rows = {a: session.execute(select(AssignmentTuple.position, AssignmentTuple.tuple_item_id,
                                          AssignmentTuple.shown_order)
                                   .where(AssignmentTuple.assignment_id == a)
                                   .order_by(AssignmentTuple.position)).all() for a in (assignment_id, copy)}
    assert rows[copy] == rows[assignment_id] and rows[copy]


def test_the_api_hands_out_tuples_and_takes_picks_through_the_one_submit_route_within_the_budget(sample_engine):
    """Claim, resume, submit and resubmit: at most six statements each, as for a Likert study
    (tests/annotation/test_statement_counts.py)."""
    make_bws_study(sample_engine, count=12, per_assignment=5)
    app = create_app({"DATABASE_URL": sample_engine.url.render_as_string(hide_password=False), "TESTING": True})
    engine, client = app.extensions["empeval.engine"], app.test_client()
    _, token = invite(sample_engine, "rita", "bws")
    headers = {"Authorization": f"Bearer {token}"}
    with counting_statements(engine) as claiming:
        page = client.get("/api/annotate/next", headers=headers).get_json()["assignment"]
    with counting_statements(engine) as resuming:
        assert client.get("/api/annotate/next", headers=headers).get_json()["assignment"] == page
    assert page["kind"] == "best_worst" and page == next_assignment_payload(sample_engine, "bws",
                                                                            page_holder(sample_engine, page))
    body = {"submission_id": new_submission_id(), "best_worst": [
        {"item_id": item["item_id"], "best": {c: "C" for c in BWS_CRITERIA}, "worst": {c: "A" for c in BWS_CRITERIA},
         "seconds": 3.0} for item in page["items"]]}
    url = f"/api/assignments/{page['assignment_id']}/submit"
    with counting_statements(engine) as submitting:
        first = client.post(url, json=body, headers=headers)
    with counting_statements(engine) as resubmitting:
        again = client.post(url, json=body, headers=headers)
    assert first.status_code == 200, first.get_json()
    assert again.get_json() == first.get_json() and first.get_json()["choices"] == 3 * len(page["items"])
    assert client.post(url, json={**body, "submission_id": new_submission_id()}, headers=headers).status_code == 409
    counts = {"claim": len(claiming), "resume": len(resuming), "submit": len(submitting),
              "resubmit": len(resubmitting)}
    assert max(counts.values()) <= 6, counts
    wrong = client.post(url, json={"submission_id": new_submission_id(), "judgments": []}, headers=headers)
    assert wrong.status_code in (400, 409)


def page_holder(engine, page) -> int:
    with Session(engine) as session:
        return session.get_one(Assignment, page["assignment_id"]).annotator_id


@pytest.fixture
def answered(sample_engine):
    """A best-worst study whose first assignment rita answered: B best and the last letter worst everywhere."""
    make_bws_study(sample_engine, control_rate=0.25)
    rita, _ = invite(sample_engine, "rita", "bws")
    assignment_id = next(a for a in assignment_ids(sample_engine, "bws")
                         if any(p.is_control for p in tuple_placements(sample_engine, a)))
    give(sample_engine, assignment_id, rita.id)
    submit_assignment(sample_engine, assignment_id, rita.id, picks_body(sample_engine, assignment_id, best="B"))
    return sample_engine, assignment_id, tuple_placements(sample_engine, assignment_id)


def test_the_export_names_the_systems_picked_and_the_order_shown(answered):
    engine, assignment_id, placed = answered
    rows = export_rows(engine, "bws")
    assert len(rows) == 3 * len(placed) and all(tuple(row) == BEST_WORST_COLUMNS for row in rows)
    by_tuple = {p.tuple_item_id: p for p in placed}
    for row, (p, criterion) in zip(rows, [(p, c) for p in placed for c in sorted(BWS_CRITERIA)], strict=True):
        assert (row["assignment_id"], row["position"], row["criterion"]) == (assignment_id, p.position, criterion)
        assert row["shown"] == "|".join(p.systems) and row["tuple"] == "|".join(sorted(p.systems))
        assert (row["best"], row["worst"]) == (p.systems[1], p.systems[-1])
        assert row["is_control"] == p.is_control and row["control_system"] == p.control_system
        assert row["control_target"] == p.control_target and row["late"] is False
    assert any(row["is_control"] for row in rows) and by_tuple
    assert len(validate_choices(rows)) == len(rows)
    table = list(csv.DictReader(io.StringIO(rows_to_csv(rows, BEST_WORST_COLUMNS))))
    assert len(validate_choices(table)) == len(rows)


def test_empeval_export_writes_the_best_worst_table(answered, tmp_path):
    engine, _, placed = answered
    out = tmp_path / "bws.csv"
    result = CliRunner().invoke(cli, ["--database-url", engine.url.render_as_string(hide_password=False), "export",
                                      "bws", "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert out.read_text().splitlines()[0] == ",".join(BEST_WORST_COLUMNS)
    assert len(out.read_text().splitlines()) == 1 + 3 * len(placed)


def test_the_dashboard_counts_tuples_and_choices(answered):
    engine, _, placed = answered
    with Session(engine) as session:
        study = session.scalar(select(Study).where(Study.name == "bws"))
        progress = annotation_kind("best_worst").progress(session, study)
        page = annotation_kind("best_worst").item_page(session, study, 1, 50, True)
    assert (progress["tuples_answered"], progress["answers"], progress["choices"]) == (len(placed), len(placed),
                                                                                        3 * len(placed))
    assert progress["per_annotator"] == {next(iter(progress["per_annotator"])): len(placed)}
    assert "best-worst study" in progress["summary"] and "k = 2" in progress["summary"]
    assert page.total == len(placed) and all(len(item.responses) == 3 for item in page.items)
    assert all(item.ratings and set(item.ratings[0]["scores"]) == set(BWS_CRITERIA) for item in page.items)
    first = next(item for item in page.items if item.item_id == placed[0].tuple_item_id)
    assert first.ratings[0]["scores"]["empathy"] == f"best {placed[0].systems[1]}, worst {placed[0].systems[-1]}"
