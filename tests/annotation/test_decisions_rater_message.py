"""A rater who asks a study whose claims are closed (its decisions are made, server/annotation/decisions.py) for
work is told so: the API answers 403 saying the study is not taking new work; a rater holding a started assignment
still gets it back. On a real SQLite file and a real PostgreSQL database."""
from __future__ import annotations

from empeval.server.annotation.annotators import invite
from empeval.server.annotation.decisions import close_claims_if_decided, decision_status
from empeval.server.annotation.handout import next_assignment_payload
from empeval.server.web import create_app
from tests.annotation.test_decisions import _study, _submit


def test_a_rater_is_told_the_study_is_not_taking_new_work(sample_engine):
    _study(sample_engine, budget=6)
    started, token_started = invite(sample_engine, "ann", "decided")
    finisher, _ = invite(sample_engine, "bob", "decided")
    _, token_new = invite(sample_engine, "cat", "decided")
    held = next_assignment_payload(sample_engine, "decided", started.id)
    _submit(sample_engine, finisher.id, next_assignment_payload(sample_engine, "decided", finisher.id))
    assert close_claims_if_decided(sample_engine, decision_status(sample_engine, "decided"))
    client = create_app({"DATABASE_URL": sample_engine.url.render_as_string(hide_password=False),
                         "TESTING": True}).test_client()
    refused = client.get("/api/annotate/next", headers={"Authorization": f"Bearer {token_new}"})
    assert refused.status_code == 403 and "not taking new work" in refused.get_data(as_text=True)
    resumed = client.get("/api/annotate/next", headers={"Authorization": f"Bearer {token_started}"})
    assert resumed.status_code == 200 and resumed.get_json()["assignment"]["assignment_id"] == held["assignment_id"]
