"""Ingest a crowd job's results.jsonl into the store: one submission per line, idempotent.

Each line's Mephisto worker becomes an Annotator(provider, pseudonym_for(secret, provider, worker_name)), so
the raw worker id never reaches SQL; the line's assignment (one of the study's planned assignments) is
claimed for that annotator with hand-out's own claim and its ratings (or, for a pairwise study, its judgments)
go through server.annotation's submit_assignment with the line's stable submission id. Re-ingesting the same
file, or a file that grew while the run is live, stores nothing twice.

A line is checked in full before its assignment is claimed (it belongs to the job's study, its assignment
is one of that study's, its ratings or judgments pass the submission rules, the study is not closed, the worker
is not revoked and has not been shown any of its contexts in another assignment of the study or of the study
linked to it by compare_with), so a bad line never leaves an assignment claimed with nothing stored. Every
rejected line is reported as `file:line: reason`.

The claim writes the worker's seen_context rows, as a local claim does, so the database refuses a second
rating of a context by the same worker even when two ingests race: the losing line is reported, never stored.

Transactions per line: the annotator is read or created in one, the claim is another and the submission a
third (submit_assignment opens its own, as it does for local annotators); if the submission still fails
after the checks, the claim is released (and its seen rows with it).
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from sqlalchemy import Engine, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from empeval.server.annotation.annotators import get_or_create_annotator, pseudonym_for
from empeval.server.annotation.handout import (
    AccessRevoked,
    StudyClosed,
    claim,
    contexts_seen_before,
    ensure_may_work,
    release,
)
from empeval.server.annotation.kinds import AnnotationKind, annotation_kind
from empeval.server.annotation.secrets import secret_key
from empeval.server.annotation.submission import submit_assignment, validate_submission
from empeval.server.errors import BadInput, Conflict, EmpevalError
from empeval.server.store.engine import unit_of_work
from empeval.server.store.models import Assignment, Study
from empeval.server.store.queries import active_assignment, now_utc, study_by_name
from empeval.server.store.statuses import AssignmentStatus, StudyStatus
from empeval.server.store.storable import MAX_ROW_ID
from empeval.tasks.crowd import contract
from empeval.tasks.crowd.contract import CrowdResult
from empeval.tasks.crowd.jobs import load_job

REJECTED = ("conflict", "invalid", "other study", "seen context", "refused")


@dataclass
class IngestReport:
    lines: int = 0
    counts: Counter = field(default_factory=Counter)  # stored, already, and the REJECTED kinds
    problems: list[str] = field(default_factory=list)  # one `file:line: reason` per rejected line
    torn_last_line: bool = False

    @property
    def rejected(self) -> int:
        return sum(self.counts[kind] for kind in REJECTED)

    def describe(self) -> str:
        parts = [f"{self.counts[k]} {k}" for k in ("stored", "already", *REJECTED) if self.counts[k]]
        text = f"{self.lines} results: " + (", ".join(parts) or "nothing new")
        if self.torn_last_line:
            text += " (an unfinished last line, cut short by a crash, was left out)"
        return text

    def reject(self, kind: str, where: str, reason: str) -> None:
        self.counts[kind] += 1
        self.problems.append(f"{where}: {reason}")


class LineRejected(BadInput):
    """One line of results.jsonl that cannot be stored: `kind` (one of REJECTED) and why."""

    def __init__(self, kind: str, reason: str):
        super().__init__(reason)
        self.kind, self.reason = kind, reason


def ingest(engine: Engine, job_dir: Path) -> IngestReport:
    """Store every new line of the job's results.jsonl; see the module docstring."""
    job_dir = Path(job_dir)
    job = load_job(job_dir)
    path = job_dir / contract.RESULTS_FILE
    found = contract.read_results(path)
    report = IngestReport(lines=len(found.records) + len(found.problems), torn_last_line=found.torn_last_line)
    for problem in found.problems:
        report.counts["invalid"] += 1
        report.problems.append(problem)
    secret = secret_key(engine)
    with Session(engine) as session:
        study_id = study_by_name(session, job.study).id
    for number, record in zip(found.line_numbers, found.records, strict=True):
        try:
            report.counts[_ingest_line(engine, record, job.study, study_id, job.provider, secret)] += 1
        except LineRejected as rejected:
            report.reject(rejected.kind, f"{path}:{number}", rejected.reason)
    return report


