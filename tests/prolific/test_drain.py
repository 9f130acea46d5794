"""Whoever has a Prolific study link can make up participant ids (issue 29, finding 2: one client with made-up
PROLIFIC_PIDs claimed 46 of 46 open assignments in 94 requests). Against the real app over a real store (a SQLite
file, and PostgreSQL): one client's drain gets at most the study's admissions per address and minute, the rest is
refused with 429, and a real participant from elsewhere still gets work; however many addresses a drain comes from,
Prolific participants hold at most the study's places; being let in holds nothing; a participant who has submitted
gets her code again and no more work, decided by the claim's own statement."""
from __future__ import annotations

import uuid
from itertools import count

import pytest
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from empeval.server.annotation import hot_sql
from empeval.server.annotation.annotators import invite
from empeval.server.annotation.kinds import annotation_kind
from empeval.server.store.engine import write_transaction
from empeval.server.store.models import Assignment
from empeval.server.store.queries import now_utc, study_by_name
from empeval.server.store.statuses import AssignmentStatus
from empeval.server.store.study_parts import DEFAULT_ADMISSIONS_PER_MINUTE
from empeval.server.web import create_app
from empeval.tasks.study_create import create_study
from empeval.tasks.study_file import parse_study
from tests.prolific.conftest import COMPLETION_CODE, CSRF, PROLIFIC_STUDY_ID, SYSTEMS, ids, link_path, study_file

COMPLETION = {"code": COMPLETION_CODE, "url": f"https://app.prolific.com/submissions/complete?cc={COMPLETION_CODE}"}
DRAINER, REAL = "203.0.113.7", "198.51.100.20"
_made_up = count(1)


def made_up_pid() -> str:
    return f"{next(_made_up):024x}"


def prolific_study(engine, name: str, **recruitment) -> None:
    create_study(engine, parse_study(study_file(name, count=12, recruitment={
        "platform": "prolific", "prolific_study_id": PROLIFIC_STUDY_ID, "completion_code": COMPLETION_CODE,
        **recruitment})))


@pytest.fixture
def drained(sample_engine):
    """A Prolific study of 16 assignments with no places given (the worst case: no limit but the per-address one),
    and the app around it."""
    from tests.annotation.conftest import add_responses

    add_responses(sample_engine, SYSTEMS, 12)
    prolific_study(sample_engine, "pilot")
    app = create_app({"DATABASE_URL": sample_engine.url.render_as_string(hide_password=False), "TESTING": True})
    return app, sample_engine


def held(engine, study: str = "pilot") -> int:
    with Session(engine) as session:
        study_id = study_by_name(session, study).id
        return session.scalar(select(func.count()).select_from(Assignment).where(
            Assignment.study_id == study_id, Assignment.status == AssignmentStatus.ASSIGNED))


def open_assignments(engine, study: str = "pilot") -> int:
    with Session(engine) as session:
        study_id = study_by_name(session, study).id
        return session.scalar(select(func.count()).select_from(Assignment).where(
            Assignment.study_id == study_id, Assignment.status == AssignmentStatus.OPEN))


def visit(app, engine, address: str, pid: str, study: str = "pilot"):
    """A fresh browser (its own cookie jar) at `address` opening the study link as participant `pid`: the client
    and the link's answer."""
    client = app.test_client()
    client.environ_base["REMOTE_ADDR"] = address
    return client, client.get(link_path(engine, study), query_string=ids(pid))


def drain(app, engine, address: str, attempts: int, study: str = "pilot") -> tuple[int, int, int]:
    """The drain script: `attempts` made-up participants from one address, each let in and asking for work at once
    (no consent, no page). (requests sent, admissions refused with 429, assignments obtained)."""
    requests = refused = obtained = 0
    for _ in range(attempts):
        client, answer = visit(app, engine, address, made_up_pid(), study)
        requests += 1
        if answer.status_code == 429:
            refused += 1
            assert int(answer.headers["Retry-After"]) >= 1
            continue
        assert answer.status_code == 303, answer.get_data(as_text=True)
        work = client.get("/api/annotate/next", headers=CSRF)
        requests += 1
        assert work.status_code == 200
        obtained += work.get_json()["assignment"] is not None
    return requests, refused, obtained


