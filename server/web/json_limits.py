"""Request bodies parsed as JSON within limits: no body can make the parser itself fail with a 500.

Python's json module recurses once per nesting level and raises RecursionError (not the ValueError that
Flask's `request.get_json` turns into a 400) on a body such as 50,000 `[` followed by as many `]`, which fits
easily under MAX_CONTENT_LENGTH. `LimitedJSONProvider` is the app's JSON provider (`app.json`): every
`request.get_json` goes through its `loads`, which refuses a body nested deeper than MAX_JSON_DEPTH with a 400
that says so (JSONTooDeep, answered by the app's EmpevalError handler), before the parser sees it. Our bodies
need 6 levels at most (a batch of raw contexts).
"""
from __future__ import annotations

import itertools
import operator
import re
from typing import Any

from flask.json.provider import DefaultJSONProvider

from empeval.server.errors import BadInput, EmpevalError

MAX_JSON_DEPTH = 64

# A JSON string, escapes included; the bytes that are not brackets; opening brackets as 2 and closing as 0, so
# that the running sum minus the position is the depth.
_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)
_NOT_BRACKETS = bytes(byte for byte in range(256) if byte not in b"[]{}")
_AS_STEPS = bytes.maketrans(b"[{]}", b"\x02\x02\x00\x00")


class JSONTooDeep(EmpevalError):
    """A body nested deeper than MAX_JSON_DEPTH: a 400. Not a BadInput (a ValueError) on purpose: the
    `get_json(silent=True)` of a route would swallow that as "not JSON"; this one reaches the client with its
    own message."""

    exit_code = BadInput.exit_code
    http_status = BadInput.http_status

    def __init__(self) -> None:
        super().__init__(f"the JSON body is nested too deeply: at most {MAX_JSON_DEPTH} levels of arrays and "
                         "objects are accepted")


def nesting_depth(data: bytes | str) -> int:
    """How deeply arrays and objects nest in a JSON text; brackets inside strings do not count. For invalid JSON
    the number is an estimate (the parser refuses such text anyway). Runs in C but for the final maximum: about
    0.15 s for a 1 MB body of brackets, microseconds for a body with a few."""
    raw = data.encode("utf-8", "surrogatepass") if isinstance(data, str) else bytes(data)
    if b'"' in raw:
        raw = _STRING.sub(b"", raw)
    steps = raw.translate(_AS_STEPS, _NOT_BRACKETS)
    deepest = max(map(operator.sub, itertools.accumulate(steps), itertools.count(1)), default=0)
    return max(deepest, 0)


def _within(data: str | bytes, limit: int) -> bool:
    """True if `data` cannot nest deeper than `limit`: it has no more opening brackets than that (no scan
    needed, the usual case), or the scan says so."""
    if isinstance(data, str):
        opening = data.count("[") + data.count("{")
    else:
        opening = data.count(b"[") + data.count(b"{")
    return opening <= limit or nesting_depth(data) <= limit


def loads_limited(data: str | bytes, loads: Any, **kwargs: Any) -> Any:
    """`loads(data, **kwargs)` if `data` nests at most MAX_JSON_DEPTH levels, else JSONTooDeep."""
    if not _within(data, MAX_JSON_DEPTH):
        raise JSONTooDeep()
    try:
        return loads(data, **kwargs)
    except RecursionError:  # cannot happen within the depth limit; kept so that no body is ever a 500
        raise JSONTooDeep() from None


class LimitedJSONProvider(DefaultJSONProvider):
    """Flask's JSON provider with bodies refused beyond MAX_JSON_DEPTH (see the module docstring)."""

    def loads(self, s: str | bytes, **kwargs: Any) -> Any:
        return loads_limited(s, super().loads, **kwargs)
