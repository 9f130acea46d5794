"""The backend API's request schemas and its parsers say the same thing: one fails when the other changes alone.

As for the submission (tests/annotation/test_request_schemas.py): generated bodies get the same verdict from
both, a corpus of bad bodies both refuse, a corpus of bodies at the limits both accept. The parsers are pure,
so no store or system is needed here; tests/backend/test_api.py drives the routes.
"""
from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from empeval.server.backend.base import ROLES, DialogueContext
from empeval.server.errors import BadInput
from empeval.server.web.request_schemas import (
    MAX_BATCH,
    MAX_ID,
    MAX_TEXT,
    MAX_TURNS,
    NOT_BLANK,
    batch_request,
    batch_schema,
    respond_request,
    respond_schema,
)
from tests.annotation.json_bodies import bodies, fits, shown, why_not

PARSERS = {"respond": (respond_request, respond_schema), "batch": (batch_request, batch_schema)}
RAW = {"turns": [{"role": "speaker", "text": "I got the job I wanted!"},
                 {"role": "listener", "text": "Congratulations!"}], "emotion": "proud", "situation": None}


def verdict(parse, body) -> str | None:
    try:
        parse(body)
    except BadInput as error:
        return error.message
    return None


def test_the_openapi_document_serves_the_generated_schemas():
    import jsonschema_rs

    import empeval.server.web.backend_api  # noqa: F401 (registers its paths and schemas)
    from empeval.server.web import openapi

    document = openapi.document()
    assert document["components"]["schemas"]["RespondRequest"] == respond_schema()
    assert document["components"]["schemas"]["BatchRequest"] == batch_schema()
    for route, name in [("/api/respond", "RespondRequest"), ("/api/respond/batch", "BatchRequest")]:
        body = document["paths"][route]["post"]["requestBody"]["content"]["application/json"]["schema"]
        assert body == {"$ref": f"#/components/schemas/{name}"}
    assert jsonschema_rs.meta.is_valid(respond_schema()) and jsonschema_rs.meta.is_valid(batch_schema())


@pytest.mark.parametrize("route", PARSERS)
def test_parser_and_schema_agree_on_generated_bodies(route):
    parse, make_schema = PARSERS[route]
    schema = make_schema()

    @given(body=st.one_of(bodies(schema), bodies(schema, fitting=False)))
    @settings(max_examples=100, deadline=None, suppress_health_check=list(HealthCheck), database=None)
    def agree(body):
        refusal = verdict(parse, body)
        if fits(schema, body):
            assert refusal is None, f"the schema admits this body but the parser says: {refusal}\n{shown(body)}"
        else:
            assert refusal is not None, (f"the parser accepts a body the schema refuses "
                                         f"({why_not(schema, body)})\n{shown(body)}")

    agree()


def _raw(**changes):
    return {**RAW, **changes}


def _turn(**changes):
    return _raw(turns=[{**RAW["turns"][0], **changes}])


