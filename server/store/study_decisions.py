"""A study's pre-registered decisions (the study file's [decisions] table, tasks/decisions_file.py): which system
pairs are compared on which criteria, the margin within which two systems count as equivalent, the error rate, and
whether the study stops handing out new work once every comparison is decided (or its budget of paid ratings is
spent). Stored in the study's configuration JSON under "decisions"; `empeval study status` and the dashboard read it
(server/annotation/decisions.py).

>>> decisions = Decisions(comparisons=(Comparison("gold", "moel", "empathy"),), margin=0.25)
>>> Decisions.from_stored(ConfigReader("pilot"), decisions.stored()) == decisions
True
>>> decisions.alpha_each  # Bonferroni over the comparisons
0.05
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from empeval.server.store.study_parts import ConfigReader


@dataclass(frozen=True)
class Comparison:
    """One pre-registered comparison: system_a against system_b on one criterion (the difference a - b)."""

    system_a: str
    system_b: str
    criterion: str

    def describe(self) -> str:
        return f"{self.system_a} vs {self.system_b} on {self.criterion}"


@dataclass(frozen=True)
class Decisions:
    """The [decisions] table, typed. `margin` (scale points) is what "equivalent" means (None: equivalence is never
    declared); `alpha` is split over the comparisons by Bonferroni (`alpha_each`); `budget` caps the paid (human)
    ratings, None for no cap."""

    comparisons: tuple[Comparison, ...] = ()
    margin: float | None = None
    alpha: float = 0.05
    stop_when_decided: bool = False
    budget: int | None = None

    @property
    def alpha_each(self) -> float:
        """Each comparison's error rate: alpha / the number of comparisons (Bonferroni: the sequences are valid at
        every look, so no step-down is needed to keep them simultaneous)."""
        return self.alpha / max(1, len(self.comparisons))

    def stored(self) -> dict[str, Any]:
        return {"comparisons": [[c.system_a, c.system_b, c.criterion] for c in self.comparisons],
                "margin": self.margin, "alpha": self.alpha, "stop_when_decided": self.stop_when_decided,
                "budget": self.budget}

    @classmethod
    def from_stored(cls, reader: ConfigReader, value: Any) -> Decisions:
        data = reader.mapping(value, "decisions")
        raw = data.get("comparisons", [])
        if not isinstance(raw, list) or not all(isinstance(c, list) and len(c) == 3
                                                and all(isinstance(part, str) for part in c) for c in raw):
            raise reader.fail("decisions.comparisons",
                              f"expected a list of [system_a, system_b, criterion], got {raw!r}")
        stop = data.get("stop_when_decided", False)
        if not isinstance(stop, bool):
            raise reader.fail("decisions.stop_when_decided", f"expected true or false, got {stop!r}")
        return cls(comparisons=tuple(Comparison(*c) for c in raw),
                   margin=reader.number(data, "margin", "decisions.margin", None),
                   alpha=reader.number(data, "alpha", "decisions.alpha", 0.05),
                   stop_when_decided=stop,
                   budget=reader.integer(data, "budget", "decisions.budget", None))
