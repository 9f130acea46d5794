"""Best-worst scaling study design: which tuple of systems each context shows, which tuples go into which
assignment, and in which order each placement shows a tuple's responses.

What the design guarantees, for every seed:
- each context shows one tuple of `size` systems, and the tuples rotate over all C(S, size) subsets of the S
  systems: every subset is used for floor(n/C) or ceil(n/C) of the n contexts, so, the subsets being all of them,
  every system and every pair of systems is shown about equally often (a balanced incomplete block design whenever
  C divides n; with S = size, every context shows every system);
- every real tuple is judged in exactly k assignments, one per round, and an assignment never holds a context
  twice (the packing is tasks.design.plan_assignments over one unit per context), so, with the hand-out's rule
  that an annotator never gets a context twice, the k judgments of a tuple come from k distinct annotators;
- the order a tuple's responses are shown in rotates over its placements: a seeded random order for round 0,
  shifted by one place per round, so that with k <= size no response is shown twice at the same place, and over
  the study every system is shown at every place about equally often (the rotation's start is drawn per tuple);
- control tuples (one control system's response with size - 1 real systems' responses, built to be the worst on
  the control's target criterion) are interleaved at the configured rate on contexts the assignment does not
  hold, the control kinds rotated across assignments (as for Likert controls) and the real systems beside the
  control rotated over all (size - 1)-subsets; a control tuple is stored once per (context, control) and shown in
  a fresh seeded order each time;
- positions within an assignment are a seeded random permutation; every random choice comes from the seed.

>>> plan = plan_best_worst(range(10), ["a", "b", "c", "d", "e"], size=4, judgments_per_tuple=2,
...                        items_per_assignment=5, seed=1)
>>> len(plan), sorted(len(a.items) for a in plan), len(plan[0].items[0].systems)
(4, [5, 5, 5, 5], 4)
"""
from __future__ import annotations

import random
from collections import defaultdict
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass
from itertools import combinations

from empeval.tasks.design import Candidate, plan_assignments

REAL = ""  # the system name a real tuple's unit carries in the packing (control units carry their control's)


@dataclass(frozen=True)
class PlacedTuple:
    """One judgment slot: a context with the responses of `systems` (by slot: slot i is systems[i]), shown in the
    order `shown` (slots, the one shown first first). `control` names the control system of a control tuple (one
    of `systems`)."""

    context: Hashable
    systems: tuple[str, ...]
    shown: tuple[int, ...]
    control: str | None = None

    @property
    def shown_systems(self) -> tuple[str, ...]:
        """The systems in the order their responses are shown."""
        return tuple(self.systems[slot] for slot in self.shown)


@dataclass(frozen=True)
class PlannedTupleAssignment:
    round: int
    index: int  # position of the assignment in hand-out order
    items: tuple[PlacedTuple, ...]  # in presentation order: items[i] is shown at position i

    @property
    def contexts(self) -> set[Hashable]:
        return {item.context for item in self.items}


def tuples_for_contexts(contexts: Sequence[Hashable], systems: Sequence[str], size: int,
                        seed: int) -> dict[Hashable, tuple[str, ...]]:
    """The tuple each context shows: the C(S, size) subsets of the systems (each sorted), in a seeded order, cycled
    over the contexts in a seeded order, so that every subset is used floor or ceil of n / C times.

    >>> shown = tuples_for_contexts(range(8), ["a", "b", "c", "d"], 3, seed=0)
    >>> from collections import Counter
    >>> sorted(Counter(shown.values()).values()), Counter(system for t in shown.values() for system in t)
    ([2, 2, 2, 2], Counter({'a': 6, 'b': 6, 'c': 6, 'd': 6}))
    """
    if not 2 <= size <= len(systems):
        raise ValueError(f"a tuple of {size} needs at least {size} systems and holds at least 2, got "
                         f"{len(systems)} systems")
    rng = random.Random(f"best-worst-tuples-{seed}")
    subsets = list(combinations(sorted(systems), size))
    rng.shuffle(subsets)
    order = list(contexts)
    rng.shuffle(order)
    return {context: subsets[i % len(subsets)] for i, context in enumerate(order)}


