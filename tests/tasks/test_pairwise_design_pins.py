"""What tasks.pairwise_design promises beyond the properties of test_pairwise_design.py: a seed's design is the
same in every version (a study recreated from its seed gets the judgments it was run with), the opponents
option, the refusals' messages, and the pair as the judgment table names it."""
from __future__ import annotations

import random
import re

import pytest

from empeval.tasks.kinds.pairwise_design import PlacedPair, balanced_colouring, pair_slots, plan_pairwise, side_surplus


def test_a_seed_gives_the_same_design_in_every_version():
    plan = plan_pairwise([1, 2, 3, 4], [("moel", "gold"), ("moel", "mime")], judgments_per_pair=2,
                         items_per_assignment=3, control_rate=0.34, controls={"control-generic": [1, 2, 3, 4]},
                         seed=7)
    c = "control-generic"
    assert [(a.round, a.index, [(i.context, i.left, i.right, i.control) for i in a.items]) for a in plan] == [
        (0, 0, [(2, "mime", "moel", None), (1, "moel", "mime", None), (3, "moel", c, c)]),
        (0, 1, [(2, "moel", "gold", None), (3, c, "gold", c), (1, "gold", "moel", None)]),
        (0, 2, [(2, "mime", c, c), (4, "mime", "moel", None), (3, "moel", "mime", None)]),
        (0, 3, [(2, c, "moel", c), (3, "gold", "moel", None), (4, "moel", "gold", None)]),
        (1, 4, [(1, "moel", "gold", None), (4, "gold", "moel", None), (2, "gold", c, c)]),
        (1, 5, [(2, c, "mime", c), (4, "moel", "mime", None), (1, "mime", "moel", None)]),
        (1, 6, [(2, "gold", "moel", None), (1, "moel", c, c), (3, "moel", "gold", None)]),
        (1, 7, [(2, "moel", "mime", None), (4, c, "gold", c), (3, "mime", "moel", None)]),
    ]
    assert plan[0].contexts == {1, 2, 3}


def test_controls_meet_only_the_opponents_named():
    plan = plan_pairwise(list(range(12)), [("moel", "gold"), ("moel", "mime")], judgments_per_pair=2,
                         items_per_assignment=5, control_rate=0.2, controls={"control-generic": list(range(12))},
                         opponents=["mime", "gold"], seed=3)
    opponents = [next(s for s in item.systems if s != item.control) for a in plan for item in a.items if item.control]
    assert opponents and set(opponents) == {"mime", "gold"}
    assert abs(opponents.count("mime") - opponents.count("gold")) <= 1


def test_each_control_kind_rotates_over_the_opponents_on_its_own():
    """Two control kinds: each one's opponents take turns (within one of each other), counted per kind."""
    plan = plan_pairwise(list(range(30)), [("moel", "gold"), ("moel", "mime")], judgments_per_pair=2,
                         items_per_assignment=6, control_rate=0.34,
                         controls={"control-generic": list(range(30)), "control-scrambled": list(range(30))}, seed=2)
    for kind in ("control-generic", "control-scrambled"):
        opponents = [next(s for s in item.systems if s != kind) for a in plan for item in a.items
                     if item.control == kind]
        counts = [opponents.count(system) for system in ("gold", "mime", "moel")]
        assert min(counts) >= 1 and max(counts) - min(counts) <= 1, (kind, counts)


@pytest.mark.parametrize(("contexts", "pairs", "says"), [
    ([1, 2, 1], [("moel", "gold")], "a context is listed twice"),
    ([1, 2], [("moel", "moel")], "a pair holds the same system twice"),
    ([1, 2], [("moel", "gold"), ("gold", "moel")], "a pair is listed twice"),
])
def test_a_refusal_says_exactly_what_was_listed_wrong(contexts, pairs, says):
    with pytest.raises(ValueError, match=f"^{says}$"):
        plan_pairwise(contexts, pairs, judgments_per_pair=1, items_per_assignment=2, seed=0)


@pytest.mark.parametrize(("size", "k", "rate", "says"), [
    (0, 1, 0.0, "judgments_per_pair and items_per_assignment must be at least 1"),
    (2, 0, 0.0, "judgments_per_pair and items_per_assignment must be at least 1"),
    (1, 1, 0.6, "control_rate leaves no room for real pairs"),
    (3, 1, 0.0, "3 real pair slots per assignment: the design needs an even number, so that every assignment "
                "holds each pair an even number of times and each annotator sees its two orders equally often"),
])
def test_a_size_without_an_even_positive_number_of_real_slots_is_refused_saying_why(size, k, rate, says):
    with pytest.raises(ValueError, match=f"^{re.escape(says)}$"):
        plan_pairwise([1, 2], [("moel", "gold")], judgments_per_pair=k, items_per_assignment=size,
                      control_rate=rate, controls={"control-generic": [1, 2]}, seed=0)


def test_real_slots_are_the_items_less_the_controls_only_when_controls_are_used():
    assert pair_slots(11, 0.1, with_controls=True) == 10 and pair_slots(11, 0.1, with_controls=False) == 11
    assert pair_slots(8, 0.2, with_controls=True) == 6


def test_without_a_control_rate_the_controls_offered_are_not_used():
    plan = plan_pairwise(list(range(6)), [("moel", "gold")], judgments_per_pair=2, items_per_assignment=4,
                         controls={"control-generic": list(range(6))}, seed=0)
    assert all(item.control is None for a in plan for item in a.items)


def test_a_placed_pair_names_its_systems_sorted_whatever_the_sides():
    item = PlacedPair(context=1, left="moel", right="gold")
    assert item.systems == ("gold", "moel") and item.label == "gold|moel"
    assert side_surplus([item, PlacedPair(context=2, left="gold", right="moel"),
                         PlacedPair(context=3, left="gold", right="moel")]) == {"gold|moel": 1}


def test_the_colouring_of_one_edge_or_none():
    assert balanced_colouring([], random.Random(0)) == []
    assert len(balanced_colouring([("x", 1)], random.Random(0))) == 1
    # two parallel placements of one cell in one assignment: one of each colour
    assert sorted(balanced_colouring([("x", 1), ("x", 1)], random.Random(0))) == [False, True]
