"""Errors about input files: each says which file, which line, and what was wrong."""
from __future__ import annotations

from pathlib import Path

from empeval.server.errors import BadInput, Conflict


class InputFileError(BadInput):
    """A file that cannot be imported. Nothing of it has been written."""

    def __init__(self, path: Path | str, line: int | None, reason: str):
        self.path = str(path)
        self.line = line
        self.reason = reason
        where = f"{self.path}:{line}" if line is not None else self.path
        super().__init__(f"{where}: {reason} (nothing was imported)")


class ImportConflictError(Conflict):
    """The file disagrees with what is already stored (same dialogue id, different content)."""


def read_utf8_lines(path: Path) -> list[str]:
    """The file's lines (without line ends), or an InputFileError naming the line with bad UTF-8."""
    raw = Path(path).read_bytes()
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as error:
        line = raw.count(b"\n", 0, error.start) + 1
        raise InputFileError(path, line, f"not UTF-8 (byte 0x{raw[error.start]:02x} at offset {error.start})") from None
    if text.startswith("\ufeff"):
        text = text[1:]
    return text.splitlines()
