"""Migration 0008 (study_context: a Likert study's contexts and whether people rate them) on SQLite and
PostgreSQL: the upgrade adds the table empty beside 0007's rows, its keys hold (one row per study and context; a
study's rows go with it; a context a study records cannot be deleted under it), and the downgrade drops it and
keeps every other row."""
from __future__ import annotations

from datetime import UTC, datetime

import pytest
from sqlalchemy import delete, inspect
from sqlalchemy.exc import IntegrityError

from empeval.server.store import downgrade, make_engine, upgrade
from empeval.server.store.migrate import current_revision, head_revision
from tests.store.test_migration_0003 import add, rows, tables

NOW = datetime(2026, 12, 1, 11, 0, tzinfo=UTC)


@pytest.fixture
def store_at_0007(store_url):
    """A study over two contexts, written under 0007."""
    engine = make_engine(store_url)
    upgrade(engine, "0007")
    dataset = add(engine, "dataset", name="d", source="", license="", created_at=NOW)
    dialogue = add(engine, "dialogue", dataset_id=dataset, conv_id="c", split="test", content_hash="h")
    contexts = []
    for n in (1, 2):
        add(engine, "turn", dialogue_id=dialogue, idx=2 * n - 1, role="speaker", text=f"s{n}")
        listener = add(engine, "turn", dialogue_id=dialogue, idx=2 * n, role="listener", text=f"l{n}")
        contexts.append(add(engine, "context", dialogue_id=dialogue, n_turns=2 * n - 1, reference_turn_id=listener))
    study = add(engine, "study", name="s", config={"design": {"human_share": 0.5}}, seed=0, status="open",
                created_at=NOW)
    yield engine, study, contexts
    engine.dispose()


def insert_sample(engine, study: int, contexts: list[int]) -> None:
    target = tables(engine).tables["study_context"]
    with engine.begin() as connection:
        connection.execute(target.insert(), [{"study_id": study, "context_id": c, "human_rated": i == 0}
                                             for i, c in enumerate(contexts)])


def test_upgrade_adds_the_table_empty_and_its_keys_hold(store_at_0007):
    engine, study, contexts = store_at_0007
    assert "study_context" not in inspect(engine).get_table_names()
    upgrade(engine)
    assert current_revision(engine) == head_revision()
    assert rows(engine, "study_context", "study_id", "context_id", "human_rated") == set()
    insert_sample(engine, study, contexts)
    assert rows(engine, "study_context", "context_id", "human_rated") == {(contexts[0], True), (contexts[1], False)}
    with pytest.raises(IntegrityError):  # one row per (study, context)
        insert_sample(engine, study, contexts[:1])
    context = tables(engine).tables["context"]
    with pytest.raises(IntegrityError), engine.begin() as connection:  # the record keeps its context
        connection.execute(delete(context).where(context.c.id == contexts[0]))
    with engine.begin() as connection:  # a study's record goes with it
        connection.execute(delete(tables(engine).tables["study"]))
    assert rows(engine, "study_context", "study_id") == set()


def test_downgrade_drops_the_table_and_keeps_every_other_row(store_at_0007):
    engine, study, contexts = store_at_0007
    upgrade(engine)
    insert_sample(engine, study, contexts)
    before = {name: rows(engine, name, "id") for name in ("study", "context", "dialogue", "turn")}
    downgrade(engine, "0007")
    assert current_revision(engine) == "0007"
    assert "study_context" not in inspect(engine).get_table_names()
    assert {name: rows(engine, name, "id") for name in before} == before
    upgrade(engine)  # and up again, empty
    assert rows(engine, "study_context", "study_id") == set()
