"""Counts of what the store holds, per dataset and split."""
from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import Engine, distinct, func, select
from sqlalchemy.orm import Session

from empeval.server.store.models import Context, Dataset, Dialogue, Turn


@dataclass(frozen=True)
class SplitSummary:
    dataset: str
    split: str
    dialogues: int
    turns: int
    contexts: int
    emotions: int


def summarize(engine: Engine, dataset: str | None = None) -> list[SplitSummary]:
    """One row per (dataset, split): dialogues, turns (utterances), contexts and distinct emotions."""
    with Session(engine) as session:
        base = select(Dataset.name, Dialogue.split).join(Dialogue, Dialogue.dataset_id == Dataset.id)
        if dataset:
            base = base.where(Dataset.name == dataset)
        groups = base.group_by(Dataset.name, Dialogue.split)
        dialogues = {(d, s): (n, e) for d, s, n, e in session.execute(
            groups.add_columns(func.count(Dialogue.id), func.count(distinct(Dialogue.emotion)))).all()}
        turns = dict(((d, s), n) for d, s, n in session.execute(
            groups.join(Turn, Turn.dialogue_id == Dialogue.id).add_columns(func.count(Turn.id))).all())
        contexts = dict(((d, s), n) for d, s, n in session.execute(
            groups.join(Context, Context.dialogue_id == Dialogue.id).add_columns(func.count(Context.id))).all())
    order = {"train": 0, "valid": 1, "test": 2}
    return [
        SplitSummary(d, s, n, turns.get((d, s), 0), contexts.get((d, s), 0), e)
        for (d, s), (n, e) in sorted(dialogues.items(), key=lambda kv: (kv[0][0], order.get(kv[0][1], 9), kv[0][1]))
    ]
