"""Pairwise (A/B) study design: which (context, pair) judgments go into which assignment, in which order, and
which system of each pair is shown on the left (A) and which on the right (B).

What the design guarantees, for every seed:
- every (context, pair) is judged in exactly k assignments, one per round, and an assignment never holds a
  context twice (so, with the hand-out rule that an annotator never gets a context twice, the k judgments
  come from k distinct annotators);
- left/right is counterbalanced per real pair within one at four levels at once: over the whole study, over
  the k judgments of each (context, pair), within each assignment (exactly, except in an assignment that holds
  the single context described below, where within one), and per annotator: whatever assignments she
  completes, in whatever order, her left/right surplus per pair stays within one, as long as she never sees a
  context twice in the study (the hand-out's rule, which a unique key in the database keeps);
- within an assignment the pairs appear equally often as far as the numbers allow, counted in couples of
  judgments (the Likert design's Latin-square rotation over blocks, `empeval.tasks.design.plan_assignments`, with
  couples of contexts in the place of contexts and pairs in the place of systems);
- control pairs (a control system's response against a real system's, built to lose on the control's
  target criterion) are interleaved at the configured rate on contexts the assignment does not hold, the
  control kinds rotated across assignments and the opponents rotated over the study's systems; their sides
  are balanced within one over the study, per assignment and per (context, control pair), per
  (control, opponent). The per-annotator promise is for real pairs only: a control pair is no real pair;
- positions within an assignment are a seeded random permutation; every random choice comes from the seed.

Why per-annotator balance holds by construction. In each round the contexts are coupled two by two (seeded,
drawn afresh each round, so that a couple is not the same in every round), and a unit is one couple judged on
one pair: two placements of the same pair on two different contexts. The Latin-square packing places units
instead of single judgments, half an assignment's real slots each, so every assignment holds every pair an
even number of times; the only exception is the context left over when the number of contexts is odd (call it
c0, the same in every round), whose units are single placements. The colouring below balances every vertex of
even degree exactly, so an assignment's surplus for a pair is 0, unless it holds c0 with that pair, and then
±1. An annotator's surplus for a pair is the sum of the surpluses of the assignments she completes, and she
completes at most one that holds c0: within one, whatever the hand-out gives her and in whatever order. It
needs an even number of real slots per assignment (items_per_assignment minus the control slots, `pair_slots`):
`plan_pairwise` refuses an odd one, and the study file says which fields to change.

The left/right balance comes from a balanced 2-colouring of a bipartite graph per pair: vertices are the
(context, pair) cells and the assignments, an edge is one placement. Pairing the odd-degree vertices of each
side with a dummy vertex on the other side makes every degree even; an Euler circuit of each component
alternates colours, so every vertex is balanced exactly; dropping the dummy edges leaves every vertex, and the
whole pair, within one, and a vertex of even degree (it had no dummy edge) still exactly balanced.
(networkx has Euler circuits but comes only with the backend extra, and a study can be created by an
annotation-only install; Hierholzer's algorithm is a dozen lines.)
"""
from __future__ import annotations

import random
from collections import Counter, defaultdict
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass

from empeval.tasks.design import Candidate, PlannedAssignment, controls_per_assignment, pick_controls, plan_assignments


@dataclass(frozen=True)
class PlacedPair:
    """One judgment slot: a context with two systems' responses, `left` shown as A and `right` as B.
    `control` names the control system when this is a control pair (it is `left` or `right`)."""

    context: Hashable
    left: str
    right: str
    control: str | None = None

    @property
    def systems(self) -> tuple[str, str]:
        """The two systems, sorted: the pair whatever the sides."""
        first, second = sorted((self.left, self.right))
        return first, second

    @property
    def label(self) -> str:
        """The pair as the judgment table names it: 'a|b', sorted."""
        return "|".join(self.systems)


@dataclass(frozen=True)
class PlannedPairAssignment:
    round: int
    index: int  # position of the assignment in hand-out order
    items: tuple[PlacedPair, ...]  # in presentation order: items[i] is shown at position i

    @property
    def contexts(self) -> set[Hashable]:
        return {item.context for item in self.items}


def side_surplus(items: Sequence[PlacedPair]) -> Counter[str]:
    """Per pair label, how many more times its sorted-first system is on the left than on the right."""
    surplus: Counter[str] = Counter()
    for item in items:
        surplus[item.label] += 1 if item.left == item.systems[0] else -1
    return surplus


