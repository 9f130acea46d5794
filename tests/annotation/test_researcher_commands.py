"""The researcher's bookkeeping commands, through the CLI on real stores (a SQLite file, then PostgreSQL): `study
list`, `annotators list`, `assignments release` and `annotators forget` (a participant's withdrawal)."""
from __future__ import annotations

from datetime import timedelta

import pytest
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from empeval.server.annotation.annotators import invite, pseudonym_for
from empeval.server.annotation.export import export_rows
from empeval.server.annotation.handout import assignment_payload, close_study, next_assignment
from empeval.server.annotation.secrets import secret_key
from empeval.server.annotation.study_log import study_log
from empeval.server.annotation.submission import submit_assignment
from empeval.server.store.kinds.likert import AssignmentItem, Rating
from empeval.server.store.models import Annotator, Assignment, SeenContext, Study
from empeval.server.store.queries import now_utc
from tests.annotation.conftest import make_study, new_submission_id, placed_items
from tests.annotation.researcher_helpers import claim, cli_run, work
from tests.store.helpers import snapshot


@pytest.fixture(autouse=True)
def signing_secret(monkeypatch):
    """The secret from the environment: no secret file under HOME that other test runs could remove meanwhile."""
    monkeypatch.setenv("EMPEVAL_SECRET_KEY", "researcher-command-tests-" + "k" * 32)


def lines_of(output: str) -> dict[str, list[str]]:
    """A text table's rows by their first cell, split on runs of blanks."""
    return {line.split()[0]: line.split() for line in output.strip().splitlines()}


def status_of(engine, assignment_id: int) -> tuple[str, int | None]:
    with Session(engine) as session:
        assignment = session.get_one(Assignment, assignment_id)
        return assignment.status, assignment.annotator_id


# study list


def assignments_of(engine, study: str) -> int:
    with Session(engine) as session:
        return session.scalar(select(func.count()).select_from(Assignment).join(Study)
                              .where(Study.name == study)) or 0


def test_study_list_shows_kind_status_assignments_done_of_total_and_annotators(study_engine):
    make_study(study_engine, name="second", count=4, k=1, per_assignment=4, systems=["sys-a", "sys-b"], controls=[])
    alice, _ = invite(study_engine, "alice", "pilot")
    bob, _ = invite(study_engine, "bob", "pilot")
    work(study_engine, alice.id)
    claim(study_engine, bob.id)
    close_study(study_engine, "second")
    pilot_total, second_total = assignments_of(study_engine, "pilot"), assignments_of(study_engine, "second")
    result = cli_run(study_engine, "study", "list")
    assert result.exit_code == 0, result.output
    rows = lines_of(result.output)
    assert rows["study"][:5] == ["study", "kind", "status", "assignments", "annotators"]
    assert rows["pilot"][1:5] == ["likert", "open", f"1/{pilot_total}", "2"]
    assert rows["second"][1:5] == ["likert", "closed", f"0/{second_total}", "0"]
    assert list(rows) == ["study", "pilot", "second"]  # oldest first


def test_study_list_counts_an_expired_assignment_once_by_the_copy_that_replaced_it(study_engine):
    alice, _ = invite(study_engine, "alice", "pilot")
    before = assignments_of(study_engine, "pilot")
    claim(study_engine, alice.id, now=now_utc() - timedelta(hours=2))  # 30-minute deadline, long past
    bob, _ = invite(study_engine, "bob", "pilot")
    claim(study_engine, bob.id)  # the hand-out expires the overdue one and puts a copy in the pool
    rows = lines_of(cli_run(study_engine, "study", "list").output)
    assert rows["pilot"][3] == f"0/{before}"


def test_study_list_on_an_empty_store_says_how_to_make_a_study(sample_engine):
    result = cli_run(sample_engine, "study", "list")
    assert result.exit_code == 0
    assert result.output.strip() == "no study yet: create one with `empeval study create STUDY.toml`"


# annotators list


