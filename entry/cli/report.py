"""`empeval report STUDY`: the analysis report (Markdown + self-contained HTML) of a study in the store."""
from __future__ import annotations

from pathlib import Path

import click

from entry.cli.common import CliContext, pass_cli
from entry.reporting import write_export_report, write_study_report


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
    if export_file is not None:
        paths = write_export_report(export_file, study, out_dir, include_late=not without_late,
                                    exclude_flagged=not keep_flagged, seed=seed)
    else:
        paths = write_study_report(obj.engine(), study, out_dir, include_late=not without_late,
                                   exclude_flagged=not keep_flagged, seed=seed)
    click.echo(f"report: {paths['html']}")
    click.echo(f"markdown: {paths['markdown']}")
