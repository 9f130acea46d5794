"""`empeval report STUDY`: the analysis report (Markdown + self-contained HTML) of a study in the store, Likert or
pairwise (A/B), or of an export file."""
from __future__ import annotations

from pathlib import Path

import click

from empeval.cli.common import SEED, CliContext, WritablePath, pass_cli

# The analysis and the store are imported when a report is written, not to read the command line
# (tests/test_cli_startup.py).


@click.command()
@click.argument("study")
@click.option("--out", "out_dir", type=WritablePath(file_okay=False, writable=True, path_type=Path), default=None,
              help="Folder for report.md, report.html, figures and tables (default: reports/STUDY).")
@click.option("--keep-flagged", is_flag=True,
              help="Do not exclude raters flagged by the quality checks (of a pairwise study: of its linked "
                   "Likert study, whose means go beside the A/B table).")
@click.option("--without-late", is_flag=True, help="Leave out assignments submitted after they had expired.")
@click.option("--seed", type=SEED, default=0, show_default=True, help="Seed of the bootstrap resampling.")
@click.option("--n-boot", type=click.IntRange(100, 1_000_000), default=None, envvar="EMPEVAL_N_BOOT",
              help="Bootstrap resamples for the intervals, agreement and rankings (default: $EMPEVAL_N_BOOT, which "
                   "the walkthrough notebook reads too, else 2000 for a Likert study and 1000 for the kinds that rank "
                   "systems). More steadies the interval ends (10000 for a paper's final tables); fewer gives a "
                   "quicker look. The methods paragraph says how many.")
@click.option("--export", "export_file", type=click.Path(exists=True, dir_okay=False, path_type=Path), default=None,
              help="Report on this export file (CSV/JSONL from `empeval export`, ratings or a pairwise study's "
                   "judgments) instead of the store.")
@click.option("--likert-export", type=click.Path(exists=True, dir_okay=False, path_type=Path), default=None,
              help="With --export of a pairwise study: the linked Likert study's export, shown beside the A/B table.")
@click.option("--latex", is_flag=True,
              help="Also write LaTeX booktabs tables under OUT/latex/: the main results (a Likert study) or the A/B "
                   "table (a pairwise study); \\usepackage{booktabs} in the paper.")
@click.option("--judge", default=None,
              help="Add a model-assisted section with this judge's scores (`empeval judge STUDY --judges NAME` "
                   "first): human-only, judge-only (biased) and prediction-powered means, paired differences, "
                   "judge-human agreement and calibration.")
@click.option("--judge-version", default=None,
              help="With --judge: the judge version whose scores to use (default: the latest that scored the study).")
@click.option("--allow-missing", is_flag=True,
              help="With --judge: drop the items the judge failed on (the report lists and counts them) instead of "
                   "refusing.")
@click.option("--order", "system_order", type=click.Choice(["study", "mean"]), default="study", show_default=True,
              help="Order of the systems in every table and figure: the study file's, or by mean (highest first).")
@click.option("--generalize", type=click.Choice(["items", "raters", "both"]), default="items", show_default=True,
              help="What the intervals and p-values of the system means and differences generalise to: items (new "
                   "contexts rated by this study's raters), raters (new raters rating this study's contexts) or both "
                   "(new raters and new contexts; needs two raters or more, better ten). The methods say which.")
@click.option("--config", "systems_config", type=click.Path(exists=True, dir_okay=False, path_type=Path),
              default=None, help="Systems config whose display_name entries name the systems in the report (default: "
                                 "the built-in systems.toml).")
@pass_cli
def report(obj: CliContext, study: str, out_dir: Path | None, keep_flagged: bool, without_late: bool, seed: int,
           n_boot: int | None, export_file: Path | None, likert_export: Path | None, latex: bool, judge: str | None,
           judge_version: str | None, allow_missing: bool, system_order: str, generalize: str,
           systems_config: Path | None) -> None:
    """Write the analysis report of STUDY: for a Likert study the paper-style table, agreement, significance,
    rater quality (with --judge, model-assisted estimates beside them); for a pairwise (A/B) study the Win / Lose
    / Tie table with its per-context test, the linked Likert study's means beside it, the ranking, agreement,
    position bias and control pairs."""
    from empeval.reporting import write_export_report, write_study_report

    out_dir = out_dir or Path("reports") / study
    if likert_export is not None and export_file is None:
        raise click.UsageError("--likert-export goes with --export (a study in the store names its linked study)")
    if judge is None and (judge_version is not None or allow_missing):
        raise click.UsageError("--judge-version and --allow-missing go with --judge NAME")
    if judge is not None and export_file is not None:
        raise click.UsageError("--judge reads the judge's scores from the store: it goes with a study in the store, "
                               "not with --export")
    if export_file is not None and (system_order != "study" or systems_config is not None):
        raise click.UsageError("--order and --config name and order the systems of a study in the store; an export "
                               "file's report lists them by name")
    if export_file is not None:
        paths = write_export_report(export_file, study, out_dir, include_late=not without_late,
                                    exclude_flagged=not keep_flagged, seed=seed, likert_export=likert_export,
                                    latex=latex, generalize=generalize, n_boot=n_boot)
    else:
        paths = write_study_report(obj.engine(), study, out_dir, include_late=not without_late,
                                   exclude_flagged=not keep_flagged, seed=seed, latex=latex, judge=judge,
                                   judge_version=judge_version, allow_missing=allow_missing,
                                   systems_config=systems_config, system_order=system_order,
                                   generalize=generalize, n_boot=n_boot)
    for line in report_summary(paths):
        click.echo(line)
    click.echo(f"report: {paths['html']}")
    click.echo(f"markdown: {paths['markdown']}")
    for key in sorted(k for k in paths if k.startswith("latex_")):
        click.echo(f"latex: {paths[key]}")
    if latex and not any(k.startswith("latex_") for k in paths):
        click.echo("latex: no table written (the report says what could not be computed)")


def report_summary(paths: dict[str, Path]) -> list[str]:
    """A few lines about a written report, read back from it: its kind's summary (the A/B table of a pairwise
    report, the system means of a Likert one, ...), criteria in the order the report shows them."""
    from empeval.analysis.report.study import report_summary_lines

    return report_summary_lines(paths)
