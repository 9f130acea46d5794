"""A study's answers as its kind's tidy table (one row per answer: a Likert study's ratings, an A/B study's
judgment rows, ...), in the columns of the contract analysis reads, defined there once per kind (the kind's
annotation part names them: AnnotationKind.export_columns); as CSV or JSON lines."""
from __future__ import annotations

import json
from typing import Any, NamedTuple

from sqlalchemy import Engine, select
from sqlalchemy.orm import Session

from empeval.analysis.kinds.csv_cells import write_csv
from empeval.server.annotation.kinds import AnnotationKind, annotation_kind
from empeval.server.annotation.qualification import qualification_meta
from empeval.server.errors import BadInput
from empeval.server.store.models import Study
from empeval.server.store.queries import study_by_name
from empeval.server.store.study_config import StudyConfig


def study_kind(engine: Engine, study: str) -> AnnotationKind:
    """The annotation part of the study's kind (NotFound when there is no such study)."""
    with Session(engine) as session:
        return annotation_kind(study_by_name(session, study).config.kind)


def export_rows(engine: Engine, study: str) -> list[dict[str, Any]]:
    """Every answer of the study as its kind's tidy table, in assignment and position order."""
    return study_kind(engine, study).export_rows(engine, study)


def rows_to_csv(rows: list[dict[str, Any]], columns: tuple[str, ...] | list[str]) -> str:
    """Rows as CSV in `columns`' order: booleans as true/false, empty for None; text a spreadsheet would run as a
    formula behind a single quote, and every cell holding a line break quoted (analysis.kinds.csv_cells, whose
    reader takes the quote off again)."""
    unknown = sorted({key for row in rows for key in row} - set(columns))
    if unknown:  # as csv.DictWriter refused them: a column the contract does not name is a bug of the exporter
        raise ValueError(f"export rows hold columns outside the export's: {', '.join(unknown)}")
    return write_csv(columns, ([_cell(row.get(column)) for column in columns] for row in rows))


def _cell(value: Any) -> Any:
    return "" if value is None else str(value).lower() if isinstance(value, bool) else value


def rows_to_jsonl(rows: list[dict[str, Any]]) -> str:
    return "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows)


def export_text(engine: Engine, study: str, fmt: str, table: str | None = None) -> tuple[str, int, str]:
    """The study's export as text in `fmt` ("csv" or "jsonl"), how many rows it has and what they are (the kind's
    word for its answers: "ratings", "judgments", ...). `table` names one of the kind's further tables instead
    (AnnotationKind.extra_exports: a chat study's "turns", ...); BadInput listing them for another name."""
    kind = study_kind(engine, study)
    if table is None:
        rows, columns, what = kind.export_rows(engine, study), kind.export_columns, kind.entries
    else:
        further = kind.extra_exports(engine, study)
        if table not in further:
            listed = ", ".join(map(repr, further)) if further else "none"
            raise BadInput(f"study {study!r} has no table {table!r}; its further tables: {listed} (without --table: "
                           f"its {kind.entries})")
        (columns, rows), what = further[table], table.replace("_", " ")
    text = rows_to_csv(rows, columns) if fmt == "csv" else rows_to_jsonl(rows)
    return text, len(rows), what


class LinkedExport(NamedTuple):
    """A study linked to the reported one by either's compare_with: its name, kind, whether it names the reported
    study, and its export rows."""

    name: str
    kind: str
    names_this: bool
    rows: list[dict[str, Any]]


class ReportInputs(NamedTuple):
    """What a study's report is written from, read from the store: its kind, its export rows, what the report needs
    of its configuration (`meta`: criteria in the study's order, the design, recruitment and pay, and the kind's
    own, AnnotationKind.report_meta) and the studies linked to it."""

    kind: str
    rows: list[dict[str, Any]]
    meta: dict[str, Any]
    linked: list[LinkedExport]
    counted: str  # what the rows are, in the kind's words ("ratings", "choices")
    # The kind's further tables (AnnotationKind.extra_exports): name -> (columns, rows); empty for most kinds.
    tables: dict[str, tuple[tuple[str, ...], list[dict[str, Any]]]] = {}


def report_meta(config: StudyConfig) -> dict[str, Any]:
    """What every report needs of a study's configuration: the criteria and the systems in the study file's order
    (every table and figure follows them, analysis.report.systems), the design, how
    raters were recruited (local volunteers unless the [recruitment] section says prolific or mturk) and what they
    were paid; and what the study's kind adds."""
    pay = config.pay
    return {"criteria": list(config.criterion_keys), "systems": list(config.systems),
            "items_per_assignment": config.design.items_per_assignment,
            "platform": config.recruitment.platform, "pay_per_assignment": pay.per_assignment,
            "currency": pay.currency, "platform_fee": pay.platform_fee if pay.per_assignment is not None else None,
            **annotation_kind(config.kind).report_meta(config)}


def report_inputs(engine: Engine, study: str) -> ReportInputs:
    """The study's report inputs (NotFound for an unknown study): its rows, its meta and every study linked to it,
    by its compare_with or theirs, with their rows."""
    with Session(engine) as session:
        found = study_by_name(session, study)
        config, qualification = found.config, qualification_meta(session, found)  # raters qualified and failed
        others = [(row.name, row.config) for row in session.scalars(select(Study).where(Study.name != study))]
    linked = [LinkedExport(name, other.kind, names_this=other.compare_with == study,
                           rows=annotation_kind(other.kind).export_rows(engine, name))
              for name, other in sorted(others) if other.compare_with == study or config.compare_with == name]
    kind = annotation_kind(config.kind)
    return ReportInputs(config.kind, kind.export_rows(engine, study), {**report_meta(config), **qualification}, linked,
                        kind.counted, kind.extra_exports(engine, study))
