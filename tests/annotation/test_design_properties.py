"""Design properties under many seeds and sizes (hypothesis), then the same promises through the store:
k distinct annotators per response, no annotator sees a context twice, expiry returns items."""

from __future__ import annotations

from collections import Counter, defaultdict
from datetime import timedelta

from hypothesis import given, settings
from hypothesis import strategies as st
from sqlalchemy import select
from sqlalchemy.orm import Session

from empeval.server.annotation.annotators import invite
from empeval.server.annotation.handout import assignment_payload, next_assignment
from empeval.server.annotation.secrets import read_invite, secret_key
from empeval.server.annotation.submission import submit_assignment
from empeval.server.store.kinds.likert import Rating, StudyItem
from empeval.server.store.models import Assignment, Response
from empeval.server.store.queries import now_utc
from empeval.tasks.design import Candidate, controls_per_assignment, plan_assignments
from tests.annotation.conftest import (
    CONTROLS,
    SYSTEMS,
    add_responses,
    make_study,
    new_submission_id,
    placed_items,
)

designs = st.fixed_dictionaries(
    {
        "contexts": st.integers(1, 40),
        "systems": st.integers(1, 7),
        "k": st.integers(1, 5),
        "per_assignment": st.integers(1, 15),
        "control_rate": st.sampled_from([0.0, 0.1, 0.2, 0.34]),
        "seed": st.integers(0, 2**32 - 1),
    }
)


def _plan(d):
    systems = [f"s{i}" for i in range(d["systems"])]
    items = [Candidate((c, s), c, s) for c in range(d["contexts"]) for s in systems]
    controls = [Candidate(("ctl", c, kind), c, kind) for c in range(d["contexts"]) for kind in CONTROLS]
    rate = (
        d["control_rate"]
        if controls_per_assignment(d["per_assignment"], d["control_rate"]) < d["per_assignment"]
        else 0.0
    )
    plan = plan_assignments(
        items,
        controls,
        ratings_per_response=d["k"],
        items_per_assignment=d["per_assignment"],
        control_rate=rate,
        seed=d["seed"],
    )
    return items, plan, rate


@settings(max_examples=100, deadline=None)
@given(designs)
def test_every_item_appears_in_exactly_k_assignments_once_per_round(d):
    items, plan, _ = _plan(d)
    real = Counter(c.key for a in plan for c in a.items if c.system not in CONTROLS)
    assert real == {item.key: d["k"] for item in items}
    per_round = Counter((a.round, c.key) for a in plan for c in a.items if c.system not in CONTROLS)
    assert set(per_round.values()) == {1}


@settings(max_examples=100, deadline=None)
@given(designs)
def test_an_assignment_never_holds_a_context_twice_and_respects_its_size(d):
    _, plan, rate = _plan(d)
    for assignment in plan:
        contexts = [c.context for c in assignment.items]
        assert len(contexts) == len(set(contexts))
        assert len(assignment.items) <= d["per_assignment"]
    assert [a.index for a in plan] == list(range(len(plan)))


@settings(max_examples=100, deadline=None)
@given(designs)
def test_systems_are_balanced_within_every_assignment(d):
    _, plan, _ = _plan(d)
    for assignment in plan:
        counts = Counter(c.system for c in assignment.items if c.system not in CONTROLS)
        if len(counts) < d["systems"]:  # fewer items than systems: each system at most once
            assert max(counts.values()) == 1
        else:
            assert max(counts.values()) - min(counts.values()) <= 1


