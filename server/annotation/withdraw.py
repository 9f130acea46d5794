"""Withdrawing a participant from a study (`empeval annotators forget NAME --study S`).

What leaves, in one transaction:
- her answers in the study (ratings, A/B choices, ...: whatever its kind stores; so they leave every export and
  every analysis), her answers to its qualification and its outcome (the report no longer counts her), and the
  comments she left on its assignments and on their single items (`item_comment`; free text may name her);
- her work in progress there (expired, as revoking does); each assignment she had submitted becomes 'expired' and,
  unless a copy already replaced it (a late submission), a copy with the same placements (pairs on the same
  sides) goes back to the pool, so another rater restores the design's k answers per unit;
- her identifying data, once she takes part in no other study: the name she was invited under is deleted and her
  pseudonym (a keyed hash of that name or worker id, the one the exports carried) is replaced by a tombstone, a
  keyed hash under another salt, so that nothing stored or exported before matches her row any more. Her row is
  revoked in every study, so her invite links stop working. While she still takes part in another study her name
  is kept (that study's hand-out and revocation need it) and the log says where.
What stays, and why that is safe: her annotator row (as a tombstone) and her seen contexts. The hand-out's promise
(nobody rates a context twice in a study) is kept by the seen rows, keyed by her row's id: keeping them keeps it
for that row, which is revoked anyway. Should she come back under a new invite she is a new row with no ratings of
old: none of hers remain in the study, so no response can end up with two ratings from her.
The withdrawal is written to the study's log (time, counts, whether her name was deleted; never the name). Running
it again finds her by the tombstone and changes nothing. The exports and reports logged before as holding her
answers (server/annotation/study_log.py) are named in the result and the log: the store cannot reach those files,
the researcher must delete or regenerate them.

Deleted rows are not yet gone from the disk: `scrub_storage` runs after the withdrawal commits. On SQLite (which the
store runs with secure_delete on, so a deleted row's bytes are overwritten in the pages it leaves) it checkpoints the
WAL into the database file and truncates it (PRAGMA wal_checkpoint(TRUNCATE)), so that neither file keeps her data;
a reader holding an old snapshot can delay that, and the result says so. On PostgreSQL it VACUUMs the tables the
withdrawal touched (FULL on request: it rewrites them, locking them meanwhile), and says what PostgreSQL keeps
regardless: the bytes of dead rows in table free space until overwritten (without FULL), the WAL segments until
they are recycled, and base backups and WAL archives until the researcher's retention deletes them.
"""
from __future__ import annotations

import hashlib
from datetime import datetime
from typing import Any, NamedTuple, cast

from sqlalchemy import CursorResult, column, delete, select, table, update
from sqlalchemy.orm import Session

from empeval.server.annotation.annotators import pseudonym_for
from empeval.server.annotation.handout import copy_to_pool, expire_active_of
from empeval.server.annotation.kinds import AnnotationKind, annotation_kind
from empeval.server.annotation.secrets import secret_key
from empeval.server.annotation.study_log import WITHDRAWAL, add_entry, releases_holding
from empeval.server.errors import NotFound
from empeval.server.store.engine import unit_of_work
from empeval.server.store.item_comment_tables import ItemComment
from empeval.server.store.models import Annotator, Assignment, Study, StudyLogEntry, StudyRevocation
from empeval.server.store.qualification_tables import QualificationAnswer, QualificationOutcome
from empeval.server.store.queries import now_utc, study_by_name
from empeval.server.store.statuses import AssignmentStatus

TOMBSTONE_PREFIX = "withdrawn-"


def tombstone_for(secret: str, provider: str, external_id: str) -> str:
    """The pseudonym a withdrawn participant's row carries instead of hers: a keyed hash under another salt, so
    `forget` can find her again (it is idempotent) while no export or pseudonym written before matches it."""
    digest = hashlib.sha256(f"{secret}|withdrawn|{provider}|{external_id}".encode()).hexdigest()[:12]
    return f"{TOMBSTONE_PREFIX}{digest}"