def pair_slots(items_per_assignment: int, control_rate: float, *, with_controls: bool) -> int:
    """How many real (context, pair) judgments an assignment holds: items_per_assignment minus its control slots
    (`empeval.tasks.design.controls_per_assignment`, none without controls). The design needs it even."""
    return items_per_assignment - (controls_per_assignment(items_per_assignment, control_rate) if with_controls
                                   else 0)


def plan_pairwise(
    contexts: Sequence[Hashable],
    pairs: Sequence[tuple[str, str]],
    *,
    judgments_per_pair: int,
    items_per_assignment: int,
    control_rate: float = 0.0,
    controls: Mapping[str, Sequence[Hashable]] | None = None,
    opponents: Sequence[str] = (),
    seed: int,
) -> list[PlannedPairAssignment]:
    """Assignments judging every (context, pair) `judgments_per_pair` times (see the module docstring for what
    is guaranteed). `controls` maps each control system to the contexts it has a response for; a control pair
    puts it against one of `opponents` (by default every system of `pairs`). Raises ValueError when the real
    slots of an assignment (items_per_assignment minus the controls) are not a positive even number."""
    if len(set(contexts)) != len(contexts):
        raise ValueError("a context is listed twice")
    canonical = [tuple(sorted(pair)) for pair in pairs]
    if any(a == b for a, b in canonical):
        raise ValueError("a pair holds the same system twice")
    if len(set(canonical)) != len(canonical):
        raise ValueError("a pair is listed twice")
    if judgments_per_pair < 1 or items_per_assignment < 1:
        raise ValueError("judgments_per_pair and items_per_assignment must be at least 1")
    control_candidates = [Candidate(key=(context, control), context=context, system=control)
                          for control, covered in sorted((controls or {}).items()) for context in covered]
    real_slots = pair_slots(items_per_assignment, control_rate, with_controls=bool(control_candidates))
    n_controls = items_per_assignment - real_slots
    if real_slots < 1:
        raise ValueError("control_rate leaves no room for real pairs")
    if real_slots % 2:
        raise ValueError(f"{real_slots} real pair slots per assignment: the design needs an even number, so that "
                         "every assignment holds each pair an even number of times and each annotator sees its two "
                         "orders equally often")
    by_label = {"|".join(pair): pair for pair in canonical}

    # Couples of contexts, drawn anew each round so that no two contexts share all their raters; with an odd
    # number, one context (the same in every round) is alone and its units are single placements.
    couples_rng = random.Random(f"pairwise-couples-{seed}")
    order = list(contexts)
    couples_rng.shuffle(order)
    single = [tuple(order[-1:])] if len(order) % 2 else []
    coupled = order[:len(order) - len(single)]
    plan: list[PlannedAssignment] = []
    for round_number in range(judgments_per_pair):
        couples_rng.shuffle(coupled)
        couples = [tuple(coupled[start:start + 2]) for start in range(0, len(coupled), 2)] + single
        units = [Candidate(key=(couple, label), context=couple, system=label)
                 for couple in couples for label in by_label]
        for planned in plan_assignments(units, ratings_per_response=1, items_per_assignment=real_slots // 2,
                                        seed=couples_rng.getrandbits(64)):
            plan.append(PlannedAssignment(round=round_number, index=len(plan), items=planned.items))

    rng = random.Random(f"pairwise-sides-{seed}")
    order_rng = random.Random(f"pairwise-order-{seed}")
    kinds = sorted({c.system for c in control_candidates})
    controls_by_kind = {kind: [c for c in control_candidates if c.system == kind] for kind in kinds}
    opponent_order = sorted(set(opponents) or {system for pair in canonical for system in pair})
    rng.shuffle(opponent_order)
    opponents_used: Counter[str] = Counter()
    # Every placement as (assignment index, context, the two systems sorted, control or None), in slot order.
    placements: list[tuple[int, Hashable, tuple[str, str], str | None]] = []
    for planned in plan:
        chosen = [Candidate(key=(context, unit.system), context=context, system=unit.system)
                  for unit in planned.items for context in unit.context]
        if n_controls:
            chosen += pick_controls(chosen, controls_by_kind, kinds, n_controls, planned.index, order_rng)
        order_rng.shuffle(chosen)
        for candidate in chosen:
            if candidate.system in by_label:
                placements.append((planned.index, candidate.context, by_label[candidate.system], None))
            else:
                control = candidate.system
                opponent = opponent_order[opponents_used[control] % len(opponent_order)]
                opponents_used[control] += 1
                placements.append((planned.index, candidate.context, tuple(sorted((control, opponent))), control))

    by_pair: dict[tuple[str, str], list[int]] = defaultdict(list)
    for number, (_, _, systems, _) in enumerate(placements):
        by_pair[systems].append(number)
    first_on_left: dict[int, bool] = {}
    for systems in sorted(by_pair):
        numbers = by_pair[systems]
        edges = [((placements[n][1], systems), placements[n][0]) for n in numbers]
        for n, colour in zip(numbers, balanced_colouring(edges, rng), strict=True):
            first_on_left[n] = colour

    slots: dict[int, list[PlacedPair]] = defaultdict(list)
    for number, (index, context, (first, second), control) in enumerate(placements):
        left, right = (first, second) if first_on_left[number] else (second, first)
        slots[index].append(PlacedPair(context=context, left=left, right=right, control=control))
    return [PlannedPairAssignment(round=planned.round, index=planned.index, items=tuple(slots[planned.index]))
            for planned in plan]


