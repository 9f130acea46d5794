"""Reports of a study in the store, or of an export file: the glue between the store's export and analysis."""
from __future__ import annotations

from pathlib import Path

import pandas as pd
from sqlalchemy import Engine

from server.annotation.export import export_rows
from server.errors import BadInput
from server.store.engine import unit_of_work
from server.store.queries import study_by_name


def study_meta(engine: Engine, name: str) -> dict:
    """What the report's methods paragraph needs from the study's configuration."""
    with unit_of_work(engine) as session:
        config = study_by_name(session, name).config
    pay = config.pay
    return {"name": name, "k": config.design.ratings_per_response,
            "items_per_assignment": config.design.items_per_assignment,
            "pay_per_assignment": pay.per_assignment, "currency": pay.currency,
            "platform_fee": pay.platform_fee if pay.per_assignment is not None else None}


def write_study_report(engine: Engine, name: str, out_dir: Path, *, include_late: bool = True,
                       exclude_flagged: bool = True, seed: int = 0) -> dict[str, Path]:
    """Export the study's ratings and write the report into out_dir; returns the written paths. Late ratings
    are left out of the analysis when include_late is False, and the report says how many."""
    from analysis.report import write_report

    rows = export_rows(engine, name)
    if not rows:
        raise BadInput(f"study {name!r} has no ratings yet")
    return write_report(pd.DataFrame(rows), out_dir, study_meta=study_meta(engine, name), include_late=include_late,
                        exclude_flagged=exclude_flagged, seed=seed)


def write_export_report(path: Path, name: str, out_dir: Path, *, include_late: bool = True,
                        exclude_flagged: bool = True, seed: int = 0) -> dict[str, Path]:
    """The report of an export file (CSV or JSONL; no store needed): a collaborator's export, or a test
    fixture."""
    from analysis.load import read_export
    from analysis.report import write_report

    return write_report(read_export(path), out_dir, study_meta={"name": name}, include_late=include_late,
                        exclude_flagged=exclude_flagged, seed=seed)
