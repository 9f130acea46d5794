"""`empeval judge`: score every item of a study with automatic judges (model-assisted evaluation)."""
from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import click

from empeval.cli.backend import cache_option, config_option
from empeval.cli.common import EXIT_BAD_INPUT, CliContext, count, fail, pass_cli

# The backend, the store and the analysis are imported when the command runs, not to read its command line
# (tests/test_cli_startup.py).


BATCH_SIZE = 32


def _names(text: str, option: str) -> list[str]:
    names = list(dict.fromkeys(n.strip() for n in text.split(",") if n.strip()))
    if not names:
        raise click.BadParameter("name at least one, comma-separated", param_hint=option)
    return names


def missing_keys(specs: list, environ: Mapping[str, str], *, study: str, criteria: str | None = None,
                 config_path: Path | None = None, batch_size: int = BATCH_SIZE,
                 cache_dir: Path | None = None) -> str | None:
    """Why `empeval judge` refuses to start, or None: the judges among `specs` (in the order asked for) whose API key
    is read from an environment variable (`api_key_env`) that `environ` lacks or holds empty, named with the variable,
    and the exact command that runs the other judges asked for (the same options) when there are any.

    >>> from types import SimpleNamespace as Spec
    >>> llm = Spec(name="llm", parameters={"api_key_env": "EMPEVAL_JUDGE_API_KEY"})
    >>> length = Spec(name="length", parameters={})
    >>> text = missing_keys([llm, length], {}, study="pilot", criteria="empathy")
    >>> text.split(", which")[0]
    "judge 'llm' reads its API key from the environment variable EMPEVAL_JUDGE_API_KEY"
    >>> text.split(". ")[0].endswith("which is not set, so no judge was run")
    True
    >>> text.rsplit(": ", 1)[1]
    'empeval judge pilot --judges length --criteria empathy'
    >>> missing_keys([llm, length], {"EMPEVAL_JUDGE_API_KEY": "k"}, study="pilot") is None
    True
    """
    import shlex

    keyed = [(spec.name, str(spec.parameters["api_key_env"])) for spec in specs if spec.parameters.get("api_key_env")]
    missing = [(name, variable) for name, variable in keyed if not environ.get(variable, "").strip()]
    if not missing:
        return None
    variables = list(dict.fromkeys(variable for _, variable in missing))
    if len(missing) == 1:
        name, variable = missing[0]
        text = (f"judge {name!r} reads its API key from the environment variable {variable}, which is not set, so no "
                "judge was run. ")
    else:
        text = (f"judges {', '.join(repr(name) for name, _ in missing)} read their API keys from the environment "
                f"variable(s) {', '.join(variables)}, which {'is' if len(variables) == 1 else 'are'} not set, so no "
                "judge was run. ")
    exports = "; ".join(f"export {variable}=..." for variable in variables)
    text += f"Set {'it' if len(variables) == 1 else 'them'} ({exports}) and run again"
    others = [spec.name for spec in specs if spec.name not in {name for name, _ in missing}]
    if not others:
        return text + "."
    command = ["empeval", "judge", study, "--judges", ",".join(others)]
    for option, value in (("--criteria", criteria), ("--config", config_path), ("--cache-dir", cache_dir)):
        if value is not None:
            command += [option, str(value)]
    if batch_size != BATCH_SIZE:
        command += ["--batch-size", str(batch_size)]
    judges = "judge" if len(others) == 1 else "judges"
    return text + f", or run only the other {judges}: {shlex.join(command)}"


@click.command()
@click.argument("study")
@click.option("--judges", "judge_names", required=True,
              help="Comma-separated judge names (the config's [judges.NAME]).")
@click.option("--criteria", default=None,
              help="Comma-separated criterion keys (default: every criterion of the study).")
@click.option("--batch-size", type=count(), default=BATCH_SIZE, show_default=True,
              help="Items per batch (one transaction each).")
@config_option
@cache_option
@pass_cli
def judge(obj: CliContext, study: str, judge_names: str, criteria: str | None, batch_size: int,
          config_path: Path | None, cache_dir: Path | None) -> None:
    """Score every item of STUDY (controls left out) with each judge, on each criterion.

    A judge of differences (pairwise-http-judge, learned-difference-judge) compares every pair of responses to
    the same context instead, into the judge_pair_score table. On an A/B study it compares the pairs the design
    compares, on every context (with design.human_share, those people judge and those they do not); only a judge
    of differences can, since people there choose instead of rating (the learned one learns from their choices).

    Resumable: items a judge version already scored are skipped, items it failed on are asked again, and each
    batch is committed on its own. Failures are stored as errors with the judge's raw answer, never as scores.
    Scores land in the judge_score table with their provenance; the analysis uses them only through the
    prediction-powered correction with the human ratings.
    """
    import os

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
    refusal = missing_keys([specs[name] for name in names], os.environ, study=study, criteria=criteria,
                           config_path=config_path, batch_size=batch_size, cache_dir=cache_dir)
    if refusal:  # before the study is read or any judge is built: nothing half done
        fail(refusal, EXIT_BAD_INPUT)
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
