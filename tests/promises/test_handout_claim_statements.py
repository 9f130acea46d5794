"""A claim costs exactly what server/annotation/handout.py's docstring says: "claiming six [statements] on
PostgreSQL and five on SQLite (no turn-taking UPDATE there)", and "resuming is two statements". Exactly, not at most
(tests/annotation/test_statement_counts.py allows six for every call of `next` and `submit` on both databases, so
a sixth statement on SQLite, or a third on a resume, would pass there). Every statement the engine sends is
counted with SQLAlchemy's before_cursor_execute event (a real SQLite file, a real PostgreSQL database); BEGIN,
COMMIT, ROLLBACK, SAVEPOINT, RELEASE, SET and PRAGMA are counted apart (SQLite's BEGIN IMMEDIATE is the one
expected)."""
from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from sqlalchemy import event

from empeval.server.annotation.annotators import invite
from empeval.server.annotation.handout import next_assignment_payload
from empeval.server.annotation.submission import submit_assignment
from empeval.server.web import create_app
from tests.annotation.conftest import CONTROLS, SYSTEMS, add_responses, make_study, new_submission_id

CLAIM = {"sqlite": 5, "postgresql": 6}
RESUME = 2
TRANSACTION_CONTROL = ("BEGIN", "COMMIT", "ROLLBACK", "SAVEPOINT", "RELEASE", "SET ", "PRAGMA")


@contextmanager
def sent(engine) -> Iterator[tuple[list[str], list[str]]]:
    """(statements, transaction control) the engine sends within the block, each as sent."""
    statements: list[str] = []
    control: list[str] = []

    def record(_connection, _cursor, statement: str, _parameters, _context, _executemany) -> None:
        text = " ".join(statement.split())
        (control if text.upper().startswith(TRANSACTION_CONTROL) else statements).append(text)

    event.listen(engine, "before_cursor_execute", record)
    try:
        yield statements, control
    finally:
        event.remove(engine, "before_cursor_execute", record)


def _rate(engine, rater_id: int, payload: dict) -> None:
    ratings = [{"item_id": item["item_id"], "scores": {"empathy": 3, "relevance": 3, "fluency": 3}}
               for item in payload["items"]]
    receipt = submit_assignment(engine, payload["assignment_id"], rater_id,
                                {"submission_id": new_submission_id(), "ratings": ratings})
    assert receipt["status"] == "stored"


def _expected_control(engine) -> list[str]:
    """SQLite's write transaction is opened by an explicit BEGIN IMMEDIATE (store.engine.write_transaction);
    PostgreSQL's by the driver, which sends no statement for it."""
    return ["BEGIN IMMEDIATE"] if engine.dialect.name == "sqlite" else []


@pytest.fixture(params=[3, 30], ids=["3-items", "30-items"])
def items_per_assignment(request, sample_engine) -> int:
    add_responses(sample_engine, SYSTEMS + CONTROLS, 300)
    make_study(sample_engine, count=300, k=3, per_assignment=request.param)
    return request.param


def test_a_claim_sends_exactly_the_statements_the_docstring_promises_first_and_with_history(
        sample_engine, items_per_assignment):
    rater, _ = invite(sample_engine, "counted", "pilot")
    claims = []
    for _ in range(2):  # her first claim (nothing seen yet), then one with history (seen rows to check against)
        with sent(sample_engine) as (statements, control):
            payload = next_assignment_payload(sample_engine, "pilot", rater.id)
        assert payload is not None and len(payload["items"]) >= min(items_per_assignment, 10)
        claims.append((len(statements), control, statements))
        with sent(sample_engine) as (statements, control):
            assert next_assignment_payload(sample_engine, "pilot", rater.id) == payload
        assert (len(statements), control) == (RESUME, []), statements
        _rate(sample_engine, rater.id, payload)
    expected = CLAIM[sample_engine.dialect.name]
    for count, control, statements in claims:
        assert (count, control) == (expected, _expected_control(sample_engine)), statements


def test_a_claim_through_the_app_sends_exactly_the_promised_statements(sample_engine, items_per_assignment):
    app = create_app({"DATABASE_URL": sample_engine.url.render_as_string(hide_password=False), "TESTING": True})
    engine = app.extensions["empeval.engine"]
    client = app.test_client()
    rater, token = invite(sample_engine, "counted", "pilot")
    headers = {"Authorization": f"Bearer {token}"}
    first = client.get("/api/annotate/next", headers=headers).get_json()["assignment"]
    _rate(sample_engine, rater.id, first)
    with sent(engine) as (statements, control):
        answer = client.get("/api/annotate/next", headers=headers)
    assert answer.status_code == 200 and answer.get_json()["assignment"]["assignment_id"] != first["assignment_id"]
    assert (len(statements), control) == (CLAIM[engine.dialect.name], _expected_control(engine)), statements
    with sent(engine) as (statements, control):
        again = client.get("/api/annotate/next", headers=headers)
    assert again.get_json() == answer.get_json()
    assert (len(statements), control) == (RESUME, []), statements
    engine.dispose()
