"""The SQL store: schema (models, and each study kind's tables under kinds/), connection (engine) and migrations
(migrate). Importing it registers every study kind's store part (kinds/registered.py)."""
from sqlalchemy import Engine

import empeval.server.store.item_comment_tables  # noqa: F401 (per-item comments)
import empeval.server.store.kinds.registered  # noqa: F401 (every kind's setup and tables, registered)
import empeval.server.store.model_assisted_tables  # noqa: F401 (pairwise judge verdicts)
import empeval.server.store.qualification_tables  # noqa: F401 (a study's qualification: its tables)
from empeval.server.store.engine import database_url, make_engine, unit_of_work
from empeval.server.store.migrate import downgrade, ensure_schema, upgrade


def open_store(url: str | None = None) -> Engine:
    """The engine of the store at `url` (see database_url), its schema brought up to date first."""
    engine = make_engine(url)
    ensure_schema(engine)
    return engine


__all__ = ["database_url", "downgrade", "ensure_schema", "make_engine", "open_store", "unit_of_work", "upgrade"]
