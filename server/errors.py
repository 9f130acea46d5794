"""The one root of the errors a user can cause, and what each kind means to the CLI and to HTTP.

Every room's errors derive from these, so the entry points need one map: a command exits with the error's
`exit_code` after printing its message, a route answers with its `http_status` and the message as JSON.

    exit 2  bad input or usage        (BadInput, NotFound, Forbidden)
    exit 3  conflict with stored data (Conflict)
    exit 4  network or remote failure (Unavailable)
    exit 1  anything unexpected
"""
from __future__ import annotations


class EmpevalError(Exception):
    """Something went wrong that the message explains; `exit_code` and `http_status` say how to report it."""

    exit_code = 1
    http_status = 500

    def __init__(self, message: str):
        super().__init__(message)
        self.message = message


class BadInput(EmpevalError, ValueError):
    """The input (a file, a request, an option) is wrong; the message says where and what to do."""

    exit_code = 2
    http_status = 400


class NotFound(BadInput):
    """What was asked for does not exist."""

    http_status = 404


class Forbidden(EmpevalError):
    """The caller may not do this (a wrong or expired token)."""

    exit_code = 2
    http_status = 403


class Conflict(EmpevalError):
    """The request contradicts what is stored."""

    exit_code = 3
    http_status = 409


class Unavailable(EmpevalError, RuntimeError):
    """A remote party (a download, a model endpoint, the crowd virtualenv) failed or is missing."""

    exit_code = 4
    http_status = 502
