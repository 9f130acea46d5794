"""A study's qualification, as its configuration holds it: the short training a local or Prolific rater goes through
before her first real assignment (issue 30; ACUTE-Eval's onboarding), typed.

A qualification is a few gold items, each in the terms of the study's kind (a Likert study's: a conversation and a
response with the scores accepted per criterion; an A/B study's: a conversation, responses A and B and the right
choice per criterion; an ACUTE study's: which control partner's conversation, drawn from its chat study when the
study is created, is set against a real partner's), the feedback a rater reads once she has answered each, and the
pass rule: `min_correct` items answered right (every question of an item within what is accepted) in one of at most
`attempts` goes through the items. A Prolific participant who fails is given the study's screened-out completion code
(or its failed-checks code, `code_on_failure`). The study file's [qualification] section is read by
tasks/qualification.py with the kind's part (TaskKind.qualification_items); what each gold item shows and
accepts is written to the store when the study is created (server/store/qualification_tables.py).

>>> from dataclasses import asdict
>>> item = GoldItem(feedback="A wrong fact is not empathy.", turns=("I passed my exam!",),
...                 responses=("Exams are held twice a year.",), accepted=(Accepted("empathy", (1, 2)),))
>>> rule = Qualification(items=(item,), min_correct=1)
>>> Qualification.from_stored(ConfigReader("pilot"), asdict(rule)) == rule
True
>>> rule.attempts, rule.code_on_failure
(1, 'screened_out')
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from empeval.server.store.study_parts import ConfigReader

# The Prolific completion codes a participant who fails may be given (recruitment.screened_out_code or
# recruitment.failed_checks_code).
CODES_ON_FAILURE = ("screened_out", "failed_checks")
# At most this many gold items, and this many goes through them: a qualification is a short training.
MAX_GOLD_ITEMS = 20
MAX_ATTEMPTS = 5


@dataclass(frozen=True)
class Accepted:
    """The answers to one question (a criterion) of a gold item that count as right, in the kind's terms: scores
    (Likert), "A", "B" or "T" (A/B), "left" or "right" (ACUTE)."""

    criterion: str
    answers: tuple[int | str, ...]


@dataclass(frozen=True)
class GoldItem:
    """One gold item as the study file gives it. Which fields a kind fills is its own (its TaskKind.
    qualification_items); the others stay empty:

    - `turns`: the conversation shown, the speaker's turn first and then turn about (Likert, A/B);
    - `responses`: the response rated (Likert) or responses A and B, in that order (A/B);
    - `control`: the control partner whose conversation is set against a real partner's (ACUTE: both drawn from the
      chat study when the study is created; the real partner's side is the right answer to every question);
    - `accepted`: per criterion, the answers counted right (none for ACUTE: known only once the sides are drawn);
    - `feedback`: what the rater reads once she has answered it, with the answers that were right.
    """

    feedback: str
    turns: tuple[str, ...] = ()
    responses: tuple[str, ...] = ()
    control: str = ""
    accepted: tuple[Accepted, ...] = ()

    @classmethod
    def from_stored(cls, reader: ConfigReader, value: Any, path: str) -> GoldItem:
        entry = reader.mapping(value, path)
        accepted = []
        raw = entry.get("accepted", [])
        if not isinstance(raw, (list, tuple)):
            raise reader.fail(f"{path}.accepted", f"expected a list, got {raw!r}")
        for i, one in enumerate(raw):
            one = reader.mapping(one, f"{path}.accepted[{i}]")
            answers = one.get("answers", [])
            if not isinstance(answers, (list, tuple)) or not all(isinstance(a, (int, str)) and not isinstance(a, bool)
                                                        for a in answers):
                raise reader.fail(f"{path}.accepted[{i}].answers", f"expected a list of integers or strings, got "
                                  f"{answers!r}")
            accepted.append(Accepted(reader.text(one, "criterion", f"{path}.accepted[{i}].criterion", ""),
                                     tuple(answers)))
        return cls(feedback=reader.text(entry, "feedback", f"{path}.feedback", ""),
                   turns=reader.texts(entry, "turns", f"{path}.turns"),
                   responses=reader.texts(entry, "responses", f"{path}.responses"),
                   control=reader.text(entry, "control", f"{path}.control", ""), accepted=tuple(accepted))


@dataclass(frozen=True)
class ShownTurn:
    """One turn of a panel: who speaks ("speaker" or "listener"), the text, and the name shown above it ("" for the
    page's default: Speaker, Listener)."""

    role: str
    text: str
    label: str = ""


@dataclass(frozen=True)
class Panel:
    """One box of a gold item as the page shows it: a title ("Conversation", "Response A", "Conversation 1"), its
    turns, and a line above them ("" for none: an ACUTE conversation's prompt, the speaker's feeling and situation)."""

    title: str
    turns: tuple[ShownTurn, ...]
    note: str = ""


@dataclass(frozen=True)
class GoldRow:
    """A gold item as the study's creation writes it (a row of qualification_item): what the page shows (text only,
    never a system's name), the answers counted right per criterion, and the feedback."""

    panels: tuple[Panel, ...]
    accepted: tuple[Accepted, ...]
    feedback: str


@dataclass(frozen=True)
class Qualification:
    """A study's qualification: its gold items, in the order shown, and the pass rule (see the module docstring)."""

    items: tuple[GoldItem, ...]
    min_correct: int
    attempts: int = 1
    intro: str = ""  # what the rater reads before the first item, beside what the page says of the rule
    code_on_failure: str = CODES_ON_FAILURE[0]

    @classmethod
    def from_stored(cls, reader: ConfigReader, value: Any) -> Qualification:
        """A stored qualification (StudyConfig.to_json stores it as dataclasses.asdict makes it); StudyConfigError
        naming the key when a value has the wrong type."""
        stored = reader.mapping(value, "qualification")
        raw = stored.get("items", [])
        if not isinstance(raw, (list, tuple)):
            raise reader.fail("qualification.items", f"expected a list, got {raw!r}")
        items = tuple(GoldItem.from_stored(reader, item, f"qualification.items[{i}]") for i, item in enumerate(raw))
        d = cls(items=(), min_correct=0)
        return cls(items=items,
                   min_correct=reader.integer(stored, "min_correct", "qualification.min_correct", len(items)),
                   attempts=reader.integer(stored, "attempts", "qualification.attempts", d.attempts),
                   intro=reader.text(stored, "intro", "qualification.intro", d.intro),
                   code_on_failure=reader.text(stored, "code_on_failure", "qualification.code_on_failure",
                                               d.code_on_failure))
