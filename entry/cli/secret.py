"""`empeval secret ...`: where the signing secret lives, and replacing it; and the global `--secret-file`.

The secret signs every invite link and gives the admin token; it is kept out of the database (see
server.annotation.secrets for where it is looked for)."""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import click

from empeval.cli.common import CliContext
from empeval.server.errors import Conflict

if TYPE_CHECKING:
    from sqlalchemy import Engine

# The root group builds its context from this module for every command, --help included: the store and the
# secrets' module are imported where a command uses them (tests/test_cli_startup.py).


@dataclass
class CliContextWithSecret(CliContext):
    """The commands' context plus the global `--secret-file`, bound to the command's engine so that every room's
    `secret_key(engine)` reads the secret from it without the option being passed down call by call."""

    secret_file: Path | None = None

    def engine(self, *, migrate: bool = True) -> Engine:
        engine = super().engine(migrate=migrate)
        if self.secret_file is not None:
            from empeval.server.annotation.secrets import use_secret_file

            use_secret_file(engine, self.secret_file)
        return engine


pass_cli_with_secret = click.make_pass_decorator(CliContextWithSecret)


@click.group()
def secret() -> None:
    """The signing secret: behind every invite link and the admin token."""


@secret.command("path")
@pass_cli_with_secret
def path_command(obj: CliContextWithSecret) -> None:
    """Print where the secret is read from (a file, or $EMPEVAL_SECRET_KEY)."""
    from empeval.server.annotation.secrets import describe_secret_source

    click.echo(describe_secret_source(obj.engine(), obj.secret_file))


@secret.command("rotate")
@click.option("--yes", is_flag=True, help="Rotate even while a study is open (its raters' links stop working).")
@pass_cli_with_secret
def rotate(obj: CliContextWithSecret, yes: bool) -> None:
    """Replace the secret with a new random one. Every invite link, invite cookie, admin session and the admin
    token made with the old secret stop working at once (a running server notices at its next request):
    hand out new links with `empeval annotators invite`, and read the new admin token with `empeval admin-token`."""
    from sqlalchemy import select
    from sqlalchemy.orm import Session

    from empeval.server.annotation.secrets import ADMIN_TOKEN_ENV, rotate_secret
    from empeval.server.store.models import Study
    from empeval.server.store.statuses import StudyStatus

    engine = obj.engine()
    with Session(engine) as session:
        open_studies = session.scalars(select(Study.name).where(Study.status == StudyStatus.OPEN)
                                       .order_by(Study.name)).all()
    if open_studies and not yes:
        raise Conflict(f"open studies: {', '.join(open_studies)}; rotating the secret invalidates every invite link "
                       "handed out for them (raters working now are refused at their next request). Pass --yes to "
                       "rotate anyway, then invite them again")
    written = rotate_secret(engine, secret_file=obj.secret_file)
    click.echo(f"new secret written to {written}; every token signed with the old one is now refused.")
    if open_studies:
        click.echo(f"invite the raters of {', '.join(open_studies)} again: `empeval annotators invite NAME ... "
                   "--study STUDY`.")
    if os.environ.get(ADMIN_TOKEN_ENV):
        click.echo(f"the admin token is pinned by ${ADMIN_TOKEN_ENV} and did not change.")
    else:
        click.echo("the admin token changed: `empeval admin-token` prints the new one.")


__all__ = ["CliContextWithSecret", "pass_cli_with_secret", "secret"]
