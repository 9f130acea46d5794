"""Helpers for store tests: a whole-database snapshot to prove that nothing changed."""
from __future__ import annotations

from sqlalchemy import Engine, inspect, select, text

from empeval.server.store.models import Base

# Per database and schema, each table's query: reflecting the columns took two thirds of a snapshot's time (the
# hostile-route corpus takes ~700 snapshots of one store). A schema is named by the database, its Alembic revision
# and its table names, so a migration (tests/store) or a table made by hand gets its own entry.
_QUERIES: dict[tuple[str, str | None, frozenset[str]], dict[str, tuple[str, bool]]] = {}


def _queries(engine: Engine, revision: str | None, tables: frozenset[str]) -> dict[str, tuple[str, bool]]:
    """Table name -> (SELECT of the columns this revision has, in primary-key order; whether it has a key)."""
    key = (engine.url.render_as_string(hide_password=False), revision, tables)
    if key not in _QUERIES:
        inspector = inspect(engine)
        found: dict[str, tuple[str, bool]] = {}
        for table in Base.metadata.sorted_tables:
            if table.name in tables:
                # The columns this revision has: an older store lacks the columns later migrations added.
                present = {column["name"] for column in inspector.get_columns(table.name)}
                columns = [column for column in table.columns if column.name in present]
                keys = [column for column in columns if column.primary_key]
                found[table.name] = (str(select(*columns).order_by(*keys).compile(engine)), bool(keys))
        _QUERIES[key] = found
    return _QUERIES[key]


def snapshot(engine: Engine) -> dict[str, list[tuple]]:
    """Every row of every table (plus the Alembic revision), in key order: equal snapshots mean an unchanged DB.
    Rows hold the values as the driver returns them (no type processing), equal when unchanged."""
    tables = frozenset(inspect(engine).get_table_names())
    result: dict[str, list[tuple]] = {}
    with engine.connect() as connection:
        versions: list = []
        if "alembic_version" in tables:
            versions = list(connection.execute(text("SELECT version_num FROM alembic_version")).all())
        revision = ",".join(sorted(v[0] for v in versions)) or None
        for name, (query, keyed) in _queries(engine, revision, tables).items():
            rows = list(map(tuple, connection.exec_driver_sql(query).all()))
            # In key order from the database (unique, so equal row sets give equal lists); sorting in Python cost as
            # much as reading the rows.
            result[name] = rows if keyed else sorted(rows, key=repr)
        if "alembic_version" in tables:
            result["alembic_version"] = versions
    return result
