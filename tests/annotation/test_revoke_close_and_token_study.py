"""An invite works in its own study only, and assignment ids reveal nothing: someone else's, another study's and
a nonexistent assignment all get the same 404. A revoked rater and a closed study get a 403 that says so, from
the API and through the CLI; `study status` shows a closed study."""
from __future__ import annotations

import pytest
from click.testing import CliRunner
from sqlalchemy import select
from sqlalchemy.orm import Session

from empeval.cli import cli
from empeval.server.annotation.annotators import invite, revoke
from empeval.server.annotation.handout import close_study
from empeval.server.store.models import Assignment, SeenContext
from tests.annotation.conftest import make_study, new_submission_id
from tests.store.helpers import snapshot


@pytest.fixture(autouse=True)
def signing_secret(monkeypatch):
    """The secret from the environment: no secret file under HOME that other test runs could remove meanwhile."""
    monkeypatch.setenv("EMPEVAL_SECRET_KEY", "one-active-assignment-tests-" + "k" * 32)


def auth(token):
    return {"Authorization": f"Bearer {token}"}


def ratings_for(assignment, score=3):
    return [{"item_id": i["item_id"], "scores": {"empathy": score, "relevance": score, "fluency": score}}
            for i in assignment["items"]]


def next_of(client, token):
    answer = client.get("/api/annotate/next", headers=auth(token))
    assert answer.status_code == 200, answer.get_json()
    return answer.get_json()["assignment"]


def submit(client, token, assignment_id, ratings, submission_id=None):
    return client.post(f"/api/assignments/{assignment_id}/submit", headers=auth(token),
                       json={"submission_id": submission_id or new_submission_id(), "ratings": ratings})


def cli_run(engine, *args):
    return CliRunner().invoke(cli, ["--database-url", engine.url.render_as_string(hide_password=False), *args])


def test_a_token_of_one_study_finds_no_assignment_of_another_and_the_404s_are_all_alike(study_engine,
                                                                                       client_factory):
    make_study(study_engine, name="second", count=6, k=1, per_assignment=3, controls=[])
    client = client_factory()
    _, alice_pilot = invite(study_engine, "alice", "pilot")
    _, alice_second = invite(study_engine, "alice", "second")
    _, bob = invite(study_engine, "bob", "pilot")
    in_second = next_of(client, alice_second)
    bobs = next_of(client, bob)
    before = snapshot(study_engine)
    answers = {
        "her own, of another study": (in_second["assignment_id"],
                                      submit(client, alice_pilot, in_second["assignment_id"], ratings_for(in_second))),
        "someone else's": (bobs["assignment_id"],
                           submit(client, alice_pilot, bobs["assignment_id"], ratings_for(bobs))),
        "nonexistent": (999999, submit(client, alice_pilot, 999999, ratings_for(bobs))),
    }
    for case, (assignment_id, answer) in answers.items():
        assert answer.status_code == 404, case
        assert answer.get_json()["message"] == f"you have no assignment {assignment_id}", case
    assert snapshot(study_engine) == before
    # With the right token the same assignment is hers.
    assert submit(client, alice_second, in_second["assignment_id"], ratings_for(in_second)).status_code == 200


def test_a_revoked_rater_is_told_so_and_her_work_in_progress_goes_back_to_the_pool(study_engine, client_factory):
    client = client_factory()
    _, alice = invite(study_engine, "alice", "pilot")
    first = next_of(client, alice)
    done = submit(client, alice, first["assignment_id"], ratings_for(first))
    assert done.status_code == 200
    in_progress = next_of(client, alice)
    revoked = cli_run(study_engine, "annotators", "revoke", "alice", "--study", "pilot")
    assert revoked.exit_code == 0, revoked.output
    assert "alice revoked in study pilot; 1 assignment(s) in progress went back to the pool" in revoked.output
    refused = client.get("/api/annotate/next", headers=auth(alice))
    assert refused.status_code == 403 and "revoked" in refused.get_json()["message"]
    late = submit(client, alice, in_progress["assignment_id"], ratings_for(in_progress))
    assert late.status_code == 403 and "revoked" in late.get_json()["message"]
    # Her stored submission stays, and sending it again still gets its receipt.
    again = client.post(f"/api/assignments/{first['assignment_id']}/submit", headers=auth(alice),
                        json={"submission_id": done.get_json()["submission_id"], "ratings": ratings_for(first)})
    assert again.status_code == 200 and again.get_json() == done.get_json()
    with Session(study_engine) as session:
        assert session.get_one(Assignment, in_progress["assignment_id"]).status == "expired"
        copy = session.scalar(select(Assignment).where(Assignment.replaces_id == in_progress["assignment_id"]))
        assert copy is not None and copy.status == "open"
        assert session.scalars(select(SeenContext)).all()  # she keeps what she saw
    twice = cli_run(study_engine, "annotators", "revoke", "alice", "--study", "pilot")
    assert twice.exit_code == 0 and "alice was revoked already in study pilot; 0 assignment(s)" in twice.output
    unknown = cli_run(study_engine, "annotators", "revoke", "nobody")
    assert unknown.exit_code == 2 and "no local annotator 'nobody'" in unknown.output


def test_revoking_everywhere_refuses_every_study_and_revoking_in_one_leaves_the_others(study_engine, client_factory):
    make_study(study_engine, name="second", count=6, k=1, per_assignment=3, controls=[])
    client = client_factory()
    _, ann_pilot = invite(study_engine, "ann", "pilot")
    _, ann_second = invite(study_engine, "ann", "second")
    _, ben_pilot = invite(study_engine, "ben", "pilot")
    _, ben_second = invite(study_engine, "ben", "second")
    revoke(study_engine, "ann")
    revoke(study_engine, "ben", study="pilot")
    for token in (ann_pilot, ann_second, ben_pilot):
        assert client.get("/api/annotate/next", headers=auth(token)).status_code == 403
    assert next_of(client, ben_second) is not None


def test_a_closed_study_hands_out_and_takes_nothing_and_status_shows_it(study_engine, client_factory):
    client = client_factory()
    _, alice = invite(study_engine, "alice", "pilot")
    _, bob = invite(study_engine, "bob", "pilot")
    held = next_of(client, alice)
    closed = cli_run(study_engine, "study", "close", "pilot")
    assert closed.exit_code == 0, closed.output
    assert "study pilot closed: 0 assignments submitted, 1 in progress left unfinished" in closed.output
    before = snapshot(study_engine)
    for answer in (client.get("/api/annotate/next", headers=auth(bob)),
                   submit(client, alice, held["assignment_id"], ratings_for(held))):
        assert answer.status_code == 403
        assert answer.get_json()["message"] == "study 'pilot' is closed and takes no more ratings. Thank you for " \
                                               "your help!"
    assert snapshot(study_engine) == before
    status = cli_run(study_engine, "study", "status", "pilot")
    assert status.exit_code == 0 and status.output.splitlines()[0] == "study pilot: closed"
    assert "assigned       1" in status.output
    assert not close_study(study_engine, "pilot").was_open
    assert "was closed already" in cli_run(study_engine, "study", "close", "pilot").output
    assert cli_run(study_engine, "study", "close", "nope").exit_code == 2
