"""Schemathesis explores every route of the app's OpenAPI document with generated input; no input may
cause a server error (5xx), and every answer must match the document's declared responses."""
from __future__ import annotations

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.errors import Unsatisfiable
from schemathesis import GenerationMode
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import status_code_conformance

from empeval.server.annotation.annotators import invite
from empeval.server.annotation.secrets import admin_token, secret_key
from empeval.server.web import create_app
from tests.annotation.conftest import add_responses, make_study

pytestmark = pytest.mark.slow  # seconds to minutes: a fresh install, a real server fuzzed; first in the run


@pytest.fixture(scope="module")
def fuzz_target(tmp_path_factory):
    from empeval.server.datasets.ed_csv import parse_ed_csv
    from empeval.server.datasets.importer import import_dialogues
    from empeval.server.store import make_engine, upgrade
    from tests.conftest import SAMPLE_ED

    engine = make_engine(f"sqlite:///{tmp_path_factory.mktemp('fuzz') / 'fuzz.db'}")
    upgrade(engine)
    import_dialogues(engine, parse_ed_csv(SAMPLE_ED / "test.csv", "test"), dataset="empatheticdialogues")
    add_responses(engine, ["sys-a", "sys-b"], 20)
    make_study(engine, count=10, k=2, per_assignment=4, systems=["sys-a", "sys-b"], controls=[])
    _, token = invite(engine, "fuzzer", "pilot")
    app = create_app({"DATABASE_URL": str(engine.url)})
    return app, token, admin_token(secret_key(engine))


def test_no_input_makes_the_server_fail(fuzz_target):
    """Every operation, fuzzed with schemathesis' generated cases (driven by hypothesis directly, since
    schemathesis' own pytest plugin does not load under pytest 9)."""
    app, invite_token, admin = fuzz_target
    schema = schemathesis.openapi.from_wsgi("/openapi.json", app)
    operations = [result.ok() for result in schema.get_all_operations()]
    assert {op.path for op in operations} >= {"/api/annotate/next", "/api/assignments/{assignment_id}/submit",
                                              "/api/studies/{name}/export", "/api/studies/{name}/progress"}
    statuses: dict[str, set[int]] = {}
    for operation in operations:
        researchers = ("/api/studies", "/api/systems", "/api/respond")  # the admin token's routes
        token = admin if operation.path.startswith(researchers) else invite_token
        _fuzz(operation, token, statuses)
    # The fuzzing reached past authentication and validation, not only the error paths.
    assert any(200 in codes for codes in statuses.values())
    assert any(400 in codes for codes in statuses.values())


def _fuzz(operation, token: str, statuses: dict[str, set[int]]) -> None:
    """Fuzz one operation (a function of its own, so each run binds its own operation and token)."""

    @given(case=operation.as_strategy())
    @settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck), database=None)
    def fuzz(case):
        if operation.path == "/api/assignments/{assignment_id}/submit" and isinstance(case.path_parameters, dict):
            # Mostly real assignment ids, so validation (not only the 404 path) gets exercised.
            case.path_parameters["assignment_id"] = abs(int(case.path_parameters.get("assignment_id", 1))) % 4 + 1
        response = case.call(headers={"Authorization": f"Bearer {token}"})
        statuses.setdefault(operation.label, set()).add(response.status_code)
        assert response.status_code < 500, (operation.label, case.body, response.text[:500])
        case.validate_response(response, checks=[not_a_server_error, status_code_conformance])

    fuzz()


# Header values outside ASCII: what a client's UTF-8 (or Latin-1) token or header becomes on the server, which
# reads header bytes as Latin-1. A non-ASCII admin token used to be a 500 on every admin route.
LATIN_1_ONLY = st.text(alphabet=st.characters(min_codepoint=0x80, max_codepoint=0xFF), min_size=1, max_size=40)


def test_no_header_value_outside_ascii_makes_the_server_fail(fuzz_target):
    """Every operation again, with schemathesis drawing header values (the bearer token among them) from Latin-1
    instead of ASCII, in positive and negative mode; and the real tokens with non-ASCII characters added, so the
    comparison of a nearly right token is reached too."""
    app, invite_token, admin = fuzz_target
    url = app.extensions["empeval.engine"].url.render_as_string(hide_password=False)
    app = create_app({"DATABASE_URL": url, "AUTH_FAILURE_LIMIT": 10**6})  # refusals are the point: no 429s
    schema = schemathesis.openapi.from_wsgi("/openapi.json", app)
    schema.config.generation.update(codec="latin-1")
    statuses: dict[str, set[int]] = {}
    for result in schema.get_all_operations():
        operation = result.ok()
        researchers = ("/api/studies", "/api/systems", "/api/respond")
        _fuzz_headers(operation, admin if operation.path.startswith(researchers) else invite_token, statuses)
    # Refused as it should be, for a wrong token: 401 or 403, and not only that.
    assert any(codes & {401, 403} for codes in statuses.values()), statuses


def _fuzz_headers(operation, token: str, statuses: dict[str, set[int]]) -> None:
    for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE):

        @given(case=operation.as_strategy(generation_mode=mode), extra=LATIN_1_ONLY, mangle=st.booleans())
        @settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck), database=None)
        def fuzz(case, extra, mangle):
            headers = dict(case.headers or {})
            if mangle or "Authorization" not in headers:
                headers["Authorization"] = f"Bearer {token}{extra}" if mangle else f"Bearer {extra}"
            headers.setdefault("X-Requested-With", f"XMLHttpRequest{extra}")
            response = case.call(headers=headers)
            statuses.setdefault(operation.label, set()).add(response.status_code)
            assert response.status_code < 500, (operation.label, headers, response.text[:500])
            case.validate_response(response, checks=[not_a_server_error])

        try:
            fuzz()
        except Unsatisfiable:
            if mode is GenerationMode.POSITIVE:  # an operation without parameters has nothing to negate
                raise
