"""Schemathesis explores every route of the app's OpenAPI document with generated input; no input may
cause a server error (5xx), and every answer must match the document's declared responses."""
from __future__ import annotations

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import status_code_conformance

from server.annotation.annotators import invite
from server.annotation.secrets import admin_token, secret_key
from server.web import create_app
from tests.annotation.conftest import add_responses, make_study


@pytest.fixture(scope="module")
def fuzz_target(tmp_path_factory):
    from server.datasets.ed_csv import parse_ed_csv
    from server.datasets.importer import import_dialogues
    from server.store import make_engine, upgrade
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
