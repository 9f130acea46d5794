"""What the kinds' qualification hooks share (TaskKind.qualification_items and qualification_rows in tasks/kinds/):
reading a gold item's table of the study file (its fields, its conversation, its feedback, its answer per criterion)
and the panel that shows a conversation. Each kind reads its own fields with these and says what its answers are.

A gold item's conversation is written as the study file's `context`: its turns as strings, the speaker's first and
then turn about, ending with a turn of the speaker (the reply rated answers it), as EmpatheticDialogues' contexts do.

>>> from empeval.tasks.kind_parts import StudyFileReader
>>> reader = StudyFileReader("study.toml")
>>> gold_context(reader, {"context": ["I passed!", "Well done!", "Thanks, I worked hard."]}, "qualification.items[0]")
('I passed!', 'Well done!', 'Thanks, I worked hard.')
>>> gold_context(reader, {"context": ["I passed!", "Well done!"]}, "qualification.items[0]")  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
empeval...StudyFileError: study.toml: qualification.items[0].context: has 2 turns: it must end with a turn of the ...
"""
from __future__ import annotations

from typing import Any

from empeval.server.store.qualification import Panel, ShownTurn
from empeval.server.store.study_parts import Criterion
from empeval.tasks.kind_parts import StudyFileReader

ROLES = ("speaker", "listener")
MAX_CONTEXT_TURNS = 12


def gold_fields(reader: StudyFileReader, entry: dict[str, Any], path: str, required: tuple[str, ...],
                optional: tuple[str, ...] = ()) -> None:
    """StudyFileError for a field of a gold item's table that the kind does not read (naming those it does), or one
    it needs that is missing."""
    known = set(required) | set(optional)
    unknown = sorted(set(entry) - known)
    if unknown:
        raise reader.error(f"{path}.{unknown[0]}", f"unknown field of a gold item; expected {', '.join(sorted(known))}")
    for field in required:
        if field not in entry:
            raise reader.error(f"{path}.{field}", "is required")


def gold_context(reader: StudyFileReader, entry: dict[str, Any], path: str) -> tuple[str, ...]:
    """The gold item's `context`: 1 to MAX_CONTEXT_TURNS turns, the speaker's first, ending with the speaker's."""
    turns = reader.strings(entry, "context", f"{path}.context") if "context" in entry else ()
    if not turns:
        raise reader.error(f"{path}.context", 'must list the conversation\'s turns, the speaker\'s first: ["I passed '
                           'my exam!"] or ["...", "...", "..."]')
    if len(turns) > MAX_CONTEXT_TURNS:
        raise reader.error(f"{path}.context", f"has {len(turns)} turns; a gold item shows at most "
                           f"{MAX_CONTEXT_TURNS}")
    if len(turns) % 2 == 0:
        raise reader.error(f"{path}.context", f"has {len(turns)} turns: it must end with a turn of the speaker (an odd "
                           "number of turns, the speaker's first), which the reply answers")
    return turns


def gold_feedback(reader: StudyFileReader, entry: dict[str, Any], path: str) -> str:
    """The gold item's `feedback`: what the rater reads once she has answered it."""
    return reader.string(entry, "feedback", f"{path}.feedback")


def gold_answers(reader: StudyFileReader, entry: dict[str, Any], path: str,
                 criteria: tuple[Criterion, ...]) -> dict[str, Any]:
    """The gold item's `answer` table: one value per criterion of the study, no other key (the kind reads the
    values)."""
    where = f"{path}.answer"
    answer = entry.get("answer")
    if not isinstance(answer, dict):
        raise reader.error(where, f"must be a table with one answer per criterion ({', '.join(c.key for c in criteria)}"
                           f"), e.g. answer = {{ {criteria[0].key} = ... }}")
    keys = [c.key for c in criteria]
    unknown = sorted(set(answer) - set(keys))
    if unknown:
        raise reader.error(f"{where}.{unknown[0]}", f"is not a criterion of the study; expected {', '.join(keys)}")
    missing = [key for key in keys if key not in answer]
    if missing:
        raise reader.error(f"{where}.{missing[0]}", "is required: every criterion of the study needs its right answer")
    return {key: answer[key] for key in keys}


def context_panel(turns: tuple[str, ...], *, title: str = "Conversation") -> Panel:
    """The conversation as a panel: the turns, the speaker's first and then turn about."""
    return Panel(title, tuple(ShownTurn(ROLES[i % 2], text) for i, text in enumerate(turns)))
