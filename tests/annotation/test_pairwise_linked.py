"""No context twice across linked studies, kept by the database: a study whose compare_with names another (a
pairwise A/B study linked to its Likert study, here) hands an annotator no context she was shown in the other,
and the other hands her none she was shown here; a claim that would break it (a direct claim, two claims at
once) fails on the seen key. Release takes back every seen row its claim wrote, so nothing blocks her wrongly.
On SQLite and PostgreSQL."""
from __future__ import annotations

import itertools
import threading
from collections import Counter

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from empeval.server.annotation.annotators import invite
from empeval.server.annotation.handout import assignment_kind, claim, contexts_seen_before, next_assignment, release
from empeval.server.store.engine import unit_of_work
from empeval.server.store.kinds.likert import AssignmentItem, StudyItem
from empeval.server.store.kinds.pairwise import AssignmentPair, PairItem
from empeval.server.store.models import Assignment, Response, SeenContext, Study
from empeval.server.store.queries import now_utc
from empeval.tasks.study_create import create_study
from empeval.tasks.study_file import parse_study
from tests.annotation.conftest import SYSTEMS, add_responses, make_study
from tests.annotation.pairwise_fixtures import make_ab_study


@pytest.fixture(autouse=True)
def signing_secret(monkeypatch):
    monkeypatch.setenv("EMPEVAL_SECRET_KEY", "pairwise-linked-tests-" + "k" * 32)


def contexts_of(engine, assignment_id: int) -> set[int]:
    with Session(engine) as session:
        items = session.scalars(
            select(Response.context_id).join(StudyItem, StudyItem.response_id == Response.id)
            .join(AssignmentItem, AssignmentItem.item_id == StudyItem.id)
            .where(AssignmentItem.assignment_id == assignment_id)).all()
        pairs = session.scalars(
            select(PairItem.context_id).join(AssignmentPair, AssignmentPair.pair_item_id == PairItem.id)
            .where(AssignmentPair.assignment_id == assignment_id)).all()
    return set(items) | set(pairs)


def study_id(engine, name: str) -> int:
    with Session(engine) as session:
        return session.scalars(select(Study.id).where(Study.name == name)).one()


def open_ids(engine, name: str) -> list[int]:
    with Session(engine) as session:
        return list(session.scalars(select(Assignment.id).where(Assignment.study_id == study_id(engine, name),
                                                                 Assignment.status == "open")
                                    .order_by(Assignment.design_index, Assignment.id)))


def finish(engine, assignment_id: int) -> None:
    """Done with it (as a submit would leave it): she may take the next."""
    with Session(engine) as session, session.begin():
        session.get_one(Assignment, assignment_id).status = "submitted"


def held_contexts(engine, annotator: int, studies: tuple[str, ...]) -> Counter[int]:
    """How often each context is in the assignments she holds or held (any status) in these studies."""
    with Session(engine) as session:
        ids = session.scalars(select(Assignment.id).join(Study, Study.id == Assignment.study_id)
                              .where(Assignment.annotator_id == annotator, Study.name.in_(studies))).all()
    shown: Counter[int] = Counter()
    for assignment_id in ids:
        shown.update(contexts_of(engine, assignment_id))
    return shown


@pytest.fixture
def linked(sample_engine):
    """A Likert study 'pilot' and a pairwise study 'ab' on the same 8 contexts, ab's compare_with naming pilot."""
    add_responses(sample_engine, SYSTEMS, 30)
    make_study(sample_engine, name="pilot", count=8, k=2, per_assignment=3, controls=[], seed=4)
    make_ab_study(sample_engine, name="ab", count=8, k=2, per_assignment=2, control_rate=0, seed=4,
                  with_responses=False, compare_with="pilot")
    return sample_engine


def test_the_linked_studies_share_their_contexts(linked):
    # What every other test here relies on: otherwise no context could be shared anyway.
    ab = set().union(*(contexts_of(linked, a) for a in open_ids(linked, "ab")))
    pilot = set().union(*(contexts_of(linked, a) for a in open_ids(linked, "pilot")))
    assert len(ab) == 8 and ab == pilot


