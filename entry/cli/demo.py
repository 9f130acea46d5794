"""`empeval demo`: a whole human evaluation on the bundled ED sample (see entry.demo)."""
from __future__ import annotations

from pathlib import Path

import click

from empeval.cli.report import summary_lines
from empeval.demo import TRY_IT_STUDY, run_demo
from empeval.server.annotation.annotators import invite
from empeval.server.annotation.secrets import admin_token, secret_key
from empeval.server.store import open_store


@click.command()
@click.option("--workdir", type=click.Path(file_okay=False, path_type=Path), default=Path("var/demo"),
              show_default=True, help="Folder for the demo's database and reports (the database is recreated).")
@click.option("--raters", default=45, show_default=True,
              help="Simulated raters (nobody sees a context twice, so a study needs many people).")
@click.option("--bad-raters", default=4, show_default=True, help="How many of them are careless.")
@click.option("--contexts", type=int, default=None, help="Contexts to rate (default: the study file's 30).")
@click.option("--time-scale", default=0.0, show_default=True,
              help="Simulated raters wait this share of a realistic time per item (1 = real time).")
@click.option("--ab-raters", default=30, show_default=True,
              help="Simulated raters of the A/B study, other people than the Likert study's (0: no A/B study).")
@click.option("--ab-bad-raters", default=2, show_default=True, help="How many of the A/B raters are careless.")
def demo(workdir: Path, raters: int, bad_raters: int, contexts: int | None, time_scale: float, ab_raters: int,
         ab_bad_raters: int) -> None:
    """Run a complete human evaluation on the bundled ED sample, a Likert study and a linked A/B study, and write
    both reports."""
    result = run_demo(workdir, raters=raters, bad_raters=bad_raters, contexts=contexts, time_scale=time_scale,
                      ab_raters=ab_raters, ab_bad_raters=ab_bad_raters,
                      **({"ab_study_file": None} if ab_raters == 0 else {}))
    url = f"sqlite:///{result.database.resolve()}"
    engine = open_store(url)
    _, token = invite(engine, "you", TRY_IT_STUDY)
    token_admin = admin_token(secret_key(engine))
    click.echo(f"\n{result.submissions} assignments, {result.ratings} ratings from {result.raters} simulated raters "
               f"({_careless(result.flagged_kinds)}).")
    for line in summary_lines(result.report):
        click.echo(line)
    click.echo(f"report:   {result.report['html']}")
    click.echo(f"          {result.report['markdown']}")
    if result.ab_report is not None:
        click.echo(f"\nA/B study {result.ab_study}: {result.ab_submissions} assignments, {result.choices} choices from "
                   f"{result.ab_raters} other simulated raters ({_careless(result.ab_flagged_kinds)}).")
        for line in summary_lines(result.ab_report):
            click.echo(line)
        click.echo(f"report:   {result.ab_report['html']}")
        click.echo(f"          {result.ab_report['markdown']}")
    click.echo("\nnext:")
    click.echo(f"  start the app:  .venv/bin/empeval --database-url {url} serve")
    click.echo(f"  rate yourself:  http://127.0.0.1:5000/annotate#{token}")
    click.echo(f"  dashboard:      http://127.0.0.1:5000/admin#{token_admin}")
    click.echo(f"  size a study:   .venv/bin/empeval --database-url {url} plan --pilot demo")


def _careless(kinds: dict[str, str]) -> str:
    return (f"{len(kinds)} careless on purpose: " + ", ".join(f"{n} {k}" for n, k in sorted(kinds.items()))
            if kinds else "none careless")
