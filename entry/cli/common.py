"""What every command shares: the store's engine (migrated on first use) and the one error-to-exit-code map.

Commands raise the errors of their rooms (server.errors.EmpevalError and its kinds; analysis's ExportFileError
and ReportRefused, and the ValueErrors its functions raise for bad arguments); `EmpevalGroup`, the root
group, turns each into a one-line message and the exit code of its kind. Exit codes: 0 success, 1 unexpected
failure, 2 bad usage or bad input, 3 conflict with stored data, 4 network or remote failure.
"""
from __future__ import annotations

import math
import os
from contextlib import suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn
from urllib.parse import urlsplit

import click

from empeval.server.errors import BadInput, Conflict, EmpevalError, Unavailable

if TYPE_CHECKING:
    from sqlalchemy import Engine

# This module is imported by every command, and by `empeval --help` (through the root group): it imports click and
# the errors only, and the store, the app and the analysis where a function needs them, so that help costs no
# SQLAlchemy, Flask or pandas (tests/test_cli_startup.py).

# server.store.storable's MAX_INTEGER and MAX_ROW_ID (what every store's integer columns hold), repeated here so
# that reading a command line imports no SQLAlchemy; tests/test_cli_startup.py holds them equal.
MAX_INTEGER = 2**31 - 1
MAX_ROW_ID = MAX_INTEGER
# server.datasets.sample's ED_DATASET (the store's name of EmpatheticDialogues), the default of every --dataset,
# repeated for the same reason (its module imports the store); held equal there too.
ED_DATASET = "empatheticdialogues"

# Where invite links point when no `empeval serve` of this store has said where it listens.
DEFAULT_BASE_URL = "http://127.0.0.1:5000"
SERVED_AT_SETTING = "served_at"  # the app_setting row `empeval serve` keeps its address in

# Every whole number on the command line has a range, checked when the command line is read: a mistyped or hostile
# one (10**30, -1) is refused there with the option's name (exit 2), and never reaches the store (its integers are
# 32-bit on PostgreSQL, 64-bit on SQLite), a random generator or a loop. tests/hostile/test_cli_fuzz.py holds every
# integer option to it.
ROW_ID = click.IntRange(1, MAX_ROW_ID)  # a stored row's id (an assignment's, ...)
SEED = click.IntRange(0, 2**32 - 1)  # what numpy's, torch's and Python's generators all take


def count(minimum: int = 1, maximum: int = MAX_INTEGER) -> click.IntRange:
    """A number of things (contexts, steps, workers, ...), between `minimum` and `maximum` inclusive."""
    return click.IntRange(minimum, maximum)


class FiniteRange(click.FloatRange):
    """A number between two bounds, both required: click's FloatRange lets NaN through (every comparison with it is
    false) and an open end lets infinity through, so a finite value is checked first."""

    def __init__(self, minimum: float, maximum: float, *, min_open: bool = False, max_open: bool = False) -> None:
        super().__init__(minimum, maximum, min_open=min_open, max_open=max_open)

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if isinstance(value, str) and value.strip().lower().lstrip("+-") in ("nan", "inf", "infinity"):
            self.fail(f"{value!r} is not a finite number.", param, ctx)
        number = super().convert(value, param, ctx)
        if not math.isfinite(number):
            self.fail(f"{value!r} is not a finite number.", param, ctx)
        return number


def share(*, open_ends: bool = False, below_one: bool = False) -> FiniteRange:
    """A share or probability: in [0, 1], (0, 1) with open_ends, [0, 1) with below_one."""
    return FiniteRange(0.0, 1.0, min_open=open_ends, max_open=open_ends or below_one)


def positive(maximum: float) -> FiniteRange:
    """A positive number up to `maximum` (an amount of something: points, minutes, ...)."""
    return FiniteRange(0.0, maximum, min_open=True)


class WritablePath(click.Path):
    """A file or folder a command writes (made if missing): click.Path's checks, and, when the command line is read,
    that it can be made there: no file stands where one of its folders should be, and the nearest folder that exists
    may be written by this user."""

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        converted = super().convert(value, param, ctx)
        path = Path(os.fsdecode(converted)).absolute()
        if path.exists():
            return converted
        folder = path.parent
        while not folder.exists() and folder != folder.parent:
            folder = folder.parent
        if not folder.is_dir():
            self.fail(f"{folder} is a file, not a folder: nothing can be written under it", param, ctx)
        if not os.access(folder, os.W_OK | os.X_OK):
            self.fail(f"the folder {folder} may not be written by this user", param, ctx)
        return converted


