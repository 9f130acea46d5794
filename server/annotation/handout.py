"""Handing out assignments: the next one for an annotator, expiry of abandoned ones, closing a study.

Rules, each kept by the database and not by Python alone:
- an annotator holds at most one active ('assigned') assignment per study (a partial unique index on
  assignment); asking again, from a second tab for instance, resumes it;
- nobody is shown a context twice in a study (so a response's k ratings come from k distinct people): a claim
  writes one seen_context row per context of the assignment, unique per (study, annotator, context), in the
  claim's own transaction;
- nor across linked studies: a claim in a study whose `compare_with` names study X writes each seen row twice,
  under its own study and under X, so the same unique key refuses a context she saw in either, even for two
  claims at once; its candidate must fit the seen rows of both. X's own claims need nothing more: their X rows
  are what the linked study checks, and the linked study's X rows are what X checks. (Studies naming the same X
  thus never share a context for one annotator either; a study linked to X is not linked to the one X names.)
- each assignment goes to one annotator: a claim is an `UPDATE` whose WHERE wants it still open (`claim`, also used
  when crowd work is ingested);
- assignments are handed out in design order (design_index);
- in a study with a qualification (gold items), only to a rater whose qualification outcome is `passed`: the claim's
  UPDATE itself checks it (hot_sql.qualified_sql), so no page, script or second tab gets real work without it;
- in a Prolific study, to no participant who has submitted there already (Prolific pays one submission: she is given
  her code again, SubmittedOnProlific), and to Prolific participants only while fewer than the study's places hold or
  have submitted its work (recruitment.places): both in the same UPDATE (hot_sql.done_on_prolific_sql,
  room_on_prolific_sql), no statement more.
The candidate is chosen in SQL (the first open assignment in design order holding no context the annotator has
seen) in the same transaction as the claim and its seen rows. One annotator's claims take turns (each first
locks her annotator row), so a second tab waits for the first and then resumes its assignment; should two
claims of hers still meet (crowd ingest, a direct `claim`), one fails on the index or on the seen key.
An assignment not submitted by its deadline expires and a copy with the same items goes back to the pool; the
rater keeps her seen rows, in both linked studies (she did see those contexts); revoking her keeps them too. Only
`release` (a claim whose work was never stored) removes them, all of them: they are found by the assignment. A
closed study hands out nothing; a revoked annotator gets nothing (both Forbidden, with a message saying so).

Cost, whatever the size of the study or of an assignment (tests/annotation/test_statement_counts.py): resuming
is two statements (who she is and where she stands in one, the items with their turns in the other), claiming
six on PostgreSQL and five on SQLite (no turn-taking UPDATE there, see _take_turn); every read goes by index
(migration 0004) and stops at the first fitting candidate. The claim's transaction holds the write lock (SQLite:
BEGIN IMMEDIATE, see store.engine) only for its three or four statements; the items are read after it commits. The
statements of `next` are prepared once (server.annotation.hot_sql) and run on a Core connection: no ORM object is
loaded and no statement built per call, so the write lock is held for little more than SQLite's own work.

On SQLite a claim is a unit of a group commit (store.group_commit): claims and submissions of a process's threads
that meet at the write lock run one after another in one transaction, each under its own savepoint and seeing the
effects of those before it, and share one commit (one fsync); each is answered only once that commit is done. So
the rules above hold across a batch exactly as across transactions.
"""
from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any, NamedTuple, cast

from sqlalchemy import (
    CompoundSelect,
    Connection,
    CursorResult,
    DateTime,
    Engine,
    Integer,
    String,
    bindparam,
    column,
    delete,
    exists,
    false,
    insert,
    literal,
    or_,
    select,
    text,
    update,
)
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from empeval.server.annotation import hot_sql
from empeval.server.annotation.hot_sql import Executor, StudyView
from empeval.server.annotation.kinds import AnnotationKind, annotation_kind, annotation_kinds
from empeval.server.errors import Conflict, Forbidden, NotFound
from empeval.server.store.engine import unit_of_work
from empeval.server.store.group_commit import run_write_unit
from empeval.server.store.models import Annotator, Assignment, SeenContext, Study, StudyRevocation
from empeval.server.store.queries import assignment_counts, now_utc, study_by_name
from empeval.server.store.statuses import AssignmentStatus, QualificationStatus, StudyStatus

