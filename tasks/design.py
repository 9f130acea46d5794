"""Study design, the engine every kind's design uses: which items go into which assignment, in which order.

The guarantees, for every seed:
- every real item (a system's response to a context) appears in exactly k assignments, one per round;
- an assignment never holds two items of the same context (so, with the hand-out rule that an annotator
  never gets a context twice, the k ratings of a response come from k distinct annotators);
- within an assignment the systems appear equally often as far as the numbers allow: contexts are cut
  into blocks and the systems rotated over a block as in a Latin square (Williams-style counterbalancing);
- control items are interleaved at the configured rate, on contexts the assignment does not hold, with
  the control kinds rotated across assignments;
- item order within an assignment is a seeded random permutation, recorded as each item's position.
All randomness comes from one `random.Random(seed)`.
"""
from __future__ import annotations

import math
import random
from collections.abc import Hashable, Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Candidate:
    """Something that can be placed in an assignment: a real item or a control item."""

    key: Hashable  # the caller's identity for it (e.g. a response id)
    context: Hashable
    system: str


@dataclass(frozen=True)
class PlannedAssignment:
    round: int
    index: int  # position of the assignment in hand-out order
    items: tuple[Candidate, ...]  # in presentation order: items[i] is shown at position i

    @property
    def contexts(self) -> set[Hashable]:
        return {item.context for item in self.items}


def _blocks(values: list, size: int) -> list[list]:
    """Cut `values` into ceil(n/size) blocks of near-equal length (sizes differ by at most one)."""
    if not values:
        return []
    count = math.ceil(len(values) / size)
    base, extra = divmod(len(values), count)
    blocks, start = [], 0
    for i in range(count):
        length = base + (1 if i < extra else 0)
        blocks.append(values[start:start + length])
        start += length
    return blocks


def controls_per_assignment(items_per_assignment: int, control_rate: float) -> int:
    return round(items_per_assignment * control_rate)


def plan_assignments(
    items: Sequence[Candidate],
    controls: Sequence[Candidate] = (),
    *,
    ratings_per_response: int,
    items_per_assignment: int,
    control_rate: float = 0.0,
    seed: int,
) -> list[PlannedAssignment]:
    """Assignments for `items` (see the module docstring for what is guaranteed)."""
    if ratings_per_response < 1 or items_per_assignment < 1:
        raise ValueError("ratings_per_response and items_per_assignment must be at least 1")
    rng = random.Random(seed)
    n_controls = controls_per_assignment(items_per_assignment, control_rate) if controls else 0
    real_per_assignment = items_per_assignment - n_controls
    if real_per_assignment < 1:
        raise ValueError("control_rate leaves no room for real items")

    by_cell = {(item.context, item.system): item for item in items}
    if len(by_cell) != len(items):
        raise ValueError("two items share a context and a system")
    systems = sorted({item.system for item in items})
    contexts = sorted({item.context for item in items}, key=repr)
    control_kinds = sorted({c.system for c in controls})
    controls_by_kind = {kind: [c for c in controls if c.system == kind] for kind in control_kinds}

    planned: list[PlannedAssignment] = []
    for round_number in range(ratings_per_response):
        order = contexts[:]
        rng.shuffle(order)
        round_assignments: list[list[Candidate]] = []
        for block in _blocks(order, real_per_assignment):
            offset = rng.randrange(len(systems))
            for j in range(len(systems)):
                # Latin-square rotation: context i of the block gets system (i + j + offset) mod n, so over
                # the n assignments of a block every (context, system) cell is used exactly once.
                chosen = [by_cell.get((context, systems[(i + j + offset) % len(systems)]))
                          for i, context in enumerate(block)]
                chosen = [c for c in chosen if c is not None]
                if chosen:
                    round_assignments.append(chosen)
        rng.shuffle(round_assignments)
        for chosen in round_assignments:
            if n_controls:
                chosen = chosen + pick_controls(chosen, controls_by_kind, control_kinds, n_controls, len(planned), rng)
            rng.shuffle(chosen)
            planned.append(PlannedAssignment(round=round_number, index=len(planned), items=tuple(chosen)))
    return planned


def pick_controls(chosen, controls_by_kind, kinds, n, assignment_number, rng) -> list[Candidate]:
    """n controls on contexts not in `chosen`, kinds rotated so every kind is used about equally."""
    taken = {c.context for c in chosen}
    picked: list[Candidate] = []
    for slot in range(n):
        kind = kinds[(assignment_number + slot) % len(kinds)]
        pool = [c for c in controls_by_kind[kind] if c.context not in taken]
        if not pool:  # this kind has nothing usable here: fall back to any kind
            pool = [c for k in kinds for c in controls_by_kind[k] if c.context not in taken]
        if not pool:
            break
        control = rng.choice(pool)
        picked.append(control)
        taken.add(control.context)
    return picked
