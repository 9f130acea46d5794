"""What the store can hold, checked before the database so that SQLite and PostgreSQL answer alike.

The two backends disagree on hostile values, and both disagree with a clear message:
- a NUL character: PostgreSQL refuses it in any text, SQLite stores it;
- an unpaired UTF-16 surrogate ("\\ud800", what a JSON escape or a command-line argument with undecodable bytes
  becomes in Python): no driver can encode it as UTF-8, so both fail with a traceback;
- a string longer than its column's declared length: PostgreSQL refuses it, SQLite stores it whole;
- an integer key beyond 2**31 - 1: PostgreSQL's INTEGER overflows, SQLite's 64-bit one does only past 2**63 - 1.
So every value a user can send is checked here first, by the importers, the annotation validators and the web
routes, with a message naming the field and the limit. The lengths are read from the models, so they cannot
drift from the schema.
"""
from __future__ import annotations

import re
from typing import Any

from sqlalchemy import String, inspect
from sqlalchemy.types import TypeEngine

from empeval.server.errors import BadInput

# Integer columns (the primary keys among them) are INTEGER: 32-bit on PostgreSQL. A larger value cannot be stored
# there (a study's seed), and a larger id names no row on either backend (tests/store/test_storable.py fails if a
# key column changes type).
MAX_INTEGER = 2**31 - 1
MAX_ROW_ID = MAX_INTEGER

_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")


def column_length(model: type, column: str) -> int:
    """The declared length of a String column of a model, e.g. column_length(Dialogue, "conv_id") == 200."""
    column_type: TypeEngine[Any] = inspect(model).columns[column].type
    if not isinstance(column_type, String) or column_type.length is None:
        raise TypeError(f"{model.__name__}.{column} is not a String column with a length")
    return column_type.length


def text_problem(value: str, *, limit: int | None = None) -> str | None:
    """Why the store cannot hold `value` (a phrase to follow the field's name), or None if it can."""
    if limit is not None and len(value) > limit:
        return f"is {len(value):,} characters long; at most {limit} are allowed"
    found = _UNSTORABLE.search(value)
    if found is None:
        return None
    if found.group() == "\x00":
        return f"contains a NUL character (at position {found.start()}), which text cannot hold"
    return (f"contains an unpaired surrogate ({ascii(found.group())} at position {found.start()}), which is not "
            "valid Unicode text (was it decoded from bytes that are not UTF-8?)")


def require_storable(value: str, what: str, *, limit: int | None = None) -> str:
    """`value` if the store can hold it, else a BadInput saying which `what` (e.g. "--dataset") and why."""
    problem = text_problem(value, limit=limit)
    if problem is not None:
        raise BadInput(f"{what} {problem}")
    return value