def test_annotators_list_shows_pseudonym_name_work_done_and_in_progress_and_revocations(study_engine):
    alice, _ = invite(study_engine, "alice", "pilot")
    bob, _ = invite(study_engine, "bob", "pilot")
    carol, _ = invite(study_engine, "carol", "pilot")
    work(study_engine, alice.id)
    work(study_engine, alice.id)
    holding = claim(study_engine, bob.id)
    claim(study_engine, carol.id)
    assert cli_run(study_engine, "annotators", "revoke", "carol", "--study", "pilot").exit_code == 0
    result = cli_run(study_engine, "annotators", "list", "pilot")
    assert result.exit_code == 0, result.output
    rows = {row[1]: row for row in lines_of(result.output).values()}
    assert rows["name"] == ["pseudonym", "name", "submitted", "holding", "revoked", "withdrawn", "flagged"]
    assert rows["alice"] == [alice.pseudonym, "alice", "2", "-", "no", "no", rows["alice"][-1]]
    assert rows["bob"] == [bob.pseudonym, "bob", "0", f"#{holding}", "no", "no", "no"]  # an id, not a count
    assert rows["carol"] == [carol.pseudonym, "carol", "0", "-", "yes", "no", "no"]  # her work went back


def test_annotators_list_flags_a_rater_the_quality_rules_flag(study_engine):
    fast, _ = invite(study_engine, "fast", "pilot")
    careful, _ = invite(study_engine, "careful", "pilot")
    work(study_engine, fast.id, seconds=1.0)  # median 1 s per item: below the report's 5 s
    work(study_engine, careful.id, seconds=20.0)
    rows = {row[1]: row for row in lines_of(cli_run(study_engine, "annotators", "list", "pilot").output).values()}
    assert rows["fast"][-1] == "yes"
    assert rows["careful"][-1] == "no"


def test_annotators_list_of_an_unknown_study_exits_2_and_of_an_unstarted_one_says_how_to_invite(study_engine):
    result = cli_run(study_engine, "annotators", "list", "nope")
    assert result.exit_code == 2 and "no study named 'nope'" in result.output
    result = cli_run(study_engine, "annotators", "list", "pilot")
    assert result.exit_code == 0
    assert "no annotator has started study pilot yet: `empeval annotators invite NAME --study pilot`" in result.output


# assignments release


def test_release_puts_an_abandoned_assignment_back_and_another_rater_gets_it(study_engine):
    alice, _ = invite(study_engine, "alice", "pilot")
    bob, _ = invite(study_engine, "bob", "pilot")
    abandoned = claim(study_engine, alice.id)
    with Session(study_engine) as session:
        assert session.scalar(select(func.count()).where(SeenContext.assignment_id == abandoned))
    result = cli_run(study_engine, "assignments", "release", str(abandoned))
    assert result.exit_code == 0, result.output
    assert result.output.strip() == (f"assignment {abandoned} of study pilot (held by {alice.pseudonym}) is back in "
                                     f"the pool")
    assert status_of(study_engine, abandoned) == ("open", None)
    with Session(study_engine) as session:  # her claim's seen rows went with it: nothing of hers was stored
        assert session.scalar(select(func.count()).where(SeenContext.assignment_id == abandoned)) == 0
    assert next_assignment(study_engine, "pilot", bob.id) == abandoned  # first in design order again


def test_release_refuses_a_submitted_assignment_with_exit_2_and_changes_nothing(study_engine):
    alice, _ = invite(study_engine, "alice", "pilot")
    done = work(study_engine, alice.id)
    before = snapshot(study_engine)
    result = cli_run(study_engine, "assignments", "release", str(done))
    assert result.exit_code == 2
    assert f"assignment {done} of study 'pilot' was submitted at" in result.output
    assert "its ratings are stored, so it cannot go back to the pool" in result.output
    assert "`empeval annotators forget NAME --study pilot`" in result.output
    assert snapshot(study_engine) == before


def test_release_refuses_an_open_an_expired_an_unknown_and_a_malformed_id(study_engine):
    alice, _ = invite(study_engine, "alice", "pilot")
    bob, _ = invite(study_engine, "bob", "pilot")
    overdue = claim(study_engine, alice.id, now=now_utc() - timedelta(hours=2))
    claim(study_engine, bob.id)  # expires alice's: a copy replaces it
    with Session(study_engine) as session:
        copy = session.scalar(select(Assignment.id).where(Assignment.replaces_id == overdue))
        never = session.scalar(select(Assignment.id).where(Assignment.status == "open", Assignment.id != copy)
                               .order_by(Assignment.id.desc()))
    before = snapshot(study_engine)
    cases = {
        str(never): f"assignment {never} of study 'pilot' is not handed out to anyone: it is in the pool already",
        str(overdue): f"assignment {overdue} of study 'pilot' has expired already and assignment {copy}, a copy of "
                      f"it, replaced it in the pool",
        "99999": "no assignment 99999: `empeval annotators list STUDY` shows the assignments in progress",
        "0": "Invalid value for 'ASSIGNMENT_ID': 0 is not in the range 1<=x<=2147483647",  # no row has id 0
        "twelve": "'twelve' is not a valid integer",
    }
    for argument, message in cases.items():
        result = cli_run(study_engine, "assignments", "release", argument)
        assert result.exit_code == 2, argument
        assert message in " ".join(result.output.split()), (argument, result.output)
    assert snapshot(study_engine) == before