# Each failed attempt means another claim committed (another annotator took the candidate, or this annotator's
# other tab claimed first), so the loop always makes progress; the bound only turns a bug into an error.
MAX_CLAIM_ATTEMPTS = 200


class StudyClosed(Forbidden):
    """The study was closed by the researcher: no assignment is handed out and no submission is taken."""


class NoNewWork(Forbidden):
    """The study has closed its claims (its pre-registered comparisons are decided, or its budget of paid ratings is
    spent: server/annotation/decisions.py): it hands out no new assignment, while one already started may still be
    resumed and submitted. The claim's own statement refuses new work too (hot_sql.CLAIMS_OPEN)."""

    def __init__(self, study: str):
        super().__init__(f"study {study!r} has the ratings it needs and is not taking new work (an assignment you "
                         "have started may still be finished and submitted). Thank you for your help!")


class AccessRevoked(Forbidden):
    """The researcher revoked this annotator, in this study or in all of them."""


class QualificationRequired(Forbidden):
    """The study asks its raters to pass its qualification (server/annotation/qualification.py) before real work, and
    this one has not passed it: she has not finished it yet, or she failed it (`failed`)."""

    def __init__(self, study: str, *, failed: bool):
        self.failed = failed
        super().__init__(
            f"you did not pass the qualification of study {study!r}, so it has no work for you: thank you for your "
            "time" if failed else
            f"study {study!r} asks you to pass its short qualification first: answer its practice items "
            "(GET /api/annotate/qualification), then ask for work again")


class SubmittedOnProlific(Forbidden):
    """A Prolific participant who has submitted an assignment of the study asks for more: Prolific pays one submission
    per participant, so she gets her completion code again (`recruitment`: the study's) and no more work. The claim's
    own statement refuses her too (hot_sql.done_on_prolific_sql)."""

    def __init__(self, study: StudyView):
        self.recruitment = study.config.recruitment
        super().__init__(f"you have submitted your assignment of study {study.name!r} already, and Prolific pays one "
                         "submission per participant: there is no more work for you here. Thank you!")


def revoked_clause(study_id: Any, annotator_id: int) -> Any:
    """SQL truth value: the annotator is revoked in every study, or in this one (`study_id` a value or a column)."""
    return or_(exists().where(Annotator.id == annotator_id, Annotator.revoked_at.is_not(None)),
               exists().where(StudyRevocation.study_id == study_id, StudyRevocation.annotator_id == annotator_id))


def refuse_unless_may_work(study: Study | StudyView, revoked: bool) -> None:
    """Raise StudyClosed or AccessRevoked when the study is closed or the annotator revoked."""
    if study.status == StudyStatus.CLOSED:
        raise StudyClosed(f"study {study.name!r} is closed and takes no more ratings. Thank you for your help!")
    if revoked:
        raise AccessRevoked(f"your access to study {study.name!r} was revoked by the researcher; ask them if you "
                            f"think this is a mistake")


def ensure_may_work(session: Session, study: Study, annotator_id: int) -> None:
    """Raise StudyClosed or AccessRevoked when this annotator may not take or submit work in this study."""
    refuse_unless_may_work(study, bool(session.scalar(select(revoked_clause(study.id, annotator_id)))))


def _copy_placements(kind: AnnotationKind) -> Any:
    """SQL: the placements of the assignments `:replaced` (a list) copied to the open copies that replace them (each
    pointing at its original by replaces_id), every placement column kept: a pairwise pair on the same side."""
    return _COPIES.setdefault(kind.name, text(
        f"INSERT INTO {kind.placement_table} (assignment_id, {', '.join(kind.placement_columns)}) "
        f"SELECT copy.id, {', '.join(f'placed.{c}' for c in kind.placement_columns)} FROM assignment AS copy "
        f"JOIN {kind.placement_table} AS placed ON placed.assignment_id = copy.replaces_id "
        "WHERE copy.replaces_id IN :replaced").bindparams(bindparam("replaced", expanding=True)))


_COPIES: dict[str, Any] = {}


