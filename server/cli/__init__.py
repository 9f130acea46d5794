"""The `empeval` command line. Exit codes: 0 success, 1 unexpected failure, 2 bad usage or bad input
file, 3 conflict with stored data, 4 network or download failure."""
from __future__ import annotations

import sys
from importlib.metadata import entry_points

import click

from server.cli.annotate import admin_token_command, annotators, export, serve
from server.cli.common import CliContext
from server.cli.backend import generate, metrics, systems
from server.cli.data import data
from server.cli.db import db
from server.cli.plan import plan
from server.cli.report import report


class PluginGroup(click.Group):
    """A group that adds the commands of other rooms (entry points `empeval.cli`) when first asked for them:
    loading them at import time would be circular, since they import `server.cli` themselves."""

    _plugins_loaded = False

    def _load_plugins(self) -> None:
        if not self._plugins_loaded:
            self._plugins_loaded = True
            for entry in entry_points(group="empeval.cli"):
                self.add_command(entry.load(), name=entry.name)

    def get_command(self, ctx, name):
        self._load_plugins()
        return super().get_command(ctx, name)

    def list_commands(self, ctx):
        self._load_plugins()
        return super().list_commands(ctx)


@click.group(cls=PluginGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--database-url", envvar="EMPEVAL_DATABASE_URL", default=None, metavar="URL",
              help="SQLAlchemy URL of the store (env EMPEVAL_DATABASE_URL; default: ./empeval.db, SQLite).")
@click.pass_context
def cli(ctx: click.Context, database_url: str | None) -> None:
    """empeval: human evaluation of empathetic dialogue models."""
    ctx.obj = CliContext(database_url=database_url)


cli.add_command(db)
cli.add_command(data)
cli.add_command(annotators)
cli.add_command(serve)
cli.add_command(export)
cli.add_command(admin_token_command)
cli.add_command(generate)
cli.add_command(metrics)
cli.add_command(systems)
cli.add_command(report)
cli.add_command(plan)


def main() -> None:
    sys.exit(cli.main(standalone_mode=True))
