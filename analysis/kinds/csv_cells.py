"""How an export's cells are written to CSV and read back, defined once: the store's exporter writes with
`write_csv` (server.annotation.export) and every kind's reader reads with `read_csv_table` (or `restore` per cell).

Formula cells. A spreadsheet that opens a CSV runs a cell starting with ``=``, ``+``, ``-`` or ``@`` as a formula,
and some also one starting with a TAB or a carriage return ("CSV injection", OWASP). Raters write comments, ACUTE
justifications and chat utterances, so an export must not hand their text to a spreadsheet as a formula. As OWASP
recommends, a text cell starting with one of those six characters is written with a single quote in front (the
spreadsheet shows it as text: ``=1+1`` is written ``'=1+1``). So that the quote can be taken off again without
guessing, a cell that already starts with quotes followed by one of them gets one more (``'=x`` is written
``''=x``); any other cell is written as it is (``'tis`` stays ``'tis``). Our readers take that one quote off, so the
statistics and the report see the text as the rater wrote it. A spreadsheet user sees the quote; a program of
one's own reading the CSV should call `restore` on each cell (JSON lines exports are written as they are).

Line breaks. Every cell holding a carriage return or a line feed is quoted (RFC 4180), so a comment
``"\\r=1+1"`` stays one cell of one row in every reader; rows end with a line feed.

>>> neutralise("=1+1"), neutralise("'=1+1"), neutralise("'tis"), neutralise("-3")
("'=1+1", "''=1+1", "'tis", "'-3")
>>> all(restore(neutralise(text)) == text for text in ("=1+1", "'=1+1", "'tis", "", "'", "@home"))
True
>>> write_csv(["comment", "score"], [["\\r=1+1", 4]])
'comment,score\\n"\\'\\r=1+1",4\\n'
"""
from __future__ import annotations

import csv
import io
import re
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pandas as pd

#: What a cell may start with that a spreadsheet runs as a formula (OWASP's list).
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")
_NEEDS_QUOTE = re.compile("'*[" + re.escape("".join(FORMULA_STARTS)) + "]")


def neutralise(cell: str) -> str:
    """The text as written to a CSV export: a single quote in front when it starts (after any quotes) with a
    character a spreadsheet runs as a formula, else unchanged."""
    return "'" + cell if _NEEDS_QUOTE.match(cell) else cell


def restore(cell: str) -> str:
    """The text a CSV export's cell holds as it was before `neutralise` (which it undoes exactly)."""
    return cell[1:] if cell.startswith("'") and _NEEDS_QUOTE.match(cell, 1) else cell


class _RowsEndingInLineFeed:
    """What csv.writer writes to: each row it writes ends in "\\r\\n" and is passed on ending in "\\n"."""

    def __init__(self, out: io.StringIO):
        self.out = out

    def write(self, row: str) -> int:
        return self.out.write(row.removesuffix("\r\n") + "\n")


def write_csv(header: Sequence[str], rows: Iterable[Sequence[Any]]) -> str:
    """The CSV text of `rows` under `header`: text cells through `neutralise`, every cell holding CR or LF quoted
    (csv.writer quotes a cell holding a character of its line terminator, so it is given "\\r\\n"; each row is
    then ended with "\\n"), other values as str() gives them."""
    out = io.StringIO()
    writer = csv.writer(_RowsEndingInLineFeed(out), lineterminator="\r\n")
    writer.writerow(header)
    writer.writerows([neutralise(value) if isinstance(value, str) else value for value in row] for row in rows)
    return out.getvalue()


def restore_column(values: pd.Series) -> pd.Series:
    """A text column of a CSV export (read as text) with `restore` applied to the cells it changes."""
    quoted = values.str.startswith("'", na=False)
    if not quoted.any():
        return values
    return values.where(~quoted, values[quoted].map(restore))


def read_csv_table(path: str | Path, error: type[Exception]) -> pd.DataFrame:
    """A CSV export as text (empty cells stay empty, ids stay strings), every cell restored (`restore`); `error`
    naming the file when it is empty (not even a header) or is no CSV pandas can read."""
    import pandas as pd

    try:
        frame = pd.read_csv(path, dtype=str, keep_default_na=False)
    except pd.errors.EmptyDataError:
        raise error(f"{path}: the file is empty; expected a header line naming the columns") from None
    except (pd.errors.ParserError, UnicodeDecodeError) as err:
        raise error(f"{path}: not a CSV file this reader can read ({str(err).strip()})") from None
    return frame.apply(restore_column) if len(frame) else frame