def copy_to_pool(executor: Executor, assignment_ids: list[int] | set[int], now: datetime,
                 kinds: tuple[AnnotationKind, ...] | None = None) -> None:
    """An open copy of each assignment, with the same placements, pointing at it by `replaces_id`: one INSERT ...
    SELECT for the copies, one per kind (`kinds`; default: every registered kind) for their placements, however
    many there are."""
    if not assignment_ids:
        return
    executor.execute(insert(Assignment).from_select(
        ["study_id", "status", "created_at", "round", "design_index", "replaces_id", "late"],
        select(Assignment.study_id, literal(AssignmentStatus.OPEN.value, String), literal(now, DateTime(timezone=True)),
               Assignment.round, Assignment.design_index, Assignment.id, false())
        .where(Assignment.id.in_(assignment_ids))))
    for kind in kinds if kinds is not None else annotation_kinds():
        executor.execute(_copy_placements(kind), {"replaced": sorted(assignment_ids)})


def _expire_all(executor: Executor, assignment_ids: list[int], now: datetime,
                kinds: tuple[AnnotationKind, ...] | None = None) -> set[int]:
    """Expire those of these assignments still active and put a copy of each, with the same placements, in the pool
    (copy_to_pool; `kinds`: of these kinds' studies, default any): three statements and one per kind however many
    there are. Returns the ids this call expired."""
    if not assignment_ids:
        return set()
    expired = set(executor.scalars(
        update(Assignment).where(Assignment.id.in_(assignment_ids), Assignment.status == AssignmentStatus.ASSIGNED)
        .values(status=AssignmentStatus.EXPIRED).returning(Assignment.id)
        .execution_options(synchronize_session=False)
    ).all())
    # An assignment expires once (only an active one does), so its copy is the one assignment replacing it.
    copy_to_pool(executor, expired, now, kinds)
    return expired


def expire_overdue(session: Session, study_id: int, now: datetime) -> int:
    """Expire assigned-but-unsubmitted assignments past their deadline; put a copy of each in the pool. Returns
    how many this call expired."""
    overdue = session.scalars(
        select(Assignment.id)
        .where(Assignment.study_id == study_id, Assignment.status == AssignmentStatus.ASSIGNED,
               Assignment.expires_at < now)
        .with_for_update(skip_locked=True)
    ).all()
    return len(_expire_all(session, list(overdue), now))


def expire_active_of(session: Session, annotator_id: int, *, study_id: int | None = None) -> int:
    """Expire the annotator's active assignments (in one study, or in every study), each copied back to the pool:
    what revoking an annotator does to her work in progress. Returns how many were expired."""
    query = select(Assignment.id).where(Assignment.annotator_id == annotator_id,
                                        Assignment.status == AssignmentStatus.ASSIGNED)
    if study_id is not None:
        query = query.where(Assignment.study_id == study_id)
    return len(_expire_all(session, list(session.scalars(query.with_for_update()).all()), now_utc()))


class Handed(NamedTuple):
    """An assignment handed to an annotator: its id and deadline (None: no local deadline)."""

    id: int
    expires_at: datetime | None


# The study row as Core table aliases: the link is read in SQL from the stored configuration's compare_with, so
# every claim (local, crowd ingest, a direct `claim`) writes the linked study's seen rows without being told to.
# (The hot path's statements, in hot_sql, read it the same way.)
_OWN_STUDY, _LINKED_STUDY = Study.__table__.alias("own_study"), Study.__table__.alias("linked_study")


def _studies_seen_in(study_id: Any) -> CompoundSelect[Any]:
    """SQL: the ids of this study (`study_id` a value or a scalar subquery) and of the study its compare_with
    names."""
    linked = (select(_LINKED_STUDY.c.id)
              .join(_OWN_STUDY, _LINKED_STUDY.c.name == _OWN_STUDY.c.config["compare_with"].as_string())
              .where(_OWN_STUDY.c.id == study_id))
    own = literal(study_id, Integer) if isinstance(study_id, int) else study_id
    return select(own.label("study_id")).union_all(linked)


