"""JSON bodies within limits (server.web.json_limits): the depth is counted as the parser would, and a body too
deep is a 400 with its own message wherever a route reads JSON, silently or not."""
from __future__ import annotations

import json
import time

import pytest
from flask import Flask, request

from empeval.server.errors import EmpevalError
from empeval.server.web.json_limits import (
    MAX_JSON_DEPTH,
    JSONTooDeep,
    LimitedJSONProvider,
    loads_limited,
    nesting_depth,
)


@pytest.mark.parametrize("text, depth", [
    ("", 0), ("1", 0), ('"[[["', 0), ("[]", 1), ("[[], {}]", 2), ('{"a": [1, {"b": null}]}', 3),
    ('["]", "[", "\\"[", "\\\\"]', 1),  # brackets in strings, an escaped quote, an escaped backslash before a quote
    ('[{"k[": "v{"}, ["\\u005b"]]', 2),
    ("]]]", 0),  # not JSON: an estimate, never below 0
])
def test_nesting_depth_counts_levels_outside_strings(text, depth):
    assert nesting_depth(text) == depth
    assert nesting_depth(text.encode()) == depth


def test_the_limit_is_inclusive():
    at_limit = "[" * MAX_JSON_DEPTH + "]" * MAX_JSON_DEPTH
    assert loads_limited(at_limit, json.loads) is not None
    with pytest.raises(JSONTooDeep, match="nested too deeply"):
        loads_limited("[" + at_limit + "]", json.loads)


def test_a_deep_body_costs_little():
    body = b"[" * 500_000 + b"]" * 500_000  # the whole 1 MB cap of brackets
    started = time.perf_counter()
    assert nesting_depth(body) == 500_000
    assert time.perf_counter() - started < 2.0


@pytest.fixture
def app():
    app = Flask(__name__)
    app.json = LimitedJSONProvider(app)
    # As create_app answers every error of ours.
    app.register_error_handler(EmpevalError, lambda error: ({"message": error.message}, error.http_status))

    @app.post("/silent")
    def silent():
        return {"parsed": request.get_json(silent=True) is not None}

    @app.post("/strict")
    def strict():
        return {"parsed": request.get_json() is not None}

    return app


@pytest.mark.parametrize("route", ["/silent", "/strict"])
def test_a_route_reading_json_answers_400_for_a_deep_body(app, route):
    client = app.test_client()
    assert client.post(route, json={"ratings": [[{"ok": [1]}]]}).get_json() == {"parsed": True}
    answer = client.post(route, data="[" * 50_000 + "]" * 50_000, content_type="application/json")
    assert answer.status_code == 400
    assert "nested too deeply" in answer.get_data(as_text=True)


def test_a_recursion_error_of_the_parser_is_a_400_too():
    def exhausted(_data, **_kwargs):
        raise RecursionError("maximum recursion depth exceeded")

    with pytest.raises(JSONTooDeep, match="nested too deeply") as refused:
        loads_limited("[1]", exhausted)
    assert refused.value.http_status == 400 and refused.value.exit_code == 2
