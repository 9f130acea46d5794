"""A state machine over hand-out: raters with two tabs each ask for work (one tab at a time, or every tab at
once), submit from a tab (a fresh submission, or the same one again), let their assignments expire, get revoked
(in the study or everywhere), and the researcher closes the study. Whatever the order, nobody is shown or rates a
context twice in a study, nobody holds two active assignments, a second tab gets the first tab's assignment, and
revoked raters and closed studies get nothing. On SQLite and PostgreSQL."""
from __future__ import annotations

import itertools
import threading
from datetime import timedelta

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule, run_state_machine_as_test
from sqlalchemy import Engine, func, select
from sqlalchemy.orm import Session

from empeval.server.annotation.annotators import invite, revoke
from empeval.server.annotation.handout import AccessRevoked, StudyClosed, close_study, next_assignment
from empeval.server.annotation.secrets import read_invite, secret_key
from empeval.server.annotation.submission import submit_assignment
from empeval.server.errors import Conflict
from empeval.server.store.kinds.likert import AssignmentItem, Rating, StudyItem
from empeval.server.store.models import Assignment, Response, SeenContext, Study
from empeval.server.store.queries import now_utc
from tests.annotation.conftest import add_responses, make_study, new_submission_id

SYSTEMS3 = ["sys-a", "sys-b", "sys-c"]
RATERS, TABS = 3, 2
rater_index = st.integers(0, RATERS - 1)
tab_index = st.integers(0, TABS - 1)


@pytest.fixture(autouse=True)
def signing_secret(monkeypatch):
    """The secret from the environment: no secret file under HOME that other test runs could remove meanwhile."""
    monkeypatch.setenv("EMPEVAL_SECRET_KEY", "one-active-assignment-tests-" + "k" * 32)


