"""Pairwise (A/B) study design: which (context, pair) judgments go into which assignment, in which order, and
which system of each pair is shown on the left (A) and which on the right (B).

What the design guarantees, for every seed:
- every (context, pair) is judged in exactly k assignments, one per round, and an assignment never holds a
  context twice (so, with the hand-out rule that an annotator never gets a context twice, the k judgments
  come from k distinct annotators);
- within an assignment the pairs appear equally often as far as the numbers allow (the Likert design's
  Latin-square rotation over blocks of contexts, `tasks.design.plan_assignments`, with pairs in the place
  of systems);
- left/right is counterbalanced per pair within one at three levels at once: over the whole study, within
  each assignment, and over the k judgments of each (context, pair); control pairs likewise per
  (control, opponent);
- control pairs (a control system's response against a real system's, built to lose on the control's
  target criterion) are interleaved at the configured rate on contexts the assignment does not hold, the
  control kinds rotated across assignments and the opponents rotated over the study's systems;
- positions within an assignment are a seeded random permutation; every random choice comes from the seed.

What the design cannot guarantee, and the hand-out must: balance per *annotator*. The design does not know
who claims which assignments: an annotator doing m assignments can be off by at most m for a pair (at most
one per assignment). The hand-out can keep her within one by preferring, among the open assignments she may
take, one whose left/right surplus per pair offsets hers (`side_surplus` gives an assignment's).

The left/right balance comes from a balanced 2-colouring of a bipartite graph per pair: vertices are the
(context, pair) cells and the assignments, an edge is one placement. Pairing the odd-degree vertices of each
side with a dummy vertex on the other side makes every degree even; an Euler circuit of each component
alternates colours, so every vertex is balanced exactly, and dropping the dummy edges leaves every vertex,
and the whole pair, within one. (networkx has Euler circuits but comes only with the backend extra, and a
study can be created by an annotation-only install; Hierholzer's algorithm is a dozen lines.)
"""
from __future__ import annotations

import random
from collections import Counter, defaultdict
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass

from tasks.design import Candidate, plan_assignments


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
    puts it against one of `opponents` (by default every system of `pairs`)."""
    if len(set(contexts)) != len(contexts):
        raise ValueError("a context is listed twice")
    canonical = [tuple(sorted(pair)) for pair in pairs]
    if any(a == b for a, b in canonical):
        raise ValueError("a pair holds the same system twice")
    if len(set(canonical)) != len(canonical):
        raise ValueError("a pair is listed twice")
    by_label = {"|".join(pair): pair for pair in canonical}
    items = [Candidate(key=(context, label), context=context, system=label)
             for context in contexts for label in by_label]
    control_candidates = [Candidate(key=(context, control), context=context, system=control)
                          for control, covered in sorted((controls or {}).items()) for context in covered]
    plan = plan_assignments(items, control_candidates, ratings_per_response=judgments_per_pair,
                            items_per_assignment=items_per_assignment, control_rate=control_rate, seed=seed)

    rng = random.Random(f"pairwise-sides-{seed}")
    opponent_order = sorted(set(opponents) or {system for pair in canonical for system in pair})
    rng.shuffle(opponent_order)
    opponents_used: Counter[str] = Counter()
    # Every placement as (assignment index, slot, context, the two systems sorted, control or None).
    placements: list[tuple[int, int, Hashable, tuple[str, str], str | None]] = []
    for planned in plan:
        for slot, candidate in enumerate(planned.items):
            if candidate.system in by_label:
                placements.append((planned.index, slot, candidate.context, by_label[candidate.system], None))
            else:
                control = candidate.system
                opponent = opponent_order[opponents_used[control] % len(opponent_order)]
                opponents_used[control] += 1
                placements.append((planned.index, slot, candidate.context, tuple(sorted((control, opponent))),
                                   control))

    by_pair: dict[tuple[str, str], list[int]] = defaultdict(list)
    for number, (_, _, _, systems, _) in enumerate(placements):
        by_pair[systems].append(number)
    first_on_left: dict[int, bool] = {}
    for systems in sorted(by_pair):
        numbers = by_pair[systems]
        edges = [((placements[n][2], systems), placements[n][0]) for n in numbers]
        for n, colour in zip(numbers, balanced_colouring(edges, rng), strict=True):
            first_on_left[n] = colour

    slots: dict[int, list[PlacedPair]] = defaultdict(list)
    for number, (index, _, context, (first, second), control) in enumerate(placements):
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
