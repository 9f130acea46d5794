"""`empeval prolific ...`: running a study on Prolific (its study file's [recruitment] names the Prolific study).

- `link STUDY --base-url URL` prints the one study link to paste into Prolific's study settings;
- `sync STUDY` asks Prolific's API (token in $PROLIFIC_API_TOKEN) who returned or timed out, and puts the
  assignments they held back in the pool; it names the participants Prolific does not know (made-up ids), and with
  --release-unknown puts their work back too;
- `pseudonyms PID...` prints the pseudonym of each Prolific participant id, to find on Prolific a rater the
  report flags.
"""
from __future__ import annotations

import sys
from urllib.parse import urlsplit

import click

from empeval.cli.common import CliContext, checked_base_url, invite_base_url, pass_cli

# The store and Prolific's client are imported when a command runs, not to read its command line
# (tests/test_cli_startup.py). server.annotation.prolific_client.API_URL, repeated (held equal by that test):
API_URL = "https://api.prolific.com"


@click.group()
def prolific() -> None:
    """Run a study on Prolific: its study link; releasing the work of participants who returned or timed out."""


@prolific.command("link")
@click.argument("study")
@click.option("--base-url", default=None, metavar="URL", callback=checked_base_url,
              help="Where participants reach `empeval serve`, e.g. https://ratings.example.org (behind HTTPS); "
                   "default: where the latest `empeval serve` of this store listens, or its --base-url.")
@pass_cli
def link_command(obj: CliContext, study: str, base_url: str | None) -> None:
    """Print STUDY's Prolific study link: paste it as the study URL on Prolific (the {{%...%}} parts are
    Prolific's, it fills them in for each participant)."""
    from empeval.server.annotation.prolific import make_study_token, require_prolific_study, study_link
    from empeval.server.annotation.secrets import secret_key

    engine = obj.engine()
    base = base_url or invite_base_url(engine)
    recruitment = require_prolific_study(engine, study)
    click.echo(study_link(base, make_study_token(secret_key(engine), study)))
    if urlsplit(base).scheme != "https":
        click.echo("warning: the link is plain HTTP; serve it behind HTTPS before participants use it", err=True)
    click.echo(f"admits Prolific study {recruitment.prolific_study_id}; completion code {recruitment.completion_code} "
               "(set the same code on Prolific)", err=True)


@prolific.command("sync")
@click.argument("study")
@click.option("--api-url", default=API_URL, show_default=True, metavar="URL", help="Prolific's API.")
@click.option("--release-unknown", is_flag=True,
              help="Also put back in the pool the work held by participants Prolific does not know (made-up ids).")
@pass_cli
def sync_command(obj: CliContext, study: str, api_url: str, release_unknown: bool) -> None:
    """Put back in the pool the assignments held by STUDY's participants who returned their submission or timed
    out on Prolific, and name the participants Prolific does not know (the API token comes from
    $PROLIFIC_API_TOKEN)."""
    from empeval.server.annotation.prolific import (
        GONE_STATUSES,
        release_departed,
        require_prolific_study,
        unknown_to_prolific,
    )
    from empeval.server.annotation.prolific import release_unknown as release_unknown_work
    from empeval.server.annotation.prolific_client import ProlificClient, token_from_environment

    engine = obj.engine()
    recruitment = require_prolific_study(engine, study)
    assert recruitment.prolific_study_id is not None  # require_prolific_study refuses a study without one
    submissions = ProlificClient(token_from_environment(), api_url=api_url).submissions(recruitment.prolific_study_id)
    departed = sorted({s.participant_id for s in submissions if s.status in GONE_STATUSES})
    released = release_departed(engine, study, departed)
    click.echo(f"{released.participants} participant(s) returned or timed out on Prolific, {released.known} of them "
               f"seen here; {len(released.released)} assignment(s) went back to the pool"
               + (f": {', '.join(map(str, released.released))}" if released.released else ""))
    unknown = unknown_to_prolific(engine, study, (s.participant_id for s in submissions))
    if not unknown:
        return
    click.echo(f"{len(unknown)} participant(s) here are unknown to Prolific (ids made up, not sent by Prolific):")
    for entry in unknown:
        click.echo(f"  {entry.pseudonym}\tholds {', '.join(map(str, entry.held)) or 'nothing'}"
                   f"\tsubmitted {entry.submitted}")
    if release_unknown:
        freed = release_unknown_work(engine, study, unknown)
        click.echo(f"{len(freed)} assignment(s) they held went back to the pool"
                   + (f": {', '.join(map(str, freed))}" if freed else ""))
    elif any(entry.held for entry in unknown):
        click.echo(f"run `empeval prolific sync {study} --release-unknown` to put the work they hold back in the pool; "
                   "their submissions stay until you remove them (`empeval annotators forget NAME`)")


@prolific.command("pseudonyms")
@click.argument("participant_ids", nargs=-1, required=True, metavar="PID...")
@pass_cli
def pseudonyms_command(obj: CliContext, participant_ids: tuple[str, ...]) -> None:
    """Print each Prolific participant id PID with its pseudonym here (the name in exports, the report and
    `annotators list`), and whether she has opened a study link; `-` reads ids from standard input, one a line."""
    from empeval.server.annotation.prolific import pseudonyms_of

    ids = [line.strip() for line in sys.stdin if line.strip()] if participant_ids == ("-",) else list(participant_ids)
    for found in pseudonyms_of(obj.engine(), ids):
        click.echo(f"{found.participant_id}\t{found.pseudonym}\t{'seen' if found.seen else 'not seen here'}")
