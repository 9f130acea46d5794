"""Simulated best-worst scaling studies with known truth, as a best-worst table
(``empeval.analysis.kinds.best_worst.schema``).

The latent qualities are those of the Likert simulation (``analysis.simulate.likert``): a response of system s to
context c has, per criterion, the quality ``effect_s + context_c + response_cs`` (the centre and the context's
share cancel within a tuple, all of whose responses answer one context). A rater perceives each response of the
tuple with independent normal noise, the one shown first shifted by ``position_bias``, and picks the highest as
the best and the lowest as the worst (the Thurstone reading of the random utility model behind best-worst scaling,
Marley & Louviere 2005). Careless raters: random clickers pick two different responses uniformly.

Each context shows one tuple of ``size`` systems, the tuples cycled over all subsets (as the study design does),
in a random order per judgment; its k judgments go to k different raters.

>>> study = simulate_best_worst_study(n_contexts=6, seed=1)
>>> len(study.choices), sorted(study.choices["annotator"].unique())[:2], study.true_ranking("empathy")
(54, ['worker-00', 'worker-01'], ['gold', 'moel', 'baseline'])
"""
from __future__ import annotations

from dataclasses import dataclass, field
from itertools import combinations

import numpy as np
import pandas as pd

from empeval.analysis.kinds.best_worst.schema import BEST_WORST_COLUMNS, SEPARATOR
from empeval.analysis.simulate.likert import CRITERIA, DEFAULT_SYSTEM_EFFECTS, _normalise_effects


@dataclass
class SimulatedBestWorstStudy:
    """A simulated best-worst table plus the truth it was drawn from: the system effects, and per (context,
    system, criterion) the latent quality of the response."""

    choices: pd.DataFrame
    system_effects: dict[str, dict[str, float]]
    qualities: pd.DataFrame
    spammers: dict[str, str] = field(default_factory=dict)

    def true_ranking(self, criterion: str) -> list[str]:
        """Systems from best to worst on ``criterion`` by their true effect."""
        return sorted(self.system_effects, key=lambda system: -self.system_effects[system][criterion])


def simulate_best_worst_study(*, n_contexts: int = 30, system_effects: dict | None = None, size: int | None = None,
                              judgments_per_tuple: int = 3, n_raters: int = 12, n_random_clickers: int = 0,
                              criteria: tuple[str, ...] = CRITERIA, context_sd: float = 0.4,
                              response_sd: float = 0.4, noise_sd: float = 0.7, position_bias: float = 0.0,
                              study: str = "simulated-bws", seed: int = 0) -> SimulatedBestWorstStudy:
    """Draw a complete best-worst study; see the module docstring for the model. ``size`` defaults to every
    system (at most 4); the first ``n_random_clickers`` raters pick at random."""
    effects = _normalise_effects(system_effects or DEFAULT_SYSTEM_EFFECTS, criteria)
    systems = sorted(effects)
    size = size or min(4, len(systems))
    if not 2 <= size <= len(systems):
        raise ValueError(f"size must be between 2 and the {len(systems)} systems, got {size}")
    if judgments_per_tuple > n_raters:
        raise ValueError("judgments_per_tuple cannot exceed n_raters: the judgments of a tuple come from different "
                         "raters")
    rng = np.random.default_rng(seed)
    subsets = list(combinations(systems, size))
    order = rng.permutation(len(subsets))
    raters = [f"worker-{i:02d}" for i in range(n_raters)]
    spammers = {rater: "random" for rater in raters[:n_random_clickers]}
    load = np.zeros(n_raters)
    quality_rows, rows = [], []
    for context in range(n_contexts):
        members = subsets[order[context % len(subsets)]]
        context_effect = rng.normal(0, context_sd)
        latent = {(system, c): effects[system][c] + context_effect + rng.normal(0, response_sd)
                  for system in members for c in criteria}
        quality_rows += [{"context_id": context, "system": s, "criterion": c, "quality": q}
                         for (s, c), q in latent.items()]
        chosen = np.argsort(load + rng.random(n_raters) * 0.5)[:judgments_per_tuple]  # the least loaded raters
        for position, rater_index in enumerate(chosen):
            load[rater_index] += 1
            rater = raters[rater_index]
            shown = [members[i] for i in rng.permutation(size)]
            for c in criteria:
                if rater in spammers:
                    best, worst = rng.choice(size, 2, replace=False)
                else:
                    perceived = np.array([latent[s, c] for s in shown]) + rng.normal(0, noise_sd, size)
                    perceived[0] += position_bias
                    best, worst = int(np.argmax(perceived)), int(np.argmin(perceived))
                rows.append({"study": study, "assignment_id": int(rater_index) + 1, "annotator": rater,
                             "context_id": context, "criterion": c, "tuple": SEPARATOR.join(sorted(shown)),
                             "shown": SEPARATOR.join(shown), "best": shown[best], "worst": shown[worst],
                             "position": position, "is_control": False, "control_system": None,
                             "control_target": None, "late": False})
    return SimulatedBestWorstStudy(pd.DataFrame(rows, columns=list(BEST_WORST_COLUMNS)), effects,
                                   pd.DataFrame(quality_rows), spammers)
