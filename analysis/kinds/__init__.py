"""Study kinds as the analysis knows them: each kind's tidy table (its columns, how an export file of it is
recognised and read) and its report (its sections, in order), in one registry.

One sub-package per kind (likert/, pairwise/, ...), whose `part` module registers an `AnalysisKind` subclass when
analysis/kinds/registered.py imports it; the shared report code (analysis.report.study) asks the registry and
never branches on a kind's name. This module imports nothing heavy: `import empeval.analysis` stays cheap.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar

# The analysis's errors live in analysis/errors.py (the report's folder code raises one and must not import the
# kinds); re-exported here, where the kinds and the entry points import them from.
from empeval.analysis.errors import ExportFileError as ExportFileError
from empeval.analysis.errors import ReportRefused as ReportRefused

if TYPE_CHECKING:
    import pandas as pd

    from empeval.analysis.report.sections import Report


class UnknownKind(ValueError):
    """A kind no module registered, or an export file no kind recognises: the message lists the registered ones."""


@dataclass
class JudgeRequest:
    """The judge a report's model-assisted section is about: its name, its scores of the study's items (the
    table ``judged_tables`` takes), the version they come from, whether it is a learned judge whose scores
    carry folds (cross-PPI), and whether items it failed on may be dropped."""

    name: str
    scores: pd.DataFrame
    version: str | None = None
    cross_fitted: bool = False
    allow_missing: bool = False
    #: The design's human sample (``context_id``, ``sampled``; ``attrs`` ``human_share`` and
    #: ``human_share_seed``), as the store records it; None when unknown (a report from an export).
    design_sample: pd.DataFrame | None = None
    #: A judge of differences' verdicts on pairs of the study's responses (criterion, context_id, system_a,
    #: system_b, judge_diff = A - B; analysis.stats.ppi.differences) and its name; None without one.
    pair_scores: pd.DataFrame | None = None
    pair_judge: str | None = None



@dataclass
class LinkedStudy:
    """A study linked to the one reported, by either's compare_with: its name and kind, whether it names the
    reported study (`names_this`) or the reported study names it, and its tidy table (None when it has no answers
    yet)."""

    name: str
    kind: str
    names_this: bool
    table: pd.DataFrame | None


@dataclass
class ReportRequest:
    """What a report is written from: the study's name and kind, its table (the kind's export or tidy table),
    `meta` (what the report needs of the study's configuration: criteria in order, k, design, recruitment, pay;
    see each kind), the kind's further tables (`tables`), the studies linked to it, a judge's scores for the
    model-assisted section (Likert), and the options: leave out late answers, exclude flagged raters, the
    bootstrap seed, LaTeX tables."""

    name: str
    kind: str
    table: pd.DataFrame
    meta: dict[str, Any] = field(default_factory=dict)
    linked: list[LinkedStudy] = field(default_factory=list)
    judge: JudgeRequest | None = None
    #: A kind's further tidy tables by name, beside `table` (a chat study's conversations, turns and turn
    #: annotations); empty for the kinds that have one table.
    tables: dict[str, pd.DataFrame] = field(default_factory=dict)
    include_late: bool = True
    exclude_flagged: bool = True
    seed: int = 0
    latex: bool = False
    #: Bootstrap resamples for the intervals, agreement and rankings; None: the kind's own default (Likert 2,000,
    #: the kinds that rank 1,000). The methods paragraph prints the number used.
    n_boot: int | None = None

    def resamples(self, default: int) -> int:
        """The bootstrap resamples to use: `n_boot`, or the kind's `default` when none was asked for."""
        return self.n_boot if self.n_boot is not None else default


class AnalysisKind:
    """A study kind's part in the analysis. A subclass sets every attribute and overrides every method; the base
    raises NotImplementedError naming the kind and the part."""

    name: ClassVar[str]
    label: ClassVar[str]  # the kind in a reader's words: "Likert", "pairwise (A/B)"
    # The columns of its export (the tidy table's contract, defined once in the kind's schema module).
    columns: ClassVar[tuple[str, ...]]

    def recognises(self, columns: Sequence[str]) -> bool:
        """Whether an export file whose first record has these columns is one of this kind's."""
        raise self._missing("recognises")

    def read_export(self, path: Path) -> pd.DataFrame:
        """An export file of this kind (CSV or JSON lines), validated: ValueError naming the line and column."""
        raise self._missing("read_export")

    def report(self, request: ReportRequest) -> Report:
        """The study's report: its sections in order (those of the kind, of the options asked for, of the studies
        linked to it, and the methods)."""
        raise self._missing("report")

    def summary_lines(self, paths: dict[str, Path], criteria: Sequence[str]) -> list[str]:
        """A few terminal lines about a written report, read back from its tables."""
        raise self._missing("summary_lines")

    def flagged_raters(self, table: pd.DataFrame, meta: dict[str, Any]) -> set[str] | None:
        """The raters the kind's quality rules flag from its table so far (the report's rules and thresholds), by
        pseudonym; None when the kind has no such rules."""
        raise self._missing("flagged_raters")

    def linked_section(self, request: ReportRequest, linked: list[LinkedStudy]) -> Any:
        """What the report of a study of another kind says of the studies of this kind linked to it (`linked`, those
        that name it): a Section, or None when it has nothing to say."""
        raise self._missing("linked_section")

    def _missing(self, part: str) -> NotImplementedError:
        return NotImplementedError(f"study kind {self.name!r} supplies no {part!r} in the analysis")


_KINDS: dict[str, AnalysisKind] = {}
Kind = TypeVar("Kind", bound=type[AnalysisKind])


def register(kind: Kind) -> Kind:
    """Register a kind's analysis part (a class decorator; one instance is kept)."""
    if kind.name in _KINDS and type(_KINDS[kind.name]) is not kind:
        raise ValueError(f"study kind {kind.name!r} has two analysis parts")
    _KINDS[kind.name] = kind()
    return kind


def put_in_order(names: Sequence[str]) -> None:
    """Order the registry as `names` (kinds not named keep their place after them): the order of
    analysis/kinds/registered.py, whichever part a process happened to import first (a kind's part may import
    another's, and register it early). What asks the registry in order (an export file read as the first kind's
    when no kind recognises it) then does not depend on import order."""
    ordered = {name: _KINDS[name] for name in names if name in _KINDS}
    ordered.update((name, kind) for name, kind in _KINDS.items() if name not in ordered)
    _KINDS.clear()
    _KINDS.update(ordered)


def analysis_kind(name: str, *, unknown: Callable[[str], Exception] | None = None) -> AnalysisKind:
    """The analysis part of the kind `name`; UnknownKind listing the registered kinds when there is none."""
    found = _KINDS.get(name)
    if found is None:
        message = f"unknown study kind {name!r}; the registered kinds are {', '.join(map(repr, _KINDS))}"
        raise (unknown or UnknownKind)(message)
    return found


def analysis_kinds() -> tuple[AnalysisKind, ...]:
    """Every registered kind's analysis part, in the order of analysis/kinds/registered.py (``put_in_order``)."""
    return tuple(_KINDS.values())


def linked_sections(request: ReportRequest) -> list[Any]:
    """What the studies whose compare_with names the reported one add to its report: their kind's linked_section,
    called once per kind with its studies (a section, or None when it has nothing to say)."""
    by_kind: dict[str, list[LinkedStudy]] = {}
    for linked in request.linked:
        if linked.names_this:
            by_kind.setdefault(linked.kind, []).append(linked)
    return [analysis_kind(kind).linked_section(request, studies) for kind, studies in by_kind.items()]
