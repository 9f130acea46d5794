"""Imports behind a progress bar, shared by `empeval data ...` and the demo."""
from __future__ import annotations

from collections.abc import Callable, Sequence

import click
from sqlalchemy import Engine

from empeval.server.datasets.importer import import_dialogues
from empeval.server.datasets.model import ParsedDialogue
from empeval.server.datasets.sample import (
    ED_DATASET,
    ED_LICENSE,
    SAMPLE_SOURCE,
    bundled_sample_dialogues,
)
from empeval.server.datasets.summary import summarize
from empeval.server.progress import progress_bar


def import_with_progress(engine: Engine, dialogues: Sequence[ParsedDialogue], *, label: str, dataset: str,
                         source: str, license: str, echo: Callable[[str], None] = click.echo) -> None:
    """Import parsed dialogues in one transaction behind a progress bar, then print what the store holds."""
    with progress_bar() as progress:
        task = progress.add_task(label, total=len(dialogues))
        result = import_dialogues(engine, dialogues, dataset=dataset, source=source, license=license,
                                  progress=lambda n: progress.advance(task, n))
    echo(result.describe())
    print_summary(engine, dataset, echo=echo)


def import_bundled_sample(engine: Engine, label: str = "importing the bundled ED sample") -> None:
    """Import the sample shipped in server/data/ed_sample (its train and test splits)."""
    import_with_progress(engine, bundled_sample_dialogues(), label=label, dataset=ED_DATASET, source=SAMPLE_SOURCE,
                         license=ED_LICENSE)


def print_summary(engine: Engine, dataset: str | None = None, *, echo: Callable[[str], None] = click.echo) -> None:
    """Plain text (not a rich table), so the summary reads the same in a terminal, a log and a pipe."""
    rows = summarize(engine, dataset)
    if not rows:
        echo("no dialogues stored" + (f" in dataset {dataset!r}" if dataset else ""))
        return
    echo(f"{'dataset':<22}{'split':<7}{'dialogues':>11}{'utterances':>12}{'contexts':>10}{'emotions':>10}")
    for r in rows:
        echo(f"{r.dataset:<22}{r.split:<7}{r.dialogues:>11,}{r.turns:>12,}{r.contexts:>10,}{r.emotions:>10}")
