"""One active assignment per (study, annotator) and never the same context twice, kept by the database: many
`next` calls of one rater at once (two tabs, or twenty) give her one assignment, on SQLite and PostgreSQL, in
Python and over HTTP."""
from __future__ import annotations

import threading
from collections import Counter
from datetime import timedelta

import pytest
import requests
from sqlalchemy import func, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from empeval.server.annotation import handout
from empeval.server.annotation.annotators import invite
from empeval.server.annotation.handout import assignment_kind, claim, contexts_seen_before, next_assignment, release
from empeval.server.annotation.secrets import read_invite, secret_key
from empeval.server.annotation.submission import submit_assignment
from empeval.server.store.engine import unit_of_work
from empeval.server.store.kinds.likert import AssignmentItem, StudyItem
from empeval.server.store.models import Assignment, Response, SeenContext
from empeval.server.store.queries import now_utc
from empeval.server.web import create_app
from tests.annotation.conftest import add_responses, make_study, new_submission_id
from tests.browser import live_server

SYSTEMS3 = ["sys-a", "sys-b", "sys-c"]


@pytest.fixture(autouse=True)
def signing_secret(monkeypatch):
    """The secret from the environment: no secret file under HOME that other test runs could remove meanwhile."""
    monkeypatch.setenv("EMPEVAL_SECRET_KEY", "one-active-assignment-tests-" + "k" * 32)


