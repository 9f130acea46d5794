"""Download the official EmpatheticDialogues archive and unpack it (for machines that are online)."""
from __future__ import annotations

import tarfile
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path

from empeval.server.errors import Unavailable

OFFICIAL_ED_URL = "https://dl.fbaipublicfiles.com/parlai/empatheticdialogues/empatheticdialogues.tar.gz"


class DownloadError(Unavailable):
    """The download failed; the message says how."""


def download(url: str, destination: Path, *, timeout: float = 60.0,
             on_size: Callable[[int | None], None] | None = None,
             on_chunk: Callable[[int], None] | None = None) -> Path:
    """Stream `url` to `destination` (written to a .part file and renamed when complete)."""
    destination.parent.mkdir(parents=True, exist_ok=True)
    partial = destination.with_name(destination.name + ".part")
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response, open(partial, "wb") as out:
            length = response.headers.get("Content-Length")
            if on_size:
                on_size(int(length) if length else None)
            while chunk := response.read(1 << 16):
                out.write(chunk)
                if on_chunk:
                    on_chunk(len(chunk))
    except (urllib.error.URLError, TimeoutError, OSError) as error:
        partial.unlink(missing_ok=True)
        reason = getattr(error, "reason", error)
        raise DownloadError(f"could not download {url}: {reason}") from None
    partial.replace(destination)
    return destination


def extract_ed_archive(archive: Path, destination: Path) -> Path:
    """Unpack the archive and return the folder holding train.csv, valid.csv and test.csv."""
    try:
        with tarfile.open(archive, "r:*") as tar:
            # The 'data' filter refuses absolute paths, links out of the folder and device files.
            tar.extractall(destination, filter="data")
    except (tarfile.TarError, OSError) as error:
        raise DownloadError(f"{archive}: not a readable tar archive ({error})") from None
    for candidate in [destination, *sorted(p for p in destination.rglob("*") if p.is_dir())]:
        if all((candidate / f"{split}.csv").is_file() for split in ("train", "valid", "test")):
            return candidate
    raise DownloadError(f"{archive}: no folder with train.csv, valid.csv and test.csv inside")

