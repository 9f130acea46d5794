"""A study whose [decisions] say stop_when_decided closes its claims once its budget of paid ratings is spent (or
every comparison is decided, server/annotation/decisions.py): new claims are refused by the claim's own SQL, while an
assignment already started is resumed, submitted and stored. On a real SQLite file and a real PostgreSQL database."""
from __future__ import annotations

import threading

import pytest
from sqlalchemy import func, select

from empeval.analysis.stats.sequential import Decision
from empeval.server.annotation.annotators import invite
from empeval.server.annotation.decisions import (
    REASON_BUDGET,
    close_claims_if_decided,
    decision_status,
)
from empeval.server.annotation.handout import NoNewWork, next_assignment, next_assignment_payload
from empeval.server.annotation.submission import submit_assignment
from empeval.server.store import unit_of_work
from empeval.server.store.kinds.likert import Rating
from empeval.server.store.models import Study
from empeval.tasks.study_create import create_study
from empeval.tasks.study_file import parse_study
from tests.annotation.conftest import SYSTEMS, add_responses, new_submission_id


def _study(engine, *, budget: int | None, stop: bool = True, human_share: float | None = None):
    add_responses(engine, SYSTEMS, 40)
    share = {"human_share": human_share} if human_share is not None else {}
    spec = parse_study({
        "name": "decided", "seed": 3, "contexts": {"split": "test", "count": 12},
        "systems": {"names": SYSTEMS},
        "design": {"ratings_per_response": 2, "items_per_assignment": 6, "control_rate": 0.0, **share},
        "decisions": {"comparisons": ["sys-a vs sys-b on empathy"], "margin": 0.5, "stop_when_decided": stop,
                      **({"budget": budget} if budget is not None else {})},
    }, "decided.toml")
    create_study(engine, spec)


def _rater(engine, name: str) -> int:
    return invite(engine, name, "decided")[0].id


def _submit(engine, rater_id: int, payload: dict) -> None:
    ratings = [{"item_id": item["item_id"], "scores": {"empathy": 4, "relevance": 3, "fluency": 3}}
               for item in payload["items"]]
    receipt = submit_assignment(engine, payload["assignment_id"], rater_id,
                                {"submission_id": new_submission_id(), "ratings": ratings})
    assert receipt["status"] == "stored"


def _paid(engine) -> int:
    with unit_of_work(engine) as session:
        return session.scalar(select(func.count(Rating.id)))


def test_a_spent_budget_closes_claims_but_started_work_is_finished_and_stored(sample_engine):
    _study(sample_engine, budget=6)
    started, finisher, newcomer = (_rater(sample_engine, name) for name in ("ann", "bob", "cat"))
    held = next_assignment_payload(sample_engine, "decided", started)  # started, not yet submitted
    _submit(sample_engine, finisher, next_assignment_payload(sample_engine, "decided", finisher))
    assert _paid(sample_engine) >= 6

    status = decision_status(sample_engine, "decided")
    assert status.budget_spent and status.paid_ratings == _paid(sample_engine)
    assert [c.comparison.describe() for c in status.comparisons] == ["sys-a vs sys-b on empathy"]
    assert close_claims_if_decided(sample_engine, status)
    assert not close_claims_if_decided(sample_engine, decision_status(sample_engine, "decided"))  # once
    with unit_of_work(sample_engine) as session:
        study = session.scalar(select(Study).where(Study.name == "decided"))
        assert study.claims_closed_at is not None and study.claims_closed_reason == REASON_BUDGET

    with pytest.raises(NoNewWork, match="not taking new work"):  # no new work
        next_assignment(sample_engine, "decided", newcomer)
    with pytest.raises(NoNewWork):  # nor more for a rater who has worked
        next_assignment(sample_engine, "decided", finisher)
    assert next_assignment(sample_engine, "decided", started) == held["assignment_id"]  # resumed
    before = _paid(sample_engine)
    _submit(sample_engine, started, held)
    assert _paid(sample_engine) == before + len(held["items"]) * 3
    lines = decision_status(sample_engine, "decided").lines()
    assert any("claims closed at" in line and REASON_BUDGET in line for line in lines)


def test_claims_stay_open_without_stop_when_decided_or_before_the_budget(sample_engine):
    _study(sample_engine, budget=1000)
    rater = _rater(sample_engine, "ann")
    _submit(sample_engine, rater, next_assignment_payload(sample_engine, "decided", rater))
    status = decision_status(sample_engine, "decided")
    assert not status.budget_spent and status.comparisons[0].state is Decision.UNDECIDED
    assert not close_claims_if_decided(sample_engine, status)
    assert next_assignment(sample_engine, "decided", _rater(sample_engine, "bob")) is not None


