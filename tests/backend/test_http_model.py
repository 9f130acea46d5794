"""The http adapter against a real local HTTP server: both protocols, timeouts, 5xx retries, 4xx, bad bodies."""
from __future__ import annotations

import json

import pytest
from sqlalchemy import func, select

from empeval.server.backend.base import ContextTurn, DialogueContext
from empeval.server.backend.generate import generate_responses
from empeval.server.backend.http_model import HttpModel
from empeval.server.store.engine import unit_of_work
from empeval.server.store.models import Response
from tests.backend.stub_http import JsonStubHandler, stub_server

CONTEXT = DialogueContext(turns=(ContextTurn("speaker", "My dog died yesterday."),
                                 ContextTurn("listener", "Oh no, I'm so sorry."),
                                 ContextTurn("speaker", "He was 14.")), emotion="sad", situation="My dog died.")


class FakeModelServer(JsonStubHandler):
    """Routes: /json (plain protocol), /v1/chat/completions (OpenAI), /slow, /fail500, /flaky, /bad400,
    /malformed, /notjson. Every request is recorded in `empeval.server.calls`."""

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self.server.calls.append((self.path, body, dict(self.headers)))
        if self.path == "/json":
            self.send_json(200, {"response": f"echo: {body['context'][-1]['text']} ({body['emotion']})"})
        elif self.path == "/v1/chat/completions":
            last = body["messages"][-1]["content"]
            self.send_json(200, {"choices": [{"message": {"role": "assistant", "content": f"I hear you: {last}"}}]})
        elif self.path == "/slow":  # never answered while the test runs
            self.hold_until_released()
        elif self.path == "/fail500":
            self.send_json(500, {"error": "model crashed"})
        elif self.path == "/flaky":  # fails twice, then answers
            if self.calls_to(self.path) <= 2:
                self.send_json(503, {"error": "warming up"})
            else:
                self.send_json(200, {"response": "ready now"})
        elif self.path == "/bad400":
            self.send_json(400, {"error": "context too long"})
        elif self.path == "/malformed":
            self.send_json(200, {"text": "wrong key"})
        elif self.path == "/notjson":
            self.send_json(200, b"<html>hello</html>")


@pytest.fixture()
def server():
    with stub_server(FakeModelServer) as httpd:
        yield httpd


def url(server, path=""):
    return f"http://127.0.0.1:{server.server_port}{path}"


# A timeout far above any answer's time on a loaded machine: with 0.3 s, a stub answer that the busy machine held
# back was retried, so a route counted two calls, or one yet to be recorded (a fresh-clone run, 2026-12-04). The
# tests of the timeout itself give 0.3 s to a route that never answers (/slow), so the timeout alone decides.
SLOW_ENOUGH = 10.0


def model(server, path, **parameters):
    return HttpModel("remote", {"url": url(server, path), "timeout": SLOW_ENOUGH, "retries": 2, "backoff": 0.01,
                                **parameters})


def test_plain_json_protocol_sends_the_documented_request_and_reads_the_response(server):
    [outcome] = model(server, "/json").respond_batch([CONTEXT])
    assert outcome.ok and outcome.text == "echo: He was 14. (sad)"
    _, body, _ = server.calls[0]
    assert body == {"context": [{"role": "speaker", "text": "My dog died yesterday."},
                                {"role": "listener", "text": "Oh no, I'm so sorry."},
                                {"role": "speaker", "text": "He was 14."}],
                    "emotion": "sad", "situation": "My dog died."}
    assert outcome.provenance["attempts"] == 1 and outcome.provenance["kind"] == "http"
    assert outcome.latency_ms > 0


def test_openai_protocol_maps_speaker_to_user_and_listener_to_assistant(server, monkeypatch):
    monkeypatch.setenv("FAKE_KEY", "sk-test")
    remote = model(server, "", protocol="openai", model="tiny", temperature=0.0, system_prompt="Be kind.",
                   headers={"Authorization": "env:FAKE_KEY"})
    [outcome] = remote.respond_batch([CONTEXT])
    assert outcome.ok and outcome.text == "I hear you: He was 14."
    path, body, headers = server.calls[0]
    assert path == "/v1/chat/completions"
    assert [m["role"] for m in body["messages"]] == ["system", "user", "assistant", "user"]
    assert body["model"] == "tiny" and body["temperature"] == 0.0
    assert headers["Authorization"] == "sk-test"
    assert "headers" not in outcome.provenance["parameters"]  # secrets stay out of the store


