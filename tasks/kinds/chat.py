"""The chat kind in the tasks room: its study-file fields, its design, its simulated speakers and raters, its crowd
parts and its page.

A chat study (ParlAI's model-chat protocol, on EmpatheticDialogues prompts as Rashkin et al. collected them): a rater
is given an emotion and a situation from an ED test dialogue and talks about it; a system the backend serves
answers live as the listener. She ticks what each reply did, ends the conversation once it is long enough, and
rates it. Its study file adds to the shared fields:

    kind = "chat"
    [systems]
    names = ["retrieval", "retrieval-emoprepend"]   # the partners compared, configured in the backend
    controls = ["control-generic"]                  # known-bad partners, one conversation with each per session
    [contexts]
    count = 6                                       # the prompts (each an ED dialogue's emotion and situation)
    [chat]
    conversations_per_system = 6                    # k: conversations with each partner
    sessions_per_rater = 1                          # 1: a rater talks to each partner at most once
    min_utterances = 4                              # both sides counted; ED's conversations have 4 to 8
    max_utterances = 8
    max_chars = 500                                 # the longest message a rater may send
    turn_timeout_seconds = 20                       # per attempt; then `turn_retries` more attempts
    turn_retries = 1
    min_reply_seconds = 1.5                         # no reply is shown sooner: speed does not tell systems apart
    [[chat.turn_questions]]                         # default: ParlAI-style turn annotations, see the store kind
    key = "empathetic"
    label = "Showed understanding of how I feel"

Its design (`plan_sessions`): a session (an assignment) holds one conversation with each partner, each on another
prompt; prompts come in blocks of as many as there are partners, and within a block every prompt is talked about
once with every partner, in different sessions, the partners' order rotated: partners are compared on the same
prompts, and each rater meets each partner once. A chat study has no scale table (its scale is the Likert one), no
pairs and no items per assignment.
"""
from __future__ import annotations

import random
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from sqlalchemy import Engine, select
from sqlalchemy.orm import Session

from empeval.server.backend.controls import CONTROL_TARGETS
from empeval.server.backend.registry import ConfigError, load_config
from empeval.server.store.bulk import insert_rows
from empeval.server.store.kinds.chat import (
    MAX_CHARS,
    MAX_UTTERANCES,
    MIN_UTTERANCES,
    NONE_OF_THESE,
    AssignmentConversation,
    ChatConversation,
    ChatSetup,
    TurnQuestion,
)
from empeval.server.store.models import Study
from empeval.server.store.study_config import StudyConfig
from empeval.server.store.study_parts import Design
from empeval.tasks.crowd.contract import Control
from empeval.tasks.kind_parts import ChosenContexts, StudyFileParts, StudyFileReader, StudySetupError, StudySummary
from empeval.tasks.kinds import Answer, TaskKind, register
from empeval.tasks.simulate import CrowdModel
from empeval.tasks.study_create import add_assignments

LISTING = {"title": "Chat about a feeling and rate your partner",
           "description": "Talk for a few turns about a situation we give you, with a conversational partner, tick "
                          "what each of its replies did, and rate each conversation for empathy, relevance and "
                          "fluency.",
           "tags": ["empathy", "dialogue", "chat", "conversation", "research"]}
QUESTION_KEY_LENGTH = 32  # the store's chat_turn_annotation.question


@dataclass(frozen=True)
class PlannedConversation:
    context: int
    partner: str


@dataclass(frozen=True)
class PlannedSession:
    """One assignment: its conversations in the order talked, its design position and round."""

    index: int
    round: int
    items: tuple[PlannedConversation, ...]