# annotators forget


def count(engine, model, *where) -> int:
    with Session(engine) as session:
        return session.scalar(select(func.count()).select_from(model).where(*where)) or 0


def test_forget_removes_her_ratings_comments_and_name_and_logs_it_without_the_name(study_engine):
    alice, _ = invite(study_engine, "alice", "pilot")
    bob, _ = invite(study_engine, "bob", "pilot")
    first = work(study_engine, alice.id, comment="I am Alice Smith, call me")
    in_progress = claim(study_engine, alice.id)
    work(study_engine, bob.id, comment="fine")
    hers = count(study_engine, Rating, Rating.annotator_id == alice.id)
    assert hers > 0
    seen_before = count(study_engine, SeenContext, SeenContext.annotator_id == alice.id)
    with Session(study_engine) as session:
        first_items = sorted(session.scalars(select(AssignmentItem.item_id)
                                             .where(AssignmentItem.assignment_id == first)))

    result = cli_run(study_engine, "annotators", "forget", "alice", "--study", "pilot")
    assert result.exit_code == 0, result.output
    assert result.output.splitlines()[0] == (f"alice withdrawn from study pilot: {hers} ratings and 1 "
                                             f"comment(s) deleted; 1 submitted assignment(s) and 1 in progress back "
                                             f"in the pool for other raters")
    assert "her name is deleted and her pseudonym replaced by a tombstone" in result.output

    rows = export_rows(study_engine, "pilot")
    assert rows and {row["annotator"] for row in rows} == {bob.pseudonym}  # she left the export, bob stays
    assert count(study_engine, Rating, Rating.annotator_id == alice.id) == 0
    with Session(study_engine) as session:
        row = session.get_one(Annotator, alice.id)
        assert row.display_name is None and row.revoked_at is not None
        assert row.pseudonym.startswith("withdrawn-") and row.pseudonym != alice.pseudonym
        assert session.scalar(select(func.count()).where(Assignment.comment.is_not(None))) == 1  # bob's
        # each of her assignments is expired and has one open copy with the same items
        statuses = dict(session.execute(select(Assignment.id, Assignment.status)
                                        .where(Assignment.annotator_id == alice.id)).all())
        assert set(statuses.values()) == {"expired"} and in_progress in statuses
        copies = session.scalars(select(Assignment).where(Assignment.replaces_id.in_(statuses))).all()
        assert sorted(c.replaces_id for c in copies) == sorted(statuses)
        assert {c.status for c in copies} == {"open"}
        copy_of_first = next(c for c in copies if c.replaces_id == first)
        assert sorted(i.item_id for i in placed_items(session, copy_of_first.id)) == first_items
    # the hand-out's promise is kept by her seen rows, which stay
    assert count(study_engine, SeenContext, SeenContext.annotator_id == alice.id) == seen_before
    (entry,) = study_log(study_engine, "pilot")
    assert entry.event == "withdrawal" and entry.annotator_id == alice.id
    assert entry.detail == {"ratings_removed": hers, "comments_removed": 1,
                            "assignments_reopened": 1, "in_progress_expired": 1, "name_removed": True,
                            "name_kept_for": [], "released_before": []}
    assert "alice" not in repr(snapshot(study_engine)).lower()  # the name is nowhere in the store


def test_forget_twice_changes_nothing_the_second_time(study_engine):
    alice, _ = invite(study_engine, "alice", "pilot")
    work(study_engine, alice.id)
    assert cli_run(study_engine, "annotators", "forget", "alice", "--study", "pilot").exit_code == 0
    before = snapshot(study_engine)
    again = cli_run(study_engine, "annotators", "forget", "alice", "--study", "pilot")
    assert again.exit_code == 0, again.output
    assert again.output.splitlines()[0] == "alice was withdrawn from study pilot already: nothing left to remove"
    assert snapshot(study_engine) == before


