"""`empeval notebook`: a copy of the walkthrough notebook (analysis/notebooks/study_walkthrough.ipynb) in a folder of
yours, to run on your study's export: the tables and plots of the report, step by step, as code you can change."""
from __future__ import annotations

import shutil
from pathlib import Path

import click

from empeval.cli.common import EXIT_CONFLICT, WritablePath, fail

NOTEBOOK = "study_walkthrough.ipynb"


def walkthrough_path() -> Path:
    """Where the installed walkthrough notebook is (package data of empeval.analysis)."""
    import empeval.analysis

    return Path(empeval.analysis.__file__).resolve().parent / "notebooks" / NOTEBOOK


@click.command()
@click.option("--out", type=WritablePath(dir_okay=False, writable=True, path_type=Path), default=Path(NOTEBOOK),
              show_default=True, help="Where to write the copy.")
@click.option("--force", is_flag=True, help="Replace a file already at --out.")
def notebook(out: Path, force: bool) -> None:
    """Copy the walkthrough notebook here (or to --out), to run on a study's export: the report's tables and plots
    step by step. Run it with `EMPEVAL_EXPORT=STUDY.csv jupyter execute study_walkthrough.ipynb` (written in
    place with --inplace), or open it in Jupyter; EMPEVAL_N_BOOT sets the bootstrap resamples (default 2000)."""
    if out.exists() and not force:
        fail(f"{out} exists: pass --force to replace it, or --out another file", EXIT_CONFLICT)
    out.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(walkthrough_path(), out)
    click.echo(f"{out} written; run it on your export: EMPEVAL_EXPORT=STUDY.csv jupyter execute --inplace {out}")
