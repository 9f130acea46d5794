"""The `empeval` command line: every command of every room, registered here, at the top.

Exit codes: 0 success, 1 unexpected failure, 2 bad usage or bad input, 3 conflict with stored data,
4 network or download failure (see entry.cli.common)."""
from __future__ import annotations

import sys

import click

from entry.cli.annotate import admin_token_command, annotators, export, serve
from entry.cli.backend import generate, metrics, systems
from entry.cli.common import CliContext, EmpevalGroup
from entry.cli.crowd import crowd
from entry.cli.data import data
from entry.cli.db import db
from entry.cli.demo import demo
from entry.cli.plan import plan
from entry.cli.report import report
from entry.cli.study import study


@click.group(cls=EmpevalGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--database-url", envvar="EMPEVAL_DATABASE_URL", default=None, metavar="URL",
              help="SQLAlchemy URL of the store (env EMPEVAL_DATABASE_URL; default: ./empeval.db, SQLite).")
@click.pass_context
def cli(ctx: click.Context, database_url: str | None) -> None:
    """empeval: human evaluation of empathetic dialogue models."""
    ctx.obj = CliContext(database_url=database_url)


for command in (db, data, annotators, serve, export, admin_token_command, generate, metrics, systems, report, plan,
                study, crowd, demo):
    cli.add_command(command)


def main() -> None:
    sys.exit(cli.main(standalone_mode=True))
