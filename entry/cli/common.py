"""What every command shares: the store's engine (migrated on first use) and error-to-exit-code mapping."""
from __future__ import annotations

import functools
from dataclasses import dataclass, field

import click
from sqlalchemy import Engine

from server.datasets.errors import ImportConflictError, InputFileError
from server.store import ensure_schema, make_engine
from server.store.engine import database_url

EXIT_BAD_INPUT = 2
EXIT_CONFLICT = 3
EXIT_NETWORK = 4


class NetworkError(RuntimeError):
    """A download or remote call failed."""


@dataclass
class CliContext:
    database_url: str | None = None
    _engine: Engine | None = field(default=None, repr=False)

    @property
    def url(self) -> str:
        return database_url(self.database_url)

    def engine(self, *, migrate: bool = True) -> Engine:
        """The store's engine; the schema is brought up to date first unless migrate=False."""
        if self._engine is None:
            self._engine = make_engine(self.url)
            if migrate:
                ensure_schema(self._engine)
        return self._engine


pass_cli = click.make_pass_decorator(CliContext)


def fail(message: str, code: int) -> None:
    click.secho(f"error: {message}", fg="red", err=True)
    raise SystemExit(code)


def reports_errors(function):
    """Turn the errors users can cause into a one-line message and a meaningful exit code."""

    @functools.wraps(function)
    def wrapper(*args, **kwargs):
        try:
            return function(*args, **kwargs)
        except InputFileError as error:
            fail(f"{error} (nothing was imported)", EXIT_BAD_INPUT)
        except ImportConflictError as error:
            fail(str(error), EXIT_CONFLICT)
        except NetworkError as error:
            fail(str(error), EXIT_NETWORK)

    return wrapper