def _rotated(order: Sequence[int], shift: int) -> tuple[int, ...]:
    shift %= len(order)
    return tuple(order[shift:]) + tuple(order[:shift])


def plan_best_worst(
    contexts: Sequence[Hashable],
    systems: Sequence[str],
    *,
    size: int,
    judgments_per_tuple: int,
    items_per_assignment: int,
    control_rate: float = 0.0,
    controls: Mapping[str, Sequence[Hashable]] | None = None,
    seed: int,
) -> list[PlannedTupleAssignment]:
    """Assignments judging every context's tuple `judgments_per_tuple` times (see the module docstring for what is
    guaranteed). `controls` maps each control system to the contexts it has a response for. ValueError when a
    context is listed twice, a system is a control too, or the sizes do not fit."""
    if len(set(contexts)) != len(contexts):
        raise ValueError("a context is listed twice")
    if len(set(systems)) != len(systems):
        raise ValueError("a system is listed twice")
    if set(systems) & set(controls or {}):
        raise ValueError("a system is listed as a control too")
    if judgments_per_tuple < 1 or items_per_assignment < 1:
        raise ValueError("judgments_per_tuple and items_per_assignment must be at least 1")
    shown_tuples = tuples_for_contexts(contexts, systems, size, seed)
    units = [Candidate(key=context, context=context, system=REAL) for context in contexts]
    control_units = [Candidate(key=(context, control), context=context, system=control)
                     for control, covered in sorted((controls or {}).items()) for context in covered]
    packed = plan_assignments(units, control_units, ratings_per_response=judgments_per_tuple,
                              items_per_assignment=items_per_assignment, control_rate=control_rate,
                              seed=random.Random(f"best-worst-packing-{seed}").getrandbits(64))

    rng = random.Random(f"best-worst-orders-{seed}")
    first_order = {context: tuple(rng.sample(range(size), size)) for context in sorted(contexts, key=repr)}
    companions = list(combinations(sorted(systems), size - 1))
    rng.shuffle(companions)
    control_tuples: dict[tuple[Hashable, str], tuple[str, ...]] = {}
    plan = []
    for planned in packed:
        placed = []
        for unit in planned.items:
            if unit.system == REAL:
                placed.append(PlacedTuple(unit.context, shown_tuples[unit.context],
                                          _rotated(first_order[unit.context], planned.round)))
                continue
            key = (unit.context, unit.system)
            if key not in control_tuples:
                beside = companions[len(control_tuples) % len(companions)]
                control_tuples[key] = tuple(sorted((*beside, unit.system)))
            members = control_tuples[key]
            placed.append(PlacedTuple(unit.context, members, tuple(rng.sample(range(size), size)),
                                      control=unit.system))
        plan.append(PlannedTupleAssignment(round=planned.round, index=planned.index, items=tuple(placed)))
    return plan


def shown_at(plan: Sequence[PlannedTupleAssignment]) -> dict[str, dict[int, int]]:
    """Per real system, how many times its response is shown at each place of a tuple (0 = first): what the
    rotation keeps about equal.

    >>> counts = shown_at(plan_best_worst(range(12), "abcd", size=4, judgments_per_tuple=4, items_per_assignment=6,
    ...                                   seed=3))
    >>> {system: sorted(set(places.values())) for system, places in counts.items()}
    {'a': [12], 'b': [12], 'c': [12], 'd': [12]}
    """
    counts: dict[str, dict[int, int]] = defaultdict(lambda: defaultdict(int))
    for assignment in plan:
        for item in assignment.items:
            if item.control is None:
                for place, system in enumerate(item.shown_systems):
                    counts[system][place] += 1
    return {system: dict(places) for system, places in sorted(counts.items())}
