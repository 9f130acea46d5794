"""Ingest a crowd job's results.jsonl into the store: one submission per line, idempotent.

Each line's Mephisto worker becomes an Annotator(provider, pseudonym_for(secret, provider, worker_name)), so
the raw worker id never reaches SQL; the line's assignment (one of the study's planned assignments) is
claimed for that annotator and its ratings go through server.annotation's submit_assignment with the line's
stable submission id. Re-ingesting the same file, or a file that grew while the run is live, stores nothing
twice.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from sqlalchemy import Engine, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from server.annotation.annotators import pseudonym_for
from server.annotation.secrets import secret_key
from server.annotation.submit import submit_assignment
from server.errors import Conflict, EmpevalError
from server.store.engine import unit_of_work
from server.store.models import Annotator, Assignment
from server.store.queries import now_utc
from tasks.crowd.jobs import read_results


@dataclass
class IngestReport:
    lines: int = 0
    counts: Counter = field(default_factory=Counter)  # stored, already, conflict, invalid
    problems: list[str] = field(default_factory=list)

    def describe(self) -> str:
        parts = [f"{self.counts[k]} {k}" for k in ("stored", "already", "conflict", "invalid") if self.counts[k]]
        return f"{self.lines} results: " + (", ".join(parts) or "nothing new")


def crowd_annotator(engine: Engine, provider: str, worker_name: str, secret: str) -> int:
    pseudonym = pseudonym_for(secret, provider, worker_name)
    for _ in range(2):
        with unit_of_work(engine) as session:
            found = session.scalar(select(Annotator.id).where(Annotator.provider == provider,
                                                              Annotator.pseudonym == pseudonym))
            if found is not None:
                return found
        try:
            with unit_of_work(engine) as session:
                annotator = Annotator(provider=provider, pseudonym=pseudonym)
                session.add(annotator)
                session.flush()
                return annotator.id
        except IntegrityError:  # created concurrently: read it again
            continue
    raise RuntimeError(f"could not create the annotator for a {provider} worker")


def claim(engine: Engine, assignment_id: int, annotator_id: int) -> str | None:
    """Give the assignment to the crowd annotator who did it. None when that worked (or was done already),
    else why not."""
    with unit_of_work(engine) as session:
        claimed = session.execute(
            update(Assignment).where(Assignment.id == assignment_id, Assignment.status == "open")
            # Crowd timing is the platform's business: no local expiry on a crowd-claimed assignment.
            .values(status="assigned", annotator_id=annotator_id, started_at=now_utc(), expires_at=None)
        ).rowcount
        if claimed:
            return None
        assignment = session.get(Assignment, assignment_id)
        if assignment is None:
            return f"assignment {assignment_id} is not in the store"
        if assignment.annotator_id == annotator_id:
            return None
        return (f"assignment {assignment_id} is {assignment.status} for another annotator (was the study also "
                f"served locally while on the crowd?)")


def ingest(engine: Engine, job_dir: Path, provider: str) -> IngestReport:
    report = IngestReport()
    secret = secret_key(engine)
    for record in read_results(Path(job_dir) / "results.jsonl"):
        report.lines += 1
        where = f"unit {record.get('unit_id')} (assignment {record.get('assignment_id')})"
        if _already_stored(engine, int(record["assignment_id"]), record["submission_id"]):
            report.counts["already"] += 1
            continue
        annotator_id = crowd_annotator(engine, provider, record["worker_name"], secret)
        problem = claim(engine, int(record["assignment_id"]), annotator_id)
        if problem:
            report.counts["conflict"] += 1
            report.problems.append(f"{where}: {problem}")
            continue
        outputs = record.get("outputs") or {}
        payload = {"submission_id": record["submission_id"], "ratings": outputs.get("ratings")}
        if outputs.get("comment"):
            payload["comment"] = outputs["comment"]
        try:
            submit_assignment(engine, int(record["assignment_id"]), annotator_id, payload)
        except EmpevalError as error:
            kind = "conflict" if isinstance(error, Conflict) else "invalid"
            report.counts[kind] += 1
            report.problems.append(f"{where}: {error.message}")
            continue
        report.counts["stored"] += 1
    return report


def _already_stored(engine: Engine, assignment_id: int, submission_id: str) -> bool:
    with Session(engine) as session:
        assignment = session.get(Assignment, assignment_id)
        return assignment is not None and assignment.status == "submitted" and assignment.submission_id == submission_id
