"""The `empeval` command line: every command of every room, registered here, at the top.

Exit codes: 0 success, 1 unexpected failure, 2 bad usage or bad input, 3 conflict with stored data,
4 network or download failure (see entry.cli.common)."""
from __future__ import annotations

import sys
from pathlib import Path

import click

from empeval.cli.annotate import admin_token_command, annotators, export, serve
from empeval.cli.backend import generate, metrics, systems
from empeval.cli.common import EmpevalGroup, WritablePath
from empeval.cli.crowd import crowd
from empeval.cli.data import data
from empeval.cli.db import db
from empeval.cli.demo import demo
from empeval.cli.judge import judge
from empeval.cli.plan import plan
from empeval.cli.prolific import prolific
from empeval.cli.report import report
from empeval.cli.researcher import annotators_forget, annotators_list, assignments, study_list
from empeval.cli.secret import CliContextWithSecret, secret
from empeval.cli.study import study
from empeval.cli.train import train
from empeval.cli.train_cobert import cobert


@click.group(cls=EmpevalGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--database-url", envvar="EMPEVAL_DATABASE_URL", default=None, metavar="URL",
              help="SQLAlchemy URL of the store (env EMPEVAL_DATABASE_URL; default: ./empeval.db, SQLite).")
@click.option("--secret-file", envvar="EMPEVAL_SECRET_FILE", default=None, metavar="FILE",
              type=WritablePath(dir_okay=False, path_type=Path),
              help="File of the secret that signs invite links and gives the admin token (env EMPEVAL_SECRET_FILE; "
                   "default: next to a SQLite file, else under $EMPEVAL_HOME or ~/.local/share/empeval; "
                   "$EMPEVAL_SECRET_KEY, the secret itself, overrides it).")
@click.pass_context
def cli(ctx: click.Context, database_url: str | None, secret_file: Path | None) -> None:
    """empeval: human evaluation of empathetic dialogue models."""
    ctx.obj = CliContextWithSecret(database_url=database_url, secret_file=secret_file)


# The researcher's bookkeeping commands join the groups they belong to (entry.cli.researcher).
study.add_command(study_list)
annotators.add_command(annotators_list)
annotators.add_command(annotators_forget)
train.add_command(cobert)
for command in (db, data, annotators, serve, export, admin_token_command, secret, generate, metrics, systems, report,
                plan, study, crowd, demo, assignments, prolific, judge, train):
    cli.add_command(command)


def main() -> None:
    sys.exit(cli.main(standalone_mode=True))
