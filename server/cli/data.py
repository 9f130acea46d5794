"""`empeval data ...`: getting dialogues into the store."""
from __future__ import annotations

import tempfile
from pathlib import Path

import click

from server.cli.common import CliContext, NetworkError, pass_cli, reports_errors
from server.datasets.ed_csv import ed_split_files, parse_ed_csv
from server.datasets.fetch import OFFICIAL_ED_URL, DownloadError, download, extract_ed_archive
from server.datasets.importer import import_dialogues
from server.datasets.jsonl import parse_dialogues_jsonl
from server.datasets.summary import summarize
from server.progress import progress_bar

ED_DATASET = "empatheticdialogues"
ED_SOURCE = "EmpatheticDialogues (Rashkin et al., ACL 2019)"
ED_LICENSE = "CC BY-NC 4.0"
BUNDLED_SAMPLE = Path(__file__).resolve().parent.parent / "data" / "ed_sample"


@click.group()
def data() -> None:
    """Import dialogues (EmpatheticDialogues or your own) and show what is stored."""


def import_with_progress(obj: CliContext, dialogues, *, label: str, dataset: str, source: str, license: str) -> None:
    """Import parsed dialogues in one transaction behind a progress bar, then print what the store holds."""
    with progress_bar() as progress:
        task = progress.add_task(label, total=len(dialogues))
        result = import_dialogues(obj.engine(), dialogues, dataset=dataset, source=source, license=license,
                                  progress=lambda n: progress.advance(task, n))
    click.echo(result.describe())
    print_summary(obj, dataset)


def import_ed_path(obj: CliContext, path: Path, split: str, dataset: str) -> None:
    """Parse every requested split first (so a bad line stops everything), then import in one transaction."""
    dialogues = []
    for file, file_split in ed_split_files(path, split):
        dialogues += parse_ed_csv(file, file_split)
    import_with_progress(obj, dialogues, label=f"importing {path.name}", dataset=dataset, source=ED_SOURCE,
                         license=ED_LICENSE)


def import_bundled_sample(obj: CliContext, label: str = "importing the bundled ED sample") -> None:
    """Import the sample shipped in server/data/ed_sample (its train and test splits)."""
    dialogues = [d for split in ("train", "test") for d in parse_ed_csv(BUNDLED_SAMPLE / f"{split}.csv", split)]
    import_with_progress(obj, dialogues, label=label, dataset=ED_DATASET, source=ED_SOURCE + ", bundled sample",
                         license=ED_LICENSE)


def print_summary(obj: CliContext, dataset: str | None = None) -> None:
    """Plain text (not a rich table), so the summary reads the same in a terminal, a log and a pipe."""
    rows = summarize(obj.engine(), dataset)
    if not rows:
        click.echo("no dialogues stored" + (f" in dataset {dataset!r}" if dataset else ""))
        return
    click.echo(f"{'dataset':<22}{'split':<7}{'dialogues':>11}{'utterances':>12}{'contexts':>10}{'emotions':>10}")
    for r in rows:
        click.echo(f"{r.dataset:<22}{r.split:<7}{r.dialogues:>11,}{r.turns:>12,}{r.contexts:>10,}{r.emotions:>10}")


@data.command("import-ed")
@click.argument("path", type=click.Path(path_type=Path))
@click.option("--split", default="all", show_default=True,
              help="train, valid, test or all (PATH is the ED folder, or one CSV file).")
@click.option("--dataset", default=ED_DATASET, show_default=True, help="Name to store the dialogues under.")
@pass_cli
@reports_errors
def import_ed(obj: CliContext, path: Path, split: str, dataset: str) -> None:
    """Import EmpatheticDialogues CSVs in the original layout (8 fields, `_comma_`, unquoted).

    Builds dialogues, turns and one context per listener turn. The whole import is one transaction:
    a bad line imports nothing. Re-importing the same files changes nothing.
    """
    import_ed_path(obj, path, split, dataset)


@data.command("import-sample")
@pass_cli
@reports_errors
def import_sample(obj: CliContext) -> None:
    """Import the ED sample bundled with empeval (320 test and 1,600 train conversations)."""
    import_bundled_sample(obj)


@data.command("import-jsonl")
@click.argument("path", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--dataset", required=True, help="Name to store these dialogues under (e.g. my-clinic-2026).")
@click.option("--license", "license_", default="", help="Licence of the data, recorded with the dataset.")
@pass_cli
@reports_errors
def import_jsonl(obj: CliContext, path: Path, dataset: str, license_: str) -> None:
    """Import your own dialogues, one JSON object per line.

    \b
    {"conv_id": "c1", "split": "test", "emotion": "sad", "situation": "...",
     "turns": [{"role": "speaker", "text": "..."}, {"role": "listener", "text": "..."}]}

    conv_id and turns are required; split defaults to test. Each listener turn after the first turn
    becomes a context. One transaction; re-importing is idempotent.
    """
    import_with_progress(obj, parse_dialogues_jsonl(path), label=f"importing {path.name}", dataset=dataset,
                         source=str(path), license=license_)


@data.command("fetch-ed")
@click.option("--url", default=OFFICIAL_ED_URL, show_default=True, help="Where the ED archive is.")
@click.option("--keep", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Keep the downloaded archive and unpacked CSVs in this folder.")
@click.option("--timeout", default=60.0, show_default=True, help="Seconds to wait for the server.")
@pass_cli
@reports_errors
def fetch_ed(obj: CliContext, url: str, keep: Path | None, timeout: float) -> None:
    """Download the official empatheticdialogues.tar.gz and import all three splits."""
    with tempfile.TemporaryDirectory(prefix="empeval-ed-") as scratch:
        folder = keep or Path(scratch)
        try:
            with progress_bar() as progress:
                task = progress.add_task("downloading ED", total=None)
                archive = download(url, folder / "empatheticdialogues.tar.gz", timeout=timeout,
                                   on_size=lambda n: progress.update(task, total=n),
                                   on_chunk=lambda n: progress.advance(task, n))
            ed_folder = extract_ed_archive(archive, folder / "unpacked")
        except DownloadError as error:
            raise NetworkError(str(error)) from None
        import_ed_path(obj, ed_folder, "all", ED_DATASET)


@data.command("summary")
@click.option("--dataset", default=None, help="Only this dataset.")
@pass_cli
def summary(obj: CliContext, dataset: str | None) -> None:
    """Print dialogues, utterances and contexts per dataset and split."""
    print_summary(obj, dataset)
