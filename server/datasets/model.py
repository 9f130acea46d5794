"""What parsers hand to the importer: dialogues as plain data, independent of the file format."""
from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field

from empeval.server.store.models import Dialogue
from empeval.server.store.storable import column_length, text_problem

ROLES = ("speaker", "listener")

# The declared lengths of the dialogue fields that have one; the other texts are unbounded (TEXT columns).
FIELD_LENGTHS = {name: column_length(Dialogue, name) for name in ("conv_id", "split", "emotion")}


def field_problem(field: str, value: str, *, named: str | None = None) -> str | None:
    """Why the store cannot hold `value` as the dialogue field `field` ("conv_id is 5,000 characters long; at
    most 200 are allowed"), or None. `named` is how the message names the field (a file format's own name)."""
    problem = text_problem(value, limit=FIELD_LENGTHS.get(field))
    return None if problem is None else f"{named or field} {problem}"


@dataclass(frozen=True)
class ParsedTurn:
    idx: int  # 1-based position in the dialogue
    role: str  # 'speaker' (who lived the situation) or 'listener'
    text: str


@dataclass(frozen=True)
class ParsedDialogue:
    conv_id: str
    split: str
    emotion: str | None
    situation: str | None
    turns: tuple[ParsedTurn, ...]
    source: str = ""  # "file:line" of the dialogue's first line, for error messages
    meta: dict = field(default_factory=dict, compare=False)

    def content_hash(self) -> str:
        """SHA-256 over everything the store keeps of this dialogue (used to make re-imports idempotent)."""
        payload = [self.split, self.emotion, self.situation, [(t.idx, t.role, t.text) for t in self.turns]]
        return hashlib.sha256(json.dumps(payload, ensure_ascii=False).encode()).hexdigest()

    def storage_problem(self) -> str | None:
        """Why the store cannot hold this dialogue (its first field that is too long or not storable text), or None.
        The parsers check each line as they read it; this is the importer's last check, for any other producer."""
        fields = (("conv_id", self.conv_id), ("split", self.split), ("emotion", self.emotion),
                  ("situation", self.situation))
        for name, value in fields:
            if value is not None and (problem := field_problem(name, value)):
                return problem
        for turn in self.turns:
            if problem := field_problem("text", turn.text, named=f"turn {turn.idx}"):
                return problem
        return None

    def context_prefix_lengths(self) -> list[tuple[int, int]]:
        """(n_turns, index into turns) for each listener turn that has at least one turn before it."""
        return [(turn.idx - 1, i) for i, turn in enumerate(self.turns) if turn.role == "listener" and turn.idx > 1]
