"""Revoking or withdrawing a rater in one study touches that study only: her work in progress in her other studies
stays hers, on time, with no copy of it in the pool (server/annotation/annotators.py revoke,
server/annotation/withdraw.py forget, both through handout.expire_active_of's study filter); and a first withdrawal
that finds nothing to remove (she never worked there; her name is kept for her other study) is still recorded in
the study's log and reported as done, not as "already"."""
from __future__ import annotations

import pytest
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from empeval.server.annotation.annotators import invite, revoke
from empeval.server.annotation.handout import AccessRevoked, assignment_payload, next_assignment
from empeval.server.annotation.study_log import study_log
from empeval.server.annotation.submission import submit_assignment
from empeval.server.annotation.withdraw import forget
from empeval.server.store.models import Annotator, Assignment
from tests.annotation.conftest import make_study, new_submission_id
from tests.annotation.researcher_helpers import claim, cli_run, work


@pytest.fixture(autouse=True)
def signing_secret(monkeypatch):
    """The secret from the environment: no secret file that other test runs could remove meanwhile."""
    monkeypatch.setenv("EMPEVAL_SECRET_KEY", "withdrawal-promise-tests-" + "k" * 32)


def _holding_work_in_two_studies(engine) -> tuple[int, int, int]:
    """alice, invited to `pilot` and to `second`, holding an assignment in each: (her id, the pilot one, the
    second one)."""
    make_study(engine, name="second", count=6, k=1, per_assignment=3, controls=[])
    alice, _ = invite(engine, "alice", "pilot")
    invite(engine, "alice", "second")
    return alice.id, claim(engine, alice.id, "pilot"), claim(engine, alice.id, "second")


def _state(engine, assignment_id: int) -> tuple[str, int | None, bool, int]:
    """(status, holder, late, copies of it) of an assignment."""
    with Session(engine) as session:
        assignment = session.get_one(Assignment, assignment_id)
        copies = session.scalar(select(func.count()).select_from(Assignment)
                                .where(Assignment.replaces_id == assignment_id)) or 0
        return assignment.status, assignment.annotator_id, bool(assignment.late), copies


def _submit(engine, assignment_id: int, annotator_id: int) -> dict:
    items = assignment_payload(engine, assignment_id)["items"]
    return submit_assignment(engine, assignment_id, annotator_id, {
        "submission_id": new_submission_id(),
        "ratings": [{"item_id": i["item_id"], "scores": {"empathy": 3, "relevance": 3, "fluency": 3}} for i in items]})


def _still_hers_elsewhere(engine, alice: int, elsewhere: int) -> None:
    """Her assignment of `second` is untouched: still hers, active, not late, not copied to the pool; she resumes
    it and her submission is stored on time."""
    assert _state(engine, elsewhere) == ("assigned", alice, False, 0)
    assert next_assignment(engine, "second", alice) == elsewhere
    receipt = _submit(engine, elsewhere, alice)
    assert receipt["status"] == "stored" and receipt["late"] is False
    assert _state(engine, elsewhere) == ("submitted", alice, False, 0)


def test_revoking_her_in_one_study_leaves_her_work_in_progress_in_another(study_engine):
    alice, here, elsewhere = _holding_work_in_two_studies(study_engine)
    revoked = revoke(study_engine, "alice", study="pilot")
    assert (revoked.already, revoked.expired) == (False, 1)
    assert _state(study_engine, here) == ("expired", alice, False, 1)  # the one in pilot: expired, copied back
    with pytest.raises(AccessRevoked):
        next_assignment(study_engine, "pilot", alice)
    _still_hers_elsewhere(study_engine, alice, elsewhere)


def test_revoking_her_again_in_one_study_still_leaves_her_work_in_another(study_engine):
    alice, _, _ = _holding_work_in_two_studies(study_engine)
    revoke(study_engine, "alice", study="pilot")
    with Session(study_engine) as session:  # what she holds in second now (claimed after the first revocation)
        elsewhere = session.scalar(select(Assignment.id).where(Assignment.annotator_id == alice,
                                                               Assignment.status == "assigned"))
    assert elsewhere is not None, "the first revocation took her work in second"
    again = revoke(study_engine, "alice", study="pilot")
    assert (again.already, again.expired) == (True, 0)
    _still_hers_elsewhere(study_engine, alice, elsewhere)


def test_withdrawing_her_from_one_study_leaves_her_work_in_progress_in_another(study_engine):
    alice, here, elsewhere = _holding_work_in_two_studies(study_engine)
    done = forget(study_engine, "alice", study="pilot")
    assert (done.in_progress_expired, done.name_removed, done.name_kept_for) == (1, False, ("second",))
    assert _state(study_engine, here) == ("expired", alice, False, 1)
    _still_hers_elsewhere(study_engine, alice, elsewhere)


def test_a_first_withdrawal_that_removes_nothing_is_logged_and_reported_as_a_withdrawal(study_engine):
    # She was invited to pilot but never worked there; she works in second, which keeps her name. Nothing of hers
    # is in pilot to delete, yet withdrawing her there is a first withdrawal: it is recorded, and said so.
    make_study(study_engine, name="second", count=6, k=1, per_assignment=3, controls=[])
    alice, _ = invite(study_engine, "alice", "pilot")
    invite(study_engine, "alice", "second")
    work(study_engine, alice.id, "second")
    result = cli_run(study_engine, "annotators", "forget", "alice", "--study", "pilot")
    assert result.exit_code == 0, result.output
    assert result.output.splitlines()[:2] == [
        "alice withdrawn from study pilot: 0 ratings and 0 comment(s) deleted; 0 submitted assignment(s) and 0 in "
        "progress back in the pool for other raters",
        "her name is kept: she still takes part in second (forget her there too to delete it)"]
    (entry,) = study_log(study_engine, "pilot")
    assert (entry.event, entry.annotator_id) == ("withdrawal", alice.id)
    assert entry.detail == {"ratings_removed": 0, "comments_removed": 0, "assignments_reopened": 0,
                            "in_progress_expired": 0, "name_removed": False, "name_kept_for": ["second"],
                            "released_before": []}
    assert study_log(study_engine, "second") == []
    with pytest.raises(AccessRevoked):  # withdrawn there: no work in pilot from now on
        next_assignment(study_engine, "pilot", alice.id)
    with Session(study_engine) as session:
        assert session.get_one(Annotator, alice.id).display_name == "alice"
    # The second time, and only then, there is nothing left to do.
    again = cli_run(study_engine, "annotators", "forget", "alice", "--study", "pilot")
    assert again.output.splitlines()[0] == "alice was withdrawn from study pilot already: nothing left to remove"
    assert len(study_log(study_engine, "pilot")) == 1


def test_a_first_withdrawal_of_a_name_kept_elsewhere_returns_a_withdrawal_not_already(study_engine):
    make_study(study_engine, name="second", count=6, k=1, per_assignment=3, controls=[])
    alice, _ = invite(study_engine, "alice", "pilot")
    invite(study_engine, "alice", "second")
    work(study_engine, alice.id, "second")
    first = forget(study_engine, "alice", study="pilot")
    assert (first.already, first.answers_removed, first.in_progress_expired, first.name_removed,
            first.name_kept_for) == (False, 0, 0, False, ("second",))
    assert forget(study_engine, "alice", study="pilot").already is True
