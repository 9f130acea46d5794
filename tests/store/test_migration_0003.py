"""Migration 0003 on a store written by 0002 with the double-claim bug's residue: a rater holding two active
assignments, and a context rated in two of her assignments. The upgrade keeps her first active assignment,
expires the other into the pool, backfills one seen row per (study, annotator, context) and then enforces
both keys; the downgrade removes what 0003 added and keeps every row of 0002's tables."""
from __future__ import annotations

from datetime import UTC, datetime

import pytest
from sqlalchemy import Engine, MetaData, func, insert, inspect, select
from sqlalchemy.exc import IntegrityError

from empeval.server.store import downgrade, make_engine, upgrade
from empeval.server.store.migrate import current_revision, head_revision

NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)


def tables(engine: Engine) -> MetaData:
    metadata = MetaData()
    metadata.reflect(engine)
    return metadata


def add(engine: Engine, table: str, **values) -> int:
    target = tables(engine).tables[table]
    with engine.begin() as connection:
        return connection.execute(insert(target).values(**values).returning(target.c.id)).scalar_one()


def rows(engine: Engine, table: str, *columns: str) -> set[tuple]:
    target = tables(engine).tables[table]
    with engine.connect() as connection:
        return set(map(tuple, connection.execute(select(*(target.c[c] for c in columns))).all()))


@pytest.fixture
def store_at_0002(store_url):
    """Three contexts with one response each in study s; rater ada holds two active assignments (contexts 1+2,
    and 3) and submitted one more with context 1 again; rater bo let one with context 2 expire; one is open."""
    engine = make_engine(store_url)
    upgrade(engine, "0002")
    ids: dict[str, int] = {}
    dataset = add(engine, "dataset", name="d", source="", license="", created_at=NOW)
    dialogue = add(engine, "dialogue", dataset_id=dataset, conv_id="c", split="test", content_hash="h")
    system = add(engine, "system", name="gold", kind="gold", version="1", parameters={}, created_at=NOW)
    study = ids["study"] = add(engine, "study", name="s", config={}, seed=0, status="open", created_at=NOW)
    items = []
    for n in range(1, 4):
        add(engine, "turn", dialogue_id=dialogue, idx=2 * n - 1, role="speaker", text=f"s{n}")
        listener = add(engine, "turn", dialogue_id=dialogue, idx=2 * n, role="listener", text=f"l{n}")
        ids[f"context{n}"] = context = add(engine, "context", dialogue_id=dialogue, n_turns=2 * n - 1,
                                           reference_turn_id=listener)
        response = add(engine, "response", context_id=context, system_id=system, text=f"r{n}", provenance={},
                       created_at=NOW)
        items.append(add(engine, "study_item", study_id=study, response_id=response, is_control=False, design={}))
    ids["ada"] = add(engine, "annotator", provider="local", pseudonym="ada", created_at=NOW)
    ids["bo"] = add(engine, "annotator", provider="local", pseudonym="bo", created_at=NOW)
    plan = {"first": ("ada", "assigned", [0, 1]), "second": ("ada", "assigned", [2]),
            "rated_again": ("ada", "submitted", [0]), "expired": ("bo", "expired", [1]), "open": (None, "open", [2])}
    for index, (name, (who, status, positions)) in enumerate(plan.items()):
        ids[name] = add(engine, "assignment", study_id=study, annotator_id=ids[who] if who else None, status=status,
                        created_at=NOW, started_at=NOW if who else None, round=0, design_index=index, late=False,
                        submission_id="sub-1" if status == "submitted" else None)
        for position, item in enumerate(positions):
            add(engine, "assignment_item", assignment_id=ids[name], item_id=items[item], position=position)
    yield engine, ids
    engine.dispose()


def test_upgrade_keeps_the_first_active_assignment_expires_the_other_and_backfills_seen_rows(store_at_0002):
    engine, ids = store_at_0002
    upgrade(engine)
    assert current_revision(engine) == head_revision()
    statuses = dict(rows(engine, "assignment", "id", "status"))
    assert statuses[ids["first"]] == "assigned" and statuses[ids["second"]] == "expired"
    copies = rows(engine, "assignment", "replaces_id", "status", "annotator_id", "design_index")
    assert (ids["second"], "open", None, 1) in copies
    copy_id = max(statuses)
    original = {item for assignment, item in rows(engine, "assignment_item", "assignment_id", "item_id")
                if assignment == ids["second"]}
    assert {item for assignment, item in rows(engine, "assignment_item", "assignment_id", "item_id")
            if assignment == copy_id} == original
    seen = rows(engine, "seen_context", "study_id", "annotator_id", "context_id", "assignment_id")
    s, ada, bo = ids["study"], ids["ada"], ids["bo"]
    assert seen == {(s, ada, ids["context1"], ids["first"]), (s, ada, ids["context2"], ids["first"]),
                    (s, ada, ids["context3"], ids["second"]), (s, bo, ids["context2"], ids["expired"])}
    assert rows(engine, "annotator", "pseudonym", "revoked_at") == {("ada", None), ("bo", None)}
    # Both keys hold from now on.
    with pytest.raises(IntegrityError):
        add(engine, "assignment", study_id=s, annotator_id=ada, status="assigned", created_at=NOW, round=0,
            design_index=9, late=False)
    with pytest.raises(IntegrityError):
        add(engine, "seen_context", study_id=s, annotator_id=bo, context_id=ids["context2"],
            assignment_id=ids["open"], seen_at=NOW)


def test_downgrade_removes_what_0003_added_and_keeps_every_row_and_upgrade_runs_again(store_at_0002):
    engine, ids = store_at_0002
    upgrade(engine)
    before = {table: rows(engine, table, "id") for table in ("assignment", "assignment_item", "annotator", "context")}
    downgrade(engine, "0002")
    assert current_revision(engine) == "0002"
    names = set(inspect(engine).get_table_names())
    assert not {"seen_context", "study_revocation"} & names
    assert "revoked_at" not in {c["name"] for c in inspect(engine).get_columns("annotator")}
    assert {table: rows(engine, table, "id") for table in before} == before
    # Without the index, 0002's code could claim twice again; the next upgrade puts that right once more.
    add(engine, "assignment", study_id=ids["study"], annotator_id=ids["bo"], status="assigned", created_at=NOW,
        round=0, design_index=7, late=False)
    add(engine, "assignment", study_id=ids["study"], annotator_id=ids["bo"], status="assigned", created_at=NOW,
        round=0, design_index=8, late=False)
    upgrade(engine)
    active = tables(engine).tables["assignment"]
    with engine.connect() as connection:
        per_rater = connection.execute(select(active.c.annotator_id, func.count()).where(active.c.status == "assigned")
                                       .group_by(active.c.annotator_id)).all()
    assert sorted(per_rater) == [(ids["ada"], 1), (ids["bo"], 1)]
