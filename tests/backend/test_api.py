"""The backend's HTTP API: list systems, respond to one context or a batch, reject bad input with 400."""

from __future__ import annotations

import pytest

from server.backend.contexts import load_contexts
from server.store.engine import unit_of_work
from server.web.app import create_app

RAW = {"turns": [{"role": "speaker", "text": "I got the job I wanted!"}], "emotion": "proud"}


@pytest.fixture()
def client(sample_engine, cache_dir):
    app = create_app(
        {
            "DATABASE_URL": sample_engine.url.render_as_string(hide_password=False),
            "BACKEND_CACHE_DIR": str(cache_dir),
            "TESTING": True,
        }
    )
    return app.test_client()


@pytest.fixture()
def context(sample_engine):
    with unit_of_work(sample_engine) as session:
        return load_contexts(session, split="test", limit=1)[0]


def test_list_systems_names_kinds_and_versions(client):
    answer = client.get("/api/systems")
    assert answer.status_code == 200
    systems = {s["name"]: s for s in answer.json["systems"]}
    assert systems["gold"]["kind"] == "gold" and systems["moel"]["kind"] == "replay"
    assert systems["moel"]["source"]["repo"] == "HLTCHKUST/MoEL"
    assert all("version" in s for s in systems.values())


def test_respond_to_a_stored_context(client, context):
    answer = client.post("/api/respond", json={"system": "gold", "context_id": context.context_id})
    assert answer.status_code == 200
    assert answer.json["response"] == context.reference
    assert answer.json["provenance"]["system"] == "gold"


def test_respond_to_raw_turns(client):
    answer = client.post("/api/respond", json={"system": "control-generic", "context": RAW})
    assert answer.status_code == 200 and answer.json["response"]


@pytest.mark.slow
def test_retrieval_through_the_api_reuses_one_model_per_app(client, context):
    for _ in range(2):
        answer = client.post("/api/respond", json={"system": "retrieval", "context": RAW})
        assert answer.status_code == 200 and answer.json["provenance"]["candidates"] > 1000
    registry = client.application.extensions["empeval.backend"]
    assert registry.get("retrieval") is registry.get("retrieval")


def test_batch_reports_each_context_in_place(client, context):
    answer = client.post(
        "/api/respond/batch",
        json={"system": "gold", "contexts": [{"context_id": context.context_id}, {"context": RAW}]},
    )
    assert answer.status_code == 200
    ok, failed = answer.json["results"]
    assert ok["response"] == context.reference
    assert "error" in failed and "response" not in failed


def test_gold_without_reference_is_422(client):
    answer = client.post("/api/respond", json={"system": "gold", "context": RAW})
    assert answer.status_code == 422 and "reference" in answer.json["message"]


@pytest.mark.parametrize(
    "body, status, message",
    [
        (None, 400, "JSON object"),
        ([1, 2], 400, "JSON object"),
        ({"context": RAW}, 400, '"system" is required'),
        ({"system": "nope", "context": RAW}, 404, "unknown system"),
        ({"system": "gold"}, 400, "exactly one of"),
        ({"system": "gold", "context_id": 1, "context": RAW}, 400, "exactly one of"),
        ({"system": "gold", "context_id": "7"}, 400, "positive integer"),
        ({"system": "gold", "context_id": 10**9}, 404, "no stored context"),
        ({"system": "gold", "context": {"turns": []}}, 400, "list of 1 to"),
        ({"system": "gold", "context": {"turns": [{"role": "bot", "text": "x"}]}}, 400, "role"),
        ({"system": "gold", "context": {"turns": [{"role": "speaker", "text": ""}]}}, 400, "non-empty"),
        ({"system": "gold", "context": {"turns": [{"role": "speaker", "text": "x"}], "emotion": 3}}, 400, "emotion"),
    ],
)
def test_bad_input_is_rejected_with_a_message(client, body, status, message):
    answer = (
        client.post("/api/respond", data="{not json", content_type="application/json")
        if body is None
        else client.post("/api/respond", json=body)
    )
    assert answer.status_code == status and message in answer.json["message"]


@pytest.mark.parametrize("contexts", [None, [], "x", [{"context_id": 1}] * 257])
def test_bad_batches_are_rejected(client, contexts):
    answer = client.post("/api/respond/batch", json={"system": "gold", "contexts": contexts})
    assert answer.status_code == 400 and "contexts" in answer.json["message"]


def test_openapi_describes_the_backend_routes(client):
    document = client.get("/openapi.json").json
    assert {"/api/systems", "/api/respond", "/api/respond/batch"} <= set(document["paths"])
    assert "SystemResponse" in document["components"]["schemas"]
