"""Simulated pairwise (A/B) studies with known truth, as a judgment table (``empeval.analysis.kinds.pairwise.schema``).

The latent qualities are those of the Likert simulation (``analysis.simulate.likert``): a response of system s to
context c has, per criterion, the quality ``centre + effect_s + context_c + response_cs`` with the same
default system effects and control profiles. A Likert rater reports that quality plus noise on a scale; a
pairwise rater here compares the two responses the Thurstone way (Thurstone 1927, case V): each is
perceived with independent normal noise, the left one shifted by ``position_bias`` (a preference for the
left side, zero for a fair rater), and the larger perceived quality wins, or a tie when the two are closer
than ``tie_band``. The rater's personal bias of the Likert model shifts both sides and cancels. So a
system with a higher effect wins more A/B judgments exactly when it gets higher Likert scores: the two
protocols agree in expectation.

Careless kinds as in the Likert simulation: random clickers (uniform over left, right and, when allowed,
tie) and straight-liners (always the same screen side). The k judgments of a (context, pair) go to k
different annotators, the least loaded of those who have not seen the context (no annotator sees a context
twice while the pool allows it); each annotator's units are cut into assignments of ``pairs_per_assignment``,
each with ``controls_per_assignment`` control pairs (a real response beside a control built to lose on one
criterion, on a context the annotator has not seen); the left/right order alternates within each pair
(balanced within one over the study).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from itertools import combinations

import numpy as np
import pandas as pd

# The Likert simulation's latent model, reused so that both protocols draw from the same truth.
from empeval.analysis.kinds.pairwise.schema import JUDGMENT_COLUMNS, pair_name
from empeval.analysis.simulate.likert import CONTROL_PROFILES, CRITERIA, DEFAULT_SYSTEM_EFFECTS, _normalise_effects


@dataclass
class SimulatedPairwiseStudy:
    """A simulated judgment table plus the truth it was drawn from."""

    judgments: pd.DataFrame
    system_effects: dict[str, dict[str, float]]
    pairs: list[tuple[str, str]]
    spammers: dict[str, str] = field(default_factory=dict)  # annotator -> "random" | "straight"

    def true_ranking(self, criterion: str) -> list[str]:
        """Systems from best to worst on ``criterion`` by their true effect.

        Examples
        --------
        >>> simulate_pairwise_study(n_contexts=4, seed=1).true_ranking("empathy")
        ['gold', 'moel', 'baseline']
        """
        return sorted(self.system_effects, key=lambda system: -self.system_effects[system][criterion])


def study_pairs(systems: list[str], *, pairs: list[tuple[str, str]] | None = None,
                anchor: str | None = None) -> list[tuple[str, str]]:
    """The pairs a study compares: ``pairs`` as given, else ``anchor`` against each other system (the papers'
    "ours vs each baseline"), else all pairs.

    Returns
    -------
    pairs : list of (str, str)

    Examples
    --------
    >>> study_pairs(["gold", "moel", "baseline"], anchor="moel")
    [('moel', 'gold'), ('moel', 'baseline')]
    >>> len(study_pairs(["gold", "moel", "baseline"]))
    3
    """
    if pairs is not None and anchor is not None:
        raise ValueError("give either pairs or anchor, not both")
    if anchor is not None:
        if anchor not in systems:
            raise ValueError(f"anchor {anchor!r} is not among the systems {systems}")
        return [(anchor, other) for other in systems if other != anchor]
    if pairs is None:
        return list(combinations(systems, 2))
    for pair in pairs:
        unknown = [s for s in pair if s not in systems]
        if unknown:
            raise ValueError(f"pair {list(pair)} names system(s) {unknown} not among {systems}")
        if len(pair) != 2 or pair[0] == pair[1]:
            raise ValueError(f"pair {list(pair)} must name two different systems")
    return [tuple(pair) for pair in pairs]  # type: ignore[misc]


def simulate_pairwise_study(
    *,
    n_contexts: int = 40,
    system_effects: dict[str, dict[str, float] | float] | None = None,
    criteria: tuple[str, ...] = CRITERIA,
    pairs: list[tuple[str, str]] | None = None,
    anchor: str | None = None,
    k: int = 3,
    n_honest: int = 12,
    n_random_clickers: int = 0,
    n_straight_liners: int = 0,
    pairs_per_assignment: int = 10,
    controls_per_assignment: int = 1,
    centre: float = 3.2,
    context_sd: float = 0.4,
    response_sd: float = 0.4,
    noise_sd: float = 0.7,
    tie_band: float = 0.3,
    allow_ties: bool = True,
    position_bias: float = 0.0,
    study: str = "simulated-ab",
    seed: int = 0,
) -> SimulatedPairwiseStudy:
    """Draw a complete pairwise study; see the module docstring for the model. ``k`` judgments per
    (context, pair); ``position_bias`` (in the latent quality's units) is added to the left response's
    perceived quality by every honest rater.

    Returns
    -------
    study : SimulatedPairwiseStudy
        * ``judgments``: a pandas.DataFrame with the columns ``JUDGMENT_COLUMNS`` (one row per judgment and
          criterion; contexts numbered from 1; no late submissions)
        * ``system_effects``: the true effects, system -> criterion -> effect
        * ``pairs``: the pairs compared
        * ``spammers``: annotator -> "random" or "straight", for the annotators who are not honest

    Examples
    --------
    >>> from empeval.analysis.kinds.pairwise.schema import validate_judgments
    >>> study = simulate_pairwise_study(n_contexts=6, anchor="moel", k=2, seed=1)
    >>> table = validate_judgments(study.judgments)
    >>> table.loc[~table["is_control"]].groupby(["pair", "criterion"]).size().unique().tolist()  # 6 contexts x 2
    [12]
    """
    rng = np.random.default_rng(seed)
    effects = _normalise_effects(system_effects or DEFAULT_SYSTEM_EFFECTS, criteria)
    systems = list(effects)
    chosen_pairs = study_pairs(systems, pairs=pairs, anchor=anchor)
    if k < 1 or n_contexts < 1:
        raise ValueError(f"k and n_contexts must be at least 1, got k={k}, n_contexts={n_contexts}")
    n_raters = n_honest + n_random_clickers + n_straight_liners
    if n_raters < k:
        raise ValueError(f"{k} judgments per (context, pair) need at least {k} annotators, got {n_raters}")

    names = [f"worker-{i:02d}" for i in range(1, n_raters + 1)]
    roles = [str(role) for role in rng.permutation(["honest"] * n_honest + ["random"] * n_random_clickers
                                                   + ["straight"] * n_straight_liners)]
    role_of = dict(zip(names, roles, strict=True))
    side_of = {name: str(rng.choice(["left", "right"])) for name in names}

    contexts = list(range(1, n_contexts + 1))
    context_effect = rng.normal(0.0, context_sd, n_contexts + 1)
    quality: dict[tuple[int, str], dict[str, float]] = {}
    for context in contexts:
        for system in systems:
            shared = rng.normal(0.0, response_sd)
            quality[context, system] = {c: centre + effects[system][c] + context_effect[context] + 0.7 * shared
                                        + rng.normal(0.0, response_sd * 0.7) for c in criteria}

    # Units (context, left, right), the order alternating within each pair.
    units_of: dict[int, list[tuple[int, str, str]]] = {context: [] for context in contexts}
    for first, second in chosen_pairs:
        draws = [context for context in contexts for _ in range(k)]
        flip = bool(rng.integers(2))
        for count, index in enumerate(rng.permutation(len(draws))):
            context = draws[index]
            units_of[context].append((context, first, second) if (count % 2 == 0) != flip else (context, second, first))
    # Annotators per unit: the k judgments of a (context, pair) go to k different annotators, the least loaded
    # of those who have not seen the context yet (of those who have, when every one has).
    seen: dict[str, set[int]] = {name: set() for name in names}
    load = dict.fromkeys(names, 0)
    work: dict[str, list[tuple[int, str, str]]] = {name: [] for name in names}
    for context in rng.permutation(contexts):
        by_pair: dict[str, list[tuple[int, str, str]]] = {}
        for unit in units_of[int(context)]:
            by_pair.setdefault(pair_name(unit[1], unit[2]), []).append(unit)
        for pair_units in by_pair.values():
            ranked = sorted(names, key=lambda name: (int(context) in seen[name], load[name], rng.random()))
            for annotator, unit in zip(ranked, pair_units, strict=False):
                work[annotator].append(unit)
                seen[annotator].add(int(context))
                load[annotator] += 1
    chunks = []
    for name in names:
        mine = [work[name][i] for i in rng.permutation(len(work[name]))]
        chunks += [(name, mine[i:i + pairs_per_assignment]) for i in range(0, len(mine), pairs_per_assignment)]
    chunks = [chunks[i] for i in rng.permutation(len(chunks))]

    rows = []
    for number, (annotator, chunk) in enumerate(chunks, start=1):
        shown = list(chunk)
        free = [c for c in contexts if c not in seen[annotator]]
        for _ in range(controls_per_assignment):
            if not free:
                break
            context = free.pop(int(rng.integers(len(free))))
            kind = list(CONTROL_PROFILES)[int(rng.integers(len(CONTROL_PROFILES)))]
            real = systems[int(rng.integers(len(systems)))]
            shown.append((context, kind, real) if rng.integers(2) else (context, real, kind))
        shown = [shown[i] for i in rng.permutation(len(shown))]
        for position, (context, left, right) in enumerate(shown):
            seen[annotator].add(context)
            control = left in CONTROL_PROFILES or right in CONTROL_PROFILES
            for criterion in criteria:
                choice = _choice(rng, role_of[annotator], side_of[annotator],
                                 _quality(quality, context, left, criterion),
                                 _quality(quality, context, right, criterion),
                                 noise_sd=noise_sd, tie_band=tie_band, allow_ties=allow_ties, bias=position_bias)
                rows.append({"study": study, "assignment_id": number, "annotator": annotator, "context_id": context,
                             "criterion": criterion, "pair": pair_name(left, right), "system_left": left,
                             "system_right": right, "choice": choice,
                             "preferred": {"left": left, "right": right}.get(choice, "tie"), "position": position,
                             "is_control": control,
                             "control_target": CONTROL_PROFILES[left if left in CONTROL_PROFILES else right][0]
                             if control else None,
                             "late": False})
    judgments = pd.DataFrame(rows, columns=list(JUDGMENT_COLUMNS))
    spammers = {name: role for name, role in role_of.items() if role != "honest"}
    return SimulatedPairwiseStudy(judgments=judgments, system_effects=effects, pairs=chosen_pairs, spammers=spammers)


def _quality(quality: dict, context: int, system: str, criterion: str) -> float:
    if system in CONTROL_PROFILES:
        return CONTROL_PROFILES[system][1][criterion]
    return quality[context, system][criterion]


def _choice(rng: np.random.Generator, role: str, side: str, left: float, right: float, *, noise_sd: float,
            tie_band: float, allow_ties: bool, bias: float) -> str:
    if role == "random":
        options = ["left", "right", "tie"] if allow_ties else ["left", "right"]
        return options[int(rng.integers(len(options)))]
    if role == "straight":
        return side
    difference = left + bias - right + rng.normal(0.0, noise_sd) - rng.normal(0.0, noise_sd)
    if allow_ties and abs(difference) < tie_band:
        return "tie"
    return "left" if difference > 0 else "right"
