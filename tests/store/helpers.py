"""Helpers for store tests: a whole-database snapshot to prove that nothing changed."""
from __future__ import annotations

from sqlalchemy import Engine, inspect, select, text

from empeval.server.store.models import Base


def snapshot(engine: Engine) -> dict[str, list[tuple]]:
    """Every row of every table (plus the Alembic revision), sorted: equal snapshots mean an unchanged DB."""
    inspector = inspect(engine)
    tables = set(inspector.get_table_names())
    result: dict[str, list[tuple]] = {}
    with engine.connect() as connection:
        for table in Base.metadata.sorted_tables:
            if table.name in tables:
                # The columns this revision has: an older store lacks the columns later migrations added.
                present = {column["name"] for column in inspector.get_columns(table.name)}
                columns = [column for column in table.columns if column.name in present]
                result[table.name] = sorted(map(tuple, connection.execute(select(*columns)).all()), key=repr)
        if "alembic_version" in tables:
            result["alembic_version"] = connection.execute(text("SELECT version_num FROM alembic_version")).all()
    return result
