"""`empeval db ...`: schema migrations."""
from __future__ import annotations

import click

from empeval.cli.common import CliContext, pass_cli

# The store's migrations are imported when a command runs, not to read its command line (tests/test_cli_startup.py).


@click.group()
def db() -> None:
    """Create or migrate the database schema (Alembic)."""


@db.command()
@click.argument("revision", default="head")
@pass_cli
def upgrade(obj: CliContext, revision: str) -> None:
    """Apply migrations up to REVISION (default: the newest), each revision whole or not at all: an upgrade
    interrupted (even by kill -9) leaves the database at the last revision it finished; run it again."""
    from empeval.server.store import migrate

    engine = obj.engine(migrate=False)
    migrate.upgrade(engine, revision)
    click.echo(f"database at revision {migrate.current_revision(engine)} ({obj.url})")


@db.command()
@click.argument("revision", default="base")
@click.option("--yes", is_flag=True, help="Do not ask for confirmation (downgrading to base drops every table).")
@pass_cli
def downgrade(obj: CliContext, revision: str, yes: bool) -> None:
    """Revert migrations down to REVISION (default: base, an empty database)."""
    if not yes:
        click.confirm(f"Downgrade {obj.url} to {revision}? Data in dropped tables is lost", abort=True)
    from empeval.server.store import migrate

    engine = obj.engine(migrate=False)
    migrate.downgrade(engine, revision)
    click.echo(f"database at revision {migrate.current_revision(engine) or 'base'}")


@db.command()
@pass_cli
def current(obj: CliContext) -> None:
    """Print the database's revision and the newest one available; exit 3, saying what to do, if a SQLite
    database holds part of the next revision (an upgrade by an older empeval, interrupted)."""
    from empeval.server.store import migrate

    engine = obj.engine(migrate=False)
    click.echo(f"current: {migrate.current_revision(engine) or 'base (empty)'}; head: {migrate.head_revision()}")
    if (half := migrate.half_applied(engine)) is not None:
        raise half
