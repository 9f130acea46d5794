"""Comparing every pair of a study's responses to one context with a judge of differences: batched, one transaction
per batch, resumable, into the `judge_pair_score` table (server/store/model_assisted_tables.py).

As ``run.judge_study`` does for items: pairs this judge version already scored are skipped; pairs it failed on
before are asked again (their failure row replaced by the new outcome); failures are stored as errors, never as
scores; two runs at once store each key once. A pair is stored in one order only, A the smaller response id:
``store_pair_verdict`` sorts the ids and negates the score when it swaps them.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from sqlalchemy import Engine, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from empeval.server.backend.judges.base import JudgedStudy, PairJudge, PairVerdict
from empeval.server.backend.judges.run import STORE_ATTEMPTS
from empeval.server.store.engine import unit_of_work
from empeval.server.store.model_assisted_tables import JudgePairScore


@dataclass
class PairJudgingReport:
    judge: str
    version: str
    study: str
    pairs: int = 0  # pair x criterion combinations in the study
    scored: int = 0
    failed: int = 0
    skipped: int = 0  # already scored by this judge version (before this run, or by a run beside it)
    retried: int = 0  # of scored + failed: asked again after an earlier failure
    #: (response a, response b, criterion, message) of each failure
    errors: list[tuple[int, int, str, str]] = field(default_factory=list)

    def describe(self, max_errors: int = 3) -> str:
        line = (f"{self.judge} ({self.version}) on study {self.study!r}: {self.scored} pairs compared, {self.failed} "
                f"failed, {self.skipped} already compared, of {self.pairs} pair-criterion combinations")
        for response_a, response_b, criterion, message in self.errors[:max_errors]:
            line += f"\n  failed responses {response_a} and {response_b} ({criterion}): {message}"
        if len(self.errors) > max_errors:
            line += f"\n  ... and {len(self.errors) - max_errors} more failures (kept in the judge_pair_score table)"
        return line


def judge_study_pairs(
    engine: Engine,
    judge: PairJudge,
    study: JudgedStudy,
    *,
    batch_size: int = 16,
    on_total: Callable[[int], None] | None = None,
    on_batch: Callable[[int], None] | None = None,
) -> PairJudgingReport:
    """Compare every pair of responses to the same context of `study` (an A/B study: the pairs its people compare)
    on each chosen criterion with `judge`, and store the verdicts; `batch_size` pairs per transaction, so an
    interrupted run keeps its finished batches."""
    judge.prepare(study)
    version = judge.version(study)
    pairs = study.pairs_to_compare()
    report = PairJudgingReport(judge.name, version, study.name, pairs=len(pairs) * len(study.criteria))
    response_ids = sorted({pair.first.response_id for pair in pairs})
    with unit_of_work(engine) as session:
        stored = session.execute(
            select(JudgePairScore.response_a_id, JudgePairScore.response_b_id, JudgePairScore.criterion,
                   JudgePairScore.score)
            .where(JudgePairScore.judge == judge.name, JudgePairScore.judge_version == version,
                   JudgePairScore.response_a_id.in_(response_ids))).all()
    done = {(a, b, c) for a, b, c, score in stored if score is not None}
    failed_before = {(a, b, c) for a, b, c, score in stored if score is None}
    work = [(criterion, [pair for pair in pairs
                         if (pair.first.response_id, pair.second.response_id, criterion.key) not in done])
            for criterion in study.criteria]
    report.skipped = report.pairs - sum(len(todo) for _, todo in work)
    report.retried = sum((pair.first.response_id, pair.second.response_id, criterion.key) in failed_before
                         for criterion, todo in work for pair in todo)
    if on_total:
        on_total(sum(len(todo) for _, todo in work))
    for criterion, todo in work:
        for start in range(0, len(todo), batch_size):
            batch = todo[start:start + batch_size]
            verdicts = judge.score_pairs(batch, criterion, study.scale)
            for attempt in range(STORE_ATTEMPTS):
                try:
                    _store_batch(engine, judge, version, criterion.key, verdicts, report)
                    break
                except IntegrityError:
                    if attempt == STORE_ATTEMPTS - 1:  # another run keeps storing these keys first
                        raise
            if on_batch:
                on_batch(len(batch))
    return report


def store_pair_verdict(session: Session, judge: PairJudge, version: str, criterion: str, verdict: PairVerdict,
                       stored: dict[tuple[int, int], JudgePairScore]) -> str:
    """Store one verdict in the pair's one order (A the smaller response id; the score negated when the verdict
    named them the other way round), unless a score of this judge version is stored already (`stored`: the rows
    of the batch's keys, read in this transaction). Returns "scored", "failed" or "skipped"."""
    a, b, score = verdict.response_a_id, verdict.response_b_id, verdict.score
    if a == b:
        raise ValueError(f"a pair verdict compares response {a} with itself")
    if a > b:
        a, b = b, a
        score = -score if score is not None else None
    row = stored.get((a, b))
    if row is not None and row.score is not None:
        return "skipped"  # scored meanwhile by another run
    if row is None:
        row = JudgePairScore(response_a_id=a, response_b_id=b, criterion=criterion, judge=judge.name,
                             judge_kind=judge.kind, judge_version=version)
        session.add(row)
        stored[(a, b)] = row
    row.prompt_hash = verdict.prompt_hash
    row.score = score if verdict.ok else None
    row.error = verdict.error
    row.raw_output = verdict.raw_output
    row.latency_ms = verdict.latency_ms
    row.details = verdict.details
    return "scored" if verdict.ok else "failed"


def _store_batch(engine: Engine, judge: PairJudge, version: str, criterion: str, verdicts: list[PairVerdict],
                 report: PairJudgingReport) -> None:
    """One batch in one transaction; the report changes only once it commits (as ``run._store_batch``)."""
    counts = {"scored": 0, "failed": 0, "skipped": 0}
    errors = []
    firsts = sorted({min(v.response_a_id, v.response_b_id) for v in verdicts})
    with unit_of_work(engine) as session:
        stored = {(row.response_a_id, row.response_b_id): row for row in session.scalars(
            select(JudgePairScore).where(JudgePairScore.judge == judge.name, JudgePairScore.judge_version == version,
                                         JudgePairScore.criterion == criterion,
                                         JudgePairScore.response_a_id.in_(firsts)))}
        for verdict in verdicts:
            outcome = store_pair_verdict(session, judge, version, criterion, verdict, stored)
            counts[outcome] += 1
            if outcome == "failed":
                errors.append((verdict.response_a_id, verdict.response_b_id, criterion, verdict.error or ""))
        session.flush()  # a key another run inserted meanwhile fails here, inside the transaction
    report.scored += counts["scored"]
    report.failed += counts["failed"]
    report.skipped += counts["skipped"]
    report.errors.extend(errors)
