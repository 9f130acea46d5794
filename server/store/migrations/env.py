"""Alembic environment: runs migrations on the engine handed over by server.store.migrate.

Each revision is one transaction, committed with its alembic_version update (transaction_per_migration), on
SQLite as on PostgreSQL: transactional_ddl is claimed for SQLite too, which holds because migration_connection
opens every transaction with an explicit BEGIN (see its docstring). A process killed mid-upgrade leaves the store
at the last revision it committed, with that revision's schema exactly.
"""
from alembic import context
from sqlalchemy import Connection

from empeval.server.errors import Conflict
from empeval.server.store.engine import make_engine, migration_connection
from empeval.server.store.models import Base

config = context.config
target_metadata = Base.metadata

# How many dangling references a refused revision names.
SHOWN_VIOLATIONS = 5


def _check_foreign_keys(ctx, step, heads, run_args) -> None:  # noqa: ARG001 (Alembic's on_version_apply signature)
    """Before a SQLite revision commits: foreign keys are off while migrating (migration_connection), so check
    here that it left no row pointing at nothing, and refuse the revision (rolled back whole) if it did."""
    connection: Connection = ctx.connection
    if connection.dialect.name != "sqlite":
        return
    dangling = connection.exec_driver_sql("PRAGMA foreign_key_check").fetchall()
    if dangling:
        shown = "; ".join(f"{table} row {rowid} -> {parent}"
                          for table, rowid, parent, _key in dangling[:SHOWN_VIOLATIONS])
        raise Conflict(f"after migration {step.up_revision_id}, {len(dangling)} rows point at rows that do not exist "
                       f"({shown}), so none of it was applied; if they did before it, delete or repair them first")


def run_migrations_online() -> None:
    engine = config.attributes.get("engine") or make_engine(config.get_main_option("sqlalchemy.url"))
    with migration_connection(engine) as connection:
        context.configure(
            connection=connection,
            target_metadata=target_metadata,
            render_as_batch=connection.dialect.name == "sqlite",
            transactional_ddl=True,
            transaction_per_migration=True,
            on_version_apply=_check_foreign_keys,
        )
        with context.begin_transaction():
            context.run_migrations()


if context.is_offline_mode():
    raise SystemExit("empeval runs migrations online only: use `empeval db upgrade`.")
run_migrations_online()
