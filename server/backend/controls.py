"""Control systems, each built to fail exactly one rating criterion, deterministic given a seed.

- `control-generic`: a fluent but generic, non-empathetic stock reply ("OK. What else is new?"): low Empathy.
- `control-mismatched`: the gold reply of another dialogue whose emotion differs: low Relevance.
- `control-scrambled`: the gold reply with its words shuffled (same multiset of words): low Fluency. In a live chat
  there is no gold reply: it shuffles the words of one of a few caring stock replies instead (LIVE_CARING_REPLIES),
  so that it still fails Fluency alone rather than refusing to talk.

Every choice is drawn from a random generator seeded with sha256(seed, context key), so the same seed
gives the same control for the same context in every run and process, independent of batch order.
"""
from __future__ import annotations

import hashlib
import random

from sqlalchemy import select

from empeval.server.backend.base import (
    DialogueContext,
    Reply,
    ResponseModel,
    ResponseUnavailable,
)
from empeval.server.store.engine import unit_of_work
from empeval.server.store.models import Context, Dataset, Dialogue, Turn

GENERIC_REPLIES = (
    "OK. What else is new?",
    "I see. Do you have any plans for the weekend?",
    "Alright. What did you have for lunch today?",
    "Okay. Have you watched any good movies lately?",
    "Sure. What is the weather like where you are?",
    "Right. What do you do for a living?",
)


# What control-scrambled shuffles in a live conversation (no gold reply exists): replies that would be empathetic and
# relevant enough if their words were in order.
LIVE_CARING_REPLIES = (
    "That sounds like a lot to go through, how are you feeling about it now?",
    "I am really glad you told me about this, it must have meant a lot to you.",
    "Oh wow, I can imagine how that felt, what happened after that?",
    "I am sorry you had to deal with that, did anyone help you through it?",
)


def context_rng(seed: int, context: DialogueContext) -> random.Random:
    digest = hashlib.sha256(f"{seed}:{context.key()}".encode()).digest()
    return random.Random(int.from_bytes(digest[:8], "big"))


class GenericControl(ResponseModel):
    kind = "control-generic"
    target_criterion = "empathy"  # the one criterion this control is built to fail

    def __init__(self, name, parameters=None, resources=None):
        super().__init__(name, {"seed": 0, **(parameters or {})})
        self.replies = tuple(self.parameters.get("replies", GENERIC_REPLIES))

    def data_version(self) -> str:
        return "replies-" + hashlib.sha256("\n".join(self.replies).encode()).hexdigest()[:12]

    def respond_one(self, context: DialogueContext) -> Reply:
        index = context_rng(self.parameters["seed"], context).randrange(len(self.replies))
        return Reply(self.replies[index], {"control_target": self.target_criterion, "seed": self.parameters["seed"],
                                           "reply_index": index})


def scramble_words(text: str, rng: random.Random) -> str:
    """The words of `text` (split on whitespace) in a shuffled order that differs from the original
    whenever there are at least two distinct words (same multiset of words either way)."""
    words = text.split()
    if len(set(words)) < 2:
        return " ".join(words)
    shuffled = words[:]
    for _ in range(20):
        rng.shuffle(shuffled)
        if shuffled != words:
            return " ".join(shuffled)
    # Twenty unlucky shuffles (only likely for very short texts): a rotation by one differs for sure,
    # because a sequence equal to its own rotation would have a single distinct word.
    return " ".join(words[1:] + words[:1])


class ScrambledControl(ResponseModel):
    kind = "control-scrambled"
    target_criterion = "fluency"  # the one criterion this control is built to fail

    def __init__(self, name, parameters=None, resources=None):
        super().__init__(name, {"seed": 0, **(parameters or {})})
        self.dataset = resources.dataset if resources else ""

    def data_version(self) -> str:
        return f"reference-shuffled:{self.dataset}"

    def respond_one(self, context: DialogueContext) -> Reply:
        rng = context_rng(self.parameters["seed"], context)
        if context.reference is None:
            if context.context_id is not None:  # a stored context with no gold reply: nothing to shuffle
                raise ResponseUnavailable("control-scrambled shuffles the gold reply; this context has no reference")
            index = rng.randrange(len(LIVE_CARING_REPLIES))  # a live chat's turn (see the module docstring)
            return Reply(scramble_words(LIVE_CARING_REPLIES[index], rng),
                         {"control_target": self.target_criterion, "seed": self.parameters["seed"],
                          "live_reply_index": index})
        text = scramble_words(context.reference, rng)
        return Reply(text, {"control_target": self.target_criterion, "seed": self.parameters["seed"],
                            "source_turn_id": context.reference_turn_id})


class MismatchedControl(ResponseModel):
    kind = "control-mismatched"
    target_criterion = "relevance"  # the one criterion this control is built to fail

    def __init__(self, name, parameters=None, resources=None):
        super().__init__(name, {"seed": 0, **(parameters or {})})
        self.resources = resources
        self._pools: dict[str, list[tuple[int, str, str | None, int, str]]] = {}

    def data_version(self) -> str:
        return f"reference-other-dialogue:{self.resources.dataset if self.resources else ''}"

    def pool(self, split: str) -> list[tuple[int, str, str | None, int, str]]:
        """(dialogue id, conv_id, emotion, reference turn id, reference text) of the split's contexts."""
        if split not in self._pools:
            with unit_of_work(self.resources.engine) as session:
                rows = session.execute(
                    select(Dialogue.id, Dialogue.conv_id, Dialogue.emotion, Turn.id, Turn.text)
                    .join(Context, Context.dialogue_id == Dialogue.id)
                    .join(Turn, Context.reference_turn_id == Turn.id)
                    .join(Dataset, Dialogue.dataset_id == Dataset.id)
                    .where(Dataset.name == self.resources.dataset, Dialogue.split == split)
                    .order_by(Context.id)).all()
            self._pools[split] = [tuple(row) for row in rows]
        return self._pools[split]

    def respond_one(self, context: DialogueContext) -> Reply:
        split = context.split or "test"
        candidates = [row for row in self.pool(split)
                      if row[0] != context.dialogue_id
                      and (context.emotion is None or (row[2] is not None and row[2] != context.emotion))]
        if not candidates:
            raise ResponseUnavailable(f"control-mismatched found no dialogue with another emotion in split "
                                      f"{split!r} of dataset {self.resources.dataset!r}; import data first")
        dialogue_id, conv_id, emotion, turn_id, text = candidates[
            context_rng(self.parameters["seed"], context).randrange(len(candidates))]
        return Reply(text, {"control_target": self.target_criterion, "seed": self.parameters["seed"],
                            "source_conv_id": conv_id, "source_turn_id": turn_id, "source_emotion": emotion})


# Each control kind and the criterion it declares it is built to fail.
CONTROL_TARGETS: dict[str, str] = {control.kind: control.target_criterion
                                   for control in (GenericControl, MismatchedControl, ScrambledControl)}
