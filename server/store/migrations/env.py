"""Alembic environment: runs migrations on the engine handed over by server.store.migrate."""
from alembic import context

from empeval.server.store.engine import make_engine
from empeval.server.store.models import Base

config = context.config
target_metadata = Base.metadata


def run_migrations_online() -> None:
    engine = config.attributes.get("engine") or make_engine(config.get_main_option("sqlalchemy.url"))
    with engine.connect() as connection:
        context.configure(
            connection=connection,
            target_metadata=target_metadata,
            render_as_batch=connection.dialect.name == "sqlite",
        )
        with context.begin_transaction():
            context.run_migrations()
        connection.commit()


if context.is_offline_mode():
    raise SystemExit("empeval runs migrations online only: use `empeval db upgrade`.")
run_migrations_online()
