"""Report tables as LaTeX booktabs tables (``\\toprule``, ``\\midrule``, ``\\bottomrule``), ready to paste into a
paper that loads ``booktabs``.

Cells are the report's text cells (``empeval.analysis.report.tables``): ``**bold**`` becomes ``\\textbf{}``, the
significance mark a superscript dagger, and the few non-ASCII symbols the report prints become math. Everything
else, system names above all (study data is untrusted input), is escaped: ``\\ & % $ # _ { } ~ ^ < >``.
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


def booktabs(frame: pd.DataFrame, *, caption: str = "", label: str = "") -> str:
    """One ``table`` environment holding a booktabs ``tabular`` of ``frame`` (its columns as the header, its
    cells as text), the first column left-aligned and the others left-aligned too (cells are text with
    intervals, not bare numbers). ``caption`` and ``label`` are written when given."""
    columns = len(frame.columns)
    lines = [r"\begin{table}[ht]", r"\centering"]
    if caption:
        lines.append(rf"\caption{{{cell(caption)}}}")
    if label:
        lines.append(rf"\label{{{re.sub(r'[^A-Za-z0-9:._-]', '-', label)}}}")
    lines += [rf"\begin{{tabular}}{{{'l' * columns}}}", r"\toprule",
              _guarded(" & ".join(cell(c) for c in frame.columns)) + r" \\", r"\midrule"]
    # A row starting with "[" would read as the optional argument of the previous row's \\: "{}" ends that.
    lines += [_guarded(" & ".join(cell(value) for value in row)) + r" \\" for row in frame.itertuples(index=False)]
    lines += [r"\bottomrule", r"\end{tabular}", r"\end{table}", ""]
    return "\n".join(lines)


def _guarded(row: str) -> str:
    return "{}" + row if row.startswith("[") else row
