"""The pairwise design's promises, for any numbers and seed (hypothesis): k judgments per (context, pair), no
context twice in an assignment, left/right balanced within one per pair over the study, per assignment, per
(context, pair) and per annotator, whatever assignments she takes; control pairs on contexts the assignment
does not hold; same seed, same design; an odd number of real slots per assignment refused."""
from __future__ import annotations

import random
from collections import Counter, defaultdict
from itertools import combinations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from empeval.tasks.kinds.pairwise_design import PlacedPair, balanced_colouring, plan_pairwise, side_surplus

SYSTEMS = ["gold", "kemp", "mime", "moel", "retrieval"]


@st.composite
def designs(draw):
    n_systems = draw(st.integers(2, 5))
    systems = SYSTEMS[:n_systems]
    all_pairs = list(combinations(systems, 2))
    pairs = draw(st.lists(st.sampled_from(all_pairs), min_size=1, max_size=len(all_pairs), unique=True))
    pairs = [pair[::-1] if draw(st.booleans()) else pair for pair in pairs]
    contexts = list(range(draw(st.integers(1, 14))))
    with_controls = draw(st.booleans())
    # an even number of real slots, as the design needs (with controls at 0.2: 3 items hold 1 control, 8 hold 2)
    sizes = [3, 5, 7, 8, 10] if with_controls else [2, 4, 6, 8, 10]
    return dict(contexts=contexts, pairs=pairs, judgments_per_pair=draw(st.integers(1, 4)),
                items_per_assignment=draw(st.sampled_from(sizes)), control_rate=0.2 if with_controls else 0.0,
                controls={"control-generic": contexts, "control-scrambled": contexts[::2]} if with_controls else {},
                seed=draw(st.integers(0, 2**32)))


def real(assignment) -> list[PlacedPair]:
    return [item for item in assignment.items if item.control is None]


@settings(max_examples=150, deadline=None)
@given(designs())
def test_every_context_and_pair_is_judged_k_times_once_per_round(design):
    plan = plan_pairwise(**design)
    judged = Counter((item.context, item.systems) for a in plan for item in real(a))
    expected = {(c, tuple(sorted(p))) for c in design["contexts"] for p in design["pairs"]}
    assert set(judged) == expected and set(judged.values()) == {design["judgments_per_pair"]}
    per_round = Counter((a.round, item.context, item.systems) for a in plan for item in real(a))
    assert set(per_round.values()) == {1}


@settings(max_examples=150, deadline=None)
@given(designs())
def test_no_assignment_holds_a_context_twice_and_none_is_too_long(design):
    for assignment in plan_pairwise(**design):
        contexts = [item.context for item in assignment.items]
        assert len(contexts) == len(set(contexts)) and 1 <= len(contexts) <= design["items_per_assignment"]


@settings(max_examples=150, deadline=None)
@given(designs())
def test_left_and_right_are_balanced_within_one_per_pair_over_the_study_each_assignment_and_each_context(design):
    plan = plan_pairwise(**design)
    study: Counter[str] = Counter()
    per_cell: Counter[tuple] = Counter()
    for assignment in plan:
        surplus = side_surplus(assignment.items)
        assert all(abs(v) <= 1 for v in surplus.values()), surplus
        study.update(surplus)
        for item in assignment.items:
            per_cell[(item.context, item.label)] += 1 if item.left == item.systems[0] else -1
    assert all(abs(v) <= 1 for v in study.values()), study
    assert all(abs(v) <= 1 for v in per_cell.values())
    # and the sides really are the pair's two systems, both shown
    for item in (item for a in plan for item in a.items):
        assert item.left != item.right and {item.left, item.right} == set(item.systems)


def real_surplus(assignments) -> Counter[str]:
    """An annotator's left/right surplus per real pair over the assignments she completed."""
    surplus: Counter[str] = Counter()
    for assignment in assignments:
        surplus.update(side_surplus(real(assignment)))
    return surplus


@settings(max_examples=100, deadline=None)
@given(designs(), st.data())
def test_an_annotator_sees_each_pair_within_one_of_balanced_whatever_assignments_she_takes(design, data):
    """She takes any assignments the hand-out may give her (in any order, none sharing a context with one she
    took), and her surplus per real pair stays within one after each of them."""
    plan = plan_pairwise(**design)
    order = data.draw(st.permutations(plan))
    taken, seen = [], set()
    for assignment in order:
        if assignment.contexts & seen or not data.draw(st.booleans()):
            continue
        taken.append(assignment)
        seen |= assignment.contexts
        surplus = real_surplus(taken)
        assert all(abs(v) <= 1 for v in surplus.values()), (surplus, [a.index for a in taken])


