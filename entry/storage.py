"""A command that meets a full disk or a read-only, unopenable or unreachable database stops with one line
saying so (exit 4, as for any unavailable resource), not with a traceback.

The root command group (entry.cli.common.EmpevalGroup) maps every error a user can cause to its exit code;
`storage_failure` turns the storage failures among the others (SQLAlchemy's and the operating system's, which
are no EmpevalError) into one, naming the database. The app answers the same failures with a 503
(server.web.storage_errors).
"""
from __future__ import annotations

from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError

from empeval.server.web.storage_errors import StorageUnavailable, storage_failure_message


def storage_failure(error: BaseException, *, database: str | None = None) -> StorageUnavailable | None:
    """The StorageUnavailable `error` means (its message naming `database`, a URL, without its password), or
    None if `error` is no storage failure."""
    message = storage_failure_message(error)
    if message is None:
        return None
    return StorageUnavailable(f"{_shown(database)}: {message}" if database else message)


def _shown(url: str) -> str:
    """The URL as given, unless it holds a password (rendering would also escape a SQLite `file:` name)."""
    try:
        parsed = make_url(url)
    except ArgumentError:
        return url
    return parsed.render_as_string(hide_password=True) if parsed.password else url
