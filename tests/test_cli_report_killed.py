"""`empeval report` killed with SIGKILL mid-report (issue 29, finding 7), in a real process: wherever it dies, the
report folder is the previous report, byte for byte, or the whole new one, never some of each; the working folders a
killed run leaves beside it are removed by the next run.

The process kills itself at a chosen point (the Nth file it opens for writing under the report's parent folder, the
rename that puts the new folder in place, the removal of its own working folder, which after the swap holds the old
report), so that each run dies where it is meant to rather than wherever a timer happens to fall."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
EXPORT_ROWS = 121  # the header and 120 ratings of the demo export: a small report, written in seconds

# Runs `empeval report ...` (argv[3:]) and SIGKILLs itself at POINT (argv[1]) on its Nth call (argv[2]).
KILLER = """
import builtins, io, os, shutil, signal, sys
point, nth, watched = sys.argv[1], int(sys.argv[2]), os.environ["WATCHED_FOLDER"]
calls = 0

def count(*_):
    global calls
    calls += 1
    if calls == nth:
        os.kill(os.getpid(), signal.SIGKILL)

real_open, real_rename, real_rmtree = io.open, os.rename, shutil.rmtree

def writing_open(file, mode="r", *args, **kwargs):
    named = isinstance(file, (str, bytes, os.PathLike)) and os.fsdecode(file).startswith(watched)
    if point == "write" and named and any(flag in mode for flag in "wax"):
        count()
    return real_open(file, mode, *args, **kwargs)

def rename(*args, **kwargs):
    if point == "rename":
        count()
    return real_rename(*args, **kwargs)

def rmtree(path, *args, **kwargs):
    if point == "rmtree" and f"-{os.getpid()}-" in os.fsdecode(path):  # its own folder, not an earlier run's
        count()
    return real_rmtree(path, *args, **kwargs)

builtins.open = io.open = writing_open
os.rename, shutil.rmtree = rename, rmtree
sys.argv = ["empeval", *sys.argv[3:]]
from empeval.cli import main
main()
"""

PREVIOUS = {"report.md": b"# The previous report\n", "report.html": b"<h1>The previous report</h1>\n",
            "report.json": b'{"study": "demo", "kind": "likert", "criteria": []}', "tables/system_means.csv": b"x\n1\n"}


def _files(folder: Path) -> dict[str, bytes]:
    return {str(path.relative_to(folder)): path.read_bytes() for path in sorted(folder.rglob("*")) if path.is_file()}


def _previous_report(folder: Path) -> None:
    for name, content in PREVIOUS.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_bytes(content)


def _report(parent: Path, export: Path, point: str = "none", nth: int = 0) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", KILLER, point, str(nth), "--database-url",
                           f"sqlite:///{parent.parent / 'unused.db'}", "report", "demo", "--export", str(export),
                           "--out", str(parent / "report"), "--n-boot", "100"],
                          env={**os.environ, "WATCHED_FOLDER": str(parent)}, capture_output=True, text=True,
                          timeout=300)


@pytest.mark.slow  # five real report runs: about 10 s each on the shared machine
def test_a_report_killed_anywhere_leaves_the_previous_report_or_the_whole_new_one(tmp_path):
    export = tmp_path / "demo.csv"
    lines = (REPO / "tests" / "fixtures" / "demo_export" / "demo.csv").read_text(encoding="utf-8").splitlines()
    export.write_text("\n".join(lines[:EXPORT_ROWS]) + "\n", encoding="utf-8")
    parent = tmp_path / "reports"
    parent.mkdir()
    _previous_report(parent / "report")

    for point, nth in (("write", 1), ("write", 3), ("rename", 1)):  # before the new folder is in place
        done = _report(parent, export, point, nth)
        assert done.returncode == -signal.SIGKILL, done.stderr[-2000:]
        assert _files(parent / "report") == PREVIOUS, f"killed at {point} #{nth}: not the previous report"

    done = _report(parent, export, "rmtree", 1)  # after the swap, while the previous report is being removed
    assert done.returncode == -signal.SIGKILL, done.stderr[-2000:]
    killed_after_swap = _files(parent / "report")
    assert any(name.startswith(".report.partial-") for name in os.listdir(parent))  # the old one, left beside it

    done = _report(parent, export)
    assert done.returncode == 0, done.stderr[-2000:]
    assert set(killed_after_swap) == set(_files(parent / "report"))  # the new report, whole
    assert "report.json" in killed_after_swap and killed_after_swap != PREVIOUS
    assert sorted(os.listdir(parent)) == ["report"]  # the killed runs' working folders are gone
