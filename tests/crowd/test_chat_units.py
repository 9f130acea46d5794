"""A chat study's crowd units without Mephisto: the unit token (what it names, altered, foreign, expired), the job's
live address, the worker's turns through the token (her first turn claims the unit for the annotator ingest will
name from Mephisto's record of her; another worker is refused), cross-origin answers granted only to requests that
authenticate by the token, and ingest storing her session on her own claim. The real Mephisto run is
tests/crowd/test_chat_mock_run.py."""
from __future__ import annotations

import time

import pytest
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from empeval.server.annotation.annotators import pseudonym_for
from empeval.server.annotation.crowd_units import (
    CrowdUnitToken,
    InvalidUnit,
    make_unit_token,
    read_unit_token,
    unit_annotator,
)
from empeval.server.store.kinds.chat import ChatRating, ChatTurn
from empeval.server.store.models import Annotator, Assignment
from empeval.server.web import create_app
from empeval.server.web.chat_api import close_live_replies
from empeval.tasks.crowd import contract, jobs
from empeval.tasks.crowd.ingest import ingest
from tests.annotation.test_chat_turns import SPEAKER, full_body, make_chat
from tests.conftest import sample_store_copy

SECRET = "crowd-test-secret"
LIVE_URL = "http://127.0.0.1:5999"
ORIGIN = "http://127.0.0.1:3000"  # where Mephisto's router serves the task page


@pytest.fixture
def chat_crowd(tmp_path, monkeypatch, crowd_dir):
    """A SQLite store with the sample and the chat study `talk` (tests/annotation/test_chat_turns.py), the app on it
    and a mock crowd job of its open assignments whose units reach the app at LIVE_URL."""
    url = f"sqlite:///{tmp_path / 'chat-crowd.db'}"
    engine = sample_store_copy(url)
    monkeypatch.setenv("EMPEVAL_DATABASE_URL", url)
    monkeypatch.setenv("EMPEVAL_SECRET_KEY", SECRET)
    make_chat(engine)
    job_dir, _ = jobs.create_job(engine, "talk", provider="mock", units=2, reward=1.0, live_url=LIVE_URL + "/")
    app = create_app({"DATABASE_URL": url, "TESTING": True})
    yield engine, app, job_dir
    close_live_replies(app)
    engine.dispose()


def unit_client(app, unit, worker):
    client = app.test_client()
    client.environ_base.update({"HTTP_X_EMPEVAL_UNIT": unit.payload["live"]["token"],
                                "HTTP_X_EMPEVAL_WORKER": worker, "HTTP_ORIGIN": ORIGIN})
    return client


def turns_path(unit, position, what="turns"):
    return f"/api/assignments/{unit.assignment_id}/conversations/{position}/{what}"


def holder(engine, assignment_id):
    with Session(engine) as session:
        row = session.get_one(Assignment, assignment_id)
        return row.status, row.annotator_id


def annotator_named(engine, worker_name):
    """The annotator ingest stores a Mephisto worker's work under (tasks/crowd/ingest.py)."""
    with Session(engine) as session:
        return session.scalar(select(Annotator.id).where(
            Annotator.provider == "mock", Annotator.pseudonym == pseudonym_for(SECRET, "mock", worker_name)))


def test_a_unit_token_names_one_assignment_and_is_refused_altered_foreign_or_expired(chat_crowd):
    engine, _app, _job = chat_crowd
    unit = CrowdUnitToken(assignment_id=7, study="talk", job_id="j1", provider="mock", name_suffix="_sandbox",
                          expires=int(time.time()) + 60)
    token = make_unit_token(SECRET, unit)
    assert read_unit_token(SECRET, token) == unit
    with pytest.raises(InvalidUnit, match="not valid"):
        read_unit_token(SECRET, token[:-2] + ("A" if token[-2] != "A" else "B") + token[-1])
    with pytest.raises(InvalidUnit, match="another installation"):
        read_unit_token("another-secret", token)
    with pytest.raises(InvalidUnit, match="expired"):
        read_unit_token(SECRET, token, now=unit.expires + 1)
    with pytest.raises(InvalidUnit, match="for assignment 7, not 8"):
        unit_annotator(engine, SECRET, unit, 8, "w1", on_open="claim")
    for worker in ("", "   ", "w\x00", "w\u202e1", "x" * 129):
        with pytest.raises(InvalidUnit, match="worker"):
            unit_annotator(engine, SECRET, unit, 7, worker, on_open="claim")


def test_a_chat_job_gives_each_unit_the_live_address_and_a_token_of_its_own(chat_crowd):
    engine, _app, job_dir = chat_crowd
    units = list(contract.read_items(job_dir).values())
    assert len(units) == 2
    for unit in units:
        live = unit.payload["live"]
        assert live["url"] == LIVE_URL
        token = read_unit_token(SECRET, live["token"])
        assert (token.assignment_id, token.study, token.job_id, token.provider, token.name_suffix) == (
            unit.assignment_id, "talk", job_dir.name, "mock", contract.RECORDED_NAME_SUFFIX["mock"])
        assert token.expires > time.time() + 86400  # the job's lifetime and a unit's time, at least
    with pytest.raises(jobs.CrowdError, match="--live-url"):
        jobs.create_job(engine, "talk", provider="mock", units=1, reward=1.0, live_url=None)
    with pytest.raises(jobs.CrowdError, match="HTTPS"):
        jobs.create_job(engine, "talk", provider="mturk_sandbox", units=1, public_url="https://tasks.example.org",
                        aws_profile="p", reward=1.0, live_url="http://eval.example.org")
    with pytest.raises(jobs.CrowdError, match="not an http"):
        jobs.create_job(engine, "talk", provider="mock", units=1, reward=1.0, live_url="ftp://eval.example.org")


