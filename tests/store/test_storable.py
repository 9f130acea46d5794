"""What the store can hold (server.store.storable): the limits are the schema's own, and they are tight on
both backends, so checking them first is what makes SQLite answer as PostgreSQL would."""
from __future__ import annotations

import pytest
from sqlalchemy import BigInteger, Integer, SmallInteger, String
from sqlalchemy.exc import DBAPIError, StatementError
from sqlalchemy.orm import Session

from empeval.server.datasets.importer import DATASET_NAME_LENGTH, LICENSE_LENGTH
from empeval.server.datasets.model import FIELD_LENGTHS
from empeval.server.errors import BadInput
from empeval.server.store import make_engine, unit_of_work, upgrade
from empeval.server.store.models import Assignment, Base, Dataset, Dialogue
from empeval.server.store.storable import MAX_ROW_ID, column_length, require_storable, text_problem


def test_text_problem_names_what_the_store_cannot_hold_and_where():
    assert text_problem("an ordinary reply, with émotion 😊") is None
    assert text_problem("x" * 200, limit=200) is None
    assert text_problem("x" * 201, limit=200) == "is 201 characters long; at most 200 are allowed"
    assert text_problem("ab\x00c") == "contains a NUL character (at position 2), which text cannot hold"
    surrogate = text_problem("ok \ud800")
    assert surrogate is not None and "unpaired surrogate ('\\ud800' at position 3)" in surrogate
    assert "unpaired surrogate" in (text_problem("\udfff") or "")
    assert "unpaired surrogate" in (text_problem("name\udcff") or "")  # an argument with an undecodable byte


def test_require_storable_raises_bad_input_naming_the_field():
    assert require_storable("mine", "--dataset", limit=100) == "mine"
    with pytest.raises(BadInput, match=r"^--dataset is 300 characters long; at most 100 are allowed$"):
        require_storable("d" * 300, "--dataset", limit=100)
    with pytest.raises(BadInput, match="^the source contains a NUL"):
        require_storable("a\x00", "the source")


def test_the_limits_are_read_from_the_models():
    assert FIELD_LENGTHS == {"conv_id": 200, "split": 20, "emotion": 50}
    assert (DATASET_NAME_LENGTH, LICENSE_LENGTH) == (100, 100)
    assert column_length(Dialogue, "conv_id") == Dialogue.__table__.c.conv_id.type.length
    with pytest.raises(TypeError, match="not a String column"):
        column_length(Dialogue, "situation")  # TEXT: no length to check


def test_every_integer_key_is_a_32_bit_integer_so_max_row_id_is_the_bound():
    """MAX_ROW_ID is INTEGER's largest value on PostgreSQL. A key column made BIGINT (or SMALLINT) would make it
    wrong for that table: this fails first, so the bound is changed with the schema."""
    assert MAX_ROW_ID == 2**31 - 1
    for table in Base.metadata.sorted_tables:
        for column in table.columns:
            if (column.primary_key or column.foreign_keys) and isinstance(column.type, Integer):
                assert type(column.type) is Integer, f"{table.name}.{column.name} is {column.type!r}"
                assert not isinstance(column.type, (BigInteger, SmallInteger))


def test_the_limits_are_tight_on_both_backends(store_url):
    """At the limit the store takes the value; one past it, PostgreSQL refuses what SQLite would have kept (which
    is why the checks run before the database), and an id past MAX_ROW_ID cannot even be looked up there."""
    engine = make_engine(store_url)
    upgrade(engine)
    longest = {"name": "n" * DATASET_NAME_LENGTH, "license": "l" * LICENSE_LENGTH}
    with unit_of_work(engine) as session:
        session.add(Dataset(source="", **longest))
    with Session(engine) as session:
        assert session.get(Assignment, MAX_ROW_ID) is None
        assert session.get(Assignment, -MAX_ROW_ID) is None
    if engine.dialect.name == "postgresql":
        with pytest.raises(DBAPIError, match="too long"), unit_of_work(engine) as session:
            session.add(Dataset(name="m" * (DATASET_NAME_LENGTH + 1), source="", license=""))
        with pytest.raises((DBAPIError, StatementError)), Session(engine) as session:
            session.get(Assignment, MAX_ROW_ID + 1)
    engine.dispose()


def test_string_columns_the_importers_fill_are_all_checked():
    """Every bounded column an import writes has its limit checked: a new one fails here until it is."""
    checked = {("dialogue", name) for name in FIELD_LENGTHS} | {("dataset", "name"), ("dataset", "license")}
    written = {("dialogue", c.name) for c in Dialogue.__table__.columns} | {("dataset", c.name)
                                                                           for c in Dataset.__table__.columns}
    bounded = {(table, name) for table, name in written
               if isinstance(Base.metadata.tables[table].c[name].type, String)
               and Base.metadata.tables[table].c[name].type.length is not None}
    # content_hash is ours (64 hex digits), not the user's.
    assert bounded - checked == {("dialogue", "content_hash")}
