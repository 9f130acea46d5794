"""`empeval demo`: a whole human evaluation on the bundled ED sample (see entry.demo)."""
from __future__ import annotations

from pathlib import Path

import click

from empeval.cli.common import FiniteRange, WritablePath, count
from empeval.cli.report import report_summary

# The demo, the store and the app are imported when it runs, not to read its command line
# (tests/test_cli_startup.py).


@click.command()
@click.option("--workdir", type=WritablePath(file_okay=False, writable=True, path_type=Path), default=Path("var/demo"),
              show_default=True, help="Folder for the demo's database and reports (the database is recreated).")
@click.option("--raters", type=count(), default=45, show_default=True,
              help="Simulated raters (nobody sees a context twice, so a study needs many people).")
@click.option("--bad-raters", type=count(0), default=4, show_default=True, help="How many of them are careless.")
@click.option("--contexts", type=count(), default=None, help="Contexts to rate (default: the study file's 30).")
@click.option("--time-scale", type=FiniteRange(0, 100), default=0.0, show_default=True,
              help="Simulated raters wait this share of a realistic time per item (1 = real time).")
@click.option("--linked-raters", type=count(0), default=30, show_default=True,
              help="Simulated raters of each study linked to the Likert one (the A/B study, ...), other people than "
                   "the Likert study's (0: run the Likert study alone).")
@click.option("--linked-bad-raters", type=count(0), default=2, show_default=True,
              help="How many of each linked study's raters are careless.")
def demo(workdir: Path, raters: int, bad_raters: int, contexts: int | None, time_scale: float, linked_raters: int,
         linked_bad_raters: int) -> None:
    """Run a complete human evaluation on the bundled ED sample: a Likert study and the studies of other kinds linked
    to it (an A/B study, ...), each answered by its own simulated crowd, and write every report."""
    from empeval.demo import TRY_IT_STUDY, run_demo
    from empeval.server.annotation.annotators import invite
    from empeval.server.store import open_store

    result = run_demo(workdir, raters=raters, bad_raters=bad_raters, contexts=contexts, time_scale=time_scale,
                      linked_raters=linked_raters, linked_bad_raters=linked_bad_raters,
                      **({"linked_files": []} if linked_raters == 0 else {}))
    url = f"sqlite:///{result.database.resolve()}"
    engine = open_store(url)
    _, token = invite(engine, "you", TRY_IT_STUDY)
    for number, study in enumerate(result.studies):
        others = "" if number == 0 else "other "
        idle = study.raters - study.worked
        click.echo(f"\n{study.name} ({study.kind}): {study.submissions} assignments, {study.answers} {study.counted} "
                   f"from {study.worked} {others}simulated raters ({_careless(study.careless)})"
                   + (f"; {idle} more found no work left (nobody sees a context twice)." if idle > 0 else "."))
        for line in report_summary(study.report):
            click.echo(line)
        click.echo(f"report:   {study.report['html']}")
        click.echo(f"          {study.report['markdown']}")
    click.echo("\nnext:")
    click.echo(f"  start the app:  .venv/bin/empeval --database-url {url} serve")
    click.echo(f"  rate yourself:  http://127.0.0.1:5000/annotate#{token}")
    click.echo("  dashboard:      http://127.0.0.1:5000/admin  (sign in with the admin token, printed by "
               f"`.venv/bin/empeval --database-url {url} admin-token`)")
    click.echo(f"  size a study:   .venv/bin/empeval --database-url {url} plan --pilot demo")


def _careless(behaviours: dict[str, str]) -> str:
    return (f"{len(behaviours)} careless on purpose: " + ", ".join(f"{n} {k}" for n, k in sorted(behaviours.items()))
            if behaviours else "none careless")
