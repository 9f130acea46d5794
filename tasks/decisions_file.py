"""The study file's [decisions] table: the comparisons pre-registered before any rating, read field by field.

    [decisions]                      # optional: comparisons monitored by anytime-valid intervals
    comparisons = ["gold vs moel", "gold vs mime on empathy"]   # "A vs B" (every criterion) or
                                     # "A vs B on CRITERION"; all pairs on every criterion when left out
    margin = 0.25                    # scale points: "equivalent" when the whole interval lies in [-margin, margin]
    alpha = 0.05                     # split over the comparisons by Bonferroni (each at alpha / their number)
    stop_when_decided = true         # close the study to new work once every comparison is decided ...
    budget = 600                     # ... or this many paid ratings are stored (optional)

What a study may compare, and in which unit its margin is, is its kind's (TaskKind.decision_terms, `DecisionTerms`):
a Likert study compares any two of its systems, its margin in scale points; a pairwise (A/B) study compares the pairs
its design judges (an anchored design: the anchor against each other system), all of them by default, its margin in
net preference (the share of judgments A wins minus the share B wins, between -1 and 1: 0.1 is ten points of wins
minus losses), below 1. A kind without terms (best-worst, chat, ACUTE) is refused the table by study_file.py.

Errors name the file and the field, e.g. `study.toml: decisions.comparisons[1]: 'gold vs gold' compares a system
with itself`.
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Any

from empeval.server.store.study_decisions import Comparison, Decisions
from empeval.tasks.kind_parts import StudyFileReader

FIELDS = {"comparisons", "margin", "alpha", "stop_when_decided", "budget"}


@dataclass(frozen=True)
class DecisionTerms:
    """What a study's [decisions] may say, as its kind sets it (TaskKind.decision_terms): `pairs` are the system
    pairs its comparisons may name, (A, B) with A the system a default comparison puts first, or None for every pair
    of its systems; `margin_unit` says what a margin is measured in, for messages; `margin_below` bounds the margin
    (exclusive), None for no bound beyond the table's own."""

    pairs: tuple[tuple[str, str], ...] | None = None
    margin_unit: str = "scale points"
    margin_below: float | None = None


def parse_decisions(r: StudyFileReader, data: dict[str, Any], *, systems: tuple[str, ...],
                    criteria: tuple[str, ...], terms: DecisionTerms | None = None) -> Decisions | None:
    """The [decisions] table of a parsed study file, or None when it has none; `systems` and `criteria` (keys) are
    the study's, which the comparisons must name; `terms` (the kind's, default: a Likert study's) the pairs they may
    compare and the margin's unit and bound."""
    if "decisions" not in data:
        return None
    terms = terms or DecisionTerms()
    d = r.table(data, "decisions", "decisions", FIELDS)
    comparisons: list[Comparison] = []
    if "comparisons" in d:
        for i, text in enumerate(r.strings(d, "comparisons", "decisions.comparisons")):
            comparisons += _comparisons(r, f"decisions.comparisons[{i}]", text, systems, criteria, terms.pairs)
    else:
        pairs = terms.pairs if terms.pairs is not None else tuple(itertools.combinations(systems, 2))
        comparisons = [Comparison(a, b, c) for c in criteria for a, b in pairs]
    if not comparisons:
        raise r.error("decisions.comparisons", "no comparison: the study needs at least two systems")
    if len(set(comparisons)) != len(comparisons):
        raise r.error("decisions.comparisons", "lists one comparison twice")
    margin = None
    if "margin" in d:
        margin = r.number(d, "margin", "decisions.margin", 0.0, minimum=0.0, maximum=1000.0)
        if margin <= 0:
            raise r.error("decisions.margin", f"must be above 0 ({terms.margin_unit}), got {margin:g}")
        if terms.margin_below is not None and margin >= terms.margin_below:
            raise r.error("decisions.margin", f"must be below {terms.margin_below:g} ({terms.margin_unit}), got "
                                              f"{margin:g}")
    alpha = r.number(d, "alpha", "decisions.alpha", 0.05, minimum=0.0, maximum=0.5)
    if alpha <= 0:
        raise r.error("decisions.alpha", "must be above 0")
    stop = d.get("stop_when_decided", False)
    if not isinstance(stop, bool):
        raise r.error("decisions.stop_when_decided", f"must be true or false, got {stop!r}")
    budget = r.integer(d, "budget", "decisions.budget", None, minimum=1)
    return Decisions(comparisons=tuple(comparisons), margin=margin, alpha=alpha, stop_when_decided=stop,
                     budget=budget)


def _comparisons(r: StudyFileReader, path: str, text: str, systems: tuple[str, ...], criteria: tuple[str, ...],
                 pairs: tuple[tuple[str, str], ...] | None) -> list[Comparison]:
    """"A vs B" (on every criterion) or "A vs B on CRITERION"; A and B must be one of `pairs` (either order) when
    the kind judges only some pairs."""
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
    if pairs is not None and {a, b} not in [set(pair) for pair in pairs]:
        judged = ", ".join(f"{first} vs {second}" for first, second in pairs)
        raise r.error(path, f"{a} vs {b} is a pair the study's design never judges; its pairs are {judged}")
    if criterion and criterion.strip() not in criteria:
        raise r.error(path, f"unknown criterion {criterion.strip()!r}; the study's are {', '.join(criteria)}")
    return [Comparison(a, b, c) for c in ([criterion.strip()] if criterion else criteria)]
