"""The client of Prolific's API, against a stub server on 127.0.0.1: who returned or timed out, all pages; the
token sent as `Token ...` and only to the API's own host; every unusable answer a ProlificApiError saying what
Prolific answered."""
from __future__ import annotations

import pytest

from empeval.server.annotation.prolific_client import (
    TOKEN_ENV,
    ProlificApiError,
    ProlificClient,
    token_from_environment,
)
from empeval.server.errors import BadInput
from tests.prolific.conftest import PROLIFIC_STUDY_ID
from tests.prolific.stub_api import TOKEN, StubProlific

RETURNED, TIMED_OUT, APPROVED, ACTIVE = ("a1" * 12, "b2" * 12, "c3" * 12, "d4" * 12)
PATH = f"/api/v1/studies/{PROLIFIC_STUDY_ID}/submissions/"


@pytest.fixture
def stub():
    server = StubProlific().start()
    yield server
    server.stop()


def entry(participant: str, status: str) -> dict:
    return {"id": "f" * 24, "participant_id": participant, "status": status, "started_at": "2026-01-01T10:00:00Z",
            "study_code": None}


def test_participants_who_returned_or_timed_out_are_read_from_every_page(stub):
    stub.submissions(PROLIFIC_STUDY_ID, [entry(RETURNED, "RETURNED"), entry(APPROVED, "APPROVED")],
                     next_page=f"{stub.url}{PATH}?page=2")
    stub.submissions(PROLIFIC_STUDY_ID, [entry(TIMED_OUT, "TIMED-OUT"), entry(ACTIVE, "ACTIVE"),
                                         entry(RETURNED, "RETURNED")], page=2)
    client = ProlificClient(TOKEN, api_url=stub.url)
    assert client.departed(PROLIFIC_STUDY_ID) == sorted([RETURNED, TIMED_OUT])
    assert [path for path, _ in stub.requests] == [PATH, f"{PATH}?page=2"]
    assert {auth for _, auth in stub.requests} == {f"Token {TOKEN}"}


def test_a_status_written_timed_out_with_an_underscore_counts_as_timed_out(stub):
    stub.submissions(PROLIFIC_STUDY_ID, [entry(TIMED_OUT, "timed_out")])
    assert ProlificClient(TOKEN, api_url=stub.url).departed(PROLIFIC_STUDY_ID) == [TIMED_OUT]


def test_a_refused_token_says_to_check_the_environment_variable(stub):
    with pytest.raises(ProlificApiError) as caught:
        ProlificClient("wrong", api_url=stub.url).departed(PROLIFIC_STUDY_ID)
    assert "HTTP 401" in caught.value.message and TOKEN_ENV in caught.value.message


def test_an_unknown_study_says_to_check_the_study_file(stub):
    with pytest.raises(ProlificApiError) as caught:
        ProlificClient(TOKEN, api_url=stub.url).departed(PROLIFIC_STUDY_ID)
    assert "404" in caught.value.message and "recruitment.prolific_study_id" in caught.value.message


def test_a_next_link_to_another_host_is_not_followed_with_the_token(stub):
    stub.submissions(PROLIFIC_STUDY_ID, [entry(RETURNED, "RETURNED")], next_page=f"http://localhost:9{PATH}")
    with pytest.raises(ProlificApiError) as caught:
        ProlificClient(TOKEN, api_url=stub.url).departed(PROLIFIC_STUDY_ID)
    assert "localhost:9" in caught.value.message and len(stub.requests) == 1


def test_a_loop_of_next_links_stops(stub):
    stub.submissions(PROLIFIC_STUDY_ID, [entry(RETURNED, "RETURNED")], next_page=f"{stub.url}{PATH}")
    with pytest.raises(ProlificApiError) as caught:
        ProlificClient(TOKEN, api_url=stub.url, max_pages=3).departed(PROLIFIC_STUDY_ID)
    assert "3 pages" in caught.value.message and len(stub.requests) == 3


@pytest.mark.parametrize(("status", "body", "says"), [
    (500, {"error": "boom"}, "HTTP 500"),
    (200, b"<html>maintenance</html>", "not JSON"),
    (200, [1, 2], "not a JSON object"),
    (200, {"results": "none"}, "no list of results"),
    (200, {"results": [{"participant_id": "not-an-id", "status": "RETURNED"}]}, "submission #0 has no participant"),
    (200, {"results": [{"participant_id": RETURNED}]}, "submission #0 has no status"),
    (200, {"results": ["RETURNED"]}, "submission #0 is not an object"),
    (200, {"results": [], "_links": {"next": {"href": 7}}}, "next link that is not a URL"),
])
def test_an_unusable_answer_is_an_api_error_saying_what_came_back(stub, status, body, says):
    stub.pages[PATH] = (status, body)
    with pytest.raises(ProlificApiError) as caught:
        ProlificClient(TOKEN, api_url=stub.url).departed(PROLIFIC_STUDY_ID)
    assert says in caught.value.message


def test_an_unreachable_api_is_an_api_error():
    with pytest.raises(ProlificApiError) as caught:
        ProlificClient(TOKEN, api_url="http://127.0.0.1:9", timeout=2).departed(PROLIFIC_STUDY_ID)
    assert "could not reach" in caught.value.message and caught.value.exit_code == 4


def test_a_malformed_study_id_is_refused_before_any_request(stub):
    with pytest.raises(BadInput):
        ProlificClient(TOKEN, api_url=stub.url).departed("../../users/me")
    assert stub.requests == []


def test_the_token_comes_from_the_environment_only(monkeypatch):
    monkeypatch.delenv(TOKEN_ENV, raising=False)
    with pytest.raises(BadInput) as caught:
        token_from_environment()
    assert TOKEN_ENV in caught.value.message
    monkeypatch.setenv(TOKEN_ENV, "  secret-token \n")
    assert token_from_environment() == "secret-token"
