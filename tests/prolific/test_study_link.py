"""The Prolific study link: a participant's first visit creates a pseudonymised annotator and sets the invite
cookie, later visits find the same one (two first visits at once too), and every malformed id, foreign study,
altered link, closed study or revoked participant is refused with a message saying what to do, storing nothing."""
from __future__ import annotations

import threading

import pytest
from sqlalchemy import event, func, select
from sqlalchemy.orm import Session

from empeval.server.annotation.annotators import revoke
from empeval.server.annotation.handout import close_study
from empeval.server.annotation.prolific import make_study_token
from empeval.server.annotation.secrets import read_invite, secret_key
from empeval.server.store.models import Annotator
from empeval.server.web import create_app
from empeval.server.web.auth import INVITE_COOKIE
from empeval.tasks.study_create import create_study
from empeval.tasks.study_file import parse_study
from tests.prolific.conftest import CSRF, OTHER_PROLIFIC_STUDY_ID, PID, ids, link_path, study_file
from tests.store.helpers import snapshot

OTHER_PID = "5e9d8c7b6a5f4e3d2c1b0a00"
WAIT = 10  # seconds a thread waits for the other (never reached when all is well)


def prolific_annotators(engine) -> list[Annotator]:
    with Session(engine) as session:
        return list(session.scalars(select(Annotator).where(Annotator.provider == "prolific")))


def visit(app, engine, **query):
    client = app.test_client()
    return client, client.get(link_path(engine), query_string=query or ids())


def invited_annotator(client, engine) -> int:
    cookie = client.get_cookie(INVITE_COOKIE)
    assert cookie is not None, "no invite cookie was set"
    annotator_id, study = read_invite(secret_key(engine), cookie.value)
    assert study == "pilot"
    return annotator_id


def test_a_first_visit_creates_a_pseudonymised_annotator_and_sends_her_to_the_task_page(prolific_app, prolific_engine):
    client, answer = visit(prolific_app, prolific_engine)
    assert answer.status_code == 303 and answer.headers["Location"] == "/annotate"
    cookie = client.get_cookie(INVITE_COOKIE)
    assert cookie.http_only and cookie.same_site == "Strict"
    [annotator] = prolific_annotators(prolific_engine)
    assert invited_annotator(client, prolific_engine) == annotator.id
    assert annotator.display_name is None and PID not in annotator.pseudonym
    assert PID not in repr(snapshot(prolific_engine))  # her Prolific id is stored nowhere, in any table
    # The cookie is the invite flow's: the task API hands her an assignment with it.
    work = client.get("/api/annotate/next", headers=CSRF)
    assert work.status_code == 200 and work.get_json()["assignment"]["items"]


def test_a_second_visit_finds_the_same_annotator_and_another_participant_gets_her_own(prolific_app, prolific_engine):
    first, _ = visit(prolific_app, prolific_engine)
    again, answer = visit(prolific_app, prolific_engine, **ids(session="0" * 24))  # a new Prolific session
    other, _ = visit(prolific_app, prolific_engine, **ids(pid=OTHER_PID))
    assert answer.status_code == 303
    assert invited_annotator(first, prolific_engine) == invited_annotator(again, prolific_engine)
    assert invited_annotator(other, prolific_engine) != invited_annotator(first, prolific_engine)
    assert len(prolific_annotators(prolific_engine)) == 2


