"""Report tables as LaTeX booktabs tables (``\\toprule``, ``\\midrule``, ``\\bottomrule``), ready to paste into a
paper that loads ``booktabs``.

Cells are the report's text cells (``empeval.analysis.report.tables``): ``**bold**`` becomes ``\\textbf{}``, the
significance mark a superscript dagger, and the few non-ASCII symbols the report prints become math. Everything
else, system names above all (study data is untrusted input), is escaped: ``\\ & % $ # _ { } ~ ^ < >``.

Columns of numbers are right-aligned (``r``: a cell may carry a CI in brackets, a sign, bold or the significance
mark, which siunitx ``S`` columns would not parse) and columns of words left-aligned (``l``), so the tables need
no package beyond booktabs.
"""

from __future__ import annotations

import re

import pandas as pd

_SPECIAL = {
    "\\": r"\textbackslash{}", "&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#", "_": r"\_", "{": r"\{",
    "}": r"\}", "~": r"\textasciitilde{}", "^": r"\textasciicircum{}", "<": r"\textless{}", ">": r"\textgreater{}",
}
# The symbols the report's cells and captions use, as LaTeX that needs no package beyond booktabs.
_SYMBOLS = {
    "†": r"\textsuperscript{\dag}", "–": "--", "−": "$-$", "Δ": r"$\Delta$", "α": r"$\alpha$", "χ": r"$\chi$",
    "²": r"\textsuperscript{2}", "×": r"$\times$", "±": r"$\pm$", "≥": r"$\geq$", "≤": r"$\leq$", "…": r"\ldots{}",
    "λ": r"$\lambda$", "ρ": r"$\rho$",
}
_BOLD = re.compile(r"\*\*(.+?)\*\*")
# What a cell of a number column may hold besides digits: a sign, a decimal point, a CI in brackets, a range or
# a count in parentheses, counts split by " / ", a percent sign, bold, the significance mark, "< 0.001", and
# "n/a" (with its reason in parentheses) or "–" for no value.
_NUMBER = r"[-−+]?\d[\d.,]*(–\d[\d.,]*)?%?"
_NUMBER_CELL = re.compile(rf"(< )?{_NUMBER}( / {_NUMBER})*( ?[(\[]{_NUMBER}(, {_NUMBER})?[)\]])*( †)?")
_NO_VALUE = {"n/a", "–", "-", ""}


def escape(text: object) -> str:
    """``text`` with LaTeX's special characters escaped and the report's symbols written as LaTeX.

    >>> escape("moel_v2 & co. 100% #1")
    'moel\\\\_v2 \\\\& co. 100\\\\% \\\\#1'
    """
    return "".join(_SPECIAL.get(char) or _SYMBOLS.get(char) or char for char in str(text))


def cell(text: object) -> str:
    """A report cell in LaTeX: escaped, with ``**bold**`` as ``\\textbf{...}``."""
    parts = _BOLD.split(str(text))
    return "".join(rf"\textbf{{{escape(part)}}}" if i % 2 else escape(part) for i, part in enumerate(parts))


def is_number_cell(text: object) -> bool:
    """Whether a report cell is a number (with its CI, sign, bold or significance mark) or says there is none.

    >>> [is_number_cell(c) for c in ("**4.10 [3.90, 4.30]**", "−0.25", "3–5 (9–15)", "< 0.001", "1 / 1 / 2", "moel")]
    [True, True, True, True, True, False]
    """
    plain = _BOLD.sub(r"\1", str(text)).strip()
    return plain in _NO_VALUE or plain.startswith("n/a (") or _NUMBER_CELL.fullmatch(plain) is not None


def alignment(frame: pd.DataFrame) -> str:
    """The tabular column spec of ``frame``: ``r`` for a column whose every cell is a number (is_number_cell)
    and that has at least one, ``l`` for the others and always for the first (the row's name).

    >>> alignment(pd.DataFrame({"System": ["a"], "n": ["3 (9)"], "Empathy": ["4.00 [3.50, 4.50]"], "sig.": ["no"]}))
    'lrrl'
    """
    spec = []
    for index in range(len(frame.columns)):
        cells = [str(value) for value in frame.iloc[:, index]]
        numbers = index > 0 and bool(cells) and all(is_number_cell(c) for c in cells) and any(
            _BOLD.sub(r"\1", c).strip() not in _NO_VALUE for c in cells)
        spec.append("r" if numbers else "l")
    return "".join(spec)


def booktabs(frame: pd.DataFrame, *, caption: str = "", label: str = "", align: str | None = None) -> str:
    """One ``table`` environment holding a booktabs ``tabular`` of ``frame`` (its columns as the header, its
    cells as text): columns of numbers right-aligned, the others left-aligned (``alignment``; ``align`` gives
    the spec instead, one letter per column). ``caption`` and ``label`` are written when given."""
    columns = len(frame.columns)
    spec = align if align is not None else alignment(frame)
    if len(spec) != columns or set(spec) - set("lcr"):
        raise ValueError(f"booktabs: align {spec!r} must be one of l, c, r per column ({columns} columns)")
    lines = [r"\begin{table}[ht]", r"\centering"]
    if caption:
        lines.append(rf"\caption{{{cell(caption)}}}")
    if label:
        lines.append(rf"\label{{{re.sub(r'[^A-Za-z0-9:._-]', '-', label)}}}")
    lines += [rf"\begin{{tabular}}{{{spec}}}", r"\toprule",
              _guarded(" & ".join(cell(c) for c in frame.columns)) + r" \\", r"\midrule"]
    # A row starting with "[" would read as the optional argument of the previous row's \\: "{}" ends that.
    lines += [_guarded(" & ".join(cell(value) for value in row)) + r" \\" for row in frame.itertuples(index=False)]
    lines += [r"\bottomrule", r"\end{tabular}", r"\end{table}", ""]
    return "\n".join(lines)


def _guarded(row: str) -> str:
    return "{}" + row if row.startswith("[") else row
