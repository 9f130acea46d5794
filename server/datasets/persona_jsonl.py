"""Persona corpora in PEC's layout (Zhong et al., EMNLP 2020, "Towards Persona-Based Empathetic Conversational
Models"), read into memory as training/evaluation examples for the CoBERT-style selector.

One JSON object per line, with exactly PEC's five fields (the features of its public release):

    {"context": ["I finally finished my first marathon!", "Wow, how long did it take?"],
     "context_speakers": ["runner_ann", "bob_k"],
     "response": "Four hours and ten minutes, and I cried at the finish line.",
     "response_speaker": "runner_ann",
     "personas": ["I run every morning before work.", "My sister got me into running."]}

- `context`: the turns before the response, oldest first, at least one, each a non-empty string;
- `context_speakers`: who said each context turn (a non-empty string per turn, as many as `context`);
- `response`: the reply to select, a non-empty string;
- `response_speaker`: who replied (a non-empty string);
- `personas`: the responder's persona sentences (a list of non-empty strings; empty when the corpus has none
  for this speaker, and the selector then runs without persona for this example).

Every line is checked before anything is returned: a line that is not JSON, not an object, lacks a field,
carries a field not listed above (a typo such as "persona" would otherwise be silently dropped), has a value of
the wrong type, an empty text, or a text the store could not hold (NUL, unpaired surrogate) stops the load with
`file:line: reason`, and nothing of the file is used. Blank lines are skipped.

Why in memory and not in the store: the store's dialogues have two roles (speaker, listener) and no persona
table; these examples only feed `empeval train cobert --persona-corpus FILE` and its evaluation, so they are
never written anywhere.
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path

from empeval.server.datasets.errors import InputFileError, read_utf8_lines
from empeval.server.store.storable import text_problem

FIELDS = ("context", "context_speakers", "response", "response_speaker", "personas")


@dataclass(frozen=True)
class PersonaExample:
    """One persona-grounded response: the context turns (oldest first) with their speakers, the response, who
    gave it and that responder's persona sentences; `source` is `file:line`."""

    context: tuple[str, ...]
    context_speakers: tuple[str, ...]
    response: str
    response_speaker: str
    personas: tuple[str, ...]
    source: str = ""

    @property
    def persona_text(self) -> str | None:
        """The persona sentences joined by spaces, or None when the responder has none."""
        return " ".join(self.personas) if self.personas else None


class PersonaFileError(InputFileError):
    """A persona corpus line that cannot be used; nothing of the file has been loaded."""

    def __init__(self, path: Path | str, line: int | None, reason: str):
        super().__init__(path, line, reason)
        where = f"{self.path}:{line}" if line is not None else self.path
        # Not imported into the store, so say "loaded", not InputFileError's "imported".
        self.message = f"{where}: {reason} (nothing was loaded)"
        self.args = (self.message,)


def _text(value, path: Path, number: int, what: str) -> str:
    if not isinstance(value, str):
        raise PersonaFileError(path, number, f"{what} must be a string, got {type(value).__name__}")
    if not value.strip():
        raise PersonaFileError(path, number, f"{what} is empty")
    if problem := text_problem(value):
        raise PersonaFileError(path, number, f"{what} {problem}")
    return value


def _texts(value, path: Path, number: int, what: str, *, allow_empty: bool) -> tuple[str, ...]:
    if not isinstance(value, list):
        raise PersonaFileError(path, number, f"'{what}' must be a list of strings, got {type(value).__name__}")
    if not value and not allow_empty:
        raise PersonaFileError(path, number, f"'{what}' is empty; it needs at least one turn")
    return tuple(_text(item, path, number, f"'{what}' item {i}") for i, item in enumerate(value, start=1))


def _parse(line: str, path: Path, number: int) -> PersonaExample:
    try:
        record = json.loads(line)
    except json.JSONDecodeError as error:
        raise PersonaFileError(path, number, f"not valid JSON ({error.msg} at column {error.colno})") from None
    except RecursionError:
        raise PersonaFileError(path, number, "JSON nested too deeply to read (an example needs 2 levels)") from None
    except ValueError as error:  # e.g. an integer of more than 4,300 digits
        raise PersonaFileError(path, number, f"not readable JSON ({error})") from None
    if not isinstance(record, dict):
        raise PersonaFileError(path, number, f"each line must be a JSON object with {', '.join(FIELDS)}; "
                                             f"got a {type(record).__name__}")
    missing = [name for name in FIELDS if name not in record]
    if missing:
        raise PersonaFileError(path, number, f"missing field{'s' if len(missing) > 1 else ''} "
                                             f"{', '.join(map(repr, missing))}")
    extra = sorted(set(record) - set(FIELDS))
    if extra:
        raise PersonaFileError(path, number, f"unexpected field{'s' if len(extra) > 1 else ''} "
                                             f"{', '.join(repr(name[:40]) for name in extra[:5])}; "
                                             f"a line has exactly {', '.join(FIELDS)}")
    context = _texts(record["context"], path, number, "context", allow_empty=False)
    speakers = _texts(record["context_speakers"], path, number, "context_speakers", allow_empty=False)
    if len(speakers) != len(context):
        raise PersonaFileError(path, number, f"'context_speakers' has {len(speakers)} entries for "
                                             f"{len(context)} context turns; it needs one speaker per turn")
    return PersonaExample(
        context=context, context_speakers=speakers,
        response=_text(record["response"], path, number, "'response'"),
        response_speaker=_text(record["response_speaker"], path, number, "'response_speaker'"),
        personas=_texts(record["personas"], path, number, "personas", allow_empty=True),
        source=f"{path}:{number}",
    )


def load_persona_jsonl(path: Path | str) -> list[PersonaExample]:
    """Every example of a PEC-layout JSONL file, in file order; raises PersonaFileError (`file:line: reason`)
    at the first malformed line, so a file is used whole or not at all."""
    path = Path(path)
    try:
        lines = read_utf8_lines(path)
    except InputFileError as error:
        raise PersonaFileError(path, error.line, error.reason) from None
    except OSError as error:
        raise PersonaFileError(path, None, f"cannot read the file ({error.strerror})") from None
    examples = [_parse(line, path, number) for number, line in enumerate(lines, start=1) if line.strip()]
    if not examples:
        raise PersonaFileError(path, None, "empty file: expected one JSON example per line in PEC's layout "
                                           f"({', '.join(FIELDS)})")
    return examples


def examples_hash(examples: list[PersonaExample]) -> str:
    """SHA-256 over what training reads of the examples (texts and personas, not speaker names or lines)."""
    digest = hashlib.sha256()
    for example in examples:
        digest.update(json.dumps([example.context, example.response, example.personas],
                                 ensure_ascii=False).encode())
        digest.update(b"\n")
    return digest.hexdigest()
