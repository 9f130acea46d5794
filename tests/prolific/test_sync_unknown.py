"""`empeval prolific sync` names the participants Prolific does not know (ids made up: Prolific lists everyone it
sent as soon as she starts), by pseudonym with what they hold and submitted, and with --release-unknown puts the work
they hold back in the pool; the work of participants Prolific knows is left alone."""
from __future__ import annotations

import pytest

from empeval.server.annotation.annotators import pseudonym_for
from empeval.server.annotation.prolific import PROVIDER
from empeval.server.annotation.secrets import secret_key
from tests.prolific.conftest import PROLIFIC_STUDY_ID
from tests.prolific.stub_api import TOKEN, StubProlific
from tests.prolific.test_sync_and_commands import assignment_row, empeval, participant, submission

REAL, MADE_UP, MADE_UP_DONE = "a1" * 12, "e5" * 12, "f6" * 12


@pytest.fixture
def stub():
    server = StubProlific().start()
    yield server
    server.stop()


def test_sync_names_participants_prolific_does_not_know_and_releases_their_work_when_asked(
        prolific_app, prolific_engine, stub):
    _, real_work = participant(prolific_app, prolific_engine, REAL)
    _, made_up_work = participant(prolific_app, prolific_engine, MADE_UP)
    done, done_work = participant(prolific_app, prolific_engine, MADE_UP_DONE)
    assert done.post(f"/api/assignments/{done_work['assignment_id']}/submit", headers={"X-Requested-With": "empeval"},
                     json=submission(done_work)).status_code == 200
    stub.submissions(PROLIFIC_STUDY_ID, [{"participant_id": REAL, "status": "ACTIVE"}])
    secret = secret_key(prolific_engine)
    made_up, made_up_done = (pseudonym_for(secret, PROVIDER, pid) for pid in (MADE_UP, MADE_UP_DONE))

    reported = empeval(prolific_engine, "prolific", "sync", "pilot", "--api-url", stub.url,
                       env={"PROLIFIC_API_TOKEN": TOKEN})
    assert reported.exit_code == 0, reported.output
    lines = reported.output.splitlines()
    assert "2 participant(s) here are unknown to Prolific" in reported.output
    assert f"  {made_up}\tholds {made_up_work['assignment_id']}\tsubmitted 0" in lines
    assert f"  {made_up_done}\tholds nothing\tsubmitted 1" in lines
    assert "--release-unknown" in lines[-1]
    assert assignment_row(prolific_engine, made_up_work["assignment_id"])[0] == "assigned"  # reported only

    released = empeval(prolific_engine, "prolific", "sync", "pilot", "--api-url", stub.url, "--release-unknown",
                       env={"PROLIFIC_API_TOKEN": TOKEN})
    assert released.exit_code == 0, released.output
    assert released.output.splitlines()[-1] == (f"1 assignment(s) they held went back to the pool: "
                                                f"{made_up_work['assignment_id']}")
    assert assignment_row(prolific_engine, made_up_work["assignment_id"]) == ("open", None, 0)
    assert assignment_row(prolific_engine, real_work["assignment_id"])[0] == "assigned"
    assert assignment_row(prolific_engine, done_work["assignment_id"])[0] == "submitted"
