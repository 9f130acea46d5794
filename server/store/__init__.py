"""The SQL store: schema (models), connection (engine) and migrations (migrate)."""
from server.store.engine import database_url, make_engine, unit_of_work
from server.store.migrate import downgrade, ensure_schema, upgrade

__all__ = ["database_url", "downgrade", "ensure_schema", "make_engine", "unit_of_work", "upgrade"]