def run_together(n: int, work) -> list:
    """work(i) on n threads released at once; their results (or the exceptions they raised) in order."""
    barrier = threading.Barrier(n)
    results: list = [None] * n

    def go(i):
        barrier.wait(timeout=30)
        try:
            results[i] = work(i)
        except Exception as error:  # noqa: BLE001 - reported by the assertion that reads results
            results[i] = error

    threads = [threading.Thread(target=go, args=(i,)) for i in range(n)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert not any(thread.is_alive() for thread in threads)
    return results


def annotator_id(engine, name: str, study: str = "pilot") -> int:
    return read_invite(secret_key(engine), invite(engine, name, study)[1])[0]


def contexts_of(engine, assignment_id: int) -> set[int]:
    with Session(engine) as session:
        return set(session.scalars(
            select(Response.context_id).join(StudyItem, StudyItem.response_id == Response.id)
            .join(AssignmentItem, AssignmentItem.item_id == StudyItem.id)
            .where(AssignmentItem.assignment_id == assignment_id)))


def active_of(engine, annotator: int) -> list[int]:
    with Session(engine) as session:
        return list(session.scalars(select(Assignment.id).where(Assignment.annotator_id == annotator,
                                                                 Assignment.status == "assigned")))


def seen_of(engine, annotator: int) -> set[int]:
    with Session(engine) as session:
        return set(session.scalars(select(SeenContext.context_id).where(SeenContext.annotator_id == annotator)))


def rate_all(engine, assignment_id: int, annotator: int, **kwargs) -> dict:
    with Session(engine) as session:
        items = session.scalars(select(AssignmentItem.item_id).where(AssignmentItem.assignment_id == assignment_id))
        ratings = [{"item_id": item, "scores": {"empathy": 3, "relevance": 3, "fluency": 3}} for item in items]
    return submit_assignment(engine, assignment_id, annotator, {"submission_id": new_submission_id(),
                                                                "ratings": ratings}, **kwargs)


@pytest.fixture
def wide_study(sample_engine):
    add_responses(sample_engine, SYSTEMS3, 40)
    make_study(sample_engine, count=40, k=2, per_assignment=4, controls=[])
    return sample_engine


def test_twenty_next_calls_of_one_rater_at_once_give_her_one_assignment(wide_study):
    engine = wide_study
    for name in ("ada", "bo", "cy"):
        me = annotator_id(engine, name)
        handed = run_together(20, lambda _, me=me: next_assignment(engine, "pilot", me))
        assert not [h for h in handed if isinstance(h, Exception)], handed
        assert len(set(handed)) == 1 and handed[0] is not None
        assert active_of(engine, me) == [handed[0]]
        # Her seen rows are exactly the contexts of that one assignment, written by its claim.
        assert seen_of(engine, me) == contexts_of(engine, handed[0])


def test_many_raters_asking_at_once_each_get_their_own_assignment_with_no_context_twice(wide_study):
    engine = wide_study
    people = [annotator_id(engine, f"rater{i}") for i in range(8)]
    handed = run_together(16, lambda i: next_assignment(engine, "pilot", people[i % 8]))  # two tabs each
    assert not [h for h in handed if isinstance(h, Exception)], handed
    by_person = {person: {handed[i] for i in range(16) if i % 8 == n} for n, person in enumerate(people)}
    assert all(len(ids) == 1 for ids in by_person.values()), by_person
    assert len({next(iter(ids)) for ids in by_person.values()}) == 8  # nobody shares an assignment
    with Session(engine) as session:
        active = session.execute(select(Assignment.annotator_id, func.count()).where(Assignment.status == "assigned")
                                 .group_by(Assignment.annotator_id)).all()
    assert sorted(active) == sorted((person, 1) for person in people)


def test_two_tabs_over_http_get_the_same_assignment_for_every_rater(wide_study):
    engine = wide_study
    app = create_app({"DATABASE_URL": engine.url.render_as_string(hide_password=False), "TESTING": True})
    tokens = {f"tab{i}": invite(engine, f"tab{i}", "pilot")[1] for i in range(10)}
    names = list(tokens)
    with live_server(app) as base:
        def ask(i):
            answer = requests.get(f"{base}/api/annotate/next", timeout=60,
                                  headers={"Authorization": f"Bearer {tokens[names[i % 10]]}"})
            assert answer.status_code == 200, answer.text
            return answer.json()["assignment"]["assignment_id"]

        handed = run_together(20, ask)
        again = run_together(20, lambda i: requests.get(
            f"{base}/api/annotate/next", timeout=60,
            headers={"Authorization": f"Bearer {tokens[names[0]]}"}).json()["assignment"]["assignment_id"])
    assert not [h for h in handed + again if isinstance(h, Exception)], handed + again
    for n in range(10):
        assert handed[n] == handed[n + 10], f"{names[n]} got two assignments from two tabs"
    assert len(set(handed)) == 10
    assert set(again) == {handed[0]}


def test_a_second_claim_by_the_same_rater_fails_in_the_database_and_next_reads_the_first_back(wide_study):
    engine = wide_study
    me = annotator_id(engine, "ada")
    first = next_assignment(engine, "pilot", me)
    with Session(engine) as session:
        open_ids = session.scalars(select(Assignment.id).where(Assignment.status == "open")).all()
    other = next(a for a in open_ids if not contexts_of(engine, a) & contexts_of(engine, first))
    with pytest.raises(IntegrityError), unit_of_work(engine) as session:
        # as a racing tab would, past Python's checks
        claim(session, assignment_kind(session, other), other, me, now=now_utc(), minutes=30)
    assert next_assignment(engine, "pilot", me) == first
    assert active_of(engine, me) == [first]


def test_the_database_refuses_a_context_shown_twice_to_one_rater(wide_study):
    engine = wide_study
    me = annotator_id(engine, "ada")
    first = next_assignment(engine, "pilot", me)
    rate_all(engine, first, me)
    mine = contexts_of(engine, first)
    with Session(engine) as session:
        overlapping = [a for a in session.scalars(select(Assignment.id).where(Assignment.status == "open"))
                       if contexts_of(engine, a) & mine]
        assert contexts_seen_before(session, assignment_kind(session, overlapping[0]), overlapping[0], me)
    with pytest.raises(IntegrityError), unit_of_work(engine) as session:
        claim(session, assignment_kind(session, overlapping[0]), overlapping[0], me, now=now_utc(), minutes=30)
    with Session(engine) as session:
        assert session.get(Assignment, overlapping[0]).status == "open"


def test_release_undoes_the_claim_and_its_seen_rows_but_expiry_keeps_them(wide_study):
    engine = wide_study
    me = annotator_id(engine, "ada")
    start = now_utc()
    first = next_assignment(engine, "pilot", me, now=start)
    with unit_of_work(engine) as session:
        assert release(session, first, me)
    assert seen_of(engine, me) == set()
    assert next_assignment(engine, "pilot", me, now=start) == first  # design order: the same one again
    later = start + timedelta(minutes=31)
    second = next_assignment(engine, "pilot", me, now=later)  # the first expired meanwhile
    assert second != first
    with Session(engine) as session:
        assert session.get(Assignment, first).status == "expired"
        copy = session.scalar(select(Assignment.id).where(Assignment.replaces_id == first))
    assert seen_of(engine, me) == contexts_of(engine, first) | contexts_of(engine, second)
    assert not contexts_of(engine, second) & contexts_of(engine, first)
    # She never gets the copy of what she abandoned; somebody else does.
    handed = [second]
    while handed[-1] is not None:
        rate_all(engine, handed[-1], me, now=later)
        handed.append(next_assignment(engine, "pilot", me, now=later))
    assert copy not in handed
    assert next_assignment(engine, "pilot", annotator_id(engine, "bo"), now=later) == copy


def test_every_pair_of_rater_and_context_is_rated_in_one_assignment_after_a_crowd_of_tabs(wide_study):
    """The issue's measurement, after the fix: ten raters with two tabs each work until nothing is left."""
    engine = wide_study
    people = [annotator_id(engine, f"r{i}") for i in range(10)]

    def work(i):
        me = people[i % 10]
        done = 0
        while (assignment_id := next_assignment(engine, "pilot", me)) is not None:
            try:
                rate_all(engine, assignment_id, me)
                done += 1
            except Exception as error:  # noqa: BLE001 - the other tab submitted it first
                if "already submitted" not in str(error):
                    raise
        return done

    results = run_together(20, work)
    assert not [r for r in results if isinstance(r, Exception)], results
    with Session(engine) as session:
        rated_in = Counter(session.execute(
            select(Assignment.annotator_id, Response.context_id)
            .join(AssignmentItem, AssignmentItem.assignment_id == Assignment.id)
            .join(StudyItem, StudyItem.id == AssignmentItem.item_id)
            .join(Response, Response.id == StudyItem.response_id)
            .where(Assignment.status == "submitted")).all())
    assert sum(results) > 10 and max(rated_in.values()) == 1


def test_a_second_tab_asking_while_the_first_tabs_claim_is_uncommitted_waits_and_gets_the_same(wide_study,
                                                                                              monkeypatch):
    """The interleaving the state machine found: tab B asks while tab A's claim of the last fitting assignment is
    not yet committed. B must wait for A and resume its assignment, not answer "nothing left"."""
    engine = wide_study
    with unit_of_work(engine) as session:
        open_ids = session.scalars(select(Assignment.id).where(Assignment.status == "open")
                                   .order_by(Assignment.design_index, Assignment.id)).all()
        for assignment_id in open_ids[1:]:
            session.get_one(Assignment, assignment_id).status = "expired"
    me = annotator_id(engine, "ada")
    real_record_seen = handout._record_seen
    tab_b_done = threading.Event()
    answers: dict[str, object] = {}

    def tab_b():
        answers["b"] = next_assignment(engine, "pilot", me)
        tab_b_done.set()

    def slow_claim(*args, **kwargs):  # the claim's last step: A has claimed, not yet committed
        real_record_seen(*args, **kwargs)
        if threading.current_thread().name == "tab-a":
            threading.Thread(target=tab_b, name="tab-b").start()
            tab_b_done.wait(timeout=1.5)  # B either answers meanwhile (wrong) or waits for this commit

    monkeypatch.setattr(handout, "_record_seen", slow_claim)
    tab_a = threading.Thread(target=lambda: answers.__setitem__("a", next_assignment(engine, "pilot", me)),
                             name="tab-a")
    tab_a.start()
    tab_a.join(timeout=60)
    assert tab_b_done.wait(timeout=60)
    assert answers["a"] == open_ids[0] and answers["b"] == open_ids[0], answers
