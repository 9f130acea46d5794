"""The researcher's bookkeeping commands: `empeval study list`, `empeval annotators list STUDY`, `empeval annotators
forget NAME --study S` (attached to their groups in entry.cli.study and entry.cli.annotate) and `empeval assignments
release ID`."""
from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import click

from empeval.cli.common import ROW_ID, CliContext, pass_cli

if TYPE_CHECKING:
    from sqlalchemy import Engine

    from empeval.server.annotation.annotators import RosterLine

# The store's rooms are imported by the commands that use them, not to read a command line
# (tests/test_cli_startup.py).


def text_table(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    """Rows as left-aligned columns two spaces apart, under their headers (no trailing blanks)."""
    cells = [[str(h) for h in headers], *[["-" if v is None else str(v) for v in row] for row in rows]]
    widths = [max(len(line[i]) for line in cells) for i in range(len(headers))]
    return "\n".join("  ".join(cell.ljust(width) for cell, width in zip(line, widths, strict=True)).rstrip()
                     for line in cells)


@click.command("list")
@pass_cli
def study_list(obj: CliContext) -> None:
    """Every study: its kind (likert or pairwise), whether it is open or closed, assignments submitted of the
    design's total, how many annotators were handed work, and when it was created (UTC)."""
    from empeval.server.annotation.study_list import study_summaries

    summaries = study_summaries(obj.engine())
    if not summaries:
        click.echo("no study yet: create one with `empeval study create STUDY.toml`")
        return
    click.echo(text_table(
        ["study", "kind", "status", "assignments", "annotators", "created"],
        [(s.name, s.kind, s.status, f"{s.done}/{s.total}", s.annotators, s.created_at.strftime("%Y-%m-%d %H:%M"))
         for s in summaries]))


def flagged_pseudonyms(engine: Engine, study: str) -> set[str] | None:
    """The pseudonyms the study kind's quality rules flag from its answers so far (the report's rules and
    thresholds), or None for a kind without such rules. Cost: one export and one quality check, well under a second
    for a pilot."""
    import pandas as pd

    from empeval.analysis.report.study import flagged_raters
    from empeval.server.annotation.export import report_inputs

    inputs = report_inputs(engine, study)
    return flagged_raters(inputs.kind, pd.DataFrame(inputs.rows), {"name": study, **inputs.meta})


@click.command("list")
@click.argument("study")
@pass_cli
def annotators_list(obj: CliContext, study: str) -> None:
    """The annotators of STUDY (everyone handed work in it, or revoked there): pseudonym (as in the exports), the
    name she was invited under, assignments submitted, the assignment in progress (free it with `empeval assignments
    release ID`), whether she is revoked or withdrawn, and whether the report's quality rules flag her so far."""
    from empeval.server.annotation.annotators import study_roster

    engine = obj.engine()
    roster = study_roster(engine, study)
    if not roster:
        click.echo(f"no annotator has started study {study} yet: `empeval annotators invite NAME --study {study}`")
        return
    flagged = flagged_pseudonyms(engine, study)
    # "submitted" counts assignments; "holding" names the one she holds now (#id, what `assignments release` takes).
    click.echo(text_table(["pseudonym", "name", "submitted", "holding", "revoked", "withdrawn", "flagged"],
                          [_roster_row(line, flagged) for line in roster]))


def _roster_row(line: RosterLine, flagged: set[str] | None) -> tuple[object, ...]:
    flag = None if flagged is None or line.withdrawn else ("yes" if line.pseudonym in flagged else "no")
    holding = f"#{line.in_progress}" if line.in_progress is not None else None
    return (line.pseudonym, line.name, line.done, holding, "yes" if line.revoked else "no",
            "yes" if line.withdrawn else "no", flag)


@click.command("forget")
@click.argument("name")
@click.option("--study", required=True, help="The study she withdraws from.")
@click.option("--provider", default="local", show_default=True,
              help="Whose annotator NAME is: local (NAME as invited) or a crowd provider (NAME is the worker id).")
@click.option("--vacuum-full", is_flag=True,
              help="PostgreSQL: rewrite the tables she was removed from (VACUUM FULL), so that no table file keeps "
                   "her deleted rows; it locks those tables while it runs. SQLite needs nothing more.")
@pass_cli
def annotators_forget(obj: CliContext, name: str, study: str, provider: str, vacuum_full: bool) -> None:
    """Withdraw participant NAME from STUDY: her ratings, choices and comments there are deleted (they leave every
    export and the report), her assignments go back to the pool for someone else, and, once she takes part in no
    other study, her name is deleted and her pseudonym replaced by a tombstone. Recorded in the study's log; running
    it again changes nothing."""
    from empeval.server.annotation.withdraw import forget, scrub_storage

    engine = obj.engine()
    done = forget(engine, name, study=study, provider=provider)
    scrub = scrub_storage(engine, study, vacuum_full=vacuum_full)
    if done.already:
        click.echo(f"{name} was withdrawn from study {study} already: nothing left to remove")
        click.echo(f"storage: {scrub.done}")
        if scrub.remains:
            click.echo(f"note: {scrub.remains}")
        return
    click.echo(f"{name} withdrawn from study {study}: {done.answers_removed} {done.answers} and "
               f"{done.comments_removed} comment(s) deleted; {done.reopened} submitted assignment(s) "
               f"and {done.in_progress_expired} in progress back in the pool for other raters")
    if done.name_removed:
        click.echo("her name is deleted and her pseudonym replaced by a tombstone; her invite links no longer work")
    elif done.name_kept_for:
        click.echo(f"her name is kept: she still takes part in {', '.join(done.name_kept_for)} (forget her there "
                   f"too to delete it)")
    if done.released_in:
        click.echo(f"her answers are still in {len(done.released_in)} export(s) or report(s) written before: "
                   f"{'; '.join(done.released_in)}. Delete them or write them again from the store.")
    click.echo(f"storage: {scrub.done}")
    if scrub.remains:
        click.echo(f"note: {scrub.remains}")


@click.group()
def assignments() -> None:
    """Manage single assignments."""


@assignments.command("release")
@click.argument("assignment_id", type=ROW_ID)
@pass_cli
def assignments_release(obj: CliContext, assignment_id: int) -> None:
    """Put the in-progress assignment ASSIGNMENT_ID (abandoned by its rater) back in the pool now, before it expires:
    nothing of it was stored. A submitted assignment is refused (exit 2). `empeval annotators list STUDY` shows who
    holds which."""
    from empeval.server.annotation.release import release_assignment

    released = release_assignment(obj.engine(), assignment_id)
    click.echo(f"assignment {released.assignment_id} of study {released.study} (held by {released.annotator}) is "
               f"back in the pool")
