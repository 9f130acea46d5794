"""`empeval demo`: the first thing a newcomer runs.

For now it imports the bundled ED sample into a fresh SQLite file and prints a summary; the full demo
(systems, a study, a simulated crowd, the report) grows here as those parts land.
"""
from __future__ import annotations

from pathlib import Path

import click

from server.cli.common import CliContext, reports_errors
from server.cli.data import BUNDLED_SAMPLE, ED_DATASET, ED_LICENSE, ED_SOURCE, print_summary
from server.datasets.ed_csv import parse_ed_csv
from server.datasets.importer import import_dialogues
from server.progress import progress_bar


@click.command()
@click.option("--workdir", type=click.Path(file_okay=False, path_type=Path), default=Path("var/demo"),
              show_default=True, help="Folder for the demo's database and outputs (emptied first).")
@reports_errors
def demo(workdir: Path) -> None:
    """Run the demo on the bundled EmpatheticDialogues sample, in a fresh SQLite database."""
    workdir.mkdir(parents=True, exist_ok=True)
    db_file = workdir / "demo.db"
    for suffix in ("", "-wal", "-shm"):
        Path(f"{db_file}{suffix}").unlink(missing_ok=True)
    obj = CliContext(database_url=f"sqlite:///{db_file.resolve()}")
    dialogues = [d for split in ("train", "test") for d in parse_ed_csv(BUNDLED_SAMPLE / f"{split}.csv", split)]
    with progress_bar() as progress:
        task = progress.add_task("importing the bundled ED sample", total=len(dialogues))
        result = import_dialogues(obj.engine(), dialogues, dataset=ED_DATASET, source=ED_SOURCE + ", bundled sample",
                                  license=ED_LICENSE, progress=lambda n: progress.advance(task, n))
    click.echo(result.describe())
    print_summary(obj, ED_DATASET)
    click.echo(f"\ndatabase: {db_file}")
    click.echo("next: `empeval --database-url sqlite:///" f"{db_file} data summary`")
