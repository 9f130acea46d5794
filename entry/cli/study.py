"""`empeval study ...`: defining studies (registered with the `empeval` CLI through an entry point)."""
from __future__ import annotations

from pathlib import Path

import click

from entry.cli.common import CliContext, pass_cli
from tasks.study_create import create_study, study_progress
from tasks.study_file import load_study_file


@click.group()
def study() -> None:
    """Create Likert studies from a study file and follow their progress."""


@study.command("create")
@click.argument("study_file", type=click.Path(path_type=Path))
@pass_cli
def create(obj: CliContext, study_file: Path) -> None:
    """Create the study described in STUDY_FILE (TOML): items, controls and counterbalanced assignments.

    The responses must exist already (`empeval generate`). See tasks/study_file.py for every field.
    """
    spec = load_study_file(study_file)
    summary = create_study(obj.engine(), spec)
    click.echo(summary.describe())
    click.echo(f"next: `empeval annotators invite NAME --study {spec.name}`, then `empeval serve`")


@study.command("status")
@click.argument("name")
@pass_cli
def status(obj: CliContext, name: str) -> None:
    """Assignments of study NAME by status (open, assigned, submitted, expired)."""
    counts = study_progress(obj.engine(), name)
    for state in ("open", "assigned", "submitted", "expired"):
        click.echo(f"{state:<10}{counts.get(state, 0):>6}")
