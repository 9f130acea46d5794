"""The methods paragraph's sentence on a study's qualification: how many raters qualified and how many failed.

``meta["qualification"]`` (absent for a study without one, or an export read without its study) holds the pass rule
and the counts the store read (server.annotation.qualification.qualification_meta): ``items``, ``min_correct``,
``attempts``, ``passed``, ``failed`` and ``undecided`` (raters who started it and neither passed nor failed yet).

>>> qualification_sentence({"qualification": {"items": 4, "min_correct": 3, "attempts": 1, "passed": 12,
...                                           "failed": 3, "undecided": 1}})  # doctest: +NORMALIZE_WHITESPACE
'Before their first assignment raters went through a qualification of 4 gold items with feedback after each (3
right to pass, one attempt): 12 qualified and 3 failed (1 had not finished it); only raters who qualified were
given work.'
>>> qualification_sentence({})
''
"""
from __future__ import annotations

from typing import Any


def qualification_sentence(meta: dict[str, Any]) -> str:
    """One sentence for the methods paragraph: the qualification's rule and how many raters qualified or failed; ""
    without a qualification."""
    rule = meta.get("qualification")
    if not rule:
        return ""
    items, attempts = rule.get("items", 0), rule.get("attempts", 1)
    tries = "one attempt" if attempts == 1 else f"up to {attempts} attempts"
    text = (f"Before their first assignment raters went through a qualification of {_count(items, 'gold item')} with "
            f"feedback after each ({rule.get('min_correct', items)} right to pass, {tries}): "
            f"{rule.get('passed', 0)} qualified and {rule.get('failed', 0)} failed")
    if rule.get("undecided"):
        text += f" ({rule['undecided']} had not finished it)"
    return text + "; only raters who qualified were given work."


def _count(n: int, what: str) -> str:
    return f"{n} {what}{'' if n == 1 else 's'}"
