"""Study design: which items go into which assignment, in which order.

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
                chosen = chosen + _pick_controls(chosen, controls_by_kind, control_kinds, n_controls, len(planned), rng)
            rng.shuffle(chosen)
            planned.append(PlannedAssignment(round=round_number, index=len(planned), items=tuple(chosen)))
    return planned


def _pick_controls(chosen, controls_by_kind, kinds, n, assignment_number, rng) -> list[Candidate]:
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


#: Fewest contexts people must rate for a human share (prediction-powered inference needs a variance per system).
MIN_HUMAN_CONTEXTS = 2


def human_share_problem(human_share: object, n_contexts: int) -> str | None:
    """What is wrong with `human_share` (design.human_share: the share of a study's contexts people rate) for a
    study of `n_contexts` contexts, else None. It must be a number strictly between 0 and 1 whose sample,
    round(human_share x n_contexts) contexts (Python's round: halves to even), holds at least two contexts
    (a variance per system) and leaves at least one context to the judges alone. The same rule as
    analysis.judged.tables.check_human_share, which the analysis applies.

    >>> human_share_problem(0.25, 40) is None
    True
    >>> print(human_share_problem(0.05, 20))  # doctest: +NORMALIZE_WHITESPACE
    0.05 of 20 contexts is 1 context rated by people (round(0.05 x 20)); prediction-powered inference needs at
    least 2 per system: raise design.human_share to 0.1 or more, or rate more contexts
    """
    if (isinstance(human_share, bool) or not isinstance(human_share, (int, float))
            or not math.isfinite(human_share)):
        return f"must be a number strictly between 0 and 1 (the share of contexts people rate), got {human_share!r}"
    if not 0 < human_share < 1:
        return (f"must be strictly between 0 and 1, got {human_share}: with 0 nobody rates and nothing corrects the "
                "judges, with 1 the judges add nothing; leave design.human_share out to have people rate every context")
    n_rated = human_sample_size(human_share, n_contexts)
    if n_rated < MIN_HUMAN_CONTEXTS:
        return (f"{human_share:g} of {n_contexts} contexts is {n_rated} context{'' if n_rated == 1 else 's'} rated by "
                f"people (round({human_share:g} x {n_contexts})); prediction-powered inference needs at least "
                f"{MIN_HUMAN_CONTEXTS} per system: raise design.human_share to {MIN_HUMAN_CONTEXTS / n_contexts:.3g} "
                "or more, or rate more contexts")
    if n_rated >= n_contexts:
        return (f"{human_share:g} of {n_contexts} contexts is {n_rated} (round({human_share:g} x {n_contexts})): "
                "people would rate every context and leave none to the judges alone; lower design.human_share or "
                "leave it out")
    return None


def human_sample_size(human_share: float, n_contexts: int) -> int:
    """How many of `n_contexts` contexts people rate under `human_share`: round(human_share x n_contexts)."""
    return round(human_share * n_contexts)


def draw_human_sample(contexts: Sequence[str], human_share: float, seed: int) -> list[str]:
    """The contexts people rate: a uniform random sample without replacement of human_sample_size(...) of
    `contexts` (keys such as "conv_id#n_turns"), drawn by `random.Random(f"human-share:{seed}").sample` from the
    keys in sorted order, so that the same keys and seed give the same sample in any store, and the draw is
    independent of the seeded draw of the contexts themselves. Returned sorted. ValueError if the share does not
    fit (`human_share_problem`).

    >>> draw_human_sample([f"c{i}" for i in range(10)], 0.3, seed=1) == draw_human_sample(
    ...     [f"c{i}" for i in reversed(range(10))], 0.3, seed=1)
    True
    """
    problem = human_share_problem(human_share, len(contexts))
    if problem:
        raise ValueError(problem)
    rng = random.Random(f"human-share:{seed}")
    return sorted(rng.sample(sorted(contexts), human_sample_size(human_share, len(contexts))))