def plan_sessions(prompts: list[int], partners: tuple[str, ...], sessions: int, seed: int) -> list[PlannedSession]:
    """`sessions` sessions over `partners`: block b takes the next len(partners) prompts; its session r gives
    partner s the prompt (s + r) mod P of the block and talks to the partners in an order rotated by r (and shuffled
    per block by `seed`), so each prompt of a block meets every partner once. `sessions` must be a multiple of
    P = len(partners) and the prompts at least sessions.

    >>> [[(c.context, c.partner) for c in s.items] for s in plan_sessions([10, 11], ("a", "b"), 2, seed=0)]
    [[(10, 'a'), (11, 'b')], [(10, 'b'), (11, 'a')]]
    """
    n = len(partners)
    rng = random.Random(seed)
    planned: list[PlannedSession] = []
    for block in range(sessions // n):
        block_prompts = prompts[block * n:(block + 1) * n]
        order = list(range(n))
        rng.shuffle(order)
        for r in range(n):
            talks = [PlannedConversation(block_prompts[(s + r) % n], partners[s]) for s in range(n)]
            rotated = [talks[order[(i + r) % n]] for i in range(n)]
            planned.append(PlannedSession(index=len(planned), round=0, items=tuple(rotated)))
    return planned


def _questions(reader: StudyFileReader, chat: dict[str, Any]) -> tuple[TurnQuestion, ...]:
    raw = chat.get("turn_questions")
    if raw is None:
        return ChatSetup.turn_questions
    if not isinstance(raw, list) or not raw:
        raise reader.error("chat.turn_questions", "must be a list of tables ([[chat.turn_questions]]), at least one")
    questions: list[TurnQuestion] = []
    for i, entry in enumerate(raw):
        where = f"chat.turn_questions[{i}]"
        if not isinstance(entry, dict):
            raise reader.error(where, f"must be a table with key and label, got {entry!r}")
        entry = reader.table({"q": entry}, "q", where, {"key", "label"})
        key, label = reader.string(entry, "key", f"{where}.key"), reader.string(entry, "label", f"{where}.label")
        if not key.replace("_", "").isalnum() or not key.isascii() or len(key) > QUESTION_KEY_LENGTH:
            raise reader.error(f"{where}.key", f"must be letters, digits and _ (at most {QUESTION_KEY_LENGTH}), got "
                               f"{key!r}")
        if key == NONE_OF_THESE:
            raise reader.error(f"{where}.key", f"{NONE_OF_THESE!r} is offered on every turn already")
        if key in {q.key for q in questions}:
            raise reader.error(f"{where}.key", f"{key!r} is listed twice")
        questions.append(TurnQuestion(key, label))
    return tuple(questions)


def _systems_config(reader: StudyFileReader, chat: dict[str, Any]) -> str:
    """chat.systems_config as an absolute path (a relative one is read from the study file's folder), checked to be
    a readable systems configuration; "" when the file names none (the built-in systems)."""
    if "systems_config" not in chat:
        return ""
    given = Path(reader.string(chat, "systems_config", "chat.systems_config"))
    source = Path(reader.source)
    path = given if given.is_absolute() or not source.is_file() else source.parent / given
    try:
        load_config(path)
    except ConfigError as error:
        raise reader.error("chat.systems_config", str(error)) from None
    return str(path.resolve())


@register
class ChatTasks(TaskKind):
    name: ClassVar[str] = "chat"
    setup = ChatSetup
    fields: ClassVar[dict[str, frozenset[str]]] = {}
    sections: ClassVar[frozenset[str]] = frozenset({"chat"})
    foreign_hints: ClassVar[dict[str, str]] = {
        "design.ratings_per_response": "a chat study counts conversations per partner: use "
                                       "chat.conversations_per_system",
        "design.judgments_per_pair": "a chat study counts conversations per partner: use chat.conversations_per_system",
        "scale": "a chat study rates conversations on the Likert kind's 1-5 scale; set chat.scale_labels to reword it",
        "systems.pairs": "a chat study talks with every partner in each session; it has no pairs",
        "systems.anchor": "a chat study has no anchor",
    }
    listing: ClassVar[dict[str, Any]] = LISTING
    ui_page: ClassVar[str] = "chat"
    live_systems: ClassVar[bool] = True

    def parse(self, reader: StudyFileReader, data: dict[str, Any], parts: StudyFileParts) -> tuple[ChatSetup, Design]:
        known = {"conversations_per_system", "sessions_per_rater", "min_utterances", "max_utterances", "max_chars",
                 "turn_questions", "turn_timeout_seconds", "turn_retries", "min_reply_seconds", "scale_labels",
                 "systems_config"}
        chat = reader.table(data, "chat", "chat", known)
        d = ChatSetup()
        low = reader.integer(chat, "min_utterances", "chat.min_utterances", d.min_utterances,
                             minimum=MIN_UTTERANCES, maximum=MAX_UTTERANCES)
        assert low is not None
        high = reader.integer(chat, "max_utterances", "chat.max_utterances", max(d.max_utterances, low),
                              minimum=low, maximum=MAX_UTTERANCES)
        assert high is not None
        if low % 2 or high % 2:
            raise reader.error("chat.min_utterances" if low % 2 else "chat.max_utterances",
                               "must be even: a conversation ends on the partner's reply (you, partner, you, ...)")
        partners = len(parts.systems) + len(parts.controls)
        k = reader.integer(chat, "conversations_per_system", "chat.conversations_per_system",
                           max(d.conversations_per_system, partners), minimum=1, maximum=10_000)
        assert k is not None
        labels = reader.strings(chat, "scale_labels", "chat.scale_labels", d.scale_labels)
        if not 2 <= len(labels) <= 11:
            raise reader.error("chat.scale_labels", f"must list 2 to 11 labels (scores 1..n), got {len(labels)}")
        setup = ChatSetup(
            conversations_per_system=k,
            sessions_per_rater=reader.integer(chat, "sessions_per_rater", "chat.sessions_per_rater",
                                              d.sessions_per_rater, minimum=1, maximum=1000) or 1,
            min_utterances=low, max_utterances=high,
            max_chars=reader.integer(chat, "max_chars", "chat.max_chars", d.max_chars, minimum=20,
                                     maximum=MAX_CHARS) or d.max_chars,
            turn_questions=_questions(reader, chat),
            turn_timeout_seconds=reader.number(chat, "turn_timeout_seconds", "chat.turn_timeout_seconds",
                                               d.turn_timeout_seconds, minimum=0.5, maximum=600),
            turn_retries=reader.integer(chat, "turn_retries", "chat.turn_retries", d.turn_retries, minimum=0,
                                        maximum=5) or 0,
            min_reply_seconds=reader.number(chat, "min_reply_seconds", "chat.min_reply_seconds",
                                            d.min_reply_seconds, minimum=0, maximum=30),
            scale_labels=labels, systems_config=_systems_config(reader, chat))
        sessions = -(-k // partners) * partners
        if parts.n_contexts and parts.n_contexts < sessions:
            raise reader.error("contexts.count", f"{sessions} sessions of {partners} conversations need {sessions} "
                               f"prompts (each talked about once with each partner); the file asks for "
                               f"{parts.n_contexts}: raise contexts.count or lower chat.conversations_per_system")
        return setup, parts.design

    def system_role(self, spec: StudyConfig, system: str) -> str:
        return " (a control partner)" if system in spec.controls else " (a chat partner)"

    def check_live_systems(self, spec: StudyConfig) -> None:
        """Each partner must be a system of the study's backend configuration (chat.systems_config, else the
        built-in systems.toml) and not a replay of stored outputs, which cannot hold a conversation."""
        setup = spec.setup
        assert isinstance(setup, ChatSetup)
        configured = {s.name: s.kind for s in load_config(setup.systems_config or None)}
        for name in (*spec.systems, *spec.controls):
            if name not in configured:
                raise StudySetupError(f"system {name!r}{self.system_role(spec, name)} is not configured in the "
                                      f"backend; configured: {', '.join(configured)}")
            if configured[name] in ("replay", "gold"):
                raise StudySetupError(f"system {name!r} ({configured[name]}) replays stored responses and cannot "
                                      "hold a live conversation: choose a system that answers any context "
                                      "(retrieval, retrieval-ft, cobert, an http model, or a control)")

    def create(self, session: Session, spec: StudyConfig, study: Study, chosen: ChosenContexts) -> StudySummary:
        """Plan the sessions over the chosen prompts and write the conversations (one per prompt and partner) and
        their placements."""
        setup = spec.setup
        assert isinstance(setup, ChatSetup)
        partners = (*spec.systems, *spec.controls)
        sessions = -(-setup.conversations_per_system // len(partners)) * len(partners)
        prompts = [chosen.key_to_id[key] for key in chosen.keys]
        if len(prompts) < sessions:
            raise StudySetupError(f"{sessions} sessions need {sessions} prompts; contexts chose {len(prompts)}: "
                                  "raise contexts.count")
        plan = plan_sessions(prompts[:sessions], partners, sessions, spec.seed)
        conversations: dict[tuple[int, str], ChatConversation] = {}
        for planned in plan:
            for talk in planned.items:
                control = talk.partner in spec.controls
                conversations[talk.context, talk.partner] = ChatConversation(
                    study_id=study.id, context_id=talk.context, system=talk.partner, is_control=control,
                    control_target=spec.control_targets.get(talk.partner, CONTROL_TARGETS.get(talk.partner))
                    if control else None, design={"session": planned.index})
        session.add_all(conversations.values())
        session.flush()
        insert_rows(session, AssignmentConversation, [
            {"assignment_id": assignment_id, "conversation_id": conversations[talk.context, talk.partner].id,
             "position": position}
            for assignment_id, planned in zip(add_assignments(session, study, plan), plan, strict=True)
            for position, talk in enumerate(planned.items)])
        real = sum(1 for c in conversations.values() if not c.is_control)
        expected = len(conversations) * len(spec.criteria)  # the control conversations are rated too
        cost = spec.pay.cost(len(plan))
        return StudySummary(
            name=spec.name, kind=self.name, contexts=sessions, systems=list(spec.systems), items=real,
            control_items=len(conversations) - real, assignments=len(plan), per_unit=1, expected_answers=expected,
            cost=cost, currency=spec.pay.currency if cost is not None else None,
            sentence=(f"chat study {spec.name!r}: {len(plan)} sessions, each a conversation with every one of "
                      f"{len(partners)} partners ({', '.join(partners)}) on its own prompt; {sessions} prompts, "
                      f"{sessions} conversations per partner, {setup.min_utterances}-{setup.max_utterances} "
                      f"utterances each; {expected} conversation ratings expected (controls included)"))

    def simulated_answers(self, engine: Engine, study: str, model: CrowdModel, seed: int) -> Answer:
        from empeval.tasks.kinds.chat_simulate import simulated_chat

        return simulated_chat(engine, study, model, seed)

    def crowd_controls(self, session: Session, assignment_id: int) -> tuple[list[int], list[Control]]:
        """Its prompts, and each control conversation scored as a Likert control is: it passes when the worker
        rated the control's target criterion below her mean on it over the session's other conversations."""
        rows = session.execute(
            select(ChatConversation.id, ChatConversation.context_id, ChatConversation.is_control,
                   ChatConversation.control_target)
            .join(AssignmentConversation, AssignmentConversation.conversation_id == ChatConversation.id)
            .where(AssignmentConversation.assignment_id == assignment_id)).all()
        return (sorted({context for _, context, _, _ in rows}),
                [Control(item_id=conversation, target=target or "empathy", entries="conversations", field="ratings")
                 for conversation, _, is_control, target in rows if is_control])
