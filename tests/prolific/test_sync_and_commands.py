"""`empeval prolific link` and `empeval prolific sync`: the printed link admits participants; sync releases the
assignments of participants who returned or timed out on Prolific (asked of a stub of Prolific's API on
127.0.0.1), leaves everyone else's work alone, and every bad input exits 2 saying what to do."""
from __future__ import annotations

import re
import uuid

import pytest
from click.testing import CliRunner
from sqlalchemy import select
from sqlalchemy.orm import Session

from empeval.cli import cli
from empeval.server.annotation.prolific import release_departed
from empeval.server.errors import BadInput
from empeval.server.store.models import Annotator, Assignment, SeenContext
from empeval.tasks.study_create import create_study
from empeval.tasks.study_file import parse_study
from tests.prolific.conftest import CSRF, PROLIFIC_STUDY_ID, ids, link_path, study_file
from tests.prolific.stub_api import TOKEN, StubProlific

LEFT, TIMED_OUT_AFTER_SUBMITTING, WORKING, NEVER_SEEN = ("a1" * 12, "b2" * 12, "c3" * 12, "d4" * 12)


@pytest.fixture
def stub():
    server = StubProlific().start()
    yield server
    server.stop()


def empeval(engine, *args, env=None):
    return CliRunner().invoke(cli, ["--database-url", engine.url.render_as_string(hide_password=False), *args],
                              env=env)


def participant(app, engine, pid):
    client = app.test_client()
    assert client.get(link_path(engine), query_string=ids(pid=pid)).status_code == 303
    return client, client.get("/api/annotate/next", headers=CSRF).get_json()["assignment"]


def submission(assignment):
    return {"submission_id": uuid.uuid4().hex,
            "ratings": [{"item_id": item["item_id"], "scores": {c["key"]: 3 for c in assignment["criteria"]}}
                        for item in assignment["items"]]}


def assignment_row(engine, assignment_id):
    with Session(engine) as session:
        row = session.get_one(Assignment, assignment_id)
        seen = session.scalars(select(SeenContext.id).where(SeenContext.assignment_id == assignment_id)).all()
        return row.status, row.annotator_id, len(seen)


def test_sync_releases_the_work_of_those_who_left_and_nobody_elses(prolific_app, prolific_engine, stub):
    left, left_work = participant(prolific_app, prolific_engine, LEFT)
    done, done_work = participant(prolific_app, prolific_engine, TIMED_OUT_AFTER_SUBMITTING)
    assert done.post(f"/api/assignments/{done_work['assignment_id']}/submit", headers=CSRF,
                     json=submission(done_work)).status_code == 200
    _, working = participant(prolific_app, prolific_engine, WORKING)
    stub.submissions(PROLIFIC_STUDY_ID, [
        {"participant_id": LEFT, "status": "RETURNED"}, {"participant_id": TIMED_OUT_AFTER_SUBMITTING,
                                                         "status": "TIMED-OUT"},
        {"participant_id": WORKING, "status": "ACTIVE"}, {"participant_id": NEVER_SEEN, "status": "RETURNED"}])

    result = empeval(prolific_engine, "prolific", "sync", "pilot", "--api-url", stub.url,
                     env={"PROLIFIC_API_TOKEN": TOKEN})
    assert result.exit_code == 0, result.output
    assert result.output.strip() == ("3 participant(s) returned or timed out on Prolific, 2 of them seen here; "
                                     f"1 assignment(s) went back to the pool: {left_work['assignment_id']}")
    assert assignment_row(prolific_engine, left_work["assignment_id"]) == ("open", None, 0)  # as before her claim
    assert assignment_row(prolific_engine, done_work["assignment_id"])[0] == "submitted"
    assert assignment_row(prolific_engine, working["assignment_id"])[0] == "assigned"

    # Her page, still open, can no longer submit it; a new participant is handed it.
    late = left.post(f"/api/assignments/{left_work['assignment_id']}/submit", headers=CSRF,
                     json=submission(left_work))
    assert late.status_code == 404
    _, newcomer_work = participant(prolific_app, prolific_engine, "e5" * 12)
    assert newcomer_work["assignment_id"] == left_work["assignment_id"]
    # A second sync finds nothing left to release.
    again = empeval(prolific_engine, "prolific", "sync", "pilot", "--api-url", stub.url,
                    env={"PROLIFIC_API_TOKEN": TOKEN})
    assert again.exit_code == 0 and "0 assignment(s) went back" in again.output


def test_sync_without_the_api_token_exits_2_naming_the_variable(prolific_engine, stub):
    result = empeval(prolific_engine, "prolific", "sync", "pilot", "--api-url", stub.url,
                     env={"PROLIFIC_API_TOKEN": ""})
    assert result.exit_code == 2 and "PROLIFIC_API_TOKEN" in result.output and stub.requests == []


def test_sync_with_a_refused_token_exits_4_and_releases_nothing(prolific_app, prolific_engine, stub):
    _, work = participant(prolific_app, prolific_engine, LEFT)
    result = empeval(prolific_engine, "prolific", "sync", "pilot", "--api-url", stub.url,
                     env={"PROLIFIC_API_TOKEN": "wrong"})
    assert result.exit_code == 4 and "refused the API token" in result.output
    assert assignment_row(prolific_engine, work["assignment_id"])[0] == "assigned"


