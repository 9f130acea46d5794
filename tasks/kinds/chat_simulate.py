"""Simulated speakers and raters for a chat study: each simulated rater talks live with the study's systems (her
utterances are the speaker turns of the ED dialogue her prompt comes from, as Rashkin et al.'s speakers wrote them),
through the same turn functions the app's routes call and a real backend registry, then ticks and rates what she
perceived of each partner (simulate.Rater.perceived, as the Likert raters do)."""
from __future__ import annotations

import random
from typing import Any

from sqlalchemy import Engine, select
from sqlalchemy.orm import Session

from empeval.server.annotation.kinds.chat_turns import begin_turn, end_conversation, record_reply
from empeval.server.backend.base import ContextTurn, DialogueContext
from empeval.server.backend.registry import Registry
from empeval.server.backend.resources import BackendResources
from empeval.server.store.kinds.chat import ChatConversation, ChatSetup
from empeval.server.store.models import Assignment, Context, Study, Turn
from empeval.tasks.kinds import Answer
from empeval.tasks.simulate import CrowdModel, Rater, UnknownItem


def simulated_chat(engine: Engine, study: str, model: CrowdModel, seed: int) -> Answer:
    """How a simulated rater answers a chat session (see the module docstring): the speaker turns of each prompt's
    dialogue and each conversation's partner read from the store once; the replies come live from the backend."""
    with Session(engine) as session:
        study_row = session.scalars(select(Study).where(Study.name == study)).one()
        partners = dict(session.execute(select(ChatConversation.id, ChatConversation.system)
                                        .where(ChatConversation.study_id == study_row.id)).all())
        speaker_turns: dict[int, list[str]] = {}
        for conversation_id, text in session.execute(
                select(ChatConversation.id, Turn.text).join(Context, Context.id == ChatConversation.context_id)
                .join(Turn, Turn.dialogue_id == Context.dialogue_id)
                .where(ChatConversation.study_id == study_row.id, Turn.role == "speaker").order_by(Turn.idx)):
            speaker_turns.setdefault(conversation_id, []).append(text)
    setup = study_row.config.setup
    assert isinstance(setup, ChatSetup)
    backend = Registry.from_config(setup.systems_config or None, BackendResources(engine=engine, show_progress=False))

    def answer(rater: Rater, rng: random.Random, assignment: dict) -> dict:
        assignment_id = assignment["assignment_id"]
        with Session(engine) as session:
            annotator_id = session.scalars(select(Assignment.annotator_id)
                                           .where(Assignment.id == assignment_id)).one()
        if annotator_id is None:
            raise UnknownItem(f"assignment {assignment_id} is held by nobody")
        chat, criteria = assignment["chat"], tuple(c["key"] for c in assignment["criteria"])
        entries: list[dict[str, Any]] = []
        for item in assignment["items"]:
            conversation = item["item_id"]
            if conversation not in partners:
                raise UnknownItem(f"conversation {conversation} is not among those the simulation was given")
            lines = speaker_turns.get(conversation) or ["I had quite a day today."]
            turns = rng.randint(chat["min_utterances"] // 2, chat["max_utterances"] // 2)
            ticks: dict[str, list[str]] = {}
            failed = False
            for i in range(turns):
                text = lines[i % len(lines)][:chat["max_chars"]]
                pending = begin_turn(engine, assignment_id, item["position"], annotator_id, study,
                                     {"index": 2 * i, "text": text})
                if pending.reply is None:
                    context = DialogueContext(turns=tuple(ContextTurn(r, t) for r, t in pending.history))
                    outcome = backend.get(partners[conversation]).respond_batch([context])[0]
                    result = record_reply(engine, pending, text=outcome.text,
                                          provenance={**outcome.provenance, "latency_ms": outcome.latency_ms},
                                          failure=outcome.error)
                    if result.failed:
                        failed = True
                        break
                perceived = rater.perceived(partners[conversation], "empathy", model, None, rng)
                ticks[str(2 * i + 1)] = ["empathetic"] if perceived >= 3.5 else ["none"]
            if failed:
                entries.append({"item_id": conversation, "seconds": rater.seconds(model, rng)})
                continue
            end_conversation(engine, assignment_id, item["position"], annotator_id, study)
            low, high = 1, len(assignment["scale"]["labels"])
            ratings = {c: min(high, max(low, round(rater.perceived(partners[conversation], c, model, None, rng))))
                       for c in criteria}
            if rater.behaviour == "random":
                ratings = {c: rng.randint(low, high) for c in criteria}
            elif rater.behaviour == "straight":
                ratings = {c: high for c in criteria}
            entries.append({"item_id": conversation, "ratings": ratings, "turns": ticks,
                            "seconds": rater.seconds(model, rng) * turns})
        return {"conversations": entries}

    return answer
