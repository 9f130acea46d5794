"""The typed study configuration: one definition, a lossless round trip through the store, old rows that
still load, invalid rows that say which study and which key, and a raw column nobody else reads."""
from __future__ import annotations

import ast
import dataclasses
import types
import typing
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sqlalchemy import insert, text

from empeval.server.store import make_engine, open_store, unit_of_work, upgrade
from empeval.server.store.kinds import StudySetup, kind_names, setup_class
from empeval.server.store.kinds.likert import Scale
from empeval.server.store.models import Study
from empeval.server.store.queries import study_by_name
from empeval.server.store.study_config import StudyConfig
from empeval.server.store.study_parts import Criterion, Pay, StudyConfigError
from empeval.tasks.study_file import parse_study

REPO = Path(__file__).resolve().parents[2]

# Exactly what the study-file parser stored before the configuration was typed (StudySpec.to_config of
# examples/pilot-study.toml's kind): every database written by an earlier version holds rows like it.
OLD_ROW = {
    "name": "old-pilot", "seed": 7,
    "contexts": {"dataset": "empatheticdialogues", "split": "test", "count": 60, "ids": [], "emotions": []},
    "systems": ["gold", "moel"], "controls": ["control-generic"],
    "design": {"ratings_per_response": 3, "items_per_assignment": 10, "control_rate": 0.1, "assignment_minutes": 45},
    "criteria": [{"key": "empathy", "label": "Empathy", "question": "Empathic?", "definition": ""},
                 {"key": "fluency", "label": "Fluency", "question": "Fluent?", "definition": "Readable."}],
    "scale": {"min": 1, "max": 4, "labels": ["1", "2", "3", "4"]},
    "pay": {"per_assignment": 0.6, "currency": "GBP", "platform_fee": 0.33},
    "title": "A pilot", "instructions": "Read carefully.",
    "control_targets": {"control-generic": "empathy"},
}


def _strategy(kind: typing.Any) -> st.SearchStrategy:
    """A strategy for any value of a field's declared type, nested dataclasses included."""
    origin, args = typing.get_origin(kind), typing.get_args(kind)
    if kind is StudySetup:  # exactly one kind's setup: any registered one
        return st.one_of(*(_strategy(setup_class(name)) for name in kind_names()))
    if dataclasses.is_dataclass(kind):
        hints = typing.get_type_hints(kind)
        return st.builds(kind, **{f.name: _strategy(hints[f.name]) for f in dataclasses.fields(kind)})
    if origin in (typing.Union, types.UnionType):
        return st.one_of(*(_strategy(a) for a in args))
    if origin is tuple:
        return st.lists(_strategy(args[0]), max_size=3).map(tuple)
    if origin is dict:
        return st.dictionaries(_strategy(args[0]), _strategy(args[1]), max_size=3)
    return {str: st.text(min_size=1, max_size=8), int: st.integers(-5, 500), type(None): st.none(),
            float: st.floats(allow_nan=False, allow_infinity=False, width=32), bool: st.booleans()}[kind]


@settings(max_examples=80, deadline=None)
@given(_strategy(StudyConfig))
def test_every_field_survives_the_round_trip_through_the_stored_json(config):
    # A field added to StudyConfig that from_json does not read (or reads into the wrong place) fails here.
    assert StudyConfig.from_json(config.to_json(), study=config.name) == config


def test_the_study_file_parser_writes_the_typed_configuration():
    config = parse_study({"name": "p", "seed": 3, "contexts": {"count": 5}, "systems": {
        "names": ["gold"], "controls": ["control-scrambled"]}, "pay": {"per_assignment": 1.5}})
    assert isinstance(config, StudyConfig)
    assert config.control_targets == {"control-scrambled": "fluency"}
    assert config.pay == Pay(per_assignment=1.5, currency="USD", platform_fee=0.2)
    assert config.design.control_rate == 0.1 and config.setup.scale == Scale()
    assert StudyConfig.from_json(config.to_json(), study="p") == config


def test_rows_written_before_the_typed_configuration_still_load(store_url):
    engine = make_engine(store_url)
    upgrade(engine, "0002")  # the schema those rows were written under
    with engine.begin() as connection:
        connection.execute(insert(Study.__table__).values(name="old-pilot", config=OLD_ROW, seed=7, status="open"))
        connection.execute(insert(Study.__table__).values(name="older", config={"systems": ["gold"]}, seed=0,
                                                          status="open"))
    engine = open_store(store_url)  # migrated to head
    with unit_of_work(engine) as session:
        config = study_by_name(session, "old-pilot").config
        bare = study_by_name(session, "older").config
    assert config.design.assignment_minutes == 45 and config.setup.scale.max == 4
    assert config.criteria[1] == Criterion("fluency", "Fluency", "Fluent?", "Readable.")
    assert config.pay.cost(10) == round(10 * 0.6 * 1.33, 2) and config.pay.currency == "GBP"
    assert config.control_targets == {"control-generic": "empathy"}
    assert bare.systems == ("gold",) and bare.design == StudyConfig().design  # missing keys: the defaults
    engine.dispose()


@pytest.mark.parametrize(("key", "value", "named"), [
    ("design", {"ratings_per_response": "three"}, "design.ratings_per_response"),
    ("scale", {"min": 1, "max": 5.5}, "scale.max"),
    ("criteria", [{"label": "no key"}], "criteria[0].key"),
    ("pay", {"per_assignment": "free"}, "pay.per_assignment"),
    ("systems", "gold", "systems"),
])
def test_a_stored_row_that_does_not_validate_names_the_study_and_the_key(store_url, key, value, named):
    engine = open_store(store_url)
    with engine.begin() as connection:
        connection.execute(insert(Study.__table__).values(name="broken", config={**OLD_ROW, key: value}, seed=0,
                                                          status="open"))
    with unit_of_work(engine) as session, pytest.raises(StudyConfigError) as caught:
        study_by_name(session, "broken").config  # noqa: B018 - reading it is the point
    assert "study 'broken'" in str(caught.value) and named in str(caught.value)
    assert caught.value.exit_code == 2
    engine.dispose()


def test_nothing_outside_the_store_reads_the_raw_configuration_column():
    readers = []
    # The skipped folders are left out before walking: globbing the virtualenvs' 23,000 files first cost seconds.
    skipped = {".venv", ".venv-crowd", "node_modules", "mutants", "mutation", "build"}
    folders = sorted(p for p in REPO.iterdir() if p.is_dir() and p.name not in skipped)
    for path in (path for folder in folders for path in sorted(folder.glob("**/*.py"))):
        relative = path.relative_to(REPO)
        if relative.parts[:2] == ("server", "store"):
            continue
        if relative.parts[0] == "tests" and path.name == Path(__file__).name:
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        readers += [f"{relative}:{node.lineno}" for node in ast.walk(tree)
                    if isinstance(node, ast.Attribute) and node.attr == "_config_json"]
    assert readers == []


def test_the_raw_column_is_json_in_the_database(sqlite_url):
    engine = open_store(sqlite_url)
    with unit_of_work(engine) as session:
        session.add(Study(name="s", config=StudyConfig(name="s", systems=("gold",)), seed=0))
    with engine.connect() as connection:
        stored = connection.execute(text("SELECT config FROM study WHERE name = 's'")).scalar()
    assert '"systems": ["gold"]' in stored
    engine.dispose()
