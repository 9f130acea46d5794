"""Own dialogues in JSONL: one dialogue per line.

    {"conv_id": "clinic-17", "split": "test", "emotion": "anxious", "situation": "…",
     "turns": [{"role": "speaker", "text": "…"}, {"role": "listener", "text": "…"}, …]}

`conv_id` (string, unique in the dataset) and `turns` (at least one; `role` is "speaker" or "listener",
`text` non-empty) are required; `split` defaults to "test"; `emotion` and `situation` are optional. Any
other keys are ignored. Every listener turn after the first turn becomes a context to be answered. A value the
store cannot hold (a conv_id longer than its column, a NUL, an unpaired surrogate escape such as "\\ud800") and
a line nested too deeply to parse are refused with the line's number, before anything is written.
"""
from __future__ import annotations

import json
import reprlib
from pathlib import Path

from empeval.server.datasets.errors import InputFileError, read_utf8_lines
from empeval.server.datasets.model import ROLES, ParsedDialogue, ParsedTurn, field_problem

SPLITS = ("train", "valid", "test")


def _optional_text(value, path, number, key) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise InputFileError(path, number, f"{key!r} must be a string, got {type(value).__name__}")
    return _storable(key, value, path, number)


def _storable(field: str, value: str, path: Path, number: int, *, named: str | None = None) -> str:
    if problem := field_problem(field, value, named=named or repr(field)):
        raise InputFileError(path, number, problem)
    return value


def _shown(value) -> str:
    """A value for a message: shortened, and never deeper than a few levels (a line may nest hundreds)."""
    return reprlib.repr(value)


def _parse_line(line: str, path: Path, number: int):
    try:
        return json.loads(line)
    except json.JSONDecodeError as error:
        raise InputFileError(path, number, f"not valid JSON ({error.msg} at column {error.colno})") from None
    except RecursionError:
        raise InputFileError(path, number, "JSON nested too deeply to read (a dialogue needs 3 levels)") from None
    except ValueError as error:  # e.g. an integer of more than 4,300 digits
        raise InputFileError(path, number, f"not readable JSON ({error})") from None


def parse_dialogues_jsonl(path: Path) -> list[ParsedDialogue]:
    """All dialogues of a JSONL file; raises InputFileError naming the first bad line."""
    lines = read_utf8_lines(path)
    dialogues: list[ParsedDialogue] = []
    seen: dict[str, int] = {}
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        record = _parse_line(line, path, number)
        if not isinstance(record, dict):
            raise InputFileError(path, number, "each line must be a JSON object")
        conv_id = record.get("conv_id")
        if not isinstance(conv_id, str) or not conv_id.strip():
            raise InputFileError(path, number, "'conv_id' is required and must be a non-empty string")
        _storable("conv_id", conv_id, path, number)
        if conv_id in seen:
            raise InputFileError(path, number, f"conv_id {conv_id!r} already used on line {seen[conv_id]}")
        seen[conv_id] = number
        split = record.get("split", "test")
        if split not in SPLITS:
            raise InputFileError(path, number, f"unknown split {_shown(split)}; expected one of {', '.join(SPLITS)}")
        raw_turns = record.get("turns")
        if not isinstance(raw_turns, list) or not raw_turns:
            raise InputFileError(path, number, "'turns' is required and must be a non-empty list")
        turns = []
        for i, turn in enumerate(raw_turns, start=1):
            if not isinstance(turn, dict):
                raise InputFileError(path, number, f"turn {i} must be an object with 'role' and 'text'")
            role, text = turn.get("role"), turn.get("text")
            if role not in ROLES:
                raise InputFileError(path, number, f"turn {i}: role {_shown(role)}, expected 'speaker' or 'listener'")
            if not isinstance(text, str) or not text.strip():
                raise InputFileError(path, number, f"turn {i}: 'text' must be a non-empty string")
            _storable("text", text, path, number, named=f"turn {i}: 'text'")
            turns.append(ParsedTurn(idx=i, role=role, text=text))
        dialogues.append(
            ParsedDialogue(
                conv_id=conv_id, split=split,
                emotion=_optional_text(record.get("emotion"), path, number, "emotion"),
                situation=_optional_text(record.get("situation"), path, number, "situation"),
                turns=tuple(turns), source=f"{path}:{number}",
            )
        )
    if not dialogues:
        raise InputFileError(path, None, "empty file: expected one JSON dialogue per line")
    return dialogues