def test_two_first_visits_at_once_make_one_annotator(prolific_app, prolific_engine):
    # Both requests read "no such annotator" before either inserts (forced by a barrier after the read), so both
    # insert: the store's unique (provider, pseudonym) key lets one through and the other reads the winner's row.
    engine = prolific_app.extensions["empeval.engine"]
    barrier = threading.Barrier(2, timeout=WAIT)
    waited = threading.local()

    def after_read(conn, cursor, statement, parameters, context, executemany):
        if "FROM annotator" in statement and "annotator.pseudonym =" in statement and not getattr(waited, "x", 0):
            waited.x = 1
            barrier.wait()

    event.listen(engine, "after_cursor_execute", after_read)
    answers: dict[int, tuple] = {}

    def first_visit(n: int) -> None:
        answers[n] = visit(prolific_app, prolific_engine)

    try:
        threads = [threading.Thread(target=first_visit, args=(n,)) for n in range(2)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(WAIT * 3)
    finally:
        event.remove(engine, "after_cursor_execute", after_read)
    assert not barrier.broken and sorted(answers) == [0, 1]
    assert [answers[n][1].status_code for n in range(2)] == [303, 303]
    assert invited_annotator(answers[0][0], prolific_engine) == invited_annotator(answers[1][0], prolific_engine)
    assert len(prolific_annotators(prolific_engine)) == 1


@pytest.mark.parametrize(("query", "named"), [
    (ids(pid=PID.upper()), "PROLIFIC_PID"),
    (ids(pid=PID[:-1]), "PROLIFIC_PID"),
    (ids(pid=PID + "0"), "PROLIFIC_PID"),
    (ids(pid="g" * 24), "PROLIFIC_PID"),
    (ids(pid=""), "PROLIFIC_PID"),
    (ids(pid="{{%PROLIFIC_PID%}}"), "PROLIFIC_PID"),  # the link opened as pasted, not from Prolific
    (ids(pid="<script>alert(1)</script>"), "PROLIFIC_PID"),
    (ids(pid="５e9d8c7b6a5f4e3d2c1b0a99"), "PROLIFIC_PID"),  # a full-width digit
    (ids(pid=PID + "\n"), "PROLIFIC_PID"),
    (ids(pid="a" * 5000), "PROLIFIC_PID"),
    ({"STUDY_ID": ids()["STUDY_ID"], "SESSION_ID": ids()["SESSION_ID"]}, "PROLIFIC_PID"),
    ({**ids(), "PROLIFIC_PID": [PID, OTHER_PID]}, "PROLIFIC_PID"),
    (ids(study_id="x" * 24), "STUDY_ID"),
    ({"PROLIFIC_PID": PID, "SESSION_ID": ids()["SESSION_ID"]}, "STUDY_ID"),
    (ids(session="1234"), "SESSION_ID"),
    ({"PROLIFIC_PID": PID, "STUDY_ID": ids()["STUDY_ID"]}, "SESSION_ID"),
])
def test_a_malformed_or_missing_prolific_id_is_refused_naming_the_parameter(prolific_app, prolific_engine, query,
                                                                           named):
    before = snapshot(prolific_engine)
    client, answer = visit(prolific_app, prolific_engine, **query)
    assert answer.status_code == 400
    assert answer.get_json()["message"].startswith(f"{named} ") or f"no {named}" in answer.get_json()["message"] \
        or f"gives {named}" in answer.get_json()["message"]
    assert client.get_cookie(INVITE_COOKIE) is None and snapshot(prolific_engine) == before


def test_a_link_opened_from_another_prolific_study_is_forbidden(prolific_app, prolific_engine):
    client, answer = visit(prolific_app, prolific_engine, **ids(study_id=OTHER_PROLIFIC_STUDY_ID))
    assert answer.status_code == 403
    assert OTHER_PROLIFIC_STUDY_ID in answer.get_json()["message"] and "go back to Prolific" in \
        answer.get_json()["message"]
    assert client.get_cookie(INVITE_COOKIE) is None and prolific_annotators(prolific_engine) == []


@pytest.mark.parametrize("token", ["not-a-token", "", "eyJzIjoicGlsb3QifQ.forged"])
def test_an_altered_study_link_is_forbidden(prolific_app, prolific_engine, token):
    answer = prolific_app.test_client().get(f"/prolific/{token}x", query_string=ids())
    assert answer.status_code == 403 and "not valid" in answer.get_json()["message"]
    assert prolific_annotators(prolific_engine) == []


def test_a_link_signed_by_another_installation_is_forbidden(prolific_app, prolific_engine):
    answer = prolific_app.test_client().get(f"/prolific/{make_study_token('another secret ' * 3, 'pilot')}",
                                            query_string=ids())
    assert answer.status_code == 403 and prolific_annotators(prolific_engine) == []


def test_a_link_to_a_study_not_recruited_on_prolific_is_forbidden(prolific_app, prolific_engine):
    create_study(prolific_engine, parse_study(study_file("volunteers", recruitment={}, count=3)))
    answer = prolific_app.test_client().get(link_path(prolific_engine, "volunteers"), query_string=ids())
    assert answer.status_code == 403 and "recruitment.platform is 'local'" in answer.get_json()["message"]
    assert prolific_annotators(prolific_engine) == []


def test_a_closed_study_lets_nobody_in(prolific_app, prolific_engine):
    close_study(prolific_engine, "pilot")
    client, answer = visit(prolific_app, prolific_engine)
    assert answer.status_code == 403 and "closed" in answer.get_json()["message"]
    assert client.get_cookie(INVITE_COOKIE) is None and prolific_annotators(prolific_engine) == []


def test_a_revoked_participant_is_refused_on_her_next_visit(prolific_app, prolific_engine):
    visit(prolific_app, prolific_engine)
    revoke(prolific_engine, PID, study="pilot", provider="prolific")  # `annotators revoke PID --provider prolific`
    client, answer = visit(prolific_app, prolific_engine)
    assert answer.status_code == 403 and "revoked" in answer.get_json()["message"]
    assert client.get_cookie(INVITE_COOKIE) is None


def test_a_browser_is_told_what_went_wrong_on_a_page_with_the_same_status(prolific_app, prolific_engine):
    hostile = "<b>x</b>"
    answer = prolific_app.test_client().get(link_path(prolific_engine), query_string=ids(pid=hostile),
                                            headers={"Accept": "text/html,application/xhtml+xml,*/*;q=0.8"})
    page = answer.get_data(as_text=True)
    assert answer.status_code == 400 and answer.mimetype == "text/html"
    assert "PROLIFIC_PID must be a Prolific id" in page and "&lt;b&gt;x&lt;/b&gt;" in page and hostile not in page


def test_failed_link_checks_are_counted_by_the_failure_limiter(prolific_engine):
    app = create_app({"DATABASE_URL": prolific_engine.url.render_as_string(hide_password=False), "TESTING": True,
                      "AUTH_FAILURE_LIMIT": 2})
    client = app.test_client()
    assert client.get("/prolific/forged", query_string=ids()).status_code == 403
    assert client.get(link_path(prolific_engine), query_string=ids(study_id=OTHER_PROLIFIC_STUDY_ID)).status_code \
        == 403
    limited = client.get(link_path(prolific_engine), query_string=ids())  # a good link, from a limited address
    assert limited.status_code == 429 and "Retry-After" in limited.headers
    with Session(prolific_engine) as session:
        assert session.scalar(select(func.count()).select_from(Annotator)) == 0


def test_the_request_log_never_shows_a_participant_id():
    import logging

    from empeval.server.web.app import RedactTokens

    line = f"GET /prolific/tok?PROLIFIC_PID={PID}&STUDY_ID={OTHER_PROLIFIC_STUDY_ID}&SESSION_ID=1 HTTP/1.1"
    record = logging.LogRecord("werkzeug", logging.INFO, "", 0, '"%s" %s -', (line, "303"), None)
    assert RedactTokens().filter(record)
    assert PID not in record.getMessage() and "PROLIFIC_PID=[redacted]&STUDY_ID=" in record.getMessage()
