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
    """Export the study's ratings and write the report into out_dir; returns the written paths."""
    from analysis.report import write_report

    rows = export_rows(engine, name)
    if not include_late:
        rows = [r for r in rows if not r["late"]]
    if not rows:
        raise BadInput(f"study {name!r} has no ratings yet")
    meta = study_meta(engine, name)
    return write_report(pd.DataFrame(rows), out_dir, study_meta=meta, exclude_flagged=exclude_flagged, seed=seed)


def write_export_report(path: Path, name: str, out_dir: Path, *, include_late: bool = True,
                        exclude_flagged: bool = True, seed: int = 0) -> dict[str, Path]:
    """The report of an export file (no store needed): a collaborator's export, or a test fixture."""
    from analysis.report import write_report

    frame = pd.read_csv(path, dtype=str, keep_default_na=False) if path.suffix.lower() == ".csv" else \
        pd.read_json(path, lines=True, dtype=False)
    if not include_late and "late" in frame.columns:
        frame = frame[~frame["late"].astype(str).str.lower().isin({"true", "1"})]
    return write_report(frame, out_dir, study_meta={"name": name}, exclude_flagged=exclude_flagged, seed=seed)
