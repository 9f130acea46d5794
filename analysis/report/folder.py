"""A report's folder is replaced whole or not at all: its files are written to a new folder beside it, which is
then renamed into its place. An interrupted run (killed, out of disk, an error halfway) leaves the previous report,
if there was one, as it was, and never a folder holding some of the new files.

With a previous report in the folder, the two folders are swapped in one step (Linux's renameat2 with
RENAME_EXCHANGE) and the old one is removed after; where that call does not exist, the old folder is renamed aside
first, so for an instant there is no folder at all (never a half one). The working folders are hidden siblings,
``.NAME.partial-PID-XXXX`` (being written) and ``.NAME.replaced-PID-XXXX`` (the previous report, being removed);
those a killed run left behind are removed by the next run into the same folder once their process is gone.

A folder holding anything a report does not write is refused (ReportRefused): replacing it would delete the other
files.

>>> import tempfile
>>> target = Path(tempfile.mkdtemp()) / "pilot"
>>> with replaced_folder(target) as folder:
...     _ = (folder / "report.md").write_text("# Pilot")
>>> sorted(path.name for path in target.parent.iterdir())
['pilot']
"""
from __future__ import annotations

import ctypes
import ctypes.util
import errno
import os
import re
import secrets
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from empeval.analysis.errors import ReportRefused

#: What a report folder holds (analysis.report.sections.write_report and report.json): anything else in the target
#: folder makes it refuse to replace the folder.
REPORT_ENTRIES = frozenset({"report.md", "report.html", "report.json", "tables", "figures", "latex"})
_AT_FDCWD = -100
_RENAME_EXCHANGE = 2


@contextmanager
def replaced_folder(target: Path) -> Iterator[Path]:
    """A new, empty folder beside `target` to write the report into; when the block finishes it replaces `target`
    (created if missing), and when the block raises it is removed and `target` stays as it was. ReportRefused
    before anything is written when `target` is a file or holds anything a report does not write."""
    target = Path(target).resolve()
    _check_replaceable(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    _remove_leftovers(target)
    work = target.with_name(f".{target.name}.partial-{os.getpid()}-{secrets.token_hex(4)}")
    work.mkdir()  # the mode a plain mkdir of the report folder would have had
    try:
        yield work
        _put_in_place(work, target)
    finally:
        shutil.rmtree(work, ignore_errors=True)  # gone already when it was put in place


def _check_replaceable(target: Path) -> None:
    if target.exists() and not target.is_dir():
        raise ReportRefused(f"{target} is a file; the report goes to a folder: name a folder with --out")
    if not target.is_dir():
        return
    others = sorted(entry.name for entry in target.iterdir() if entry.name not in REPORT_ENTRIES)
    if others:
        listed = ", ".join(others[:5]) + (f" and {len(others) - 5} more" if len(others) > 5 else "")
        raise ReportRefused(f"{target} holds files a report does not write ({listed}): a report replaces its whole "
                            "folder, so it would delete them. Name a new or empty folder with --out, or move them")


def _put_in_place(work: Path, target: Path) -> None:
    """`work` at `target`'s path: renamed there, or swapped with the previous report, which is then removed."""
    try:
        os.rename(work, target)  # no previous report: one atomic step
        return
    except OSError as error:
        if error.errno not in (errno.ENOTEMPTY, errno.EEXIST):
            raise
    if _exchange(work, target):  # `work` now holds the previous report
        shutil.rmtree(work, ignore_errors=True)
        return
    aside = target.with_name(f".{target.name}.replaced-{os.getpid()}-{secrets.token_hex(4)}")
    os.rename(target, aside)
    os.rename(work, target)
    shutil.rmtree(aside, ignore_errors=True)


def _exchange(first: Path, second: Path) -> bool:
    """Swap two paths in one step (renameat2 with RENAME_EXCHANGE); False where the system cannot."""
    libc_name = ctypes.util.find_library("c")
    libc = ctypes.CDLL(libc_name, use_errno=True) if libc_name else None
    renameat2 = getattr(libc, "renameat2", None)
    if renameat2 is None:
        return False
    if renameat2(_AT_FDCWD, os.fsencode(first), _AT_FDCWD, os.fsencode(second), _RENAME_EXCHANGE) == 0:
        return True
    code = ctypes.get_errno()
    if code in (errno.EINVAL, errno.ENOSYS, errno.ENOTSUP):  # a file system or kernel without the exchange
        return False
    raise OSError(code, os.strerror(code), str(second))


def _remove_leftovers(target: Path) -> None:
    """Remove the working folders of earlier runs into `target` whose process is gone (killed mid-run)."""
    pattern = re.compile(rf"\.{re.escape(target.name)}\.(?:partial|replaced)-(\d+)-[0-9a-f]+")
    for entry in target.parent.iterdir():
        found = pattern.fullmatch(entry.name)
        if found and not _running(int(found.group(1))):
            shutil.rmtree(entry, ignore_errors=True)


def _running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process
        return True
    return True
