"""`empeval report STUDY`: the analysis report (Markdown + self-contained HTML) of a study in the store."""
from __future__ import annotations

from pathlib import Path

import click
import pandas as pd

from server.annotation.errors import AnnotationError
from server.annotation.export import export_rows
from server.annotation.handout import study_by_name
from server.cli.common import EXIT_BAD_INPUT, CliContext, fail, pass_cli
from server.store.engine import unit_of_work


def study_meta(engine, name: str) -> dict:
    """What the report's methods paragraph needs from the study's configuration."""
    with unit_of_work(engine) as session:
        config = study_by_name(session, name).config
    design, pay = config.get("design", {}), config.get("pay", {})
    return {"name": name, "k": design.get("ratings_per_response"),
            "items_per_assignment": design.get("items_per_assignment"),
            "pay_per_assignment": pay.get("per_assignment"), "currency": pay.get("currency", "USD"),
            "platform_fee": pay.get("platform_fee")}


def write_study_report(engine, name: str, out_dir: Path, *, include_late: bool = True,
                       exclude_flagged: bool = True, seed: int = 0) -> dict[str, Path]:
    """Export the study's ratings and write the report into out_dir; returns the written paths."""
    from analysis.report import write_report

    rows = export_rows(engine, name)
    if not include_late:
        rows = [r for r in rows if not r["late"]]
    if not rows:
        raise AnnotationError(f"study {name!r} has no ratings yet")
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


@click.command()
@click.argument("study")
@click.option("--out", "out_dir", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Folder for report.md, report.html, figures and tables (default: reports/STUDY).")
@click.option("--keep-flagged", is_flag=True, help="Do not exclude raters flagged by the quality checks.")
@click.option("--without-late", is_flag=True, help="Leave out assignments submitted after they had expired.")
@click.option("--seed", default=0, show_default=True, help="Seed of the bootstrap resampling.")
@click.option("--export", "export_file", type=click.Path(exists=True, dir_okay=False, path_type=Path), default=None,
              help="Report on this export file (CSV/JSONL from `empeval export`) instead of the store.")
@pass_cli
def report(obj: CliContext, study: str, out_dir: Path | None, keep_flagged: bool, without_late: bool, seed: int,
           export_file: Path | None) -> None:
    """Write the analysis report of STUDY: paper-style table, agreement, significance, rater quality."""
    out_dir = out_dir or Path("reports") / study
    try:
        if export_file is not None:
            paths = write_export_report(export_file, study, out_dir, include_late=not without_late,
                                        exclude_flagged=not keep_flagged, seed=seed)
        else:
            paths = write_study_report(obj.engine(), study, out_dir, include_late=not without_late,
                                       exclude_flagged=not keep_flagged, seed=seed)
    except (AnnotationError, ValueError) as error:
        fail(getattr(error, "message", str(error)), EXIT_BAD_INPUT)
    click.echo(f"report: {paths['html']}")
    click.echo(f"markdown: {paths['markdown']}")
