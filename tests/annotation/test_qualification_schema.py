"""The qualification answer's JSON schema (served in the OpenAPI document) and the check of its shape say the same
thing: bodies drawn from the schema pass the check, bodies drawn not to fit it are refused (one fails when the other
changes alone)."""
from __future__ import annotations

from hypothesis import HealthCheck, given, settings

from empeval.server.annotation.qualification import answer_body_schema, read_answer_body
from empeval.server.errors import BadInput
from tests.annotation.json_bodies import bodies, shown

SCHEMA = answer_body_schema()
DRAWN = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@DRAWN
@given(bodies(SCHEMA))
def test_every_body_the_schema_allows_passes_the_shape_check(body):
    read_answer_body(body)


@DRAWN
@given(bodies(SCHEMA, fitting=False))
def test_every_body_the_schema_refuses_is_refused_by_the_shape_check(body):
    try:
        read_answer_body(body)
    except BadInput:
        return
    raise AssertionError(f"accepted a body the schema refuses: {shown(body)}")


def test_the_openapi_document_serves_the_generated_schema():
    import empeval.server.web.qualification_api  # noqa: F401 (registers its paths and schemas)
    from empeval.server.web import openapi

    assert openapi.document()["components"]["schemas"]["QualificationAnswer"] == SCHEMA