class Withdrawal(NamedTuple):
    annotator_id: int
    already: bool  # withdrawn from this study before, and nothing was left to remove
    answers_removed: int
    answers: str  # what they are, in the study kind's words: "ratings", "choices", ...
    comments_removed: int
    reopened: int  # submitted assignments whose copy went back to the pool
    in_progress_expired: int
    name_removed: bool  # her name and pseudonym were deleted now
    name_kept_for: tuple[str, ...]  # the other studies she still takes part in, which keep her name
    # The exports and reports written before that held her answers ("export to PATH at TIME"): they still do.
    released_in: tuple[str, ...] = ()


def forget(engine, name: str, *, study: str, provider: str = "local", now: datetime | None = None) -> Withdrawal:
    """Withdraw the participant `name` (an invited name, or with `provider` a crowd worker's id) from `study`: see
    the module's docstring for what is removed and what is kept. NotFound for an unknown study or participant."""
    secret = secret_key(engine)
    now = now or now_utc()
    pseudonyms = (pseudonym_for(secret, provider, name), tombstone_for(secret, provider, name))
    with unit_of_work(engine) as session:
        study_row = study_by_name(session, study)
        annotator = session.scalar(select(Annotator).where(Annotator.provider == provider,
                                                           Annotator.pseudonym.in_(pseudonyms)))
        if annotator is None:
            raise NotFound(f"no {provider} annotator {name!r}: check the name as it was invited (or the worker id "
                           f"and --provider for crowd workers); `empeval annotators list {study}` lists them")
        withdrawn_before = session.scalar(select(StudyLogEntry.id).where(
            StudyLogEntry.study_id == study_row.id, StudyLogEntry.annotator_id == annotator.id,
            StudyLogEntry.event == WITHDRAWAL).limit(1)) is not None
        if session.get(StudyRevocation, (study_row.id, annotator.id)) is None:
            session.add(StudyRevocation(study_id=study_row.id, annotator_id=annotator.id, revoked_at=now))
        in_progress = expire_active_of(session, annotator.id, study_id=study_row.id)
        kind = annotation_kind(study_row.config.kind)
        removed = _remove_work(session, kind, study_row.id, annotator.id, now)
        kept_for = _other_studies(session, study_row.id, annotator.id)
        name_removed = False
        if not kept_for and annotator.pseudonym != pseudonyms[1]:
            annotator.display_name, annotator.pseudonym = None, pseudonyms[1]
            annotator.revoked_at = annotator.revoked_at or now
            name_removed = True
        answers, comments, reopened = removed
        released = tuple(f"{entry.event} to {entry.detail.get('where')} at {entry.at:%Y-%m-%d %H:%M} UTC"
                         for entry in releases_holding(session, study_row.id, annotator.id))
        withdrawal = Withdrawal(annotator.id, False, answers, kind.counted, comments, reopened, in_progress,
                                name_removed, tuple(kept_for), released)
        if withdrawn_before and not (any(removed) or in_progress or name_removed):
            return withdrawal._replace(already=True)
        add_entry(session, study_row.id, WITHDRAWAL, annotator_id=annotator.id, at=now, detail={
            f"{kind.counted}_removed": withdrawal.answers_removed, "comments_removed": withdrawal.comments_removed,
            "assignments_reopened": withdrawal.reopened,
            "in_progress_expired": in_progress, "name_removed": name_removed, "name_kept_for": list(kept_for),
            "released_before": list(released)})
        return withdrawal


class Scrub(NamedTuple):
    """What `scrub_storage` did to the disk after a withdrawal, and what may still hold her data."""

    done: str
    remains: str | None  # None: nothing of hers is known to remain on this store's disk