def _take_turn(connection: Executor, annotator_id: int) -> None:
    """Make this annotator's claims take turns: a no-op UPDATE of her row, first in the claim's transaction. On
    PostgreSQL it is a row lock, held to commit; on SQLite the transaction holds the database's write lock from
    its start anyway. Either way a second tab's claim waits here until the first has committed, and then sees its
    assignment. Without it, the second could look for an active assignment before the first committed, find every
    fitting candidate taken (or locked) by the first, and answer "nothing left". On SQLite it is not sent: the
    claim's transaction began IMMEDIATE (write_connection), which already orders her claims, and the UPDATE would
    only write a page to the WAL under the one write lock."""
    if hot_sql.dialect_of(connection) != "sqlite":
        hot_sql.run(connection, hot_sql.TAKE_TURN, {"annotator": annotator_id})


def _active_after_expiry(connection: Executor, kind: AnnotationKind, study_id: int, annotator_id: int,
                         now: datetime) -> Handed | None:
    """Expire the study's overdue assignments (hers among them) and return her active assignment, if any: one read
    of the study's active assignments that are hers or overdue (as many as raters at work, not as the study)."""
    rows = hot_sql.run(connection, hot_sql.ACTIVE_OR_OVERDUE, {"study": study_id, "annotator": annotator_id,
                                                               "now": hot_sql.moment(connection, now)}).all()
    expired = _expire_all(connection, [row.id for row in rows if row.overdue], now, (kind,))
    mine = [Handed(row.id, hot_sql.read_moment(row.expires_at)) for row in rows if row.annotator_id == annotator_id
            and row.id not in expired]
    return mine[0] if mine else None


# Where each rater's last claim was, per store and rater, per study (see _claim_first_fitting); at most this many
# raters remembered in a process (then forgotten all at once: a hint lost costs one walk from the start).
WALK_HINTS_KEPT = 100_000
_walk_hints: dict[tuple[Any, int], dict[int, tuple[int, int]]] = {}
# No hint yet: a position after every assignment, so the first walk finds nothing at once.
_NO_HINT = (2**62, 0)


def _forget_walk_hints(executor: Executor, annotator_id: int) -> None:
    """Start this rater's next walks from the start (her seen rows shrank: what she passed may fit her now)."""
    _walk_hints.pop((hot_sql.store_of(executor), annotator_id), None)


def _claim_first_fitting(connection: Executor, kind: AnnotationKind, study_id: int, annotator_id: int, *,
                         now: datetime, minutes: int | None, limit: int | None = None) -> Handed | None:
    """Claim the first open assignment of the study, in design order, holding no context this annotator has seen
    (in this study or in the one its compare_with names), in one UPDATE whose WHERE chooses it (walked by index,
    stopping at the first that fits), and write its seen rows (under the linked study too); None when none
    fits.

    The walk starts after her last claim in this process, and from the start only when nothing after it fits. A
    walk from the start passes every open assignment that holds a context she has seen, and those pile up before
    a rater who works ahead of the others (the copies of her contexts that the others have not taken yet): a solo
    rater's `next` took 1.5 ms after 100 assignments and 37 ms after 700. Whatever was open before her last claim
    did not fit her then (or was held by another rater's claim, PostgreSQL's SKIP LOCKED), and a context once seen
    stays seen (her own release forgets the hint, see release); only an assignment opened again since (someone
    else's expired, released or rolled back) may fit, and she is handed it when nothing after her last claim
    fits. A release in another process leaves this one's hint: she then gets the released assignment back only
    when nothing after her last claim fits. So the
    promises do not depend on the hint: it changes which fitting assignment she gets first, not whether she
    gets one. With `limit` (the kind's claims_per_annotator), nothing once she has claimed that many in the study:
    counted in the claim's transaction, after her turn is taken, so two tabs cannot both pass the count."""
    expires_at = None if minutes is None else now + timedelta(minutes=minutes)
    if limit is not None and hot_sql.run(connection, hot_sql.CLAIMED_BY_HER,
                                         {"study": study_id, "annotator": annotator_id}).scalar_one() >= limit:
        return None  # she has had as many as the kind allows one annotator (see AnnotationKind.claims_per_annotator)
    statement = hot_sql.kind_statements(kind).claim
    hint_key = (hot_sql.store_of(connection), annotator_id)
    hints = _walk_hints.get(hint_key)
    from_index, from_id = hints.get(study_id, _NO_HINT) if hints is not None else _NO_HINT
    claimed = hot_sql.run(connection, statement, {
        "study": study_id, "annotator": annotator_id, "now": hot_sql.moment(connection, now),
        "expires_at": hot_sql.moment(connection, expires_at), "from_index": from_index, "from_id": from_id}).first()
    if claimed is None:
        return None
    if hints is None:
        if len(_walk_hints) >= WALK_HINTS_KEPT:
            _walk_hints.clear()
        hints = _walk_hints.setdefault(hint_key, {})
    # Remembered before the commit: a claim rolled back leaves a hint one claim ahead, which costs nothing (see above).
    hints[study_id] = (claimed.design_index, claimed.id)
    _record_seen(connection, kind, claimed.id, annotator_id, now)
    return Handed(claimed.id, expires_at)


