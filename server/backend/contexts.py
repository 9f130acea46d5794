"""Reading contexts (and the texts systems draw on) out of the store as plain `DialogueContext`s."""
from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence

from sqlalchemy import select
from sqlalchemy.orm import Session

from empeval.server.backend.base import ContextTurn, DialogueContext
from empeval.server.datasets.sample import ED_DATASET
from empeval.server.store.models import Context, Dataset, Dialogue, Turn


def load_contexts(
    session: Session,
    *,
    dataset: str | None = ED_DATASET,
    split: str | None = None,
    context_ids: Sequence[int] | None = None,
    limit: int | None = None,
) -> list[DialogueContext]:
    """Stored contexts in (dialogue id, n_turns) order, optionally of one dataset/split or given ids."""
    query = (select(Context.id, Context.n_turns, Context.reference_turn_id, Dialogue.id, Dialogue.conv_id,
                    Dialogue.split, Dialogue.emotion, Dialogue.situation)
             .join(Dialogue, Context.dialogue_id == Dialogue.id)
             .order_by(Dialogue.id, Context.n_turns))
    if dataset is not None:
        query = query.join(Dataset, Dialogue.dataset_id == Dataset.id).where(Dataset.name == dataset)
    if split is not None:
        query = query.where(Dialogue.split == split)
    if context_ids is not None:
        query = query.where(Context.id.in_(list(context_ids)))
    if limit is not None:
        query = query.limit(limit)
    rows = session.execute(query).all()
    dialogue_ids = sorted({row[3] for row in rows})
    turns: dict[int, list[tuple[int, int, str, str]]] = defaultdict(list)
    for chunk_start in range(0, len(dialogue_ids), 5000):
        chunk = dialogue_ids[chunk_start:chunk_start + 5000]
        for turn_id, dialogue_id, idx, role, text in session.execute(
            select(Turn.id, Turn.dialogue_id, Turn.idx, Turn.role, Turn.text).where(Turn.dialogue_id.in_(chunk))
        ):
            turns[dialogue_id].append((idx, turn_id, role, text))
    for dialogue_turns in turns.values():
        dialogue_turns.sort()
    contexts = []
    for context_id, n_turns, reference_turn_id, dialogue_id, conv_id, split_, emotion, situation in rows:
        dialogue_turns = turns[dialogue_id]
        reference = next(text for _, turn_id, _, text in dialogue_turns if turn_id == reference_turn_id)
        contexts.append(DialogueContext(
            turns=tuple(ContextTurn(role, text) for idx, _, role, text in dialogue_turns if idx <= n_turns),
            emotion=emotion, situation=situation, context_id=context_id, dialogue_id=dialogue_id,
            conv_id=conv_id, n_turns=n_turns, split=split_, reference=reference,
            reference_turn_id=reference_turn_id,
        ))
    return contexts


def load_listener_turns(session: Session, *, dataset: str | None = ED_DATASET, split: str = "train"
                        ) -> list[tuple[int, str, str | None, str]]:
    """(turn id, text, dialogue emotion, conv_id) of every listener turn of a split, by turn id."""
    query = (select(Turn.id, Turn.text, Dialogue.emotion, Dialogue.conv_id)
             .join(Dialogue, Turn.dialogue_id == Dialogue.id)
             .where(Dialogue.split == split, Turn.role == "listener").order_by(Turn.id))
    if dataset is not None:
        query = query.join(Dataset, Dialogue.dataset_id == Dataset.id).where(Dataset.name == dataset)
    return [tuple(row) for row in session.execute(query)]


def load_first_turns(session: Session, *, dataset: str | None = ED_DATASET, split: str = "train"
                     ) -> list[tuple[str, str | None, str, str]]:
    """(conv_id, situation, first turn text, emotion) of every labelled dialogue of a split, by dialogue id."""
    query = (select(Dialogue.conv_id, Dialogue.situation, Turn.text, Dialogue.emotion)
             .join(Turn, Turn.dialogue_id == Dialogue.id)
             .where(Dialogue.split == split, Turn.idx == 1, Dialogue.emotion.is_not(None)).order_by(Dialogue.id))
    if dataset is not None:
        query = query.join(Dataset, Dialogue.dataset_id == Dataset.id).where(Dataset.name == dataset)
    return [tuple(row) for row in session.execute(query)]