def test_timeout_is_retried_then_reported_per_context(server):
    [outcome] = model(server, "/slow", timeout=0.3).respond_batch([CONTEXT])
    assert not outcome.ok and outcome.text is None
    assert "timed out" in outcome.error and outcome.error_kind == "upstream"
    assert outcome.provenance["attempts"] == 3 and len(server.calls) == 3


def test_server_error_500_is_retried_a_bounded_number_of_times(server):
    [outcome] = model(server, "/fail500", retries=1).respond_batch([CONTEXT])
    assert not outcome.ok and "HTTP 500" in outcome.error and "model crashed" in outcome.error
    assert len(server.calls) == 2


def test_transient_5xx_then_success_is_a_response(server):
    [outcome] = model(server, "/flaky").respond_batch([CONTEXT])
    assert outcome.ok and outcome.text == "ready now" and outcome.provenance["attempts"] == 3


def test_client_error_4xx_is_not_retried(server):
    [outcome] = model(server, "/bad400").respond_batch([CONTEXT])
    assert not outcome.ok and "HTTP 400" in outcome.error and len(server.calls) == 1


@pytest.mark.parametrize("path", ["/malformed", "/notjson"])
def test_malformed_answers_are_errors(server, path):
    [outcome] = model(server, path).respond_batch([CONTEXT])
    assert not outcome.ok and len(server.calls) == 1


def test_connection_refused_is_an_error_after_retries():
    remote = HttpModel("down", {"url": "http://127.0.0.1:9", "timeout": 0.3, "retries": 1, "backoff": 0.01})
    [outcome] = remote.respond_batch([CONTEXT])
    assert not outcome.ok and "connection failed" in outcome.error


def test_generate_stores_successes_and_reports_failures_without_storing_them(server, fresh_engine):
    remote = model(server, "/flaky", retries=0)  # the first two contexts fail, the rest succeed
    report = generate_responses(fresh_engine, remote, dataset="empatheticdialogues", split="test", limit=6,
                                batch_size=4)
    assert report.stored == 4 and len(report.errors) == 2 and "HTTP 503" in report.errors[0][1]
    with unit_of_work(fresh_engine) as session:
        assert session.scalar(select(func.count(Response.id))) == 4
    # Resuming retries only the two that failed.
    again = generate_responses(fresh_engine, remote, dataset="empatheticdialogues", split="test", limit=6)
    assert again.skipped == 4 and again.stored == 2 and not again.errors


def test_concurrent_requests_keep_the_order_of_contexts(server):
    contexts = [DialogueContext(turns=(ContextTurn("speaker", f"turn {i}"),)) for i in range(8)]
    outcomes = model(server, "/json", concurrency=4).respond_batch(contexts)
    assert [o.text for o in outcomes] == [f"echo: turn {i} (None)" for i in range(8)]


def test_a_system_without_url_is_a_config_error():
    with pytest.raises(ValueError, match="url"):
        HttpModel("remote", {})


def test_cli_generate_with_a_failing_remote_model_exits_4_and_stores_nothing(server, tmp_path):
    from click.testing import CliRunner

    from empeval.cli import cli

    config = tmp_path / "systems.toml"
    config.write_text(f'[systems.remote]\nkind = "http"\nurl = "{url(server, "/fail500")}"\nretries = 0\n')
    db = f"sqlite:///{tmp_path}/cli.db"
    runner = CliRunner()
    assert runner.invoke(cli, ["--database-url", db, "data", "import-sample"]).exit_code == 0
    result = runner.invoke(cli, ["--database-url", db, "generate", "--systems", "remote", "--limit", "5",
                                 "--config", str(config)])
    assert result.exit_code == 4
    assert "0 stored" in result.output and "5 errors" in result.output and "HTTP 500" in result.output
