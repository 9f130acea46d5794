"""ACUTE-Eval study design: which conversations are compared (the pairing), which pairs of conversations go into
which assignment, in which order, and which conversation of each pair is shown on the left.

The pairing (`pair_conversations`), for every pair of compared systems (s, t) and every (real system, control)
pair: each finished conversation takes part in at most one pair of conversations of that pair of systems; first the
conversations of s and t on the same prompt are paired (in seeded order when a prompt has several of one system),
then, unless `same_prompt_only`, the ones left over are paired across prompts (seeded). A chat study crosses
prompts with partners, so with every session finished every pair of systems has a pair on every prompt and none
across prompts; the ones across prompts only use conversations that would otherwise go unjudged.

What the plan (`plan_acute`) guarantees, for every seed:
- every real pair of conversations is placed in exactly k assignments, one per round (so, with the hand-out's rule
  that nobody is shown a prompt twice, by k distinct raters);
- an assignment never holds a prompt twice (neither in two pairs, nor a pair of conversations on one prompt with a
  control on it): the seen rule would otherwise keep its rater from a prompt she has not yet read in full;
- within an assignment the pairs of systems are mixed: units are taken round-robin over the pairs of systems and
  packed first-fit;
- control pairs are interleaved at the configured rate, on prompts the assignment does not hold, the least used
  control partner and control pair first;
- left/right is balanced with the A/B design's balanced colouring (tasks.kinds.pairwise_design.balanced_colouring)
  per pair of systems (controls included): within one over the study, over the k placements of each pair of
  conversations, and per assignment. Unlike the A/B design there is no per-rater promise: a rater usually does
  only a few assignments, and the per-assignment balance bounds her surplus per pair of systems by their number;
- positions within an assignment are a seeded random permutation; every random choice comes from the seed.

>>> talks = [Conversation(1, "a", 10), Conversation(2, "b", 10), Conversation(3, "a", 11), Conversation(4, "b", 12)]
>>> real, _ = pair_conversations(talks, ("a", "b"), seed=0)
>>> sorted((c.a.key, c.b.key, c.same_prompt) for c in real)
[(1, 2, True), (3, 4, False)]
>>> [len(p.items) for p in plan_acute(real, judgments_per_pair=2, items_per_assignment=2, seed=0)]
[2, 2]
"""
from __future__ import annotations

import random
from collections import Counter, defaultdict
from collections.abc import Hashable, Sequence
from dataclasses import dataclass

from empeval.tasks.design import controls_per_assignment
from empeval.tasks.kinds.pairwise_design import balanced_colouring


@dataclass(frozen=True)
class Conversation:
    """A finished conversation of the chat study: its key (the chat placement's id), its partner and its prompt."""

    key: int
    system: str
    prompt: Hashable


@dataclass(frozen=True)
class Comparison:
    """Two conversations of two different partners, `a` the one with the lower key; `control` names the control
    partner of a control pair (the system of `a` or of `b`)."""

    a: Conversation
    b: Conversation
    control: str | None = None

    @property
    def key(self) -> tuple[int, int]:
        return self.a.key, self.b.key

    @property
    def systems(self) -> tuple[str, str]:
        """The two partners, sorted: the pair of systems whatever the sides."""
        first, second = sorted((self.a.system, self.b.system))
        return first, second

    @property
    def label(self) -> str:
        return "|".join(self.systems)

    @property
    def prompts(self) -> frozenset[Hashable]:
        return frozenset((self.a.prompt, self.b.prompt))

    @property
    def same_prompt(self) -> bool:
        return self.a.prompt == self.b.prompt


@dataclass(frozen=True)
class PlacedComparison:
    """One slot of an assignment: a comparison and whether its conversation `a` is shown on the left."""

    comparison: Comparison
    a_left: bool

    @property
    def left(self) -> Conversation:
        return self.comparison.a if self.a_left else self.comparison.b

    @property
    def right(self) -> Conversation:
        return self.comparison.b if self.a_left else self.comparison.a


@dataclass(frozen=True)
class PlannedAcuteAssignment:
    round: int
    index: int  # position of the assignment in hand-out order
    items: tuple[PlacedComparison, ...]  # in presentation order

    @property
    def prompts(self) -> set[Hashable]:
        return {prompt for item in self.items for prompt in item.comparison.prompts}


def _pair_two(mine: list[Conversation], theirs: list[Conversation], rng: random.Random, *, same_prompt_only: bool,
              control: str | None) -> list[Comparison]:
    """The comparisons of two partners' conversations (see the module docstring): same prompt first, then the
    leftovers across prompts unless `same_prompt_only`."""
    by_prompt: dict[Hashable, tuple[list[Conversation], list[Conversation]]] = defaultdict(lambda: ([], []))
    for talk in mine:
        by_prompt[talk.prompt][0].append(talk)
    for talk in theirs:
        by_prompt[talk.prompt][1].append(talk)
    comparisons, left_mine, left_theirs = [], [], []
    for prompt in sorted(by_prompt, key=repr):
        ours, others = (sorted(side, key=lambda t: t.key) for side in by_prompt[prompt])
        rng.shuffle(ours)
        rng.shuffle(others)
        n = min(len(ours), len(others))
        comparisons += [_comparison(x, y, control) for x, y in zip(ours[:n], others[:n], strict=True)]
        left_mine += ours[n:]
        left_theirs += others[n:]
    if not same_prompt_only:
        # No prompt has leftovers of both partners (the loop above paired them), so these are all across prompts.
        rng.shuffle(left_mine)
        rng.shuffle(left_theirs)
        comparisons += [_comparison(x, y, control) for x, y in zip(left_mine, left_theirs, strict=False)]
    return comparisons


