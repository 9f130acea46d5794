"""When the store cannot be written: a full disk, a read-only database, a database that cannot be opened or
reached. These are not bugs, and not the caller's fault: each gets a one-line message saying what is wrong and
what to do, a 503 from the app (for a command: exit 4, see entry/storage.py), and nothing else.

Nothing is cached about the failure: the next request opens its transaction as usual, so once space returns or
the database is writable again the app works without a restart. SQLite says what happened in an error code;
PostgreSQL in a SQLSTATE; an operating-system error (the secret file next to the database, say) in errno.
"""
from __future__ import annotations

import errno
import sqlite3
import sys

from flask import Response, current_app, jsonify
from sqlalchemy.exc import DBAPIError

from empeval.server.errors import Unavailable

RETRY_AFTER_SECONDS = 30

_FULL = ("the database is full (its disk is out of space, or it reached its size limit): nothing was written; "
         "free some space and try again (no restart is needed)")
_READ_ONLY = ("the database is read-only: nothing was written; make it writable (the file's and its folder's "
              "permissions, a read-only mount, mode=ro in the URL, or PostgreSQL's default_transaction_read_only)")
_CANNOT_OPEN = "the database cannot be opened: check that its folder exists and that this user may write there"
_DISK_ERROR = "the disk failed while reading or writing the database (an I/O error): check the disk, then try again"
_BUSY = "the database is busy (another process holds its write lock): try again in a moment"
_UNREACHABLE = "the database server cannot be reached: check that it runs and that the database URL is right"
_SERVER_SHORT = "the database server is out of resources"
_SERVER_RESTARTING = "the database server is shutting down or starting up: try again in a moment"

# SQLite primary result codes (the low byte of an extended code), https://sqlite.org/rescode.html
_SQLITE = {5: _BUSY, 6: _BUSY, 8: _READ_ONLY, 10: _DISK_ERROR, 13: _FULL, 14: _CANNOT_OPEN}
# PostgreSQL SQLSTATEs, https://www.postgresql.org/docs/current/errcodes-appendix.html
_POSTGRES = {"53100": _FULL, "25006": _READ_ONLY, "57P01": _SERVER_RESTARTING, "57P02": _SERVER_RESTARTING,
             "57P03": _SERVER_RESTARTING}
_POSTGRES_CLASSES = {"08": _UNREACHABLE, "53": _SERVER_SHORT, "58": _DISK_ERROR}
_ERRNO = {errno.ENOSPC: _FULL, errno.EDQUOT: _FULL, errno.EROFS: _READ_ONLY}


class StorageUnavailable(Unavailable):
    """The store cannot be written (or read) now; the message says why and what to do."""

    http_status = 503


def storage_failure_message(error: BaseException) -> str | None:
    """One line saying why the store failed, if `error` is a storage failure (full, read-only, cannot be opened
    or reached, busy, disk error), else None: any other database error is a bug or a constraint, not this."""
    cause = error.orig if isinstance(error, DBAPIError) else error
    reason = _reason(cause)
    if reason is None:
        return None
    detail = str(cause).strip().splitlines()[0] if str(cause).strip() else type(cause).__name__
    return f"{reason} ({detail})"


def _reason(cause: BaseException | None) -> str | None:
    if isinstance(cause, sqlite3.Error):
        code = getattr(cause, "sqlite_errorcode", None)
        return _SQLITE.get(code & 0xFF) if isinstance(code, int) else None
    # Looked up, not imported: an install for SQLite only has no psycopg, and then no error can come from it.
    psycopg = sys.modules.get("psycopg")
    if psycopg is not None and isinstance(cause, psycopg.Error):
        sqlstate = cause.sqlstate
        if sqlstate is None:  # the client failed before any server answered: there is no connection
            return _UNREACHABLE if isinstance(cause, psycopg.OperationalError) else None
        return _POSTGRES.get(sqlstate) or _POSTGRES_CLASSES.get(sqlstate[:2])
    if isinstance(cause, OSError):
        return _ERRNO.get(cause.errno) if cause.errno is not None else None
    return None


def as_storage_unavailable(error: BaseException) -> StorageUnavailable | None:
    """The StorageUnavailable `error` means, or None if it is not a storage failure."""
    message = storage_failure_message(error)
    return None if message is None else StorageUnavailable(message)


def storage_error_as_json(error: DBAPIError) -> tuple[Response, int]:
    """The app's handler for database errors: a storage failure answers 503 with its one-line message (and
    Retry-After); any other database error is re-raised, to be the 500 it is."""
    unavailable = as_storage_unavailable(error)
    if unavailable is None:
        raise error
    current_app.logger.error("storage failure: %s", unavailable.message)
    response = jsonify(error=type(unavailable).__name__, message=unavailable.message)
    response.headers["Retry-After"] = str(RETRY_AFTER_SECONDS)
    return response, unavailable.http_status