def test_cross_origin_answers_go_only_to_requests_that_authenticate_by_the_unit_token(chat_crowd):
    _engine, app, job_dir = chat_crowd
    unit = next(iter(contract.read_items(job_dir).values()))
    client = app.test_client()
    asked = {"Origin": ORIGIN, "Access-Control-Request-Method": "POST"}
    granted = client.options(turns_path(unit, 0), headers={
        **asked, "Access-Control-Request-Headers": "content-type,x-empeval-unit,x-empeval-worker"})
    assert granted.headers.get("Access-Control-Allow-Origin") == "*"
    assert "X-Empeval-Unit" in granted.headers["Access-Control-Allow-Headers"]
    assert "Access-Control-Allow-Credentials" not in granted.headers
    # The cookie routes' CSRF rule stands: no preflight carrying X-Requested-With (or no unit token) is granted.
    for headers in ("content-type,x-requested-with", "content-type,x-empeval-unit,x-requested-with", "content-type"):
        refused = client.options(turns_path(unit, 0), headers={**asked, "Access-Control-Request-Headers": headers})
        assert "Access-Control-Allow-Origin" not in refused.headers, headers
    cookie_call = client.post(turns_path(unit, 0), json={"index": 0, "text": "hi"}, headers={"Origin": ORIGIN})
    assert cookie_call.status_code == 401 and "Access-Control-Allow-Origin" not in cookie_call.headers


def test_a_worker_talks_through_her_unit_and_ingest_stores_her_session_on_her_claim(chat_crowd):
    engine, app, job_dir = chat_crowd
    unit, other_unit = contract.read_items(job_dir).values()
    rita = unit_client(app, unit, "w1")
    # Before her first turn the page reads the unit's state: nothing is claimed by reading.
    state = rita.get(f"/api/assignments/{unit.assignment_id}/live")
    assert state.status_code == 200 and state.headers["Access-Control-Allow-Origin"] == "*"
    page = state.get_json()["assignment"]
    assert [item["item_id"] for item in page["items"]] == [item["item_id"] for item in unit.payload["items"]]
    assert holder(engine, unit.assignment_id) == ("open", None)
    assert rita.post(turns_path(unit, 0, "end"), json={}).status_code == 404  # nothing to end yet

    # Her first turn claims the unit for the annotator ingest will name from Mephisto's record ("w1" + suffix).
    first = rita.post(turns_path(unit, 0), json={"index": 0, "text": SPEAKER[0]})
    assert first.status_code == 200, first.get_json()
    assert set(first.get_json()) >= {"index", "text"} and "system" not in first.get_json()
    worker = annotator_named(engine, "w1" + contract.RECORDED_NAME_SUFFIX["mock"])
    assert holder(engine, unit.assignment_id) == ("assigned", worker)

    # Another worker with the same unit (given it after she returned it, say) is refused and stores nothing.
    sam = unit_client(app, unit, "w2")
    for answer in (sam.post(turns_path(unit, 0), json={"index": 2, "text": SPEAKER[1]}),
                   sam.get(f"/api/assignments/{unit.assignment_id}/live")):
        assert answer.status_code == 409 and "another worker" in answer.get_json()["message"]
    # Her token opens her unit only.
    foreign = rita.post(turns_path(other_unit, 0), json={"index": 0, "text": SPEAKER[0]})
    assert foreign.status_code == 403 and "not " + str(other_unit.assignment_id) in foreign.get_json()["message"]

    for position in range(len(page["items"])):
        start = 2 if position == 0 else 0
        for index in range(start, 4, 2):
            answer = rita.post(turns_path(unit, position), json={"index": index, "text": SPEAKER[index // 2]})
            assert answer.status_code == 200, answer.get_json()
        assert rita.post(turns_path(unit, position, "end"), json={}).status_code == 200
    # A reload reads the conversations as the server holds them.
    reloaded = rita.get(f"/api/assignments/{unit.assignment_id}/live").get_json()["assignment"]
    assert all(len(item["turns"]) == 4 for item in reloaded["items"])
    with Session(engine) as session:
        stored_turns = session.scalar(select(func.count()).select_from(ChatTurn)
                                      .where(ChatTurn.assignment_id == unit.assignment_id))
    assert stored_turns == 4 * len(page["items"])

    # What Mephisto records: the worker's name with the provider's suffix, and the page's outputs.
    body = full_body(reloaded)
    results = contract.ResultsFile(job_dir / contract.RESULTS_FILE)
    for unit_id, name, assignment_id in (("1", "w1_sandbox", unit.assignment_id),
                                         ("2", "w2_sandbox", unit.assignment_id)):
        results.append(contract.CrowdResult(
            submission_id=f"{job_dir.name}.u{unit_id}", job_id=job_dir.name, study="talk", provider="mock",
            unit_id=unit_id, worker_name=name, assignment_id=assignment_id,
            outputs={"conversations": body["conversations"], "comment": "nice partners"},
            controls=contract.ControlScore(n=0, passed=0), passed_controls=True))
    report = ingest(engine, job_dir)
    assert (report.counts["stored"], report.counts["conflict"]) == (1, 1), report.problems
    status, annotator_id = holder(engine, unit.assignment_id)
    assert (status, annotator_id) == ("submitted", worker)
    with Session(engine) as session:
        ratings = session.scalar(select(func.count()).select_from(ChatRating)
                                 .where(ChatRating.assignment_id == unit.assignment_id))
    assert ratings == len(page["items"]) * len(page["criteria"])
    assert ingest(engine, job_dir).counts["already"] == 1
    # After the submission the unit takes no more turns.
    late = rita.post(turns_path(unit, 0), json={"index": 4, "text": SPEAKER[2]})
    assert late.status_code == 409
