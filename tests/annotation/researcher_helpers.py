"""What the researcher-command tests share: running the CLI on a store, and a rater doing real work through the
hand-out and the submit (no shortcut in SQL)."""
from __future__ import annotations

from datetime import datetime

from click.testing import CliRunner

from empeval.cli import cli
from empeval.server.annotation.handout import assignment_payload, next_assignment
from empeval.server.annotation.submission import submit_assignment
from empeval.server.store.queries import now_utc
from tests.annotation.conftest import new_submission_id


def cli_run(engine, *args: str):
    return CliRunner().invoke(cli, ["--database-url", engine.url.render_as_string(hide_password=False), *args])


def claim(engine, annotator_id: int, study: str = "pilot", *, now: datetime | None = None) -> int:
    assignment_id = next_assignment(engine, study, annotator_id, now=now)
    assert assignment_id is not None, "the study has work left"
    return assignment_id


def work(engine, annotator_id: int, study: str = "pilot", *, seconds: float = 12.0, score: int = 4,
         comment: str | None = None, now: datetime | None = None) -> int:
    """Claim the next assignment and submit a rating of every item on every criterion; returns its id."""
    assignment_id = claim(engine, annotator_id, study, now=now)
    items = assignment_payload(engine, assignment_id)["items"]
    ratings = [{"item_id": item["item_id"], "seconds": seconds,
                "scores": {"empathy": score, "relevance": max(1, score - 1), "fluency": score}} for item in items]
    body: dict = {"submission_id": new_submission_id(), "ratings": ratings}
    if comment is not None:
        body["comment"] = comment
    submit_assignment(engine, assignment_id, annotator_id, body, now=now or now_utc())
    return assignment_id