def _hand_out(connection: Connection, study_name: str, annotator_id: int, now: datetime
              ) -> tuple[StudyView, AnnotationKind, Handed] | None:
    """The study and the assignment this annotator works on now (resumed or newly claimed), or None when nothing
    suitable is left. One read says whether she may work and what she holds; only a claim writes (in a write
    transaction of its own on the same connection)."""
    row = hot_sql.run(connection, hot_sql.STUDY_AND_RESUMABLE,
                      {"study": study_name, "annotator": annotator_id, "now": hot_sql.moment(connection, now)}
                      ).first()
    if row is None:
        raise NotFound(f"no study named {study_name!r}")
    study = hot_sql.study_view(row.id, study_name, row.status, row.config)
    refuse_unless_may_work(study, bool(row.revoked))
    kind = annotation_kind(study.config.kind)
    if row.resumable_id is not None:  # resuming work that is not overdue needs no turn
        return study, kind, Handed(row.resumable_id, hot_sql.read_moment(row.expires_at))
    if row.done_on_prolific:  # the claim's own statement refuses her too (hot_sql.done_on_prolific_sql)
        raise SubmittedOnProlific(study)
    if not row.qualified:  # the claim's own statement refuses her too (hot_sql.qualified_sql): this says why
        raise QualificationRequired(study_name, failed=row.qualification == QualificationStatus.FAILED)
    if row.claims_closed_at is not None:  # the claim's own statement refuses it too (hot_sql.CLAIMS_OPEN)
        raise NoNewWork(study_name)
    minutes, limit = study.config.design.assignment_minutes, kind.claims_per_annotator(study.config)

    def claim_unit(writer: Connection) -> Handed | None:
        # Expiry, the active check and the claim in one turn: another tab cannot be expiring her assignment (and
        # claiming the next) while this one reads it as still hers. Run as a unit of a group commit: it may share
        # its transaction (after the claims before it, whose effects it sees) and its commit with other requests'.
        _take_turn(writer, annotator_id)
        return (_active_after_expiry(writer, kind, study.id, annotator_id, now)
                or _claim_first_fitting(writer, kind, study.id, annotator_id, now=now, minutes=minutes, limit=limit))

    for _ in range(MAX_CLAIM_ATTEMPTS):
        try:
            handed = run_write_unit(connection, claim_unit)
            return None if handed is None else (study, kind, handed)
        except IntegrityError:
            # This annotator's concurrent claim committed first (one active assignment per study, one seen row
            # per context): the next attempt reads it back.
            continue
    raise Conflict(f"could not hand out an assignment of study {study_name!r} after {MAX_CLAIM_ATTEMPTS} "
                   f"attempts (very many claims at once): try again")


def next_assignment(engine: Engine, study_name: str, annotator_id: int, *, now: datetime | None = None) -> int | None:
    """The id of the assignment this annotator should work on now (resumed or newly claimed), or None when
    nothing suitable is left. StudyClosed or AccessRevoked when she may not work on this study; SubmittedOnProlific
    when she is a Prolific participant who has submitted her assignment of it."""
    with engine.connect() as connection:
        handed = _hand_out(connection, study_name, annotator_id, now or now_utc())
    return None if handed is None else handed[2].id