def test_study_status_prints_the_decisions_and_closes_a_spent_study_and_the_alias_says_the_same(sample_engine):
    from tests.annotation.researcher_helpers import cli_run

    _study(sample_engine, budget=6)
    rater = _rater(sample_engine, "ann")
    _submit(sample_engine, rater, next_assignment_payload(sample_engine, "decided", rater))
    result = cli_run(sample_engine, "study", "status", "decided")
    assert result.exit_code == 0, result.output
    assert "sys-a vs sys-b on empathy: n=" in result.output and "human-only" in result.output
    assert "paid ratings so far of a budget of 6" in result.output
    assert REASON_BUDGET in result.output  # closed by this look
    alias = cli_run(sample_engine, "status", "decided")
    assert alias.exit_code == 0 and "(not taking new work)" in alias.output and REASON_BUDGET in alias.output
    with pytest.raises(NoNewWork):
        next_assignment(sample_engine, "decided", _rater(sample_engine, "bob"))


def test_the_study_page_shows_the_decisions_and_a_submission_closes_the_claims(sample_engine):
    """The page only shows (a GET changes nothing); a submission stored through the API starts a look in the
    background (server/web/decisions_watch.py) that closes the claims of a study whose budget is spent, and a
    submission soon after starts none."""
    from empeval.server.annotation.secrets import admin_token, secret_key
    from empeval.server.web import create_app

    _study(sample_engine, budget=6)
    first = _rater(sample_engine, "ann")
    bob, bob_token = invite(sample_engine, "bob", "decided")
    cat, cat_token = invite(sample_engine, "cat", "decided")
    app = create_app({"DATABASE_URL": sample_engine.url.render_as_string(hide_password=False), "TESTING": True})
    held = {rater.id: next_assignment_payload(sample_engine, "decided", rater.id) for rater in (bob, cat)}
    _submit(sample_engine, first, next_assignment_payload(sample_engine, "decided", first))  # the budget is spent
    headers = {"Authorization": f"Bearer {admin_token(secret_key(sample_engine))}"}
    page = app.test_client().get("/admin/studies/decided", headers=headers).get_data(as_text=True)
    table = page.split('id="decision-table"', 1)[1].split("</table>", 1)[0]
    assert "sys-a vs sys-b on empathy" in table and str(Decision.UNDECIDED) in table
    assert "of a budget of 6" in page and 'id="claims-closed"' not in page  # shown, not closed by a GET
    assert next_assignment(sample_engine, "decided", _rater(sample_engine, "dan")) is not None

    watch = app.extensions["empeval.decisions_watch"]
    for rater, token in ((bob, bob_token), (cat, cat_token)):  # started work, submitted through the API
        payload = held[rater.id]
        ratings = [{"item_id": item["item_id"], "scores": {"empathy": 4, "relevance": 3, "fluency": 3}}
                   for item in payload["items"]]
        answer = app.test_client().post(f"/api/assignments/{payload['assignment_id']}/submit", headers={
            "Authorization": f"Bearer {token}"}, json={"submission_id": new_submission_id(), "ratings": ratings})
        assert answer.status_code == 200 and answer.get_json()["status"] == "stored", answer.get_data(as_text=True)
        for thread in [t for t in threading.enumerate() if t.name == "decisions-decided"]:
            thread.join(30)
    assert watch.looks == 1  # the second submission came within the interval: no second look
    with pytest.raises(NoNewWork):  # the look closed the claims
        next_assignment(sample_engine, "decided", _rater(sample_engine, "eve"))
    page = app.test_client().get("/admin/studies/decided", headers=headers).get_data(as_text=True)
    assert 'id="claims-closed"' in page and REASON_BUDGET in page


def test_with_a_judges_scores_the_status_adds_model_assisted_intervals(sample_engine):
    from tests.annotation.researcher_helpers import cli_run

    _study(sample_engine, budget=None, stop=False, human_share=0.5)
    assert cli_run(sample_engine, "judge", "decided", "--judges", "length").exit_code == 0
    for name in ("ann", "bob", "cat", "dan"):
        rater = _rater(sample_engine, name)
        payload = next_assignment_payload(sample_engine, "decided", rater)
        if payload is not None:
            _submit(sample_engine, rater, payload)
    from empeval.server.backend.judges.scores import judge_scores

    status = decision_status(sample_engine, "decided", judge_scores=judge_scores(sample_engine, "decided", "length"),
                             judge="length")
    (comparison,) = status.comparisons
    assert comparison.n >= 2 and comparison.ppi_state is not None and comparison.ppi_low < comparison.ppi_high
    assert comparison.state is comparison.ppi_state  # the model-assisted interval is the one the study stops on
    result = cli_run(sample_engine, "status", "decided")  # picks the judge that scored the study
    assert result.exit_code == 0 and "model-assisted (length)" in result.output, result.output
