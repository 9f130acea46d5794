"""The `empeval` command line: every command of every room, registered here, at the top.

Commands are loaded when they run (or their own --help is asked for), not when the program starts: `empeval --help`
lists them from `COMMANDS` below, which holds each one's module and its line of help, so it imports neither the
store, the app nor the models (tests/test_cli_startup.py holds that, and that each line is the command's own).

Exit codes: 0 success, 1 unexpected failure, 2 bad usage or bad input, 3 conflict with stored data,
4 network or download failure (see entry.cli.common)."""
from __future__ import annotations

import importlib
import sys
from pathlib import Path
from typing import NamedTuple

import click

from empeval.cli.common import EmpevalGroup, WritablePath


class Command(NamedTuple):
    """Where a command lives (module of empeval.cli, attribute) and the line `empeval --help` shows for it."""

    module: str
    attribute: str
    short_help: str


COMMANDS: dict[str, Command] = {
    "admin-token": Command("annotate", "admin_token_command",
                           "Print the admin token: sign in at /admin with it (or open /admin#TOKEN), and send it to "
                           "the export and backend APIs as `Authorization: Bearer TOKEN`."),
    "annotators": Command("annotate", "annotators", "Invite local annotators, list who works on a study, revoke "
                          "annotators, withdraw a participant (forget)."),
    "assignments": Command("researcher", "assignments", "Manage single assignments."),
    "crowd": Command("crowd", "crowd",
                     "Run a study on a crowd platform through Mephisto (mock, mturk_sandbox, mturk)."),
    "data": Command("data", "data", "Import dialogues (EmpatheticDialogues or your own) and show what is stored."),
    "db": Command("db", "db", "Create or migrate the database schema (Alembic)."),
    "demo": Command("demo", "demo", "Run a complete human evaluation on the bundled ED sample: a Likert study and the "
                    "studies of other kinds linked to it (an A/B study, ...), each answered by its own simulated "
                    "crowd, and write every..."),
    "export": Command("annotate", "export", "Export STUDY's answers as its kind's tidy table: a Likert study's ratings "
                      "one row per rating, an A/B study's choices one row per judgment and criterion, a chat study's "
                      "conversation ratings, ..."),
    "generate": Command("backend", "generate", "Fill the response table for the chosen systems and contexts."),
    "judge": Command("judge", "judge", "Score every item of STUDY (controls left out) with each judge, on each "
                     "criterion."),
    "metrics": Command("backend", "metrics", "Print automatic metrics: corpus BLEU against gold for every system with "
                       "stored responses (run `empeval generate` first); for every retrieval system P@1,100, R@10, "
                       "R@50 and MRR over one shared..."),
    "notebook": Command("notebook", "notebook", "Copy the walkthrough notebook here (or to --out), to run on a "
                        "study's export: the report's tables and plots step by step."),
    "plan": Command("plan", "plan", "Simulate designs to size a study: power to detect EFFECT on CRITERION, required "
                    "contexts, cost."),
    "prolific": Command("prolific", "prolific", "Run a study on Prolific: its study link; releasing the work of "
                        "participants who returned or timed out."),
    "report": Command("report", "report", "Write the analysis report of STUDY: for a Likert study the paper-style "
                      "table, agreement, significance, rater quality (with --judge, model-assisted estimates beside "
                      "them); for a pairwise (A/B) study..."),
    "secret": Command("secret", "secret", "The signing secret: behind every invite link and the admin token."),
    "serve": Command("annotate", "serve", "Run the app: annotation pages, JSON API, admin dashboard."),
    "status": Command("study", "status_alias", "Progress of study NAME and its pre-registered decisions (the same "
                      "as `empeval study status NAME`)."),
    "study": Command("study", "study", "Create Likert or pairwise (A/B) studies from a study file, list them, follow "
                     "their progress, close them."),
    "systems": Command("backend", "systems", "List the configured systems and judges (name, kind, parameters); "
                       "`systems replay-align` rebuilds the replay file."),
    "train": Command("train", "train", "Train a system on the store's corpus (checkpoints under the cache directory)."),
}
# Subcommands that live beside their group's module: the researcher's bookkeeping commands (entry.cli.researcher)
# and cobert's training (entry.cli.train_cobert). group -> (module, attribute) of each.
JOINED: dict[str, tuple[tuple[str, str], ...]] = {
    "study": (("researcher", "study_list"),),
    "annotators": (("researcher", "annotators_list"), ("researcher", "annotators_forget")),
    "train": (("train_cobert", "cobert"),),
}


def load_command(name: str) -> click.Command:
    """The command `name` of COMMANDS, imported now, with the subcommands JOINED to it."""
    where = COMMANDS[name]
    command = getattr(importlib.import_module(f"empeval.cli.{where.module}"), where.attribute)
    if isinstance(command, click.Group):
        for module, attribute in JOINED.get(name, ()):
            joined = getattr(importlib.import_module(f"empeval.cli.{module}"), attribute)
            if joined.name not in command.commands:
                command.add_command(joined)
    return command


class LazyGroup(EmpevalGroup):
    """The root group, whose commands are imported when one is run or its help is asked for (click's "lazily loading
    subcommands" pattern); the listing of `empeval --help` comes from COMMANDS without importing any."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        return load_command(cmd_name) if cmd_name in COMMANDS else None

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        limit = formatter.width - 6 - max(map(len, COMMANDS))
        # Shortened as click shortens a command's own help (click.utils.make_default_short_help is deprecated).
        rows = [(name, click.Command(name, help=COMMANDS[name].short_help).get_short_help_str(limit))
                for name in COMMANDS]
        with formatter.section("Commands"):
            formatter.write_dl(sorted(rows))


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("empeval")
    except PackageNotFoundError:  # run from a checkout that was never installed
        return "unknown (not installed)"


def _print_version(ctx: click.Context, _param: click.Parameter, value: bool) -> None:
    if value and not ctx.resilient_parsing:
        click.echo(f"empeval {_version()} (Python {sys.version.split()[0]})")
        ctx.exit()


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--version", is_flag=True, expose_value=False, is_eager=True, callback=_print_version,
              help="Print empeval's version and exit.")
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
    from empeval.cli.secret import CliContextWithSecret

    ctx.obj = CliContextWithSecret(database_url=database_url, secret_file=secret_file)


def main() -> None:
    sys.exit(cli.main(standalone_mode=True))