def _comparison(x: Conversation, y: Conversation, control: str | None) -> Comparison:
    a, b = sorted((x, y), key=lambda t: t.key)
    return Comparison(a, b, control)


def pair_conversations(conversations: Sequence[Conversation], systems: Sequence[str], controls: Sequence[str] = (),
                       *, same_prompt_only: bool = False, seed: int) -> tuple[list[Comparison], list[Comparison]]:
    """The real comparisons (every pair of `systems`) and the control ones (each control against each system) over
    the finished `conversations` (see the module docstring for the rule). Conversations of other partners are
    ignored."""
    rng = random.Random(f"acute-pairs-{seed}")
    by_partner: dict[str, list[Conversation]] = defaultdict(list)
    for talk in sorted(conversations, key=lambda t: t.key):
        by_partner[talk.system].append(talk)
    real = [comparison for i, s in enumerate(systems) for t in systems[i + 1:]
            for comparison in _pair_two(by_partner[s], by_partner[t], rng, same_prompt_only=same_prompt_only,
                                        control=None)]
    control = [comparison for c in controls for s in systems
               for comparison in _pair_two(by_partner[s], by_partner[c], rng, same_prompt_only=same_prompt_only,
                                           control=c)]
    return real, control


def _round_robin(comparisons: Sequence[Comparison], rng: random.Random) -> list[Comparison]:
    """The comparisons shuffled within each pair of systems, then taken one pair of systems at a time in turn."""
    by_label: dict[str, list[Comparison]] = defaultdict(list)
    for comparison in comparisons:
        by_label[comparison.label].append(comparison)
    labels = sorted(by_label)
    rng.shuffle(labels)
    for label in labels:
        rng.shuffle(by_label[label])
    order = []
    for turn in range(max((len(group) for group in by_label.values()), default=0)):
        order += [by_label[label][turn] for label in labels if turn < len(by_label[label])]
    return order


def _pick_controls(taken: set[Hashable], controls: Sequence[Comparison], n: int, used: Counter,
                   used_partner: Counter, rng: random.Random) -> list[Comparison]:
    """n control comparisons on prompts not `taken`: the least used control partner first, then the least used
    comparison of it (ties broken by the seed)."""
    picked: list[Comparison] = []
    for _ in range(n):
        pool = [c for c in controls if not (c.prompts & taken) and c not in picked]
        if not pool:
            break
        rank = min((used_partner[c.control], used[c.key]) for c in pool)
        choice = rng.choice([c for c in pool if (used_partner[c.control], used[c.key]) == rank])
        picked.append(choice)
        used[choice.key] += 1
        used_partner[choice.control] += 1
        taken |= choice.prompts
    return picked


def plan_acute(comparisons: Sequence[Comparison], controls: Sequence[Comparison] = (), *, judgments_per_pair: int,
               items_per_assignment: int, control_rate: float = 0.0, seed: int) -> list[PlannedAcuteAssignment]:
    """Assignments placing every comparison `judgments_per_pair` times and interleaving the `controls` (see the
    module docstring for what is guaranteed). ValueError when the numbers leave no room for real comparisons."""
    if judgments_per_pair < 1 or items_per_assignment < 1:
        raise ValueError("judgments_per_pair and items_per_assignment must be at least 1")
    if len({c.key for c in comparisons}) != len(comparisons):
        raise ValueError("a comparison is listed twice")
    n_controls = controls_per_assignment(items_per_assignment, control_rate) if controls else 0
    real_slots = items_per_assignment - n_controls
    if real_slots < 1:
        raise ValueError("control_rate leaves no room for real comparisons")
    rng = random.Random(f"acute-plan-{seed}")
    packed: list[tuple[int, list[Comparison]]] = []
    for round_number in range(judgments_per_pair):
        this_round: list[list[Comparison]] = []
        for comparison in _round_robin(comparisons, rng):
            fits = next((held for held in this_round if len(held) < real_slots
                         and not any(comparison.prompts & other.prompts for other in held)), None)
            if fits is None:
                this_round.append([comparison])
            else:
                fits.append(comparison)
        rng.shuffle(this_round)
        packed += [(round_number, held) for held in this_round]

    used: Counter[tuple[int, int]] = Counter()
    used_partner: Counter[str | None] = Counter()
    slots: list[tuple[int, list[Comparison]]] = []
    for round_number, held in packed:
        taken = {prompt for comparison in held for prompt in comparison.prompts}
        chosen = held + _pick_controls(taken, controls, n_controls, used, used_partner, rng)
        rng.shuffle(chosen)
        slots.append((round_number, chosen))

    # Sides: a balanced colouring per pair of systems of the bipartite graph (comparison, assignment); colour True
    # puts the sorted-first system of the pair on the left.
    by_label: dict[str, list[tuple[int, int]]] = defaultdict(list)
    for index, (_, chosen) in enumerate(slots):
        for position, comparison in enumerate(chosen):
            by_label[comparison.label].append((index, position))
    first_left: dict[tuple[int, int], bool] = {}
    for label in sorted(by_label):
        placements = by_label[label]
        edges = [(slots[index][1][position].key, index) for index, position in placements]
        for placement, colour in zip(placements, balanced_colouring(edges, rng), strict=True):
            first_left[placement] = colour
    plan = []
    for index, (round_number, chosen) in enumerate(slots):
        items = tuple(PlacedComparison(comparison, a_left=(comparison.a.system == comparison.systems[0])
                                       == first_left[index, position])
                      for position, comparison in enumerate(chosen))
        plan.append(PlannedAcuteAssignment(round=round_number, index=index, items=items))
    return plan
