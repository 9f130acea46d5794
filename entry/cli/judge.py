"""`empeval judge`: score every item of a study with automatic judges (model-assisted evaluation)."""
from __future__ import annotations

from pathlib import Path

import click

from empeval.cli.backend import cache_option, config_option
from empeval.cli.common import EXIT_BAD_INPUT, CliContext, count, fail, pass_cli

# The backend, the store and the analysis are imported when the command runs, not to read its command line
# (tests/test_cli_startup.py).


def _names(text: str, option: str) -> list[str]:
    names = list(dict.fromkeys(n.strip() for n in text.split(",") if n.strip()))
    if not names:
        raise click.BadParameter("name at least one, comma-separated", param_hint=option)
    return names


@click.command()
@click.argument("study")
@click.option("--judges", "judge_names", required=True,
              help="Comma-separated judge names (the config's [judges.NAME]).")
@click.option("--criteria", default=None,
              help="Comma-separated criterion keys (default: every criterion of the study).")
@click.option("--batch-size", type=count(), default=32, show_default=True,
              help="Items per batch (one transaction each).")
@config_option
@cache_option
@pass_cli
def judge(obj: CliContext, study: str, judge_names: str, criteria: str | None, batch_size: int,
          config_path: Path | None, cache_dir: Path | None) -> None:
    """Score every item of STUDY (controls left out) with each judge, on each criterion.

    A judge of differences (pairwise-http-judge, learned-difference-judge) compares every pair of responses to
    the same context instead, into the judge_pair_score table.

    Resumable: items a judge version already scored are skipped, items it failed on are asked again, and each
    batch is committed on its own. Failures are stored as errors with the judge's raw answer, never as scores.
    Scores land in the judge_score table with their provenance; the analysis uses them only through the
    prediction-powered correction with the human ratings.
    """
    from empeval.analysis.stats.ppi.crossfit import cross_fit_difference_judge, cross_fit_judge
    from empeval.server.backend.judges.pair_run import judge_study_pairs
    from empeval.server.backend.judges.run import judge_study
    from empeval.server.backend.judges.study_items import load_judged_study
    from empeval.server.backend.registry import build_judge, load_judges
    from empeval.server.backend.resources import BackendResources, default_cache_dir
    from empeval.server.progress import progress_bar

    specs = {spec.name: spec for spec in load_judges(config_path)}
    names = _names(judge_names, "--judges")
    unknown = [name for name in names if name not in specs]
    if unknown:
        fail(f"unknown judge(s) {', '.join(unknown)}; configured judges: {', '.join(specs) or 'none'} "
             f"(add one under [judges.NAME] in {config_path or 'the systems config'})", EXIT_BAD_INPUT)
    chosen = _names(criteria, "--criteria") if criteria is not None else None
    engine = obj.engine()
    judged = load_judged_study(engine, study, criteria=chosen, cross_fit=cross_fit_judge,
                               cross_fit_differences=cross_fit_difference_judge)
    if not judged.items:
        fail(f"study {study!r} has no items to judge", EXIT_BAD_INPUT)
    resources = BackendResources(engine=engine, cache_dir=cache_dir or default_cache_dir())
    for name in names:
        judge_model = build_judge(specs[name], resources)
        with progress_bar() as progress:
            task = progress.add_task(name, total=None)
            run = judge_study_pairs if judge_model.compares_pairs else judge_study
            report = run(engine, judge_model, judged, batch_size=batch_size,
                         on_total=lambda n, task=task: progress.update(task, total=n),
                         on_batch=lambda n, task=task: progress.advance(task, n))
        click.echo(report.describe())
