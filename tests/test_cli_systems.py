"""The model registry refuses a system name the store cannot keep (longer than the `system.name` column, or
empty) with an error naming the file, the length and the limit, before any model runs or any row is written; a
name of exactly the limit is stored whole. `empeval systems` and `empeval generate` on a real SQLite file."""
from __future__ import annotations

from collections.abc import Iterator

import pytest
from click.testing import CliRunner
from sqlalchemy import select

from empeval.cli import cli
from empeval.server.backend.registry import MAX_NAME_LENGTH
from empeval.server.store import unit_of_work
from empeval.server.store.models import Response, System
from tests.conftest import sample_store_copy


@pytest.fixture
def store(tmp_path) -> Iterator[tuple[str, object]]:
    url = f"sqlite:///{tmp_path / 'store.db'}"
    engine = sample_store_copy(url)
    yield url, engine
    engine.dispose()


def config_naming(tmp_path, name: str):
    path = tmp_path / "systems.toml"
    path.write_text(f'[systems."{name}"]\nkind = "gold"\n', encoding="utf-8")
    return path


def stored_systems(engine) -> list[str]:
    with unit_of_work(engine) as session:
        return list(session.scalars(select(System.name)))


def test_the_limit_is_the_store_column_length():
    assert MAX_NAME_LENGTH == System.__table__.c.name.type.length == 100


def test_a_name_longer_than_the_store_keeps_is_refused_by_systems_and_generate_before_any_row(store, tmp_path):
    url, engine = store
    config = config_naming(tmp_path, "m" * (MAX_NAME_LENGTH + 1))
    listed = CliRunner().invoke(cli, ["--database-url", url, "systems", "--config", str(config)])
    assert listed.exit_code == 2
    message = " ".join(listed.output.split())
    assert str(config) in message and "101 characters long" in message and "at most 100" in message
    generated = CliRunner().invoke(cli, ["--database-url", url, "generate", "--config", str(config), "--systems",
                                         "all", "--limit", "2"])
    assert generated.exit_code == 2 and "at most 100" in generated.output
    assert "Traceback" not in generated.output and stored_systems(engine) == []


def test_a_name_of_exactly_the_limit_is_stored_whole(store, tmp_path):
    url, engine = store
    name = "m" * MAX_NAME_LENGTH
    config = config_naming(tmp_path, name)
    generated = CliRunner().invoke(cli, ["--database-url", url, "generate", "--config", str(config), "--systems",
                                         name, "--limit", "2"])
    assert generated.exit_code == 0, generated.output
    assert stored_systems(engine) == [name]
    with unit_of_work(engine) as session:
        assert len(session.scalars(select(Response.id)).all()) == 2


def test_an_empty_system_name_is_refused_with_what_to_write(store, tmp_path):
    url, _ = store
    listed = CliRunner().invoke(cli, ["--database-url", url, "systems", "--config", str(config_naming(tmp_path, ""))])
    assert listed.exit_code == 2 and "empty name" in listed.output and "[systems.my-model]" in listed.output