def _ingest_line(engine: Engine, record: CrowdResult, study: str, study_id: int, provider: str, secret: str) -> str:
    """Store one line; returns "stored" or "already", raises LineRejected."""
    where = f"unit {record.unit_id} (assignment {record.assignment_id})"
    if record.study != study:
        raise LineRejected("other study", f"{where} is a result of study {record.study!r}, not of this job's "
                                          f"study {study!r}")
    with Session(engine) as session:
        # An id beyond the store's integer keys is nobody's assignment; asking the database would overflow.
        holdable = 0 < record.assignment_id <= MAX_ROW_ID
        assignment = session.get(Assignment, record.assignment_id) if holdable else None
        if assignment is None or assignment.study_id != study_id:
            raise LineRejected("invalid", f"{where}: assignment {record.assignment_id} is not one of study "
                                          f"{study!r}'s")
        if assignment.status == AssignmentStatus.SUBMITTED and assignment.submission_id == record.submission_id:
            return "already"
        elsewhere = session.scalar(select(Assignment.id).where(Assignment.submission_id == record.submission_id))
        if elsewhere is not None:
            raise LineRejected("conflict", f"{where}: submission {record.submission_id} is stored already, for "
                                           f"assignment {elsewhere}")
        study_row = session.get_one(Study, study_id)
        if study_row.status == StudyStatus.CLOSED:
            raise LineRejected("refused", f"{where}: study {study!r} is closed and takes no more ratings")
        config = study_row.config
        kind = annotation_kind(config.kind)
        expected = kind.expected(session, record.assignment_id, config)
    # What the task page sent (tasks/webapp: the kind's page posts its entries), as the API takes it.
    payload = {"submission_id": record.submission_id, kind.entries: record.outputs.get(kind.entries)}
    if record.outputs.get("comment"):
        payload["comment"] = record.outputs["comment"]
    try:
        validate_submission(payload, kind, expected)
    except EmpevalError as error:
        raise LineRejected("invalid", f"{where}: {error.message}") from None

    annotator_id = get_or_create_annotator(engine, provider, pseudonym_for(secret, provider, record.worker_name)).id
    with Session(engine) as session:
        try:
            ensure_may_work(session, session.get_one(Study, study_id), annotator_id)
        except StudyClosed:
            raise LineRejected("refused", f"{where}: study {study!r} is closed and takes no more ratings") from None
        except AccessRevoked:
            raise LineRejected("refused", f"{where}: the worker was revoked in study {study!r}") from None
        _refuse_seen_contexts(session, kind, record, where, annotator_id, study)
    try:
        with unit_of_work(engine) as session:
            # Crowd timing is the platform's business: no local expiry on a crowd-claimed assignment.
            claimed_now = claim(session, kind, record.assignment_id, annotator_id, now=now_utc(), minutes=None)
            if not claimed_now:
                holder = session.get_one(Assignment, record.assignment_id)
                if holder.annotator_id != annotator_id:
                    raise LineRejected("conflict", f"{where}: assignment {record.assignment_id} is {holder.status} "
                                                   f"for another annotator (was the study also served locally while "
                                                   f"on the crowd?)")
    except IntegrityError:
        # Another ingest claimed for this worker meanwhile: a context she has now seen, or another assignment
        # she holds unsubmitted in this study (one active assignment per rater and study).
        with Session(engine) as session:
            _refuse_seen_contexts(session, kind, record, where, annotator_id, study)
            held = active_assignment(session, study_id, annotator_id)
        raise LineRejected("conflict", f"{where}: the worker holds assignment {held} unsubmitted in study {study!r} "
                                       f"(being stored by another ingest, or left by an interrupted one); ingest "
                                       f"again once it is stored") from None
    try:
        submit_assignment(engine, record.assignment_id, annotator_id, payload, study=study)
    except EmpevalError as error:
        if claimed_now:
            with unit_of_work(engine) as session:
                release(session, record.assignment_id, annotator_id)
        kind = "conflict" if isinstance(error, Conflict) else "invalid"
        raise LineRejected(kind, f"{where}: {error.message}") from None
    return "stored"


def _refuse_seen_contexts(session: Session, kind: AnnotationKind, record: CrowdResult, where: str, annotator_id: int,
                          study: str) -> None:
    """LineRejected("seen context") when the worker was shown a context of this line's assignment in another
    assignment of the study (or of the study linked to it): a rater rates a context once per study, on the crowd
    as locally."""
    seen = contexts_seen_before(session, kind, record.assignment_id, annotator_id)
    if seen:
        listed = ", ".join(f"context {context} (in assignment {shown_in})" for context, shown_in in seen)
        raise LineRejected("seen context", f"{where}: the worker was already shown {listed} in study {study!r}; a "
                                           f"rater rates each context once per study")