@settings(max_examples=80, deadline=None)
@given(designs)
def test_controls_come_at_the_configured_rate_with_kinds_rotated(d):
    _, plan, rate = _plan(d)
    wanted = controls_per_assignment(d["per_assignment"], rate)
    kinds = Counter()
    for assignment in plan:
        controls = [c for c in assignment.items if c.system in CONTROLS]
        # A control needs a context the assignment does not already hold.
        assert len(controls) == min(wanted, d["contexts"] - len(assignment.items) + len(controls))
        kinds.update(c.system for c in controls)
    if wanted and sum(kinds.values()) >= 3 * len(CONTROLS):
        assert max(kinds.values()) - min(kinds.values()) <= max(2, sum(kinds.values()) // 4)


def test_the_same_seed_gives_the_same_design_and_another_seed_another():
    d = {"contexts": 30, "systems": 4, "k": 3, "per_assignment": 8, "control_rate": 0.125, "seed": 11}
    first, second = _plan(d)[1], _plan(d)[1]
    assert first == second
    assert _plan({**d, "seed": 12})[1] != first


def _work_through(engine, n_annotators, *, now=None):
    """Annotators take turns asking for work and submitting it until nobody gets anything."""
    secret = secret_key(engine)
    people = [read_invite(secret, invite(engine, f"rater{i}", "pilot")[1]) for i in range(n_annotators)]
    busy = True
    while busy:
        busy = False
        for annotator_id, _ in people:
            assignment_id = next_assignment(engine, "pilot", annotator_id, now=now)
            if assignment_id is None:
                continue
            busy = True
            payload = assignment_payload(engine, assignment_id)
            ratings = [
                {"item_id": i["item_id"], "scores": {"empathy": 3, "relevance": 3, "fluency": 3}}
                for i in payload["items"]
            ]
            submit_assignment(
                engine, assignment_id, annotator_id, {"submission_id": new_submission_id(), "ratings": ratings}, now=now
            )


def test_handout_gives_each_response_k_distinct_annotators_and_nobody_a_context_twice(sample_engine):
    add_responses(sample_engine, SYSTEMS + CONTROLS, 30)
    for seed in range(4):
        make_study(sample_engine, name="pilot", count=10, k=3, per_assignment=4, control_rate=0.25, seed=seed)
        _work_through(sample_engine, n_annotators=14 if seed % 2 else 30)
        with Session(sample_engine) as s:
            rows = s.execute(
                select(Rating.item_id, Rating.annotator_id, Response.context_id, StudyItem.is_control)
                .join(StudyItem, StudyItem.id == Rating.item_id)
                .join(Response, Response.id == StudyItem.response_id)
                .where(Rating.criterion == "empathy")
            ).all()
            assignments = s.scalars(select(Assignment)).all()
            contexts_of = {
                a.id: {s.get(Response, s.get(StudyItem, i.item_id).response_id).context_id
                       for i in placed_items(s, a.id)}
                for a in assignments
            }
            done_by = {a.id: a.annotator_id for a in assignments if a.status == "submitted"}
            still_open = [a.id for a in assignments if a.status == "open"]
        seen = defaultdict(set)
        raters = defaultdict(list)
        for item_id, annotator_id, context_id, is_control in rows:
            seen[annotator_id].add(context_id)
            raters[(item_id, is_control)].append(annotator_id)
        # Nobody rated a context twice, and so every response's ratings come from distinct annotators.
        per_person = Counter((annotator_id, context_id) for _, annotator_id, context_id, _ in rows)
        assert max(per_person.values()) == 1
        real = {item: people for (item, is_control), people in raters.items() if not is_control}
        assert all(len(people) == len(set(people)) <= 3 for people in real.values())
        if seed % 2 == 0:  # with 30 raters there are enough people for every slot
            assert not still_open and sum(len(p) for p in real.values()) == 10 * len(SYSTEMS) * 3
        # The hand-out refused nothing it could give: every assignment still open overlaps what each
        # annotator has already seen.
        for assignment_id in still_open:
            assert all(contexts_of[assignment_id] & seen[person] for person in set(done_by.values()))
        _drop_study(sample_engine)


def _drop_study(engine):
    from empeval.server.store.engine import unit_of_work
    from empeval.server.store.models import Annotator, Study

    with unit_of_work(engine) as s:
        for study in s.scalars(select(Study)).all():
            s.delete(study)
        s.flush()
        for annotator in s.scalars(select(Annotator)).all():
            s.delete(annotator)


def test_an_expired_assignment_goes_back_to_the_pool_and_a_late_submission_is_kept_but_flagged(sample_engine):
    add_responses(sample_engine, SYSTEMS, 12)
    make_study(sample_engine, count=6, k=1, per_assignment=3, controls=[], minutes=30)
    secret = secret_key(sample_engine)
    alice, _ = read_invite(secret, invite(sample_engine, "alice", "pilot")[1])
    bob, _ = read_invite(secret, invite(sample_engine, "bob", "pilot")[1])
    start = now_utc()
    abandoned = next_assignment(sample_engine, "pilot", alice, now=start)
    items = {i["item_id"] for i in assignment_payload(sample_engine, abandoned)["items"]}
    # 31 minutes later alice's assignment has expired; its copy is open again and bob gets it.
    later = start + timedelta(minutes=31)
    handed = [next_assignment(sample_engine, "pilot", bob, now=later)]
    with Session(sample_engine) as s:
        old = s.get(Assignment, abandoned)
        copy = s.scalar(select(Assignment).where(Assignment.replaces_id == abandoned))
        assert old.status == "expired" and copy is not None
        assert {i.item_id for i in placed_items(s, copy.id)} == items
    while handed[-1] is not None and handed[-1] != copy.id:
        submit_assignment(
            sample_engine,
            handed[-1],
            bob,
            {
                "submission_id": new_submission_id(),
                "ratings": [
                    {"item_id": i["item_id"], "scores": {"empathy": 2, "relevance": 2, "fluency": 2}}
                    for i in assignment_payload(sample_engine, handed[-1])["items"]
                ],
            },
            now=later,
        )
        handed.append(next_assignment(sample_engine, "pilot", bob, now=later))
    assert copy.id in handed
    receipt = submit_assignment(
        sample_engine,
        abandoned,
        alice,
        {
            "submission_id": new_submission_id(),
            "ratings": [{"item_id": i, "scores": {"empathy": 5, "relevance": 5, "fluency": 5}} for i in items],
        },
        now=start + timedelta(minutes=40),
    )
    assert receipt["late"] is True
    with Session(sample_engine) as s:
        assert s.get(Assignment, abandoned).late is True
        assert len(s.scalars(select(Rating).where(Rating.assignment_id == abandoned)).all()) == 3 * len(items)
