"""`empeval study ...`: defining studies, following them and closing them (registered with the `empeval` CLI)."""
from __future__ import annotations

from pathlib import Path

import click

from empeval.cli.common import CliContext, pass_cli

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


@study.command("status")
@click.argument("name")
@pass_cli
def status(obj: CliContext, name: str) -> None:
    """Whether study NAME is open or closed, and its assignments by status (open, assigned, submitted, expired)."""
    from sqlalchemy.orm import Session

    from empeval.server.store.queries import study_by_name
    from empeval.server.store.statuses import AssignmentStatus
    from empeval.tasks.study_create import study_progress

    engine = obj.engine()
    counts = study_progress(engine, name)
    with Session(engine) as session:
        click.echo(f"study {name}: {study_by_name(session, name).status}")
    for state in AssignmentStatus:
        click.echo(f"{state:<10}{counts.get(state, 0):>6}")


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
