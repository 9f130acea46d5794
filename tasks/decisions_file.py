"""The study file's [decisions] table: the comparisons pre-registered before any rating, read field by field.

    [decisions]                      # optional: comparisons monitored by anytime-valid intervals
    comparisons = ["gold vs moel", "gold vs mime on empathy"]   # "A vs B" (every criterion) or
                                     # "A vs B on CRITERION"; all pairs on every criterion when left out
    margin = 0.25                    # scale points: "equivalent" when the whole interval lies in [-margin, margin]
    alpha = 0.05                     # split over the comparisons by Bonferroni (each at alpha / their number)
    stop_when_decided = true         # close the study to new work once every comparison is decided ...
    budget = 600                     # ... or this many paid ratings are stored (optional)

Errors name the file and the field, e.g. `study.toml: decisions.comparisons[1]: 'gold vs gold' compares a system
with itself`.
"""
from __future__ import annotations

import itertools
from typing import Any

from empeval.server.store.study_decisions import Comparison, Decisions
from empeval.tasks.kind_parts import StudyFileReader

FIELDS = {"comparisons", "margin", "alpha", "stop_when_decided", "budget"}


def parse_decisions(r: StudyFileReader, data: dict[str, Any], *, systems: tuple[str, ...],
                    criteria: tuple[str, ...]) -> Decisions | None:
    """The [decisions] table of a parsed study file, or None when it has none; `systems` and `criteria` (keys) are
    the study's, which the comparisons must name."""
    if "decisions" not in data:
        return None
    d = r.table(data, "decisions", "decisions", FIELDS)
    comparisons: list[Comparison] = []
    if "comparisons" in d:
        for i, text in enumerate(r.strings(d, "comparisons", "decisions.comparisons")):
            comparisons += _comparisons(r, f"decisions.comparisons[{i}]", text, systems, criteria)
    else:
        comparisons = [Comparison(a, b, c) for c in criteria for a, b in itertools.combinations(systems, 2)]
    if not comparisons:
        raise r.error("decisions.comparisons", "no comparison: the study needs at least two systems")
    if len(set(comparisons)) != len(comparisons):
        raise r.error("decisions.comparisons", "lists one comparison twice")
    margin = None
    if "margin" in d:
        margin = r.number(d, "margin", "decisions.margin", 0.0, minimum=0.0, maximum=1000.0)
        if margin <= 0:
            raise r.error("decisions.margin", f"must be above 0 (scale points), got {margin:g}")
    alpha = r.number(d, "alpha", "decisions.alpha", 0.05, minimum=0.0, maximum=0.5)
    if alpha <= 0:
        raise r.error("decisions.alpha", "must be above 0")
    stop = d.get("stop_when_decided", False)
    if not isinstance(stop, bool):
        raise r.error("decisions.stop_when_decided", f"must be true or false, got {stop!r}")
    budget = r.integer(d, "budget", "decisions.budget", None, minimum=1)
    return Decisions(comparisons=tuple(comparisons), margin=margin, alpha=alpha, stop_when_decided=stop,
                     budget=budget)


def _comparisons(r: StudyFileReader, path: str, text: str, systems: tuple[str, ...],
                 criteria: tuple[str, ...]) -> list[Comparison]:
    """"A vs B" (on every criterion) or "A vs B on CRITERION"."""
    pair, _, criterion = text.partition(" on ")
    parts = pair.split(" vs ")
    if len(parts) != 2 or not all(p.strip() for p in parts):
        raise r.error(path, f"{text!r} must read \"SystemA vs SystemB\" or \"SystemA vs SystemB on criterion\"")
    a, b = (p.strip() for p in parts)
    for system in (a, b):
        if system not in systems:
            raise r.error(path, f"{system!r} is not one of the study's systems ({', '.join(systems)})")
    if a == b:
        raise r.error(path, f"{text!r} compares a system with itself")
    if criterion and criterion.strip() not in criteria:
        raise r.error(path, f"unknown criterion {criterion.strip()!r}; the study's are {', '.join(criteria)}")
    return [Comparison(a, b, c) for c in ([criterion.strip()] if criterion else criteria)]
