"""What parsers hand to the importer: dialogues as plain data, independent of the file format."""
from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field

ROLES = ("speaker", "listener")


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

    def context_prefix_lengths(self) -> list[tuple[int, int]]:
        """(n_turns, index into turns) for each listener turn that has at least one turn before it."""
        return [(turn.idx - 1, i) for i, turn in enumerate(self.turns) if turn.role == "listener" and turn.idx > 1]