def test_a_withdrawn_participant_gets_no_more_work_and_a_new_rater_takes_her_copies(study_engine):
    alice, token = invite(study_engine, "alice", "pilot")
    done = work(study_engine, alice.id)
    assert cli_run(study_engine, "annotators", "forget", "alice", "--study", "pilot").exit_code == 0
    from empeval.server.annotation.handout import AccessRevoked

    with pytest.raises(AccessRevoked):
        next_assignment(study_engine, "pilot", alice.id)
    bob, _ = invite(study_engine, "bob", "pilot")
    with Session(study_engine) as session:
        copy = session.scalar(select(Assignment.id).where(Assignment.replaces_id == done))
    assert next_assignment(study_engine, "pilot", bob.id) == copy  # same place in design order as hers


def test_forget_keeps_the_name_while_she_takes_part_in_another_study_and_says_where(study_engine):
    make_study(study_engine, name="second", count=6, k=1, per_assignment=3, controls=[])
    alice, _ = invite(study_engine, "alice", "pilot")
    invite(study_engine, "alice", "second")
    work(study_engine, alice.id)
    work(study_engine, alice.id, "second")
    result = cli_run(study_engine, "annotators", "forget", "alice", "--study", "pilot")
    assert result.exit_code == 0, result.output
    assert "her name is kept: she still takes part in second (forget her there too to delete it)" in result.output
    with Session(study_engine) as session:
        row = session.get_one(Annotator, alice.id)
        assert (row.display_name, row.pseudonym, row.revoked_at) == ("alice", alice.pseudonym, None)
    assert {r["annotator"] for r in export_rows(study_engine, "second")} == {alice.pseudonym}  # untouched there
    assert next_assignment(study_engine, "second", alice.id) is not None  # she may go on there
    # withdrawing her from the other study too deletes the name
    result = cli_run(study_engine, "annotators", "forget", "alice", "--study", "second")
    assert result.exit_code == 0 and "her name is deleted" in result.output
    assert study_log(study_engine, "pilot")[0].detail["name_kept_for"] == ["second"]


def test_forget_refuses_an_unknown_participant_and_an_unknown_study_with_exit_2(study_engine):
    invite(study_engine, "alice", "pilot")
    before = snapshot(study_engine)
    result = cli_run(study_engine, "annotators", "forget", "alise", "--study", "pilot")
    assert result.exit_code == 2
    assert "no local annotator 'alise': check the name as it was invited" in " ".join(result.output.split())
    result = cli_run(study_engine, "annotators", "forget", "alice", "--study", "nope")
    assert result.exit_code == 2 and "no study named 'nope'" in result.output
    result = cli_run(study_engine, "annotators", "forget", "alice")
    assert result.exit_code == 2 and "Missing option '--study'" in result.output
    assert snapshot(study_engine) == before


def test_forget_of_a_late_submission_puts_no_second_copy_in_the_pool(study_engine):
    alice, _ = invite(study_engine, "alice", "pilot")
    bob, _ = invite(study_engine, "bob", "pilot")
    late = claim(study_engine, alice.id, now=now_utc() - timedelta(hours=2))
    claim(study_engine, bob.id)  # expires hers: a copy goes to the pool
    items = assignment_payload(study_engine, late)["items"]
    receipt = submit_assignment(study_engine, late, alice.id, {
        "submission_id": new_submission_id(),
        "ratings": [{"item_id": i["item_id"], "scores": {"empathy": 2, "relevance": 2, "fluency": 2}} for i in items]})
    assert receipt["late"] is True and status_of(study_engine, late)[0] == "submitted"
    assert count(study_engine, Assignment, Assignment.replaces_id == late) == 1
    result = cli_run(study_engine, "annotators", "forget", "alice", "--study", "pilot")
    assert result.exit_code == 0 and "0 submitted assignment(s)" in result.output
    assert count(study_engine, Assignment, Assignment.replaces_id == late) == 1
    assert status_of(study_engine, late)[0] == "expired"


def test_the_tombstone_is_not_the_pseudonym_of_anyone_invited_under_that_name(study_engine):
    alice, _ = invite(study_engine, "alice", "pilot")
    work(study_engine, alice.id)
    assert cli_run(study_engine, "annotators", "forget", "alice", "--study", "pilot").exit_code == 0
    again, _ = invite(study_engine, "alice", "pilot")  # a new invite makes a new participant
    assert again.id != alice.id
    assert again.pseudonym == pseudonym_for(secret_key(study_engine), "local", "alice")


