"""Writes parsed dialogues into the store: dialogues, turns, and one context per listener turn.

One import is one transaction: a bad line anywhere (the parsers check the whole input before anything is
written) or a conflict with stored data leaves the database exactly as it was. Re-importing the same
dialogues is a no-op: each dialogue's content hash is stored and compared. Whatever the store could not hold
(a name longer than its column, a NUL, an unpaired surrogate) is refused before the transaction starts, so
SQLite and PostgreSQL answer alike (see server.store.storable).
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from sqlalchemy import Engine, select
from sqlalchemy.orm import Session

from empeval.server.datasets.errors import ImportConflictError, InputFileError
from empeval.server.datasets.model import ParsedDialogue
from empeval.server.store.bulk import insert_returning_ids, insert_rows
from empeval.server.store.engine import unit_of_work
from empeval.server.store.models import Context, Dataset, Dialogue, Turn
from empeval.server.store.storable import column_length, require_storable

DATASET_NAME_LENGTH = column_length(Dataset, "name")
LICENSE_LENGTH = column_length(Dataset, "license")

# Rows per INSERT batch: large enough to amortise round trips, small enough for PostgreSQL's parameter cap.
BATCH = 2000


@dataclass
class ImportResult:
    dataset: str
    dialogues_added: int = 0
    dialogues_unchanged: int = 0
    turns_added: int = 0
    contexts_added: int = 0

    def describe(self) -> str:
        return (f"{self.dataset}: {self.dialogues_added} dialogues added ({self.turns_added} turns, "
                f"{self.contexts_added} contexts), {self.dialogues_unchanged} already present")


def _get_or_create_dataset(session: Session, name: str, source: str, license: str) -> Dataset:
    dataset = session.scalar(select(Dataset).where(Dataset.name == name))
    if dataset is None:
        dataset = Dataset(name=name, source=source, license=license)
        session.add(dataset)
        session.flush()
    return dataset


def _check_storable(dialogues: Sequence[ParsedDialogue], *, dataset: str, source: str, license: str) -> None:
    """Refuse, before any write, what the store cannot hold: the dataset's own fields, then each dialogue's."""
    require_storable(dataset, "the dataset name (--dataset)", limit=DATASET_NAME_LENGTH)
    require_storable(license, "the licence (--license)", limit=LICENSE_LENGTH)
    require_storable(source, "the source")
    for dialogue in dialogues:
        if problem := dialogue.storage_problem():
            path, _, line = dialogue.source.rpartition(":")
            if path and line.isdigit():
                raise InputFileError(path, int(line), problem)
            raise InputFileError(dialogue.source or "<dialogues>", None, problem)


def _batches(rows: Sequence, size: int = BATCH):
    for start in range(0, len(rows), size):
        yield rows[start:start + size]


def import_dialogues(
    engine: Engine,
    dialogues: Sequence[ParsedDialogue],
    *,
    dataset: str,
    source: str = "",
    license: str = "",
    progress: Callable[[int], None] | None = None,
) -> ImportResult:
    """Store `dialogues` under `dataset` in one transaction; see the module docstring for the guarantees.

    `progress(n)` is called as dialogues are written (n dialogues at a time).
    """
    _check_storable(dialogues, dataset=dataset, source=source, license=license)
    result = ImportResult(dataset=dataset)
    with unit_of_work(engine) as session:
        dataset_row = _get_or_create_dataset(session, dataset, source, license)
        stored = dict(session.execute(
            select(Dialogue.conv_id, Dialogue.content_hash).where(Dialogue.dataset_id == dataset_row.id)
        ).all())
        new: list[ParsedDialogue] = []
        for dialogue in dialogues:
            known = stored.get(dialogue.conv_id)
            if known is None:
                new.append(dialogue)
            elif known == dialogue.content_hash():
                result.dialogues_unchanged += 1
                if progress:
                    progress(1)
            else:
                raise ImportConflictError(
                    f"{dialogue.source}: conversation {dialogue.conv_id} is already stored in dataset "
                    f"{dataset!r} with different content; nothing was imported. Import it into another "
                    f"dataset (--dataset NAME) or remove the stored one first."
                )

        for chunk in _batches(new):
            dialogue_ids = insert_returning_ids(session, Dialogue, [
                {"dataset_id": dataset_row.id, "conv_id": d.conv_id, "split": d.split, "emotion": d.emotion,
                 "situation": d.situation, "content_hash": d.content_hash()} for d in chunk])
            turn_rows = [
                {"dialogue_id": dialogue_id, "idx": t.idx, "role": t.role, "text": t.text}
                for dialogue_id, d in zip(dialogue_ids, chunk, strict=True) for t in d.turns
            ]
            turn_ids: list[int] = []
            for turn_chunk in _batches(turn_rows):
                turn_ids += insert_returning_ids(session, Turn, turn_chunk)
            context_rows = []
            offset = 0
            for dialogue_id, d in zip(dialogue_ids, chunk, strict=True):
                for n_turns, turn_index in d.context_prefix_lengths():
                    context_rows.append({"dialogue_id": dialogue_id, "n_turns": n_turns,
                                         "reference_turn_id": turn_ids[offset + turn_index]})
                offset += len(d.turns)
            for context_chunk in _batches(context_rows):
                insert_rows(session, Context, context_chunk)
            result.dialogues_added += len(chunk)
            result.turns_added += len(turn_rows)
            result.contexts_added += len(context_rows)
            if progress:
                progress(len(chunk))
    return result