class HandoutMachine(RuleBasedStateMachine):
    engine: Engine  # set by the test, one database per backend
    studies = itertools.count()

    def __init__(self) -> None:
        super().__init__()
        number = next(self.studies)
        self.study = f"machine{number}"
        make_study(self.engine, name=self.study, count=6, k=3, per_assignment=2, systems=SYSTEMS3, controls=[],
                   seed=number, minutes=30)
        with Session(self.engine) as session:
            self.study_id = session.scalars(select(Study.id).where(Study.name == self.study)).one()
        secret = secret_key(self.engine)
        self.names = [f"{self.study}-rater{i}" for i in range(RATERS)]
        self.people = [read_invite(secret, invite(self.engine, name, self.study)[1])[0] for name in self.names]
        self.tabs: dict[tuple[int, int], int | None] = {}  # the assignment each tab shows
        self.acknowledged: dict[int, str] = {}  # assignment id -> the submission id its receipt names
        self.revoked: set[int] = set()
        self.closed = False
        self.now = now_utc()

    # --- what raters and the researcher do -------------------------------------------------------------------

    def _expect_refusal(self, rater: int, error: Exception) -> None:
        if isinstance(error, StudyClosed):
            assert self.closed, error
        elif isinstance(error, AccessRevoked):
            assert rater in self.revoked and not self.closed, error
        else:
            raise error

    def _handed(self, rater: int, got: int | None) -> None:
        assert not self.closed and rater not in self.revoked, "a closed study or a revoked rater got work"
        held = self._active(self.people[rater])
        assert held == ([got] if got is not None else []), (got, held)

    @rule(rater=rater_index, tab=tab_index)
    def next_in_one_tab(self, rater: int, tab: int) -> None:
        try:
            got = next_assignment(self.engine, self.study, self.people[rater], now=self.now)
        except (StudyClosed, AccessRevoked) as error:
            self._expect_refusal(rater, error)
            return
        self._handed(rater, got)
        for other in range(TABS):  # a tab still showing unsubmitted work shows this same assignment
            shown = self.tabs.get((rater, other))
            if shown is not None and self._status(shown) == "assigned":
                assert shown == got
        self.tabs[(rater, tab)] = got

    @rule(rater=rater_index)
    def next_in_every_tab_at_once(self, rater: int) -> None:
        barrier = threading.Barrier(TABS)
        results: list[object] = [None] * TABS

        def ask(tab: int) -> None:
            barrier.wait(timeout=30)
            try:
                results[tab] = next_assignment(self.engine, self.study, self.people[rater], now=self.now)
            except Exception as error:  # noqa: BLE001 - checked below
                results[tab] = error

        threads = [threading.Thread(target=ask, args=(tab,)) for tab in range(TABS)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=60)
        errors = [r for r in results if isinstance(r, Exception)]
        if errors:
            assert len(errors) == TABS
            self._expect_refusal(rater, errors[0])
            return
        assert len(set(results)) == 1, f"two tabs at once got {results}"
        got = results[0]
        assert got is None or isinstance(got, int)
        self._handed(rater, got)
        for tab in range(TABS):
            self.tabs[(rater, tab)] = got

    @rule(rater=rater_index, tab=tab_index, resend=st.booleans())
    def submit_from_tab(self, rater: int, tab: int, resend: bool) -> None:
        assignment_id = self.tabs.get((rater, tab))
        if assignment_id is None:
            return
        again = resend and assignment_id in self.acknowledged
        submission_id = self.acknowledged[assignment_id] if again else new_submission_id()
        with Session(self.engine) as session:
            items = session.scalars(select(AssignmentItem.item_id)
                                    .where(AssignmentItem.assignment_id == assignment_id)).all()
        payload = {"submission_id": submission_id, "ratings": [
            {"item_id": item, "scores": {"empathy": 2, "relevance": 4, "fluency": 5}} for item in items]}
        try:
            receipt = submit_assignment(self.engine, assignment_id, self.people[rater], payload, study=self.study,
                                        now=self.now)
        except Conflict:
            assert assignment_id in self.acknowledged and not again  # submitted already, by another submission
            return
        except (StudyClosed, AccessRevoked) as error:
            assert not again, "sending a stored submission again must get its receipt"
            self._expect_refusal(rater, error)
            return
        if again:
            assert receipt["submission_id"] == submission_id
        else:
            assert not self.closed and rater not in self.revoked and assignment_id not in self.acknowledged
            self.acknowledged[assignment_id] = submission_id

    @rule()
    def time_passes_beyond_the_deadline(self) -> None:
        self.now += timedelta(minutes=31)

    @rule(rater=rater_index, everywhere=st.booleans())
    def researcher_revokes(self, rater: int, everywhere: bool) -> None:
        revoke(self.engine, self.names[rater], study=None if everywhere else self.study)
        self.revoked.add(rater)
        assert self._active(self.people[rater]) == []

    @precondition(lambda self: not self.closed)
    @rule()
    def researcher_closes_the_study(self) -> None:
        assert close_study(self.engine, self.study).was_open
        self.closed = True

    # --- what must always hold -------------------------------------------------------------------------------

    def _active(self, annotator: int) -> list[int]:
        with Session(self.engine) as session:
            return list(session.scalars(select(Assignment.id).where(
                Assignment.study_id == self.study_id, Assignment.annotator_id == annotator,
                Assignment.status == "assigned")))

    def _status(self, assignment_id: int) -> str:
        with Session(self.engine) as session:
            return session.get_one(Assignment, assignment_id).status

    @invariant()
    def nobody_rates_a_context_in_two_assignments(self) -> None:
        with Session(self.engine) as session:
            twice = session.execute(
                select(Rating.annotator_id, Response.context_id)
                .join(StudyItem, StudyItem.id == Rating.item_id).join(Response, Response.id == StudyItem.response_id)
                .where(StudyItem.study_id == self.study_id)
                .group_by(Rating.annotator_id, Response.context_id)
                .having(func.count(func.distinct(Rating.assignment_id)) > 1)).all()
        assert twice == []

    @invariant()
    def every_context_shown_is_a_seen_row_and_no_one_was_shown_a_context_twice(self) -> None:
        with Session(self.engine) as session:
            shown = session.execute(
                select(Assignment.annotator_id, Response.context_id, Assignment.id)
                .join(AssignmentItem, AssignmentItem.assignment_id == Assignment.id)
                .join(StudyItem, StudyItem.id == AssignmentItem.item_id)
                .join(Response, Response.id == StudyItem.response_id)
                .where(Assignment.study_id == self.study_id, Assignment.annotator_id.is_not(None))).all()
            seen = set(session.execute(select(SeenContext.annotator_id, SeenContext.context_id)
                                       .where(SeenContext.study_id == self.study_id)).all())
        pairs = [(annotator, context) for annotator, context, _ in shown]
        assert len(pairs) == len(set(pairs)), "someone was handed a context in two assignments"
        assert set(pairs) == seen

    @invariant()
    def nobody_holds_two_active_assignments_and_the_refused_hold_none(self) -> None:
        for rater, person in enumerate(self.people):
            held = self._active(person)
            assert len(held) <= 1
            if rater in self.revoked:
                assert held == []


def run_machine(engine: Engine, examples: int) -> None:
    add_responses(engine, SYSTEMS3, 6)

    class Machine(HandoutMachine):
        pass

    Machine.engine = engine
    run_state_machine_as_test(Machine, settings=settings(
        max_examples=examples, stateful_step_count=30, deadline=None, database=None,
        suppress_health_check=list(HealthCheck)))


def test_no_order_of_next_submit_expire_revoke_and_close_lets_anyone_rate_a_context_twice(sample_engine):
    run_machine(sample_engine, examples=25)