_DUMMY_CELL, _DUMMY_ASSIGNMENT = object(), object()


def balanced_colouring(edges: Sequence[tuple[Hashable, Hashable]], rng: random.Random) -> list[bool]:
    """A colour per edge of the bipartite multigraph `edges` ((left vertex, right vertex) pairs) such that at
    every vertex the two colours differ in count by at most one, and over all edges by at most one.

    >>> colours = balanced_colouring([("x", 1), ("x", 2), ("y", 1), ("y", 2), ("z", 1)], random.Random(0))
    >>> abs(2 * sum(colours) - len(colours)) <= 1, colours[0] != colours[1], colours[0] != colours[2]
    (True, True, True)
    """
    ends: list[tuple[tuple[int, Hashable], tuple[int, Hashable]]] = [((0, u), (1, v)) for u, v in edges]
    degree: Counter[tuple[int, Hashable]] = Counter(end for edge in ends for end in edge)
    odd_left = [vertex for vertex in degree if vertex[0] == 0 and degree[vertex] % 2]
    odd_right = [vertex for vertex in degree if vertex[0] == 1 and degree[vertex] % 2]
    # The dummy of each side takes the other side's odd vertices; the two dummies then have degrees of the same
    # parity (both sides sum to the number of edges), and one edge between them makes both even.
    ends += [(vertex, (1, _DUMMY_ASSIGNMENT)) for vertex in odd_left]
    ends += [((0, _DUMMY_CELL), vertex) for vertex in odd_right]
    if len(odd_left) % 2:
        ends.append(((0, _DUMMY_CELL), (1, _DUMMY_ASSIGNMENT)))

    incident: dict[tuple[int, Hashable], list[int]] = defaultdict(list)
    for number, (u, v) in enumerate(ends):
        incident[u].append(number)
        incident[v].append(number)
    used = [False] * len(ends)
    next_edge: Counter[tuple[int, Hashable]] = Counter()
    colour: list[bool] = [False] * len(ends)
    for start in list(incident):
        # Hierholzer: the edges, popped in order, form an Euler circuit of the start's component; the circuit
        # is closed and of even length (the graph is bipartite), so alternating colours balances every vertex.
        circuit: list[int] = []
        stack: list[tuple[tuple[int, Hashable], int | None]] = [(start, None)]
        while stack:
            vertex, arrived_by = stack[-1]
            edges_here = incident[vertex]
            while next_edge[vertex] < len(edges_here) and used[edges_here[next_edge[vertex]]]:
                next_edge[vertex] += 1
            if next_edge[vertex] == len(edges_here):
                stack.pop()
                if arrived_by is not None:
                    circuit.append(arrived_by)
            else:
                edge = edges_here[next_edge[vertex]]
                used[edge] = True
                u, v = ends[edge]
                stack.append((v if u == vertex else u, edge))
        flip = rng.random() < 0.5
        for position, edge in enumerate(circuit):
            colour[edge] = (position % 2 == 0) != flip
    return colour[:len(edges)]