def write_whole(path: Path, text: str) -> None:
    """Write `text` to `path` (its folders made if missing) whole or not at all: to a temporary file beside it, then
    renamed over it, so that an interrupted command leaves the previous file, never half of the new one. BadInput
    naming the path when it cannot be written. The temporary file is synced before the rename (so the new file is
    whole on disk once it has the name), and temporaries beside it left by a writer that was killed (their process
    gone) are removed first."""
    temporary = path.with_name(f".{path.name}.partial-{os.getpid()}")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        _remove_stale_partials(path)
        with open(temporary, "w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temporary, path)
    except OSError as error:
        with suppress(OSError):
            temporary.unlink()
        raise BadInput(f"cannot write {path}: {error.strerror or error}") from None


def _remove_stale_partials(path: Path) -> None:
    """Delete `.NAME.partial-PID` files beside `path` whose process no longer runs (a write killed midway)."""
    for partial in path.parent.glob(f".{path.name}.partial-*"):
        pid = partial.name.rsplit("-", 1)[-1]
        if not pid.isdigit() or int(pid) == os.getpid():
            continue
        try:
            os.kill(int(pid), 0)
        except ProcessLookupError:
            with suppress(OSError):
                partial.unlink()
        except (PermissionError, OverflowError):
            continue  # alive under another user, or not a pid at all: leave it


EXIT_BAD_INPUT = BadInput.exit_code
EXIT_CONFLICT = Conflict.exit_code
EXIT_NETWORK = Unavailable.exit_code


def foreign_exit_codes() -> dict[type[Exception], int]:
    """Errors from modules that import nothing of ours (analysis; the crowd contract, which the crowd virtualenv
    loads by path with the standard library only), by the exit code they mean. Imported when an error is reported
    (the contract's package registers every kind's tasks part)."""
    from empeval.analysis.kinds import ExportFileError, ReportRefused
    from empeval.tasks.crowd.contract import ContractError

    return {ExportFileError: EXIT_BAD_INPUT, ReportRefused: EXIT_BAD_INPUT, ContractError: EXIT_BAD_INPUT}


def __getattr__(name: str) -> Any:
    """FOREIGN_EXIT_CODES, built on first use (PEP 562), as foreign_exit_codes() says."""
    if name == "FOREIGN_EXIT_CODES":
        return foreign_exit_codes()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def exit_code_of(error: BaseException) -> int | None:
    """The exit code an error means, or None for an unexpected error (a bug: let the traceback show)."""
    if isinstance(error, EmpevalError):
        return error.exit_code
    for kind, code in foreign_exit_codes().items():
        if isinstance(error, kind):
            return code
    return None


@dataclass
class CliContext:
    database_url: str | None = None
    _engine: Engine | None = field(default=None, repr=False)

    @property
    def url(self) -> str:
        from empeval.server.store.engine import database_url

        return database_url(self.database_url)

    def engine(self, *, migrate: bool = True) -> Engine:
        """The store's engine; the schema is brought up to date first unless migrate=False."""
        if self._engine is None:
            if migrate:
                from empeval.server.store import open_store

                self._engine = open_store(self.url)
            else:
                from empeval.server.store import make_engine

                self._engine = make_engine(self.url)
        return self._engine


pass_cli = click.make_pass_decorator(CliContext)


def served_base_url(host: str, port: int) -> str:
    """The address a browser on this machine reaches `empeval serve --host HOST --port PORT` at: a wildcard
    host (every interface) is reached at 127.0.0.1, an IPv6 address in brackets."""
    if host in ("", "0.0.0.0", "::"):
        host = "127.0.0.1"
    elif ":" in host:
        host = f"[{host}]"
    return f"http://{host}:{port}"


def checked_base_url(ctx: click.Context | None, param: click.Parameter | None, value: str | None) -> str | None:
    """A `--base-url` callback: the URL without a trailing slash, or a usage error (exit 2) unless it is an
    http(s) address with a host and no query or fragment."""
    if value is None:
        return None
    parsed = urlsplit(value.strip())
    if parsed.scheme not in ("http", "https") or not parsed.netloc or parsed.query or parsed.fragment:
        raise click.BadParameter(f"{value!r} is not an http(s) address such as https://eval.example.org or "
                                 "http://127.0.0.1:8000 (no query, no #)", ctx=ctx, param=param)
    return value.strip().rstrip("/")


def remember_base_url(engine: Engine, base_url: str) -> None:
    """Record where `empeval serve` serves this store, for the invite links printed later (in one transaction)."""
    from empeval.server.store.engine import unit_of_work
    from empeval.server.store.models import AppSetting

    with unit_of_work(engine) as session:
        session.merge(AppSetting(key=SERVED_AT_SETTING, value=base_url.rstrip("/")))


def invite_base_url(engine: Engine) -> str:
    """Where invite links point: the address the latest `empeval serve` of this store recorded, else
    DEFAULT_BASE_URL."""
    from empeval.server.store.engine import unit_of_work
    from empeval.server.store.models import AppSetting

    with unit_of_work(engine) as session:
        setting = session.get(AppSetting, SERVED_AT_SETTING)
        return setting.value if setting is not None else DEFAULT_BASE_URL


def fail(message: str, code: int) -> NoReturn:
    click.secho(f"error: {message}", fg="red", err=True)
    raise SystemExit(code)


class EmpevalGroup(click.Group):
    """The root group: every command below it runs inside `invoke`, so one handler maps every room's errors."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except (click.exceptions.Exit, click.exceptions.Abort, click.ClickException):
            # click's own ends (--help, usage errors, Ctrl-C) are no room's error: passed on as they are, without
            # importing the store to ask (`empeval CMD --help` stays light; tests/test_cli_startup.py).
            raise
        except Exception as error:  # noqa: BLE001 - re-raised unless it is one we know how to report
            from empeval.storage import storage_failure

            error = storage_failure(error, database=getattr(ctx.obj, "url", None)) or error
            code = exit_code_of(error)
            if code is None:
                raise
            fail(getattr(error, "message", None) or str(error), code)