@settings(max_examples=100, deadline=None)
@given(designs())
def test_the_assignments_off_balance_for_a_real_pair_all_share_a_context_so_nobody_takes_two(design):
    """The promise for every set of assignments at once: those whose surplus for a real pair is not 0 share one
    context, so an annotator (who never sees a context twice) completes at most one of them; with an even number
    of contexts there is none."""
    plan = plan_pairwise(**design)
    off = [a for a in plan if any(real_surplus([a]).values())]
    if len(design["contexts"]) % 2 == 0:
        assert off == []
    elif off:
        assert set.intersection(*(a.contexts for a in off))


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 12), st.booleans(), st.integers(0, 99))
def test_a_size_is_refused_exactly_when_its_real_slots_are_odd(size, with_controls, seed):
    """Real slots are the items of an assignment minus its controls (a fifth of them here, rounded)."""
    n_real = size - (round(size * 0.2) if with_controls else 0)
    design = dict(judgments_per_pair=2, items_per_assignment=size, control_rate=0.2 if with_controls else 0.0,
                  controls={"control-generic": list(range(6))} if with_controls else {}, seed=seed)
    if n_real % 2:
        with pytest.raises(ValueError, match=f"^{n_real} real pair slots per assignment: the design needs an even"):
            plan_pairwise(list(range(6)), [("moel", "gold")], **design)
    else:
        assert plan_pairwise(list(range(6)), [("moel", "gold")], **design)


@settings(max_examples=100, deadline=None)
@given(designs())
def test_control_pairs_put_a_control_against_a_real_system_on_a_context_of_its_own(design):
    plan = plan_pairwise(**design)
    real_systems = {s for pair in design["pairs"] for s in pair}
    per_assignment = round(design["items_per_assignment"] * design["control_rate"])
    usable = {c for covered in design["controls"].values() for c in covered}
    for assignment in plan:
        controls = [item for item in assignment.items if item.control is not None]
        held = {item.context for item in real(assignment)}
        assert len(controls) == min(per_assignment, len(usable - held))
        for item in controls:
            assert item.control in design["controls"] and item.control in (item.left, item.right)
            assert set(item.systems) - {item.control} <= real_systems
            assert item.context in design["controls"][item.control] and item.context not in held


@settings(max_examples=60, deadline=None)
@given(designs())
def test_the_same_seed_gives_the_same_design(design):
    assert plan_pairwise(**design) == plan_pairwise(**design)


def test_different_seeds_give_different_orders_and_sides():
    design = dict(contexts=list(range(20)), pairs=[("moel", s) for s in ("gold", "mime", "kemp")],
                  judgments_per_pair=3, items_per_assignment=11, control_rate=0.1,
                  controls={"control-generic": list(range(20))})
    plans = [plan_pairwise(**design, seed=seed) for seed in range(4)]
    orders = {tuple((i.context, i.label) for a in plan for i in a.items) for plan in plans}
    sides = {tuple(i.left for a in plan for i in a.items) for plan in plans}
    assert len(orders) == 4 and len(sides) == 4


def test_an_opponent_rotation_uses_every_system_against_the_controls():
    plan = plan_pairwise(list(range(30)), [("moel", "gold"), ("moel", "mime"), ("moel", "kemp")],
                         judgments_per_pair=2, items_per_assignment=5, control_rate=0.2,
                         controls={"control-generic": list(range(30))}, seed=1)
    opponents = Counter(next(s for s in i.systems if s != i.control) for a in plan for i in a.items if i.control)
    assert set(opponents) == {"moel", "gold", "mime", "kemp"} and max(opponents.values()) - min(opponents.values()) <= 1


@pytest.mark.parametrize(("pairs", "says"), [
    ([("moel", "moel")], "same system twice"),
    ([("moel", "gold"), ("gold", "moel")], "listed twice"),
])
def test_bad_pairs_are_refused(pairs, says):
    with pytest.raises(ValueError, match=says):
        plan_pairwise([1, 2], pairs, judgments_per_pair=1, items_per_assignment=2, seed=0)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 6), st.integers(0, 6)), max_size=40, unique=True), st.integers(0, 99))
def test_the_colouring_balances_every_vertex_and_the_whole_within_one(edges, seed):
    colours = balanced_colouring(edges, random.Random(seed))
    assert len(colours) == len(edges)
    balance: defaultdict[tuple, int] = defaultdict(int)
    for (u, v), colour in zip(edges, colours, strict=True):
        balance[("u", u)] += 1 if colour else -1
        balance[("v", v)] += 1 if colour else -1
    assert all(abs(b) <= 1 for b in balance.values())
    assert abs(2 * sum(colours) - len(colours)) <= 1