def next_assignment_payload(engine: Engine, study_name: str, annotator_id: int, *,
                            now: datetime | None = None) -> dict[str, Any] | None:
    """What the task UI shows of the assignment next_assignment hands out (see assignment_payload), or None when
    nothing suitable is left: one statement more than handing it out, on the same connection."""
    with engine.connect() as connection:
        handed = _hand_out(connection, study_name, annotator_id, now or now_utc())
        if handed is None:
            return None
        study, kind, (assignment_id, expires_at) = handed
        return kind.payload(connection, study, assignment_id, AssignmentStatus.ASSIGNED, expires_at)


def current_assignment_payload(engine: Engine, study_name: str, annotator_id: int, *,
                               now: datetime | None = None) -> tuple[StudyView, dict[str, Any] | None]:
    """The study and what the task UI shows of the assignment this annotator holds in it and may resume (not
    overdue), or None when she holds none: like next_assignment_payload, but never claims, so a page can ask for her
    consent before anything is handed to her. Refuses as `next` does (StudyClosed, AccessRevoked,
    SubmittedOnProlific)."""
    now = now or now_utc()
    with engine.connect() as connection:
        row = hot_sql.run(connection, hot_sql.STUDY_AND_RESUMABLE,
                          {"study": study_name, "annotator": annotator_id, "now": hot_sql.moment(connection, now)}
                          ).first()
        if row is None:
            raise NotFound(f"no study named {study_name!r}")
        study = hot_sql.study_view(row.id, study_name, row.status, row.config)
        refuse_unless_may_work(study, bool(row.revoked))
        if row.resumable_id is None:
            if row.done_on_prolific:
                raise SubmittedOnProlific(study)
            return study, None
        expires_at = hot_sql.read_moment(row.expires_at)
        return study, annotation_kind(study.config.kind).payload(connection, study, row.resumable_id,
                                                                 AssignmentStatus.ASSIGNED, expires_at)


def decline(engine: Engine, study_name: str, annotator_id: int) -> list[int]:
    """What a rater who declines the study's consent leaves behind: nothing. Releases (`release`) every assignment
    of the study she holds unsubmitted, in one transaction, so it goes back to the pool as if never claimed, seen
    rows and work in progress with it; returns their ids (none when she held nothing, as when the page asked for
    her consent before claiming)."""
    with unit_of_work(engine) as session:
        study_id = study_by_name(session, study_name).id
        held = session.scalars(select(Assignment.id).where(
            Assignment.study_id == study_id, Assignment.annotator_id == annotator_id,
            Assignment.status == AssignmentStatus.ASSIGNED).order_by(Assignment.id).with_for_update()).all()
        return [assignment_id for assignment_id in held if release(session, assignment_id, annotator_id)]


def _record_seen(connection: Executor, kind: AnnotationKind, assignment_id: int, annotator_id: int,
                 now: datetime) -> None:
    """One seen_context row per context of the assignment, for this annotator, under its study and under the study
    its compare_with names, if any: one INSERT ... SELECT.

    Raises IntegrityError when she has already seen one of its contexts in the study or in the linked one."""
    hot_sql.run(connection, hot_sql.kind_statements(kind).record_seen,
                {"assignment": assignment_id, "annotator": annotator_id, "now": hot_sql.moment(connection, now)})


def claim(session: Session, kind: AnnotationKind, assignment_id: int, annotator_id: int, *, now: datetime,
          minutes: int | None) -> bool:
    """Give an open assignment to the annotator: one `UPDATE` whose WHERE wants it still open, so of two claims at
    once exactly one wins, and in the same transaction one seen_context row per context of the assignment (under
    its study and under the study its `compare_with` names).
    True when this call claimed it. The assignment expires `minutes` after `now`; None means no local deadline
    (crowd work is timed by the platform, not here).

    Raises IntegrityError, spoiling the caller's transaction, when the annotator already holds another active
    assignment of the study or has already seen one of its contexts there or in the linked study."""
    expires_at = None if minutes is None else now + timedelta(minutes=minutes)
    claimed = session.execute(
        update(Assignment).where(Assignment.id == assignment_id, Assignment.status == AssignmentStatus.OPEN)
        .values(status=AssignmentStatus.ASSIGNED, annotator_id=annotator_id, started_at=now, expires_at=expires_at)
    )
    if not cast("CursorResult[Any]", claimed).rowcount:
        return False
    _record_seen(session, kind, assignment_id, annotator_id, now)
    return True


