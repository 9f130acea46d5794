"""Model-assisted evaluation's design for a Likert study: people rate a seeded uniform sample of the contexts
(`design.human_share` of them, every system's response on each), the judges score every item. What share fits a
study, how many contexts it samples, the study file's two fields read, and the draw itself. An A/B study's human
share (tasks/kinds/pairwise.py) follows the same rules: people judge the sampled contexts' pairs.
"""
from __future__ import annotations

import math
import random
from collections.abc import Sequence
from typing import TYPE_CHECKING

from empeval.server.store.study_parts import ACTIVE_SAMPLING, SAMPLINGS, UNIFORM_SAMPLING

if TYPE_CHECKING:
    from empeval.tasks.kind_parts import StudyFileReader

#: Fewest contexts people must rate for a human share (prediction-powered inference needs a variance per system).
MIN_HUMAN_CONTEXTS = 2


def human_share_problem(human_share: object, n_contexts: int) -> str | None:
    """What is wrong with `human_share` (design.human_share: the share of a study's contexts people rate) for a
    study of `n_contexts` contexts, else None. It must be a number strictly between 0 and 1 whose sample,
    round(human_share x n_contexts) contexts (Python's round: halves to even), holds at least two contexts
    (a variance per system) and leaves at least one context to the judges alone. The same rule as
    analysis.stats.ppi.tables.check_human_share, which the analysis applies.

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


def read_human_share(reader: StudyFileReader, design: dict, *, n_contexts: int,
                     seed: int) -> tuple[float, int] | None:
    """The study file's design.human_share and design.human_share_seed, checked: (share, seed) with the seed
    defaulting to the study's `seed` (stored resolved, so the stored configuration reproduces the draw), or None
    without a share. A seed without a share, and a share that does not fit (``human_share_problem``), are refused
    where they are written."""
    if "human_share" not in design:
        if "human_share_seed" in design:
            raise reader.error("design.human_share_seed", "is the seed of design.human_share's sample; set "
                               "design.human_share too, or remove it")
        return None
    share = design["human_share"]
    if problem := human_share_problem(share, n_contexts):
        raise reader.error("design.human_share", problem)
    sample_seed = reader.integer(design, "human_share_seed", "design.human_share_seed", seed, minimum=0)
    assert sample_seed is not None
    return float(share), sample_seed


def read_share_and_sampling(reader: StudyFileReader, design: dict, *, n_contexts: int, seed: int,
                            people: str) -> tuple[float, int, str] | None:
    """``read_human_share`` with design.sampling (study_parts.SAMPLINGS, "uniform" by default), for the kinds whose
    share may be drawn actively: (share, seed, sampling), or None without a share. A sampling not in SAMPLINGS is
    refused first; "active" without a share is refused after the share's own checks, saying what the share is for
    (`people`: what people do with the contexts, "rate" or "judge")."""
    sampling = design.get("sampling", UNIFORM_SAMPLING)
    if sampling not in SAMPLINGS:
        raise reader.error("design.sampling", f"must be one of {', '.join(map(repr, SAMPLINGS))}, got {sampling!r}")
    read = read_human_share(reader, design, n_contexts=n_contexts, seed=seed)
    if read is None:
        if sampling == ACTIVE_SAMPLING:
            raise reader.error("design.sampling", "\"active\" draws design.human_share's contexts: set "
                               f"design.human_share (the expected share people {people}) too, or remove it")
        return None
    return (*read, sampling)
