"""The SQL store: schema (models), connection (engine) and migrations (migrate)."""
from sqlalchemy import Engine

from empeval.server.store.engine import database_url, make_engine, unit_of_work
from empeval.server.store.migrate import downgrade, ensure_schema, upgrade


def open_store(url: str | None = None) -> Engine:
    """The engine of the store at `url` (see database_url), its schema brought up to date first."""
    engine = make_engine(url)
    ensure_schema(engine)
    return engine


__all__ = ["database_url", "downgrade", "ensure_schema", "make_engine", "open_store", "unit_of_work", "upgrade"]
