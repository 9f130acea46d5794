"""`empeval study ...`: defining studies, following them and closing them (registered with the `empeval` CLI)."""
from __future__ import annotations

from pathlib import Path

import click

from empeval.cli.common import SEED, CliContext, pass_cli, share

# The store and the study kinds are imported by the commands that use them, not to read a command line
# (tests/test_cli_startup.py).


@click.group()
def study() -> None:
    """Create Likert or pairwise (A/B) studies from a study file, list them, follow their progress, close them."""


@study.command("create")
@click.argument("study_file", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@pass_cli
def create(obj: CliContext, study_file: Path) -> None:
    """Create the study described in STUDY_FILE (TOML): items (or pairs), controls and counterbalanced assignments.

    The responses must exist already (`empeval generate`). See tasks/study_file.py for every field. With
    design.human_share, people rate a seeded sample of the contexts and judges score every item.
    """
    from empeval.tasks.study_create import create_study
    from empeval.tasks.study_file import load_study_file

    spec = load_study_file(study_file)
    summary = create_study(obj.engine(), spec)
    click.echo(summary.describe())
    click.echo(summary.next_steps())


def _status_command(function):
    """The options of `empeval study status` (and of its top-level alias `empeval status`)."""
    function = click.option("--judge", default=None,
                            help="The judge whose scores (an A/B study: a judge of differences' verdicts) give the "
                                 "model-assisted intervals of the study's [decisions] (default: the judge that judged "
                                 "the study most recently, if any).")(function)
    return pass_cli(click.argument("name")(function))


def _print_status(obj: CliContext, name: str, judge: str | None) -> None:
    """Open or closed, assignments by status, and the pre-registered decisions ([decisions]): each comparison's
    anytime-valid interval and state, human-only and model-assisted; closes the study's claims when its decisions say
    stop_when_decided and everything is decided or the budget is spent."""
    from sqlalchemy.orm import Session

    from empeval.server.errors import BadInput
    from empeval.server.store.queries import study_by_name
    from empeval.server.store.statuses import AssignmentStatus
    from empeval.server.web.decisions_watch import look
    from empeval.tasks.study_create import study_progress

    engine = obj.engine()
    counts = study_progress(engine, name)
    with Session(engine) as session:
        row = study_by_name(session, name)
        click.echo(f"study {name}: {row.status}" + (" (not taking new work)" if row.claims_closed_at else ""))
        has_decisions = row.config.decisions is not None
    for state in AssignmentStatus:
        click.echo(f"{state:<10}{counts.get(state, 0):>6}")
    if not has_decisions:
        return
    try:
        status = look(engine, name, close=True, judge=judge)
    except BadInput as problem:  # a study of another kind (decisions are computed for Likert and pairwise studies)
        click.echo(f"decisions: {problem}")
        return
    for line in status.lines() if status is not None else ():
        click.echo(line)


@study.command("status")
@_status_command
def status(obj: CliContext, name: str, judge: str | None) -> None:
    """Whether study NAME is open or closed, its assignments by status (open, assigned, submitted, expired), and,
    when its study file pre-registered [decisions], each comparison's anytime-valid interval and state (undecided,
    A better, B better, equivalent within margin), human-only and model-assisted, with the paid ratings so far."""
    _print_status(obj, name, judge)


@click.command("status")
@_status_command
def status_alias(obj: CliContext, name: str, judge: str | None) -> None:
    """Progress of study NAME and its pre-registered decisions (the same as `empeval study status NAME`)."""
    _print_status(obj, name, judge)


@study.command("close")
@click.argument("name")
@pass_cli
def close(obj: CliContext, name: str) -> None:
    """Close study NAME: from now on it hands out no assignment and takes no submission (raters are told so).

    Assignments in progress stay unfinished; ratings stored so far stay. Crowd results ingested later are
    refused and reported.
    """
    from empeval.server.annotation.handout import close_study
    from empeval.server.store.statuses import AssignmentStatus

    closing = close_study(obj.engine(), name)
    in_progress = closing.counts[AssignmentStatus.ASSIGNED]
    click.echo(f"study {name} {'closed' if closing.was_open else 'was closed already'}: "
               f"{closing.counts[AssignmentStatus.SUBMITTED]} assignments submitted, {in_progress} in progress left "
               "unfinished, "
               f"{closing.counts[AssignmentStatus.OPEN]} never handed out")


# Active sampling (design.sampling = "active", issue 28): the draw made once the judges have scored every item.
@study.command("sample")
@click.argument("name")
@click.option("--judges", "judge_names", default=None,
              help="Comma-separated judges whose scores guide the draw (default: every judge that scored the study).")
@click.option("--seed", type=SEED, default=None,
              help="The draw's seed (default: design.human_share_seed, else the study's seed).")
@click.option("--burn-in", "burn_in", type=share(open_ends=True), default=None,
              help="Draw in two phases: first this share of the expected contexts uniformly; once people have rated "
                   "them, run the command again and a model of the judges' errors fitted on their ratings draws the "
                   "rest. Default: one draw on the judges' disagreement.")
@pass_cli
def sample(obj: CliContext, name: str, judge_names: str | None, seed: int | None, burn_in: float | None) -> None:
    """Draw the contexts people rate in actively sampled study NAME and write their assignments.

    Each context is drawn with a probability that follows the judges' uncertainty about it (their disagreement, or a
    learned judge's predictive variance; an A/B study's judges of differences' disagreement), mixed with uniform,
    design.human_share x contexts expected (analysis/stats/ppi/active_draw.py); the probabilities are stored per
    context for the estimates. One transaction; a study drawn before is left as it is. Refused until every judge named
    has scored every item.

    With --burn-in the first run draws a uniform burn-in and the second (after its ratings) the rest, guided by a
    residual model fitted on the burn-in (analysis/stats/ppi/active_phases.py); the option matters on the first run.
    """
    from empeval.sampling import sample_study

    judges = [n.strip() for n in judge_names.split(",") if n.strip()] if judge_names is not None else None
    if judges is not None and not judges:
        raise click.BadParameter("name at least one, comma-separated", param_hint="--judges")
    draw = sample_study(obj.engine(), name, judges=judges, seed=seed, burn_in=burn_in)
    click.echo(draw.describe())
    if draw.new:
        click.echo(f"next: `empeval annotators invite NAME --study {name}`, then `empeval serve` (the drawn contexts)")