def contexts_seen_before(session: Session, kind: AnnotationKind, assignment_id: int,
                         annotator_id: int) -> list[tuple[int, int]]:
    """(context id, assignment id) for each context of this assignment (of its items or of its pairs) that the
    annotator was shown in another assignment of its study or of the study linked to it (by either's
    compare_with): claiming it would fail on the seen key. Empty when she may take it."""
    own_study = select(Assignment.study_id).where(Assignment.id == assignment_id).scalar_subquery()
    contexts = text(f"SELECT {kind.context_column} AS context_id FROM {kind.contexts_from} "
                    f"WHERE {kind.contexts_assignment} = :held").bindparams(held=assignment_id)
    return [(context_id, seen_in) for context_id, seen_in in session.execute(
        select(SeenContext.context_id, SeenContext.assignment_id).distinct()
        .where(SeenContext.context_id.in_(contexts.columns(column("context_id", Integer))),
               SeenContext.study_id.in_(_studies_seen_in(own_study)),
               SeenContext.annotator_id == annotator_id, SeenContext.assignment_id != assignment_id)
        .order_by(SeenContext.context_id, SeenContext.assignment_id)
    ).all()]


def release(session: Session, assignment_id: int, annotator_id: int) -> bool:
    """Undo a claim whose work was not stored: the assignment goes back to the pool as it was, if this
    annotator still holds it unsubmitted, and the seen rows its claim wrote go with it (those under a linked
    study too: every row names the assignment whose claim wrote it), as does what the kind kept of work in progress
    (a chat's turns: AnnotationKind.forget_unsubmitted). True when it was released."""
    released = session.execute(
        update(Assignment).where(Assignment.id == assignment_id, Assignment.status == AssignmentStatus.ASSIGNED,
                                 Assignment.annotator_id == annotator_id)
        .values(status=AssignmentStatus.OPEN, annotator_id=None, started_at=None, expires_at=None)
    )
    if not cast("CursorResult[Any]", released).rowcount:
        return False
    _forget_walk_hints(session, annotator_id)
    session.execute(delete(SeenContext).where(SeenContext.assignment_id == assignment_id,
                                              SeenContext.annotator_id == annotator_id))
    study_kind = session.scalar(select(Study).join(Assignment, Assignment.study_id == Study.id)
                                .where(Assignment.id == assignment_id))
    if study_kind is not None:
        annotation_kind(study_kind.config.kind).forget_unsubmitted(session, assignment_id)
    return True


class Closing(NamedTuple):
    was_open: bool  # False when the study was closed already
    counts: dict[str, int]  # its assignments by status once closed


def close_study(engine: Engine, name: str) -> Closing:
    """Close the study: from now on it hands out nothing and takes no submission (StudyClosed). Assignments in
    progress stay as they are, so `study status` shows how many were left unfinished."""
    with unit_of_work(engine) as session:
        study = study_by_name(session, name)
        was_open = study.status != StudyStatus.CLOSED
        study.status = StudyStatus.CLOSED
        return Closing(was_open, assignment_counts(session, study.id))


def assignment_kind(session: Session, assignment_id: int) -> AnnotationKind:
    """The annotation part of the kind of the study the assignment belongs to (for callers of `claim` and
    `contexts_seen_before` that hold an assignment id only); NotFound when there is no such assignment."""
    study = session.scalar(select(Study).join(Assignment, Assignment.study_id == Study.id)
                           .where(Assignment.id == assignment_id))
    if study is None:
        raise NotFound(f"no assignment {assignment_id}")
    return annotation_kind(study.config.kind)


def assignment_payload(engine: Engine, assignment_id: int) -> dict[str, Any]:
    """What the task UI needs to show an assignment. System names and control flags are not included."""
    with Session(engine) as session:
        row = session.execute(select(Assignment.status, Assignment.expires_at, Study)
                              .join(Study, Study.id == Assignment.study_id)
                              .where(Assignment.id == assignment_id)).first()
        if row is None:
            raise NotFound(f"no assignment {assignment_id}")
        status, expires_at, study = row
        return annotation_kind(study.config.kind).payload(session, study, assignment_id, status, expires_at)
