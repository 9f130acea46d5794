"""Order in the design is a seeded permutation: items within an assignment and assignments within a round are
shuffled by the study's seed (so position effects are balanced and controls are not always last), the same
seed gives the same order and another seed another; and an item never silently vanishes."""
from __future__ import annotations

from collections import Counter

import pytest

from empeval.tasks.design import Candidate, plan_assignments

SYSTEMS = ("a", "b", "c", "d")
CONTROL_KINDS = ("control-generic", "control-mismatched")


def _design(seed: int, *, contexts: int = 40, per_assignment: int = 8, control_rate: float = 0.25, k: int = 2):
    items = [Candidate(key=(c, s), context=c, system=s) for c in range(contexts) for s in SYSTEMS]
    controls = [Candidate(key=(c, kind), context=c, system=kind) for c in range(contexts) for kind in CONTROL_KINDS]
    return plan_assignments(items, controls, ratings_per_response=k, items_per_assignment=per_assignment,
                            control_rate=control_rate, seed=seed)


def test_controls_take_every_position_not_only_the_last():
    positions = Counter(i for a in _design(3) for i, item in enumerate(a.items) if item.system in CONTROL_KINDS)
    sizes = {len(a.items) for a in _design(3)}
    assert len(positions) == max(sizes)  # every position holds a control somewhere
    last_share = sum(n for i, n in positions.items() if i == max(sizes) - 1) / sum(positions.values())
    assert last_share < 0.5


def test_item_order_within_an_assignment_follows_the_seed():
    first, again, other = _design(5), _design(5), _design(6)
    assert [a.items for a in first] == [a.items for a in again]
    # The same assignment contents (as sets) in another order under another seed: compare the orders of the
    # assignments both designs share.
    by_content = {frozenset(a.items): a.items for a in other}
    shared = [(a.items, by_content[frozenset(a.items)]) for a in first if frozenset(a.items) in by_content]
    orders = [(x, y) for x, y in shared if x != y]
    assert shared == [] or orders, "another seed must not keep every shared assignment's order"
    # Within one design the systems do not always come in the same rotation order.
    rotations = {tuple(item.system for item in a.items if item.system in SYSTEMS) for a in first}
    assert len(rotations) > len(SYSTEMS)


def test_assignments_of_one_block_are_spread_over_the_round():
    # Without the shuffle of assignments within a round, the n assignments cut from one block of contexts
    # (one per system rotation) come one after another.
    design = _design(9, control_rate=0.0)
    for round_number in (0, 1):
        blocks = [frozenset(item.context for item in a.items) for a in design if a.round == round_number]
        adjacent_same_block = sum(x == y for x, y in zip(blocks, blocks[1:], strict=False))
        assert adjacent_same_block < (len(blocks) - len(set(blocks)))


def test_the_round_order_depends_on_the_seed():
    def order(seed):
        return [frozenset(item.context for item in a.items) for a in _design(seed, control_rate=0.0) if a.round == 0]
    assert order(1) == order(1) and order(1) != order(2)


def test_two_items_with_the_same_context_and_system_are_refused():
    items = [Candidate(key=1, context=0, system="a"), Candidate(key=2, context=0, system="a")]
    with pytest.raises(ValueError, match="share a context and a system"):
        plan_assignments(items, ratings_per_response=1, items_per_assignment=4, seed=0)