@pytest.mark.parametrize("first", ["pilot", "ab"])
def test_one_annotator_taking_work_in_both_linked_studies_never_gets_a_context_twice(linked, first):
    rita, _ = invite(linked, "rita", "pilot")
    handed = {"pilot": [], "ab": []}
    order = [first, "ab" if first == "pilot" else "pilot"]
    for study in itertools.islice(itertools.cycle(order), 20):
        got = next_assignment(linked, study, rita.id)
        if got is not None:
            handed[study].append(got)
            finish(linked, got)
    assert handed["pilot"] and handed["ab"]
    shown = held_contexts(linked, rita.id, ("pilot", "ab"))
    assert max(shown.values()) == 1  # every context at most once, in one study or the other
    # and she ran out of work only because nothing fit: every assignment left open holds a context she saw
    assert all(contexts_of(linked, left) & set(shown) for study in order for left in open_ids(linked, study))


def test_the_unlinked_study_hands_the_context_again(linked):
    # The control: without compare_with the pairwise study may show her a context she rated in pilot.
    make_ab_study(linked, name="free", count=8, k=2, per_assignment=2, control_rate=0, seed=4,
                  with_responses=False)
    rita, _ = invite(linked, "rita", "pilot")
    while (got := next_assignment(linked, "pilot", rita.id)) is not None:
        finish(linked, got)
    assert next_assignment(linked, "free", rita.id) is not None
    assert next_assignment(linked, "ab", rita.id) is None


def _assignment_with(engine, study: str, context: int) -> int:
    return next(a for a in open_ids(engine, study) if context in contexts_of(engine, a))


@pytest.mark.parametrize("first, then", [("pilot", "ab"), ("ab", "pilot")])
def test_a_direct_claim_of_a_context_seen_in_the_linked_study_fails_in_the_database(linked, first, then):
    rita, _ = invite(linked, "rita", "pilot")
    taken = next_assignment(linked, first, rita.id)
    context = min(contexts_of(linked, taken))
    other = _assignment_with(linked, then, context)
    with Session(linked) as session:
        assert (context, taken) in contexts_seen_before(session, assignment_kind(session, other), other, rita.id)
    with pytest.raises(IntegrityError), unit_of_work(linked) as session:
        claim(session, assignment_kind(session, other), other, rita.id, now=now_utc(), minutes=None)
    with Session(linked) as session:
        assert session.get_one(Assignment, other).status == "open"


def test_a_linked_claim_writes_its_seen_rows_under_both_studies_and_release_takes_them_all_back(linked):
    rita, _ = invite(linked, "rita", "pilot")
    pilot_id, ab_id = study_id(linked, "pilot"), study_id(linked, "ab")
    first = open_ids(linked, "ab")[0]
    with unit_of_work(linked) as session:
        assert claim(session, assignment_kind(session, first), first, rita.id, now=now_utc(), minutes=None)
    with Session(linked) as session:
        rows = set(session.execute(select(SeenContext.study_id, SeenContext.context_id)
                                   .where(SeenContext.assignment_id == first)).all())
    contexts = contexts_of(linked, first)
    assert rows == {(s, c) for s in (pilot_id, ab_id) for c in contexts}
    with unit_of_work(linked) as session:
        assert release(session, first, rita.id)
    # No phantom row: the pilot assignment with that context is hers to take now.
    other = _assignment_with(linked, "pilot", min(contexts))
    with Session(linked) as session:
        assert contexts_seen_before(session, assignment_kind(session, other), other, rita.id) == []
    with unit_of_work(linked) as session:
        assert claim(session, assignment_kind(session, other), other, rita.id, now=now_utc(), minutes=None)


