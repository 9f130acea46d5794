"""A benchmark's figure (what was measured, beside its goal) and the one line every benchmark prints it as.

    figure: <name> | goal <= 6 | measured 5 | ratio 0.83 | met | <note>

The ratio is always measured / goal threshold, so a goal "at most" is met at a ratio up to 1 and a goal "at least"
from 1 up; a goal whose threshold is not positive (a difference that may be negative) has no ratio ("-"), a figure
without a goal has neither ("goal none", "ratio -", verdict "no goal"). `benchmarks.session.report` prints the line
and adds the figure to the running benchmark's JSON.
"""

from __future__ import annotations

import math
import operator
from dataclasses import dataclass
from typing import Any, Literal

Direction = Literal["at most", "at least", "below", "above"]
SYMBOLS: dict[str, str] = {"at most": "<=", "at least": ">=", "below": "<", "above": ">"}
COMPARE = {"at most": operator.le, "at least": operator.ge, "below": operator.lt, "above": operator.gt}
MET, NOT_MET, NO_GOAL = "met", "NOT MET", "no goal"
PREFIX = "figure: "
SEPARATOR = " | "


@dataclass(frozen=True)
class Goal:
    """A threshold the measured value must stay at most / at least at (or strictly below / above)."""

    direction: Direction
    threshold: float

    def __post_init__(self) -> None:
        if self.direction not in SYMBOLS:
            raise ValueError(f"unknown goal direction {self.direction!r}; expected one of {', '.join(SYMBOLS)}")
        object.__setattr__(self, "threshold", float(self.threshold))

    def met(self, value: float) -> bool:
        """Whether `value` meets the goal (a NaN never does)."""
        return not math.isnan(value) and bool(COMPARE[self.direction](value, self.threshold))


def at_most(threshold: float) -> Goal:
    """The goal measured <= threshold."""
    return Goal("at most", threshold)


def at_least(threshold: float) -> Goal:
    """The goal measured >= threshold."""
    return Goal("at least", threshold)


def below(threshold: float) -> Goal:
    """The goal measured < threshold."""
    return Goal("below", threshold)


def above(threshold: float) -> Goal:
    """The goal measured > threshold."""
    return Goal("above", threshold)


def number(value: float | None, fmt: str | None = None) -> str:
    """`value` as text: with `fmt` (a format spec such as ".2f") if given, else 4 significant digits (thousands
    separated from 10,000 up); None and NaN as "-"."""
    if value is None or math.isnan(value):
        return "-"
    if fmt is not None:
        return format(value, fmt)
    if math.isinf(value):
        return str(value)
    if abs(value) >= 10_000:
        return f"{value:,.0f}"
    return f"{value:.4g}"


@dataclass(frozen=True)
class Figure:
    """One measured value of a benchmark, its unit, its goal (None: information only) and a free note (the
    conditions, a Monte Carlo error, an aim beyond the goal...). `fmt` formats the measured value (the threshold is
    shown to 4 significant digits)."""

    name: str
    measured: float
    unit: str = ""
    goal: Goal | None = None
    note: str = ""
    fmt: str | None = None

    def __post_init__(self) -> None:
        if SEPARATOR in self.name or "\n" in self.name:
            raise ValueError(f"a figure's name holds no {SEPARATOR!r} or line break: {self.name!r}")
        object.__setattr__(self, "measured", float(self.measured))

    @property
    def ratio(self) -> float | None:
        """measured / the goal's threshold; None without a goal, with a threshold <= 0 or a NaN measured value."""
        if self.goal is None or self.goal.threshold <= 0 or math.isnan(self.measured):
            return None
        return self.measured / self.goal.threshold

    @property
    def verdict(self) -> str:
        """The verdict: "met", "NOT MET", or "no goal" for a figure without one."""
        if self.goal is None:
            return NO_GOAL
        return MET if self.goal.met(self.measured) else NOT_MET

    def _with_unit(self, value: float, fmt: str | None) -> str:
        text = number(value, fmt)
        if not self.unit or text == "-":
            return text
        return f"{text}{self.unit}" if self.unit in ("%", "x") else f"{text} {self.unit}"

    def line(self) -> str:
        """The figure in the shared one-line format (see the module docstring)."""
        goal = "none"
        if self.goal is not None:
            goal = f"{SYMBOLS[self.goal.direction]} {self._with_unit(self.goal.threshold, None)}"
        fields = [f"{PREFIX}{self.name}", f"goal {goal}", f"measured {self._with_unit(self.measured, self.fmt)}",
                  f"ratio {ratio_text(self.ratio)}", self.verdict]
        if self.note:
            fields.append(" ".join(self.note.split()).replace(SEPARATOR, " / "))
        return SEPARATOR.join(fields)

    def as_dict(self) -> dict[str, Any]:
        """The figure as JSON-ready values (NaN and infinities as None)."""
        return {"name": self.name, "measured": _finite(self.measured), "unit": self.unit,
                "goal": None if self.goal is None else {"direction": self.goal.direction,
                                                        "threshold": _finite(self.goal.threshold)},
                "ratio": _finite(self.ratio), "verdict": self.verdict, "note": self.note}


def ratio_text(ratio: float | None) -> str:
    """A ratio as text: 2 decimals, 2 significant digits below 0.01, "-" for none."""
    if ratio is None:
        return "-"
    return f"{ratio:.2f}" if abs(ratio) >= 0.01 or ratio == 0 else f"{ratio:.2g}"


def _finite(value: float | None) -> float | None:
    return None if value is None or not math.isfinite(value) else value