REFUSED = {
    "respond": {
        "body a list": ([1, 2], "JSON object"),
        "body null (not JSON)": (None, "JSON object"),
        "no system": ({"context": RAW}, '"system" is required'),
        "system empty": ({"system": "", "context": RAW}, '"system" is required'),
        "system a number": ({"system": 3, "context": RAW}, '"system" is required'),
        "unknown field": ({"system": "gold", "context_id": 1, "dataset": "ed"}, "unknown field 'dataset'"),
        "no context": ({"system": "gold"}, "exactly one of"),
        "both context and id": ({"system": "gold", "context_id": 1, "context": RAW}, "exactly one of"),
        "context_id a string": ({"system": "gold", "context_id": "7"}, "positive integer"),
        "context_id true": ({"system": "gold", "context_id": True}, "positive integer"),
        "context_id zero": ({"system": "gold", "context_id": 0}, "positive integer"),
        "context_id fractional": ({"system": "gold", "context_id": 7.5}, "positive integer"),
        "context_id beyond 64 bits": ({"system": "gold", "context_id": MAX_ID + 1}, f"at most {MAX_ID}"),
        "context a list": ({"system": "gold", "context": RAW["turns"]}, '"context" must be an object'),
        "context with an unknown field": ({"system": "gold", "context": _raw(topic="jobs")},
                                          "\"context\" has unknown field 'topic'"),
        "no turns": ({"system": "gold", "context": {"turns": []}}, f"list of 1 to {MAX_TURNS}"),
        "too many turns": ({"system": "gold", "context": _raw(turns=RAW["turns"] * (MAX_TURNS // 2 + 1))},
                           f"list of 1 to {MAX_TURNS}"),
        "turns an object": ({"system": "gold", "context": _raw(turns={"0": RAW["turns"][0]})}, "list of 1 to"),
        "turn a string": ({"system": "gold", "context": _raw(turns=["hello"])}, 'turn 0 needs "role"'),
        "unknown role": ({"system": "gold", "context": _turn(role="bot")}, 'turn 0 needs "role": "speaker" or'),
        "turn with an unknown field": ({"system": "gold", "context": _turn(emotion="sad")},
                                       "turn 0 has unknown field 'emotion'"),
        "text empty": ({"system": "gold", "context": _turn(text="")}, "non-empty"),
        "text blank": ({"system": "gold", "context": _turn(text=" \t\n\u3000\xa0\ufeff\x1c")}, "non-empty"),
        "text too long": ({"system": "gold", "context": _turn(text="x" * (MAX_TEXT + 1))}, f"at most {MAX_TEXT}"),
        "text a number": ({"system": "gold", "context": _turn(text=5)}, "non-empty"),
        "emotion a number": ({"system": "gold", "context": _raw(emotion=3)}, '"context.emotion" must be a string'),
        "situation a list": ({"system": "gold", "context": _raw(situation=["x"])}, '"context.situation" must be'),
    },
    "batch": {
        "body a string": ("gold", "JSON object"),
        "no system": ({"contexts": [{"context_id": 1}]}, '"system" is required'),
        "unknown field": ({"system": "gold", "contexts": [{"context_id": 1}], "n": 2}, "unknown field 'n'"),
        "contexts missing": ({"system": "gold"}, '"contexts" must be a list'),
        "contexts empty": ({"system": "gold", "contexts": []}, f"list of 1 to {MAX_BATCH}"),
        "contexts too many": ({"system": "gold", "contexts": [{"context_id": 1}] * (MAX_BATCH + 1)},
                              f"list of 1 to {MAX_BATCH}"),
        "contexts an object": ({"system": "gold", "contexts": {"context_id": 1}}, '"contexts" must be a list'),
        "item not an object": ({"system": "gold", "contexts": [{"context_id": 1}, 2]}, "item 1: expected an object"),
        "item with system": ({"system": "gold", "contexts": [{"context_id": 1, "system": "gold"}]},
                             "request: unknown field 'system'"),
        "item with neither": ({"system": "gold", "contexts": [{"context_id": 1}, {}]}, "item 1: give exactly one"),
        "item with a bad turn": ({"system": "gold", "contexts": [{"context": _turn(role="Speaker")}]},
                                 'request: turn 0 needs "role"'),
        "item id true": ({"system": "gold", "contexts": [{"context_id": 2}, {"context_id": True}]},
                         "item 1: \"context_id\" must be a positive integer"),
    },
}


@pytest.mark.parametrize("route, case", [(route, case) for route, cases in REFUSED.items() for case in cases])
def test_both_refuse_each_bad_body_and_the_parser_says_where(route, case):
    parse, make_schema = PARSERS[route]
    body, message = REFUSED[route][case]
    assert not fits(make_schema(), body), f"the schema admits {case!r}"
    refusal = verdict(parse, body)
    assert refusal is not None, f"the parser accepts {case!r}"
    assert message in refusal


ACCEPTED = {
    "respond": {
        "a stored context": {"system": "gold", "context_id": 1},
        "the largest id": {"system": "gold", "context_id": MAX_ID},
        "an id written 7.0": {"system": "gold", "context_id": 7.0},
        "raw turns": {"system": "control-generic", "context": RAW},
        "only turns": {"system": "x", "context": {"turns": [{"role": "listener", "text": "ok"}]}},
        "the most turns": {"system": "x", "context": _raw(turns=RAW["turns"] * (MAX_TURNS // 2))},
        "the longest text": {"system": "x", "context": _turn(text="é" * MAX_TEXT)},
        "a text padded with blanks": {"system": "x", "context": _turn(text="\u3000 ok \n")},
        "every role": {"system": "x", "context": _raw(turns=[{"role": role, "text": role} for role in ROLES])},
    },
    "batch": {
        "one item": {"system": "gold", "contexts": [{"context_id": 1}]},
        "mixed items": {"system": "gold", "contexts": [{"context_id": 1}, {"context": RAW}, {"context_id": 1}]},
        "the most items": {"system": "gold", "contexts": [{"context_id": 1}] * MAX_BATCH},
    },
}


@pytest.mark.parametrize("route, case", [(route, case) for route, cases in ACCEPTED.items() for case in cases])
def test_both_accept_each_body_at_the_limits(route, case):
    parse, make_schema = PARSERS[route]
    body = ACCEPTED[route][case]
    assert fits(make_schema(), body), why_not(make_schema(), body)
    assert verdict(parse, body) is None


def test_parsed_requests_keep_order_ids_and_turns():
    name, requests = batch_request({"system": "gold", "contexts": [{"context_id": 7.0}, {"context": RAW},
                                                                   {"context_id": 3}]})
    assert name == "gold" and requests[0] == 7 and type(requests[0]) is int and requests[2] == 3
    raw = requests[1]
    assert isinstance(raw, DialogueContext) and raw.emotion == "proud" and raw.situation is None
    assert [(turn.role, turn.text) for turn in raw.turns] == [(t["role"], t["text"]) for t in RAW["turns"]]


def test_blank_means_the_same_to_python_and_to_json_schema():
    """Every character Python's str.isspace or ECMA-262's \\s calls whitespace is blank to the parser."""
    ecma_space = {"\t", "\n", "\v", "\f", "\r", " ", "\xa0", "\u1680", *map(chr, range(0x2000, 0x200B)),
                  "\u2028", "\u2029", "\u202f", "\u205f", "\u3000", "\ufeff"}
    python_space = {chr(c) for c in range(0x10000) if chr(c).isspace()}
    for char in ecma_space | python_space:
        assert not NOT_BLANK.search(char), repr(char)
    assert NOT_BLANK.search("\u200b") and NOT_BLANK.search("a")


# Through the routes: the parsers' verdicts reach the caller as JSON.

@pytest.fixture()
def client(sample_engine, cache_dir):
    from empeval.server.annotation.secrets import admin_token, secret_key
    from empeval.server.web.app import create_app

    app = create_app({"DATABASE_URL": sample_engine.url.render_as_string(hide_password=False),
                      "BACKEND_CACHE_DIR": str(cache_dir), "TESTING": True})
    researcher = app.test_client()  # the backend API is the researcher's: every request carries the admin token
    researcher.environ_base["HTTP_AUTHORIZATION"] = f"Bearer {admin_token(secret_key(sample_engine))}"
    return researcher


@pytest.mark.parametrize("route, body, message", [
    ("/api/respond", {"system": "gold", "context_id": 1, "dataset": "ed"}, "unknown field 'dataset'"),
    ("/api/respond", {"system": "gold", "context": _turn(text="   ")}, "non-empty"),
    ("/api/respond", {"system": "gold", "context_id": True}, "positive integer"),
    ("/api/respond/batch", {"system": "gold", "contexts": [{"context_id": 1}, [1]]}, "item 1: expected an object"),
])
def test_a_malformed_body_is_a_400_with_the_parsers_message(client, route, body, message):
    answer = client.post(route, json=body)
    assert answer.status_code == 400 and answer.is_json and message in answer.json["message"]


def test_an_id_written_as_a_whole_float_finds_the_same_stored_context(client, sample_engine):
    from empeval.server.backend.contexts import load_contexts
    from empeval.server.store.engine import unit_of_work

    with unit_of_work(sample_engine) as session:
        context = load_contexts(session, split="test", limit=1)[0]
    as_int = client.post("/api/respond", json={"system": "gold", "context_id": context.context_id})
    as_float = client.post("/api/respond", json={"system": "gold", "context_id": float(context.context_id)})
    assert as_int.status_code == as_float.status_code == 200
    assert as_float.json["response"] == as_int.json["response"] == context.reference