def run_together(n: int, work) -> list:
    barrier = threading.Barrier(n)
    results: list = [None] * n

    def go(i):
        barrier.wait(timeout=30)
        try:
            results[i] = work(i)
        except Exception as error:  # noqa: BLE001 - read by the assertions
            results[i] = error

    threads = [threading.Thread(target=go, args=(i,)) for i in range(n)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert not any(thread.is_alive() for thread in threads)
    return results


def test_two_direct_claims_at_once_in_the_linked_studies_sharing_a_context_one_wins(linked):
    # Crowd ingest claims directly (no turn taking): the seen key under the linked study decides.
    for round_ in range(3):
        rater = invite(linked, f"rater{round_}", "pilot")[0].id
        pilot = open_ids(linked, "pilot")[round_]
        ab = _assignment_with(linked, "ab", min(contexts_of(linked, pilot)))

        def take(i, pilot=pilot, ab=ab, rater=rater):
            with unit_of_work(linked) as session:
                chosen = (pilot, ab)[i]
                return claim(session, assignment_kind(session, chosen), chosen, rater, now=now_utc(), minutes=None)

        outcome = run_together(2, take)
        assert sorted(map(type, outcome), key=str) == sorted([bool, IntegrityError], key=str), outcome
        shown = held_contexts(linked, rater, ("pilot", "ab"))
        assert shown and max(shown.values()) == 1


def test_next_calls_at_once_in_both_linked_studies_never_share_a_context(linked):
    people = [invite(linked, f"tab{i}", "pilot")[0].id for i in range(3)]
    for _ in range(3):
        handed = run_together(12, lambda i: next_assignment(linked, ("pilot", "ab")[i % 2], people[i % 3]))
        assert not [h for h in handed if isinstance(h, Exception)], handed
        for got in {h for h in handed if h is not None}:
            finish(linked, got)
    for person in people:
        shown = held_contexts(linked, person, ("pilot", "ab"))
        assert shown and max(shown.values()) == 1, (person, shown)


# ---------------------------------------------------------------- a property over small linked designs

designs = itertools.count()
step = st.tuples(st.integers(0, 2), st.sampled_from(["likert", "ab", "free"]), st.sampled_from(["submit", "expire"]))


@pytest.fixture
def responses(sample_engine):
    add_responses(sample_engine, SYSTEMS, 30)
    return sample_engine


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(count=st.integers(2, 6), likert_k=st.integers(1, 3), likert_size=st.integers(1, 4),
       ab_k=st.integers(1, 2), ab_size=st.sampled_from([2, 4]), seed=st.integers(0, 50),
       ab_links_likert=st.booleans(), steps=st.lists(step, min_size=1, max_size=16))
def test_property_no_annotator_is_shown_a_context_twice_across_linked_studies(
        responses, count, likert_k, likert_size, ab_k, ab_size, seed, ab_links_likert, steps):
    # Either direction of the link (the A/B study names the Likert one, or the Likert one names the A/B study),
    # and a third study linked to neither, which may show anything again.
    engine, n = responses, next(designs)
    likert, ab, free = f"lik{n}", f"ab{n}", f"free{n}"
    if ab_links_likert:
        make_study(engine, name=likert, count=count, k=likert_k, per_assignment=likert_size, controls=[], seed=seed)
        make_ab_study(engine, name=ab, count=count, k=ab_k, per_assignment=ab_size, control_rate=0, seed=seed,
                      with_responses=False, compare_with=likert)
    else:
        make_ab_study(engine, name=ab, count=count, k=ab_k, per_assignment=ab_size, control_rate=0, seed=seed,
                      with_responses=False)
        create_study(engine, parse_study({
            "name": likert, "seed": seed, "compare_with": ab, "contexts": {"split": "test", "count": count},
            "systems": {"names": SYSTEMS, "controls": []},
            "design": {"ratings_per_response": likert_k, "items_per_assignment": likert_size, "control_rate": 0.0,
                       "assignment_minutes": 30}}))
    make_study(engine, name=free, count=count, k=1, per_assignment=likert_size, controls=[], seed=seed)
    names = {"likert": likert, "ab": ab, "free": free}
    people = [invite(engine, f"{n}-rater{i}", likert)[0].id for i in range(3)]
    for rater, study, then in steps:
        got = next_assignment(engine, names[study], people[rater])
        if got is None:
            continue
        if then == "submit":
            finish(engine, got)
        else:  # she saw it and let it lapse: the copy goes back to the pool, her seen rows stay
            with Session(engine) as session, session.begin():
                mine = session.get_one(Assignment, got)
                mine.expires_at = now_utc().replace(year=2000)
    for person in people:
        linked_shown = held_contexts(engine, person, (likert, ab))
        assert not linked_shown or max(linked_shown.values()) == 1, linked_shown
        free_shown = held_contexts(engine, person, (free,))
        assert not free_shown or max(free_shown.values()) == 1, free_shown
