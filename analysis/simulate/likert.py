"""Simulated Likert studies with known truth, in the store's export format.

Useful beyond tests: to check that an analysis recovers a known ordering, to see how many contexts a study
needs to detect a given difference (run it with several ``n_contexts``), and to try the notebooks without
real data. The export it returns goes through ``empeval.analysis.kinds.likert.load.tidy_from_export`` like a real one.

The model: each item (a context plus one system's response) has a latent quality per criterion,
``centre + system effect + context effect + response effect``; an honest annotator reports it plus a personal
bias plus noise, rounded and clipped to the scale. Spammers are random clickers (uniform scores) or
straight-liners (one score for everything). Each assignment holds ``items_per_assignment`` real items and
``controls_per_assignment`` control responses built to fail one criterion (generic -> empathy, mismatched ->
relevance, scrambled -> fluency), in shuffled order.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

import numpy as np
import pandas as pd

from empeval.analysis.kinds.likert.load import EXPORT_COLUMNS

CRITERIA = ("empathy", "relevance", "fluency")

DEFAULT_SYSTEM_EFFECTS: dict[str, dict[str, float]] = {
    "gold": {"empathy": 0.9, "relevance": 1.0, "fluency": 0.7},
    "moel": {"empathy": 0.2, "relevance": 0.3, "fluency": 0.2},
    "baseline": {"empathy": -0.6, "relevance": -0.5, "fluency": -0.3},
}

# Latent quality of each kind of control response, per criterion (before rater noise).
CONTROL_PROFILES: dict[str, tuple[str, dict[str, float]]] = {
    "control-generic": ("empathy", {"empathy": 1.2, "relevance": 2.6, "fluency": 4.5}),
    "control-mismatched": ("relevance", {"empathy": 2.0, "relevance": 1.2, "fluency": 4.3}),
    "control-scrambled": ("fluency", {"empathy": 1.8, "relevance": 1.8, "fluency": 1.1}),
}


@dataclass
class SimulatedStudy:
    """A simulated export plus the truth it was drawn from."""

    export: pd.DataFrame
    system_effects: dict[str, dict[str, float]]
    spammers: dict[str, str] = field(default_factory=dict)  # annotator -> "random" | "straight"

    def true_ranking(self, criterion: str) -> list[str]:
        """Systems from best to worst on ``criterion`` by their true effect.

        Examples
        --------
        >>> simulate_study(n_contexts=4, seed=1).true_ranking("empathy")
        ['gold', 'moel', 'baseline']
        """
        return sorted(self.system_effects, key=lambda system: -self.system_effects[system][criterion])


def simulate_study(
    *,
    n_contexts: int = 40,
    system_effects: dict[str, dict[str, float] | float] | None = None,
    criteria: tuple[str, ...] = CRITERIA,
    raters_per_item: int = 3,
    n_honest: int = 12,
    n_random_clickers: int = 2,
    n_straight_liners: int = 1,
    items_per_assignment: int = 10,
    controls_per_assignment: int = 1,
    centre: float = 3.2,
    context_sd: float = 0.4,
    response_sd: float = 0.4,
    rater_bias_sd: float = 0.3,
    noise_sd: float = 0.7,
    scale: tuple[int, int] = (1, 5),
    study: str = "simulated",
    seed: int = 0,
) -> SimulatedStudy:
    """Draw a complete study; see the module docstring for the model.

    ``system_effects`` maps each system to its effect per criterion (or one number for every criterion);
    the default is ``DEFAULT_SYSTEM_EFFECTS`` (gold > moel > baseline). Annotators get assignments in
    turn, the least loaded first, ``raters_per_item`` per chunk of ``items_per_assignment`` items.

    Returns
    -------
    study : SimulatedStudy
        * ``export``: a pandas.DataFrame in the store's export format, one row per rating, columns
          ``empeval.analysis.kinds.likert.schema.EXPORT_COLUMNS`` (no late submissions; 0-based positions)
        * ``system_effects``: the true effects, system -> criterion -> effect
        * ``spammers``: annotator -> "random" or "straight", for the annotators who are not honest

    Examples
    --------
    >>> from empeval.analysis import tidy_from_export
    >>> study = simulate_study(n_contexts=4, n_honest=3, n_random_clickers=1, n_straight_liners=0, seed=1)
    >>> study.export.shape, study.spammers
    ((126, 18), {'worker-04': 'random'})
    >>> ratings = tidy_from_export(study.export)
    >>> ratings.groupby("is_control")["item"].nunique().to_dict()
    {False: 12, True: 6}
    """
    rng = np.random.default_rng(seed)
    effects = _normalise_effects(system_effects or DEFAULT_SYSTEM_EFFECTS, criteria)
    systems = list(effects)
    lo, hi = scale
    n_raters = n_honest + n_random_clickers + n_straight_liners
    if n_raters < raters_per_item:
        raise ValueError(f"{raters_per_item} ratings per item need at least that many annotators, got {n_raters}")

    names = [f"worker-{i:02d}" for i in range(1, n_raters + 1)]
    roles = ["honest"] * n_honest + ["random"] * n_random_clickers + ["straight"] * n_straight_liners
    roles = [str(role) for role in rng.permutation(roles)]
    role_of = dict(zip(names, roles, strict=True))
    bias_of = {name: rng.normal(0.0, rater_bias_sd) for name in names}
    constant_of = {name: int(rng.integers(max(lo, hi - 2), hi + 1)) for name in names}

    contexts = [f"ctx-{i:03d}" for i in range(1, n_contexts + 1)]
    context_effect = dict(zip(contexts, rng.normal(0.0, context_sd, n_contexts), strict=True))
    items = []
    for context in contexts:
        for system in systems:
            shared = rng.normal(0.0, response_sd)
            latent = {c: centre + effects[system][c] + context_effect[context] + 0.7 * shared
                      + rng.normal(0.0, response_sd * 0.7) for c in criteria}
            items.append({"item_id": f"{context}:{system}", "context_id": context, "system": system,
                          "latent": latent, "is_control": False})

    order = rng.permutation(len(items))
    chunks = [order[i:i + items_per_assignment] for i in range(0, len(order), items_per_assignment)]
    load = dict.fromkeys(names, 0)
    start = datetime(2024, 5, 1, 9, 0, tzinfo=UTC)
    rows = []
    assignment_no = 0
    for chunk in chunks:
        candidates = sorted(names, key=lambda name: (load[name], rng.random()))
        for annotator in candidates[:raters_per_item]:
            load[annotator] += 1
            assignment_no += 1
            assignment = f"asg-{assignment_no:04d}"
            shown = [items[i] for i in chunk] + [
                _control_item(rng, contexts, assignment, j) for j in range(controls_per_assignment)
            ]
            shown = [shown[i] for i in rng.permutation(len(shown))]
            clock = start + timedelta(minutes=17 * assignment_no)
            started = clock
            per_item_seconds = _seconds(rng, role_of[annotator], len(shown))
            item_rows = []
            # Positions are 0-based, as the export contract says and the store writes them.
            for position, (item, seconds) in enumerate(zip(shown, per_item_seconds, strict=True)):
                for criterion in criteria:
                    item_rows.append({
                        "study": study, "item_id": item["item_id"], "context_id": item["context_id"],
                        "system": item["system"], "annotator": annotator, "criterion": criterion,
                        "score": _score(rng, role_of[annotator], item["latent"][criterion], bias_of[annotator],
                                        constant_of[annotator], noise_sd, lo, hi),
                        "position": position, "is_control": item["is_control"],
                        "control_kind": item.get("control_kind", ""), "control_target": item.get("control_target", ""),
                        "assignment_id": assignment, "started_at": started.isoformat().replace("+00:00", "Z"),
                        "submitted_at": "", "seconds_on_item": round(float(seconds), 1), "late": False,
                    })
            submitted = (started + timedelta(seconds=float(per_item_seconds.sum()) + 5.0)).isoformat()
            for row in item_rows:
                row["submitted_at"] = submitted.replace("+00:00", "Z")
            rows.extend(item_rows)

    export = pd.DataFrame(rows, columns=list(EXPORT_COLUMNS))
    spammers = {name: role for name, role in role_of.items() if role != "honest"}
    return SimulatedStudy(export=export, system_effects=effects, spammers=spammers)


def _normalise_effects(effects: dict, criteria: tuple[str, ...]) -> dict[str, dict[str, float]]:
    normalised = {}
    for system, effect in effects.items():
        if isinstance(effect, (int, float)):
            normalised[system] = dict.fromkeys(criteria, float(effect))
        else:
            missing = [c for c in criteria if c not in effect]
            if missing:
                raise ValueError(f"system {system!r} has no effect for criteria {missing}")
            normalised[system] = {c: float(effect[c]) for c in criteria}
    if len(normalised) < 2:
        raise ValueError("a study needs at least two systems")
    return normalised


def _control_item(rng: np.random.Generator, contexts: list[str], assignment: str, index: int) -> dict:
    kind = list(CONTROL_PROFILES)[int(rng.integers(len(CONTROL_PROFILES)))]
    target, profile = CONTROL_PROFILES[kind]
    context = contexts[int(rng.integers(len(contexts)))]
    return {"item_id": f"{assignment}:control-{index}", "context_id": context, "system": kind, "latent": profile,
            "is_control": True, "control_kind": kind, "control_target": target}


def _score(rng, role: str, latent: float, bias: float, constant: int, noise_sd: float, lo: int, hi: int) -> int:
    if role == "random":
        return int(rng.integers(lo, hi + 1))
    if role == "straight":
        return constant
    return int(np.clip(np.rint(latent + bias + rng.normal(0.0, noise_sd)), lo, hi))


def _seconds(rng: np.random.Generator, role: str, n: int) -> np.ndarray:
    typical = {"honest": 25.0, "random": 4.0, "straight": 3.0}[role]
    return rng.lognormal(np.log(typical), 0.35, size=n)
