"""Helpers for store tests: a whole-database snapshot to prove that nothing changed."""
from __future__ import annotations

from sqlalchemy import Engine, inspect, select, text

from empeval.server.store.models import Base


def snapshot(engine: Engine) -> dict[str, list[tuple]]:
    """Every row of every table (plus the Alembic revision), sorted: equal snapshots mean an unchanged DB."""
    tables = set(inspect(engine).get_table_names())
    result: dict[str, list[tuple]] = {}
    with engine.connect() as connection:
        for table in Base.metadata.sorted_tables:
            if table.name in tables:
                result[table.name] = sorted(map(tuple, connection.execute(select(table)).all()), key=repr)
        if "alembic_version" in tables:
            result["alembic_version"] = connection.execute(text("SELECT version_num FROM alembic_version")).all()
    return result
