"""What every command shares: the store's engine (migrated on first use) and the one error-to-exit-code map.

Commands raise the errors of their rooms (server.errors.EmpevalError and its kinds; analysis's ExportError
and the ValueErrors its functions raise for bad arguments); `EmpevalGroup`, the root group, turns each into
a one-line message and the exit code of its kind. Exit codes: 0 success, 1 unexpected failure, 2 bad usage
or bad input, 3 conflict with stored data, 4 network or remote failure.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, NoReturn

import click
from sqlalchemy import Engine

from analysis.load import ExportError
from analysis.pairwise_schema import JudgmentError
from entry.storage import storage_failure
from server.errors import BadInput, Conflict, EmpevalError, Unavailable
from server.store import open_store
from server.store.engine import database_url
from tasks.crowd.contract import ContractError

EXIT_BAD_INPUT = BadInput.exit_code
EXIT_CONFLICT = Conflict.exit_code
EXIT_NETWORK = Unavailable.exit_code

# Errors from modules that import nothing of ours (analysis; the crowd contract, which the crowd virtualenv
# loads by path with the standard library only), by the exit code they mean.
FOREIGN_EXIT_CODES: dict[type[Exception], int] = {ExportError: EXIT_BAD_INPUT, JudgmentError: EXIT_BAD_INPUT,
                                                  ContractError: EXIT_BAD_INPUT}


def exit_code_of(error: BaseException) -> int | None:
    """The exit code an error means, or None for an unexpected error (a bug: let the traceback show)."""
    if isinstance(error, EmpevalError):
        return error.exit_code
    for kind, code in FOREIGN_EXIT_CODES.items():
        if isinstance(error, kind):
            return code
    return None


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
            if migrate:
                self._engine = open_store(self.url)
            else:
                from server.store import make_engine

                self._engine = make_engine(self.url)
        return self._engine


pass_cli = click.make_pass_decorator(CliContext)


def fail(message: str, code: int) -> NoReturn:
    click.secho(f"error: {message}", fg="red", err=True)
    raise SystemExit(code)


class EmpevalGroup(click.Group):
    """The root group: every command below it runs inside `invoke`, so one handler maps every room's errors."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except Exception as error:  # noqa: BLE001 - re-raised unless it is one we know how to report
            error = storage_failure(error, database=getattr(ctx.obj, "url", None)) or error
            code = exit_code_of(error)
            if code is None:
                raise
            fail(getattr(error, "message", None) or str(error), code)
