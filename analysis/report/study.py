"""A study's report, whatever its kind: the kind's analysis part builds the sections (analysis/kinds/), the
sections are written (analysis.report.sections). A study in the store comes as a ReportRequest (the entry point
reads the store); an export file is recognised by its columns and read by the kind it belongs to.

>>> from empeval.analysis.kinds import analysis_kinds
>>> [kind.name for kind in analysis_kinds()][:2]
['likert', 'pairwise']
"""
from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

import empeval.analysis.kinds.registered  # noqa: F401 (every kind's analysis part, registered)
from empeval.analysis.kinds import AnalysisKind, ExportFileError, ReportRequest, analysis_kind, analysis_kinds
from empeval.analysis.report.sections import write_report

# The criteria order of a report read from an export file, which does not carry its study's order: the default
# study file's (Rashkin et al. 2019); other criteria follow sorted.
EXPORT_CRITERIA_ORDER = ("empathy", "relevance", "fluency")


def report_study(request: ReportRequest, out_dir: Path) -> dict[str, Path]:
    """Write the report of `request` under `out_dir` (report.md, report.html, tables, figures, LaTeX when asked,
    and report.json: the study, its kind and its criteria in the order the report shows them, which
    report_summary_lines reads back); returns the written paths by name (see sections.write_report; "about" is
    report.json). The folder is replaced whole once every file is written (analysis.report.folder): an interrupted
    run leaves the previous report as it was."""
    report = analysis_kind(request.kind).report(request)
    about = json.dumps({"study": request.name, "kind": request.kind,
                        "criteria": list(request.meta.get("criteria") or ())}, indent=1)
    paths = write_report(report, Path(out_dir), latex=request.latex, files={"report.json": about})
    return {**paths, "about": Path(out_dir) / "report.json"}


def export_columns(path: Path) -> list[str]:
    """The columns of an export file's first record: the CSV header, or the keys of the first JSON line (none when
    that line is not a JSON object: the kind's reader then names the bad line)."""
    try:
        with Path(path).open(encoding="utf-8") as lines:
            first = next((line for line in lines if line.strip()), "")
    except UnicodeDecodeError as error:
        raise ExportFileError(f"{path}: not a text file in UTF-8 (byte {error.start}); an export is CSV or JSON "
                              "lines written by `empeval export`") from None
    if Path(path).suffix.lower() == ".csv":
        return [column.strip().strip('"') for column in first.strip().split(",")]
    try:
        record = json.loads(first)
    except json.JSONDecodeError:
        return []
    return list(record) if isinstance(record, dict) else []


def export_kind(path: Path) -> AnalysisKind:
    """The kind whose export the file is, recognised by its columns (a kind registered later is asked first, so a
    kind whose columns include another's is told apart). A file no kind recognises is read as the default kind's
    (registered first), whose reader then says which of its columns are missing."""
    columns = export_columns(path)
    for kind in reversed(analysis_kinds()):
        if kind.recognises(columns):
            return kind
    return analysis_kinds()[0]


def report_summary_lines(paths: dict[str, Path]) -> list[str]:
    """A few terminal lines about a report report_study wrote (`paths`, as it returned them), by its kind: the
    Likert means, the A/B table, ..., criteria in the report's order."""
    about = json.loads(paths["about"].read_text(encoding="utf-8"))
    return analysis_kind(about["kind"]).summary_lines(paths, about["criteria"])


def flagged_raters(kind: str, table: pd.DataFrame, meta: dict) -> set[str] | None:
    """The raters a study kind's quality rules flag from its table (None: the kind has none)."""
    return analysis_kind(kind).flagged_raters(table, meta)