def test_one_client_with_made_up_ids_gets_at_most_the_cap_and_a_real_participant_still_gets_work(drained):
    app, engine = drained
    total = open_assignments(engine)
    requests, refused, obtained = drain(app, engine, DRAINER, attempts=total * 3)
    cap = DEFAULT_ADMISSIONS_PER_MINUTE
    print(f"\nprolific drain: {obtained} of {total} open assignments claimed by one client in {requests} requests "
          f"(cap {cap} new participants per address and minute; {refused} admissions refused with 429)")
    assert obtained <= cap < total
    assert refused == total * 3 - cap
    assert held(engine) == obtained
    client, answer = visit(app, engine, REAL, made_up_pid())
    assert answer.status_code == 303
    work = client.get("/api/annotate/next", headers=CSRF).get_json()
    assert work["assignment"] is not None
    # A participant already seen is let in again from the drained address (the limit is on new ones only).
    assert visit(app, engine, DRAINER, made_up_pid())[1].status_code == 429


def test_being_let_in_holds_nothing_until_she_asks_for_work(drained):
    app, engine = drained
    client, answer = visit(app, engine, REAL, made_up_pid())
    assert answer.status_code == 303
    assert held(engine) == 0
    current = client.get("/api/annotate/next?claim=no", headers=CSRF).get_json()
    assert current["assignment"] is None and current["study"]["name"] == "pilot" and held(engine) == 0
    assert client.get("/api/annotate/next", headers=CSRF).get_json()["assignment"] is not None
    assert held(engine) == 1


def test_prolific_participants_hold_at_most_the_study_places_from_however_many_addresses(sample_engine):
    from tests.annotation.conftest import add_responses

    add_responses(sample_engine, SYSTEMS, 12)
    prolific_study(sample_engine, "placed", places=4)
    app = create_app({"DATABASE_URL": sample_engine.url.render_as_string(hide_password=False), "TESTING": True})
    obtained = sum(drain(app, sample_engine, f"192.0.2.{n}", attempts=1, study="placed")[2] for n in range(1, 11))
    print(f"\nprolific drain from 10 addresses: {obtained} assignments claimed (places 4), "
          f"{open_assignments(sample_engine, 'placed')} left open")
    assert obtained == 4 and held(sample_engine, "placed") == 4
    # A rater invited by the researcher is no Prolific participant: the places do not count her.
    rater, token = invite(sample_engine, "local-rater", "placed")
    local = app.test_client().get("/api/annotate/next", headers={"Authorization": f"Bearer {token}"})
    assert local.get_json()["assignment"] is not None


def ratings(assignment):
    return [{"item_id": item["item_id"], "scores": {c["key"]: 4 for c in assignment["criteria"]}, "seconds": 3.0}
            for item in assignment["items"]]


def claim_directly(engine, study: str, annotator_id: int):
    """The claim statement as `next` runs it, without the Python read before it: the row claimed, or None."""
    with Session(engine) as session:
        study_id = study_by_name(session, study).id
    now = now_utc()
    with engine.connect() as connection, write_transaction(connection):
        return hot_sql.run(connection, hot_sql.kind_statements(annotation_kind("likert")).claim, {
            "study": study_id, "annotator": annotator_id, "now": hot_sql.moment(connection, now),
            "expires_at": hot_sql.moment(connection, now), "from_index": 0, "from_id": 0}).first()


def test_a_participant_who_has_submitted_gets_her_code_again_and_no_more_work(drained):
    app, engine = drained
    client, answer = visit(app, engine, REAL, made_up_pid())
    assignment = client.get("/api/annotate/next", headers=CSRF).get_json()["assignment"]
    receipt = client.post(f"/api/assignments/{assignment['assignment_id']}/submit", headers=CSRF,
                          json={"submission_id": uuid.uuid4().hex, "ratings": ratings(assignment)})
    assert receipt.status_code == 200 and receipt.get_json()["completion"] == COMPLETION
    open_before = open_assignments(engine)
    for path in ("/api/annotate/next", "/api/annotate/next?claim=no"):
        again = client.get(path, headers=CSRF)
        assert again.status_code == 200, path
        body = again.get_json()
        assert body["assignment"] is None and body["completion"] == COMPLETION, path
        assert "submitted" in body["message"]
    assert open_assignments(engine) == open_before and held(engine) == 0
    # The claim's own statement refuses her, whatever Python read before it (a second tab, a script).
    with Session(engine) as session:
        annotator_id = session.get(Assignment, assignment["assignment_id"]).annotator_id
    assert claim_directly(engine, "pilot", annotator_id) is None
    # A rater of the same study invited by the researcher may go on: one submission per participant is Prolific's.
    rater, token = invite(engine, "volunteer", "pilot")
    assert claim_directly(engine, "pilot", rater.id) is not None
