"""The Likert kind's part in the analysis: its tidy ratings table (the export's columns, analysis.kinds.likert.schema;
read and validated by analysis.kinds.likert.load) and its report (analysis.kinds.likert.report's sections, then a
section per kind of study linked to it)."""
from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import ClassVar

import pandas as pd

from empeval.analysis.kinds import AnalysisKind, LinkedStudy, ReportRequest, analysis_kind, register
from empeval.analysis.kinds.likert.schema import EXPORT_COLUMNS
from empeval.analysis.report.sections import Report, Section

# The columns that say an export holds Likert ratings.
LIKERT_COLUMNS = frozenset({"item_id", "score", "criterion", "annotator"})


def likert_summary_lines(means: pd.DataFrame, criteria: Sequence[str] = ()) -> list[str]:
    """The Likert report's system means (tables/system_means.csv) in a line per criterion, best first; the
    criteria in the order of `criteria` (the study's), any others after them as the table has them."""
    lines = []
    order = {criterion: rank for rank, criterion in enumerate(criteria)}
    ranks = means["criterion"].map(lambda c: order.get(c, len(order)))
    means = means.assign(_rank=ranks).sort_values("_rank", kind="stable")
    for criterion, group in means.groupby("criterion", sort=False):
        ranked = group.sort_values("mean", ascending=False)
        lines.append(f"  {criterion:<10} " + ", ".join(f"{row.system} {row.mean:.2f}"
                                                       for row in ranked.itertuples(index=False)))
    return lines


def judged_summary_lines(means: pd.DataFrame, criteria: Sequence[str] = ()) -> list[str]:
    """The model-assisted section's means (tables/judge_means.csv) in a line per criterion (in the order of
    `criteria`, others after), best first: the PPI++ or cross-PPI mean and, in brackets, the human-rated
    contexts the judge was worth."""
    estimate = "crossppi_mean" if "crossppi_mean" in means.columns else "ppi_mean"
    name = "cross-PPI" if estimate == "crossppi_mean" else "PPI++"
    order = {criterion: rank for rank, criterion in enumerate(criteria)}
    lines = [f"model-assisted mean per system ({name}; effective human-rated contexts in brackets):"]
    for criterion in sorted(dict.fromkeys(means["criterion"]), key=lambda c: order.get(c, len(order))):
        ranked = means.loc[means["criterion"] == criterion].sort_values(estimate, ascending=False)
        lines.append(f"  {criterion:<10} " + ", ".join(
            f"{row['system']} {row[estimate]:.2f} ({row['effective_n_human']:.0f})" for _, row in ranked.iterrows()))
    return lines


def gap_lines(markdown: str) -> list[str]:
    """The bullets of a report's "What could not be computed" section, as terminal lines after "gaps:"."""
    if "\n## What could not be computed\n" not in markdown:
        return []
    section = markdown.split("\n## What could not be computed\n", 1)[1].split("\n## ", 1)[0]
    return ["gaps:", *(f"  {line[2:]}" for line in section.splitlines() if line.startswith("- "))]


def _scale(meta: dict) -> tuple[int, int]:
    """The study's scale (meta "scale": [min, max]), 1-5 when the meta does not say (an export file)."""
    from empeval.analysis.kinds.likert.load import DEFAULT_SCALE

    low, high = meta.get("scale") or DEFAULT_SCALE
    return int(low), int(high)


@register
class LikertAnalysisKind(AnalysisKind):
    name: ClassVar[str] = "likert"
    label: ClassVar[str] = "Likert"
    columns: ClassVar[tuple[str, ...]] = EXPORT_COLUMNS

    def recognises(self, columns: Sequence[str]) -> bool:
        return LIKERT_COLUMNS <= set(columns)

    def read_export(self, path: Path) -> pd.DataFrame:
        """The export as the tidy ratings table, its optional `comment` column kept (the report lists it)."""
        from empeval.analysis.kinds.csv_cells import read_csv_table
        from empeval.analysis.kinds.likert.load import ExportError, read_export
        from empeval.analysis.report.comments import with_export_comments

        tidy = read_export(path)  # first: it names what is wrong with the file
        raw = (read_csv_table(path, ExportError) if Path(path).suffix.lower() == ".csv"
               else pd.read_json(path, lines=True, dtype=False))
        return with_export_comments(tidy, raw)

    def report(self, request: ReportRequest) -> Report:
        from empeval.analysis.kinds.likert.report import N_BOOT as LIKERT_N_BOOT
        from empeval.analysis.kinds.likert.report import likert_report
        from empeval.analysis.stats.threads import single_threaded_blas

        with single_threaded_blas():
            report = likert_report(request.table, study_meta={"name": request.name, **request.meta},
                                   scale=_scale(request.meta), include_late=request.include_late,
                                   exclude_flagged=request.exclude_flagged, seed=request.seed, judge=request.judge,
                                   n_boot=request.resamples(LIKERT_N_BOOT))
        by_kind: dict[str, list[LinkedStudy]] = {}
        for linked in request.linked:
            if linked.names_this:
                by_kind.setdefault(linked.kind, []).append(linked)
        for kind, studies in by_kind.items():
            report.add(analysis_kind(kind).linked_section(request, studies))
        return report

    def summary_lines(self, paths: dict[str, Path], criteria: Sequence[str]) -> list[str]:
        lines = []
        if "table_system_means" in paths:
            lines = ["mean score per system (best first):",
                     *likert_summary_lines(pd.read_csv(paths["table_system_means"]), criteria)]
        if "table_judge_means" in paths:
            lines += judged_summary_lines(pd.read_csv(paths["table_judge_means"]), criteria)
        return lines + gap_lines(paths["markdown"].read_text(encoding="utf-8"))

    def flagged_raters(self, table: pd.DataFrame, meta: dict) -> set[str]:
        from empeval.analysis.kinds.likert.load import tidy_from_export
        from empeval.analysis.kinds.likert.quality import flagged_annotators, rater_quality

        if table.empty:
            return set()
        ratings = tidy_from_export(table, scale=_scale(meta), source=f"study {meta.get('name', '')}".strip())
        return set(flagged_annotators(rater_quality(ratings)))

    def linked_section(self, request: ReportRequest, linked: list[LinkedStudy]) -> Section | None:
        """A Likert study linked to a study of another kind is read by that kind's report (its means beside the
        other protocol's results): no section of its own."""
        return None