@pytest.mark.parametrize("command", ["sync", "link"])
def test_a_study_not_recruited_on_prolific_exits_2_saying_what_to_add(prolific_engine, stub, command):
    create_study(prolific_engine, parse_study(study_file("volunteers", recruitment={}, count=3)))
    result = empeval(prolific_engine, "prolific", command, "volunteers", "--base-url" if command == "link"
                     else "--api-url", "https://ratings.example.org" if command == "link" else stub.url,
                     env={"PROLIFIC_API_TOKEN": TOKEN})
    assert result.exit_code == 2 and 'platform = "prolific"' in result.output and stub.requests == []


@pytest.mark.parametrize("command", ["sync", "link"])
def test_an_unknown_study_exits_2(prolific_engine, command):
    option = ["--base-url", "https://ratings.example.org"] if command == "link" else []
    result = empeval(prolific_engine, "prolific", command, "nope", *option, env={"PROLIFIC_API_TOKEN": TOKEN})
    assert result.exit_code == 2 and "no study named 'nope'" in result.output


def test_link_prints_the_one_study_link_with_prolifics_placeholders_and_it_admits(prolific_app, prolific_engine):
    result = empeval(prolific_engine, "prolific", "link", "pilot", "--base-url", "https://ratings.example.org/")
    assert result.exit_code == 0, result.output
    link = result.stdout.strip()
    match = re.fullmatch(r"https://ratings\.example\.org(/prolific/[^?]+)\?PROLIFIC_PID=\{\{%PROLIFIC_PID%\}\}"
                         r"&STUDY_ID=\{\{%STUDY_ID%\}\}&SESSION_ID=\{\{%SESSION_ID%\}\}", link)
    assert match, link
    assert PROLIFIC_STUDY_ID in result.stderr and "C1A2B3C4" in result.stderr and "warning" not in result.stderr
    # What Prolific does with it: fill in the placeholders and send the participant there.
    answer = prolific_app.test_client().get(match.group(1), query_string=ids())
    assert answer.status_code == 303 and answer.headers["Location"] == "/annotate"


def test_link_warns_when_the_base_url_is_plain_http(prolific_engine):
    result = empeval(prolific_engine, "prolific", "link", "pilot", "--base-url", "http://127.0.0.1:5000")
    assert result.exit_code == 0 and "warning" in result.stderr and "HTTPS" in result.stderr


@pytest.mark.parametrize("base_url", ["ratings.example.org", "ftp://ratings.example.org", "https://",
                                      "https://ratings.example.org/?x=1", "https://ratings.example.org/#top"])
def test_link_refuses_a_base_url_that_is_not_an_address_exiting_2(prolific_engine, base_url):
    result = empeval(prolific_engine, "prolific", "link", "pilot", "--base-url", base_url)
    assert result.exit_code == 2 and "--base-url" in result.output and result.stdout.count("/prolific/") == 0


def test_link_without_a_base_url_points_where_the_store_was_last_served(prolific_engine):
    from empeval.cli.common import remember_base_url

    remember_base_url(prolific_engine, "https://served.example.org")
    result = empeval(prolific_engine, "prolific", "link", "pilot")
    assert result.exit_code == 0 and result.stdout.startswith("https://served.example.org/prolific/")


def test_release_refuses_ids_that_are_not_prolific_ids_and_releases_nothing(prolific_app, prolific_engine):
    _, work = participant(prolific_app, prolific_engine, LEFT)
    with pytest.raises(BadInput) as caught:
        release_departed(prolific_engine, "pilot", [LEFT, "'; DROP TABLE assignment; --"])
    assert "not a Prolific participant id" in caught.value.message
    assert assignment_row(prolific_engine, work["assignment_id"])[0] == "assigned"


def test_release_of_nobody_changes_nothing(prolific_app, prolific_engine):
    released = release_departed(prolific_engine, "pilot", [])
    assert released == (0, 0, [])


def test_pseudonyms_maps_prolific_ids_to_the_names_the_report_uses(prolific_app, prolific_engine):
    participant(prolific_app, prolific_engine, LEFT)
    result = empeval(prolific_engine, "prolific", "pseudonyms", LEFT, NEVER_SEEN)
    assert result.exit_code == 0, result.output
    rows = [line.split("\t") for line in result.stdout.splitlines()]
    assert [(pid, seen) for pid, _, seen in rows] == [(LEFT, "seen"), (NEVER_SEEN, "not seen here")]
    with Session(prolific_engine) as session:
        stored = session.scalars(select(Annotator.pseudonym).where(Annotator.provider == "prolific")).all()
    assert stored == [rows[0][1]] and rows[1][1].startswith("prolific-") and rows[1][1] != rows[0][1]
    from_stdin = CliRunner().invoke(cli, ["--database-url", prolific_engine.url.render_as_string(
        hide_password=False), "prolific", "pseudonyms", "-"], input=f"{LEFT}\n\n{NEVER_SEEN}\n")
    assert from_stdin.exit_code == 0 and from_stdin.stdout == result.stdout


def test_pseudonyms_refuses_what_is_not_a_prolific_id_exiting_2(prolific_engine):
    result = empeval(prolific_engine, "prolific", "pseudonyms", LEFT, "alice")
    assert result.exit_code == 2 and "'alice' is not a Prolific participant id" in result.output
    assert LEFT not in result.stdout