def scrub_storage(engine, study: str, *, vacuum_full: bool = False) -> Scrub:
    """After a withdrawal from `study` committed: on SQLite, PRAGMA wal_checkpoint(TRUNCATE); on
    PostgreSQL, VACUUM (or VACUUM FULL) of the tables a withdrawal writes (the kind's answer table, assignments,
    annotators, the qualification's answers and outcomes, the comments on single items). See the module docstring."""
    if engine.dialect.name == "sqlite":
        with engine.connect() as connection:
            busy, wal_frames, copied = connection.exec_driver_sql("PRAGMA wal_checkpoint(TRUNCATE)").one()
        if busy or (wal_frames >= 0 and copied < wal_frames):
            return Scrub("the WAL could not be checkpointed: another connection is reading the store",
                         "her deleted data may remain in the -wal file until the next checkpoint; run `annotators "
                         "forget` again once `empeval serve` is stopped to check")
        return Scrub("the WAL was checkpointed into the database file and truncated (SQLite overwrote the deleted "
                     "rows: secure_delete is on)", None)
    with Session(engine) as session:
        answer_table = annotation_kind(study_by_name(session, study).config.kind).answer_table
    tables = [answer_table, Assignment.__tablename__, Annotator.__tablename__,
              QualificationAnswer.__tablename__, QualificationOutcome.__tablename__, ItemComment.__tablename__]
    verb = "VACUUM FULL" if vacuum_full else "VACUUM"
    with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as connection:
        for name in tables:
            connection.exec_driver_sql(f'{verb} "{name}"')
    stays = ("the WAL segments until PostgreSQL recycles them, and base backups and WAL archives until your "
             "retention deletes them")
    if vacuum_full:
        return Scrub(f"{verb} rewrote {', '.join(tables)}", f"PostgreSQL still holds her data in {stays}")
    return Scrub(f"{verb} of {', '.join(tables)}",
                 f"PostgreSQL keeps the deleted rows' bytes in those tables' free space until overwritten (run "
                 f"`annotators forget` with --vacuum-full in a quiet moment to rewrite them) and in {stays}")


def _remove_work(session: Session, kind: AnnotationKind, study_id: int, annotator_id: int,
                 now: datetime) -> tuple[int, int, int]:
    """Delete her answers (rows of the kind's answer table, and to the study's qualification, with its outcome) and
    comments in the study (on assignments and on single items, counted together); expire her submitted
    assignments and put a copy of each not yet replaced back in the pool. Returns (answers, comments, assignments
    reopened)."""
    hers = select(Assignment.id).where(Assignment.study_id == study_id, Assignment.annotator_id == annotator_id)
    answer = table(kind.answer_table, column("annotator_id"), column("assignment_id"))
    answers = _count(session.execute(delete(answer).where(answer.c.annotator_id == annotator_id,
                                                          answer.c.assignment_id.in_(hers))))
    for qualification_table in (QualificationAnswer, QualificationOutcome):
        session.execute(delete(qualification_table).where(qualification_table.study_id == study_id,
                                                          qualification_table.annotator_id == annotator_id))
    comments = _count(session.execute(update(Assignment).where(Assignment.id.in_(hers), Assignment.comment.is_not(None))
                                      .values(comment=None).execution_options(synchronize_session=False)))
    comments += _count(session.execute(delete(ItemComment).where(ItemComment.assignment_id.in_(hers))))
    submitted = session.scalars(select(Assignment.id).where(Assignment.id.in_(hers),
                                                            Assignment.status == AssignmentStatus.SUBMITTED)).all()
    replaced = set(session.scalars(select(Assignment.replaces_id).where(Assignment.replaces_id.in_(submitted))))
    reopen = [assignment_id for assignment_id in submitted if assignment_id not in replaced]
    if submitted:
        session.execute(update(Assignment).where(Assignment.id.in_(submitted)).values(status=AssignmentStatus.EXPIRED)
                        .execution_options(synchronize_session=False))
    copy_to_pool(session, reopen, now, (kind,))
    return answers, comments, len(reopen)


def _count(result: Any) -> int:
    """The rows a DELETE or UPDATE touched."""
    return cast("CursorResult[Any]", result).rowcount


def _other_studies(session: Session, study_id: int, annotator_id: int) -> list[str]:
    """The studies other than this one where she was handed work and has not been withdrawn, by name."""
    withdrawn = select(StudyLogEntry.study_id).where(StudyLogEntry.annotator_id == annotator_id,
                                                     StudyLogEntry.event == WITHDRAWAL)
    return list(session.scalars(
        select(Study.name).distinct().join(Assignment, Assignment.study_id == Study.id)
        .where(Assignment.annotator_id == annotator_id, Study.id != study_id,
               Study.id.not_in(withdrawn)).order_by(Study.name)))