def test_forget_in_an_ab_study_removes_her_choices_and_reopens_her_pairs_on_the_same_sides(sample_engine):
    from empeval.server.store.kinds.pairwise import AssignmentPair, Choice
    from tests.annotation.pairwise_fixtures import make_ab_study

    make_ab_study(sample_engine, name="ab", count=6, k=2, per_assignment=4, control_rate=0.0)
    alice, _ = invite(sample_engine, "alice", "ab")
    bob, _ = invite(sample_engine, "bob", "ab")
    judged = {}
    for rater in (alice, bob):
        assignment_id = claim(sample_engine, rater.id, "ab")
        pairs = assignment_payload(sample_engine, assignment_id)["items"]
        submit_assignment(sample_engine, assignment_id, rater.id, {"submission_id": new_submission_id(), "judgments": [
            {"item_id": p["item_id"], "choices": {"empathy": "A", "relevance": "B", "fluency": "T"}} for p in pairs]})
        judged[rater.id] = assignment_id
    hers = count(sample_engine, Choice, Choice.annotator_id == alice.id)
    bobs = count(sample_engine, Choice, Choice.annotator_id == bob.id)
    assert hers and bobs
    result = cli_run(sample_engine, "annotators", "forget", "alice", "--study", "ab")
    assert result.exit_code == 0, result.output
    assert f"{hers} choices and 0 comment(s) deleted; 1 submitted assignment(s)" in result.output
    assert count(sample_engine, Choice, Choice.annotator_id == alice.id) == 0
    assert count(sample_engine, Choice, Choice.annotator_id == bob.id) == bobs  # bob's stay
    with Session(sample_engine) as session:
        copy = session.scalar(select(Assignment.id).where(Assignment.replaces_id == judged[alice.id]))
        placed = lambda assignment_id: sorted(session.execute(  # noqa: E731
            select(AssignmentPair.position, AssignmentPair.pair_item_id, AssignmentPair.shown_left)
            .where(AssignmentPair.assignment_id == assignment_id)).all())
        assert copy is not None and placed(copy) == placed(judged[alice.id])


def test_annotators_list_shows_a_withdrawn_participant_by_her_tombstone_only(study_engine):
    alice, _ = invite(study_engine, "alice", "pilot")
    work(study_engine, alice.id)
    assert cli_run(study_engine, "annotators", "forget", "alice", "--study", "pilot").exit_code == 0
    result = cli_run(study_engine, "annotators", "list", "pilot")
    assert result.exit_code == 0 and "alice" not in result.output and alice.pseudonym not in result.output
    (row,) = [r for r in lines_of(result.output).values() if r[0].startswith("withdrawn-")]
    assert row[1:] == ["-", "0", "-", "yes", "yes", "-"]  # no name, no work, revoked, withdrawn, not judged


def test_study_list_names_an_ab_study_pairwise(sample_engine):
    from tests.annotation.pairwise_fixtures import make_ab_study

    make_ab_study(sample_engine, name="ab", count=6, k=2, per_assignment=4, control_rate=0.0)
    rows = lines_of(cli_run(sample_engine, "study", "list").output)
    assert rows["ab"][1:4] == ["pairwise", "open", f"0/{assignments_of(sample_engine, 'ab')}"]


def test_listing_studies_and_annotators_costs_the_same_statements_however_many_there_are(study_engine):
    from empeval.server.annotation.annotators import study_roster
    from empeval.server.annotation.study_list import study_summaries
    from tests.annotation.pairwise_fixtures import StatementCounter

    def statements(call) -> int:
        with StatementCounter(study_engine) as counter:
            call()
        return len(counter.statements)

    one_study, nobody = statements(lambda: study_summaries(study_engine)), statements(
        lambda: study_roster(study_engine, "pilot"))
    make_study(study_engine, name="second", count=4, k=1, per_assignment=4, controls=[])
    make_study(study_engine, name="third", count=4, k=1, per_assignment=4, controls=[])
    for name in ("alice", "bob", "carol"):
        rater, _ = invite(study_engine, name, "pilot")
        claim(study_engine, rater.id)
    assert len(study_summaries(study_engine)) == 3 and len(study_roster(study_engine, "pilot")) == 3
    assert statements(lambda: study_summaries(study_engine)) == one_study == 2
    assert statements(lambda: study_roster(study_engine, "pilot")) == nobody == 2  # the study, then the roster
