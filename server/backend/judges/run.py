"""Scoring every item of a study with one judge: batched, one transaction per batch, resumable.

Items that already have a score from this judge version are skipped; items it failed on before are asked
again (their failure row is replaced by the new outcome); failures are stored as errors, never as scores. Two
runs at once store each key once: each batch reads what is stored for its keys in its own transaction.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from sqlalchemy import Engine, select
from sqlalchemy.exc import IntegrityError

from empeval.server.backend.judges.base import Judge, JudgedStudy
from empeval.server.errors import BadInput
from empeval.server.store.engine import unit_of_work
from empeval.server.store.models import JudgeScore

# Tries to store one batch when other runs of the same judge version keep storing the same keys first.
STORE_ATTEMPTS = 5


@dataclass
class JudgingReport:
    judge: str
    version: str
    study: str
    items: int = 0  # item x criterion pairs in the study
    scored: int = 0
    failed: int = 0
    skipped: int = 0  # already scored by this judge version (before this run, or by a run beside it)
    retried: int = 0  # of scored + failed: asked again after an earlier failure
    errors: list[tuple[int, str, str]] = field(default_factory=list)  # (response id, criterion, message)

    def describe(self, max_errors: int = 3) -> str:
        line = (f"{self.judge} ({self.version}) on study {self.study!r}: {self.scored} scored, {self.failed} failed, "
                f"{self.skipped} already scored, of {self.items} item-criterion pairs")
        for response_id, criterion, message in self.errors[:max_errors]:
            line += f"\n  failed response {response_id} ({criterion}): {message}"
        if len(self.errors) > max_errors:
            line += f"\n  ... and {len(self.errors) - max_errors} more failures (kept in the judge_score table)"
        return line


def judge_study(
    engine: Engine,
    judge: Judge,
    study: JudgedStudy,
    *,
    batch_size: int = 32,
    on_total: Callable[[int], None] | None = None,
    on_batch: Callable[[int], None] | None = None,
) -> JudgingReport:
    """Score every item of `study` on each of its chosen criteria with `judge` and store the verdicts.

    The judge prepares first (checks its configuration; the learned judge fits its cross-fitted models), then
    scores, `batch_size` items at a time, what this judge version has not scored yet; each batch is written in
    one transaction, so an interrupted run keeps its finished batches and the next run resumes after them."""
    if study.pairs is not None:
        raise BadInput(f"study {study.name!r} asks its people to choose between two responses, so judge "
                       f"{judge.name!r}, which scores responses one at a time, has nothing to predict: use a judge "
                       "of differences (pairwise-http-judge or learned-difference-judge)")
    judge.prepare(study)
    version = judge.version(study)
    report = JudgingReport(judge.name, version, study.name, items=len(study.items) * len(study.criteria))
    response_ids = [item.response_id for item in study.items]
    with unit_of_work(engine) as session:
        stored = session.execute(
            select(JudgeScore.response_id, JudgeScore.criterion, JudgeScore.score)
            .where(JudgeScore.judge == judge.name, JudgeScore.judge_version == version,
                   JudgeScore.response_id.in_(response_ids))).all()
    done = {(r, c) for r, c, score in stored if score is not None}
    failed_before = {(r, c) for r, c, score in stored if score is None}
    work = [(criterion, [item for item in study.items if (item.response_id, criterion.key) not in done])
            for criterion in study.criteria]
    report.skipped = report.items - sum(len(todo) for _, todo in work)
    report.retried = sum((item.response_id, criterion.key) in failed_before
                         for criterion, todo in work for item in todo)
    if on_total:
        on_total(sum(len(todo) for _, todo in work))
    for criterion, todo in work:
        for start in range(0, len(todo), batch_size):
            batch = todo[start:start + batch_size]
            verdicts = judge.score_batch(batch, criterion, study.scale)
            for attempt in range(STORE_ATTEMPTS):
                try:
                    _store_batch(engine, judge, version, criterion.key, batch, verdicts, report)
                    break
                except IntegrityError:
                    # Another run of this judge version stored some of these keys between our read and our insert
                    # (PostgreSQL; SQLite's write transactions take turns): read again and keep what it stored.
                    if attempt == STORE_ATTEMPTS - 1:
                        raise
            if on_batch:
                on_batch(len(batch))
    return report


def _store_batch(engine: Engine, judge: Judge, version: str, criterion: str, batch: list, verdicts: list,
                 report: JudgingReport) -> None:
    """Store one batch's verdicts in one transaction. What is stored for these keys is read inside it, so a run
    beside this one (two `empeval judge` at once) is neither duplicated nor overwritten: a score it stored is kept
    (counted as skipped), a failure it stored is replaced by ours. The report is changed only once it commits."""
    counts = {"scored": 0, "failed": 0, "skipped": 0}
    errors = []
    with unit_of_work(engine) as session:
        stored = {row.response_id: row for row in session.scalars(
            select(JudgeScore).where(JudgeScore.judge == judge.name, JudgeScore.judge_version == version,
                                     JudgeScore.criterion == criterion,
                                     JudgeScore.response_id.in_([item.response_id for item in batch])))}
        for item, verdict in zip(batch, verdicts, strict=True):
            row = stored.get(item.response_id)
            if row is not None and row.score is not None:
                counts["skipped"] += 1  # scored meanwhile by another run
                continue
            if row is None:
                row = JudgeScore(response_id=item.response_id, criterion=criterion, judge=judge.name,
                                 judge_kind=judge.kind, judge_version=version)
                session.add(row)
            row.prompt_hash = verdict.prompt_hash
            row.score = verdict.score if verdict.ok else None
            row.error = verdict.error
            row.raw_output = verdict.raw_output
            row.latency_ms = verdict.latency_ms
            row.details = verdict.details
            if verdict.ok:
                counts["scored"] += 1
            else:
                counts["failed"] += 1
                errors.append((item.response_id, criterion, verdict.error or ""))
        session.flush()  # a key another run inserted meanwhile fails here, inside the transaction
    report.scored += counts["scored"]
    report.failed += counts["failed"]
    report.skipped += counts["skipped"]
    report.errors.extend(errors)
