"""A structural check of generated LaTeX, standing in for a compiler that is not installed: environments
balanced and properly nested, braces balanced, every tabular row as wide as its column spec, no unescaped
special character in text."""

from __future__ import annotations

import re

_ENVIRONMENT = re.compile(r"\\(begin|end)\{([^}]*)\}")
_UNESCAPED = re.compile(r"(?<!\\)[&%#_$]")


def _unescaped_braces(text: str) -> tuple[int, int]:
    plain = re.sub(r"\\[{}]", "", text.replace("\\\\", ""))
    return plain.count("{"), plain.count("}")


def tabular_rows(tex: str) -> list[list[str]]:
    """The cells of each row of the (first) tabular, header first, rules left out."""
    body = tex.split(r"\toprule", 1)[1].split(r"\bottomrule", 1)[0].replace(r"\midrule", "")
    rows = [row.strip() for row in body.split("\\\\") if row.strip()]
    return [[cell.strip().removeprefix("{}") for cell in re.split(r"(?<!\\)&", row)] for row in rows]


def latex_problems(tex: str) -> list[str]:
    """What would stop the LaTeX from compiling, as sentences; empty when nothing is found."""
    problems = []
    stack: list[str] = []
    for kind, name in _ENVIRONMENT.findall(tex):
        if kind == "begin":
            stack.append(name)
        elif not stack or stack.pop() != name:
            problems.append(f"\\end{{{name}}} closes nothing open")
    problems += [f"\\begin{{{name}}} never closed" for name in stack]
    opened, closed = _unescaped_braces(tex)
    if opened != closed:
        problems.append(f"{opened} '{{' against {closed} '}}'")
    spec = re.search(r"\\begin\{tabular\}\{([^}]*)\}", tex)
    if spec is None:
        return [*problems, "no tabular"]
    columns = len(re.findall(r"[lcrpX]", spec.group(1)))
    try:
        rows = tabular_rows(tex)
    except IndexError:
        return [*problems, "no booktabs rules"]
    for number, row in enumerate(rows):
        if len(row) != columns:
            problems.append(f"row {number} has {len(row)} cells, the tabular {columns}")
        for cell in row:
            if _UNESCAPED.search(cell):
                problems.append(f"row {number}: unescaped special character in {cell!r}")
    return problems
