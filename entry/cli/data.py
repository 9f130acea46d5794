"""`empeval data ...`: getting dialogues into the store."""
from __future__ import annotations

import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

import click

from empeval.cli.common import ED_DATASET, CliContext, WritablePath, pass_cli, positive
from empeval.server.datasets.fetch import OFFICIAL_ED_URL  # the standard library only

if TYPE_CHECKING:
    from sqlalchemy import Engine

# The parsers and the importer (the store's models) are imported by the commands that use them, not to read a
# command line (tests/test_cli_startup.py).


@click.group()
def data() -> None:
    """Import dialogues (EmpatheticDialogues or your own) and show what is stored."""


def import_ed_path(engine: Engine, path: Path, split: str, dataset: str) -> None:
    """Parse every requested split first (so a bad line stops everything), then import in one transaction."""
    from empeval.importing import import_with_progress
    from empeval.server.datasets.ed_csv import ed_split_files, parse_ed_csv
    from empeval.server.datasets.sample import ED_LICENSE, ED_SOURCE

    dialogues = []
    for file, file_split in ed_split_files(path, split):
        dialogues += parse_ed_csv(file, file_split)
    import_with_progress(engine, dialogues, label=f"importing {path.name}", dataset=dataset, source=ED_SOURCE,
                         license=ED_LICENSE)


@data.command("import-ed")
@click.argument("path", type=click.Path(exists=True, path_type=Path))
@click.option("--split", default="all", show_default=True,
              help="train, valid, test or all (PATH is the ED folder, or one CSV file).")
@click.option("--dataset", default=ED_DATASET, show_default=True, help="Name to store the dialogues under.")
@pass_cli
def import_ed(obj: CliContext, path: Path, split: str, dataset: str) -> None:
    """Import EmpatheticDialogues CSVs in the original layout (8 fields, `_comma_`, unquoted).

    Builds dialogues, turns and one context per listener turn. The whole import is one transaction:
    a bad line imports nothing. Re-importing the same files changes nothing.
    """
    import_ed_path(obj.engine(), path, split, dataset)


@data.command("import-sample")
@pass_cli
def import_sample(obj: CliContext) -> None:
    """Import the ED sample bundled with empeval (320 test and 1,600 train conversations)."""
    from empeval.importing import import_bundled_sample

    import_bundled_sample(obj.engine())


@data.command("import-jsonl")
@click.argument("path", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--dataset", required=True, help="Name to store these dialogues under (e.g. my-clinic-2026).")
@click.option("--license", "license_", default="", help="Licence of the data, recorded with the dataset.")
@pass_cli
def import_jsonl(obj: CliContext, path: Path, dataset: str, license_: str) -> None:
    """Import your own dialogues, one JSON object per line.

    \b
    {"conv_id": "c1", "split": "test", "emotion": "sad", "situation": "...",
     "turns": [{"role": "speaker", "text": "..."}, {"role": "listener", "text": "..."}]}

    conv_id and turns are required; split defaults to test. Each listener turn after the first turn
    becomes a context. One transaction; re-importing is idempotent.
    """
    from empeval.importing import import_with_progress
    from empeval.server.datasets.jsonl import parse_dialogues_jsonl

    import_with_progress(obj.engine(), parse_dialogues_jsonl(path), label=f"importing {path.name}", dataset=dataset,
                         source=str(path), license=license_)


@data.command("fetch-ed")
@click.option("--url", default=OFFICIAL_ED_URL, show_default=True, help="Where the ED archive is.")
@click.option("--keep", type=WritablePath(file_okay=False, writable=True, path_type=Path), default=None,
              help="Keep the downloaded archive and unpacked CSVs in this folder.")
@click.option("--timeout", type=positive(3600), default=60.0, show_default=True, help="Seconds to wait for the server.")
@pass_cli
def fetch_ed(obj: CliContext, url: str, keep: Path | None, timeout: float) -> None:
    """Download the official empatheticdialogues.tar.gz and import all three splits."""
    from empeval.server.datasets.fetch import download, extract_ed_archive
    from empeval.server.progress import progress_bar

    with tempfile.TemporaryDirectory(prefix="empeval-ed-") as scratch:
        folder = keep or Path(scratch)
        with progress_bar() as progress:
            task = progress.add_task("downloading ED", total=None)
            archive = download(url, folder / "empatheticdialogues.tar.gz", timeout=timeout,
                               on_size=lambda n: progress.update(task, total=n),
                               on_chunk=lambda n: progress.advance(task, n))
        ed_folder = extract_ed_archive(archive, folder / "unpacked")
        import_ed_path(obj.engine(), ed_folder, "all", ED_DATASET)


@data.command("summary")
@click.option("--dataset", default=None, help="Only this dataset.")
@pass_cli
def summary(obj: CliContext, dataset: str | None) -> None:
    """Print dialogues, utterances and contexts per dataset and split."""
    from empeval.importing import print_summary

    print_summary(obj.engine(), dataset)
