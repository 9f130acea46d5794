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
- assignments are handed out in design order (design_index).
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
BEGIN IMMEDIATE, see store.engine) only for its three or four statements; the
items are read after it commits. The statements of `next` are prepared once (server.annotation.hot_sql) and run on
a Core connection: no ORM object is loaded and no statement built per call, so the write lock is held for little
more than SQLite's own work.
"""
from __future__ import annotations

from dataclasses import asdict
from datetime import datetime, timedelta
from functools import lru_cache
from typing import Any, NamedTuple, cast

from sqlalchemy import (
    CompoundSelect,
    Connection,
    CursorResult,
    DateTime,
    Engine,
    Integer,
    String,
    delete,
    exists,
    false,
    insert,
    literal,
    or_,
    select,
    union,
    update,
)
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session, aliased

from empeval.server.annotation import hot_sql
from empeval.server.annotation.hot_sql import Executor, StudyView
from empeval.server.annotation.pairwise_payload import pairwise_items, pairwise_payload
from empeval.server.errors import Conflict, Forbidden, NotFound
from empeval.server.store.engine import unit_of_work, write_transaction
from empeval.server.store.models import (
    Annotator,
    Assignment,
    AssignmentItem,
    AssignmentPair,
    PairItem,
    Response,
    SeenContext,
    Study,
    StudyItem,
    StudyRevocation,
)
from empeval.server.store.queries import assignment_counts, iso_utc, now_utc, study_by_name
from empeval.server.store.statuses import AssignmentStatus, StudyStatus
from empeval.server.store.study_config import Criterion, Scale

# Made once: an alias made per call costs SQLAlchemy more than running the query it is used in.
_COPY = aliased(Assignment, name="copy")

# Each failed attempt means another claim committed (another annotator took the candidate, or this annotator's
# other tab claimed first), so the loop always makes progress; the bound only turns a bug into an error.
MAX_CLAIM_ATTEMPTS = 200


class StudyClosed(Forbidden):
    """The study was closed by the researcher: no assignment is handed out and no submission is taken."""


class AccessRevoked(Forbidden):
    """The researcher revoked this annotator, in this study or in all of them."""


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


def _expire_all(session: Executor, assignment_ids: list[int], now: datetime) -> set[int]:
    """Expire those of these assignments still active and put a copy of each, with the same items (or pairs, on
    the same sides), in the pool: four statements however many there are. Returns the ids this call expired."""
    if not assignment_ids:
        return set()
    expired = set(session.scalars(
        update(Assignment).where(Assignment.id.in_(assignment_ids), Assignment.status == AssignmentStatus.ASSIGNED)
        .values(status=AssignmentStatus.EXPIRED).returning(Assignment.id).execution_options(synchronize_session=False)
    ).all())
    if not expired:
        return expired
    session.execute(insert(Assignment).from_select(
        ["study_id", "status", "created_at", "round", "design_index", "replaces_id", "late"],
        select(Assignment.study_id, literal(AssignmentStatus.OPEN.value, String), literal(now, DateTime(timezone=True)),
               Assignment.round,
               Assignment.design_index, Assignment.id, false()).where(Assignment.id.in_(expired))))
    # An assignment expires once (only an active one does), so its copy is the one assignment replacing it.
    copy = _COPY
    session.execute(insert(AssignmentItem).from_select(
        ["assignment_id", "item_id", "position"],
        select(copy.id, AssignmentItem.item_id, AssignmentItem.position)
        .join(AssignmentItem, AssignmentItem.assignment_id == copy.replaces_id)
        .where(copy.replaces_id.in_(expired))))
    session.execute(insert(AssignmentPair).from_select(  # a pairwise assignment's pairs, each on the same side
        ["assignment_id", "pair_item_id", "position", "shown_left"],
        select(copy.id, AssignmentPair.pair_item_id, AssignmentPair.position, AssignmentPair.shown_left)
        .join(AssignmentPair, AssignmentPair.assignment_id == copy.replaces_id)
        .where(copy.replaces_id.in_(expired))))
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


def _active_after_expiry(connection: Executor, study_id: int, annotator_id: int, now: datetime) -> Handed | None:
    """Expire the study's overdue assignments (hers among them) and return her active assignment, if any: one read
    of the study's active assignments that are hers or overdue (as many as raters at work, not as the study)."""
    rows = hot_sql.run(connection, hot_sql.ACTIVE_OR_OVERDUE, {"study": study_id, "annotator": annotator_id,
                                                               "now": hot_sql.moment(connection, now)}).all()
    expired = _expire_all(connection, [row.id for row in rows if row.overdue], now)
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


def _claim_first_fitting(connection: Executor, study_id: int, annotator_id: int, *, now: datetime,
                         minutes: int | None, pairwise: bool = False) -> Handed | None:
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
    gets one."""
    expires_at = None if minutes is None else now + timedelta(minutes=minutes)
    statement = hot_sql.CLAIM_FIRST_FITTING_PAIR if pairwise else hot_sql.CLAIM_FIRST_FITTING
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
    _record_seen(connection, claimed.id, annotator_id, now)
    return Handed(claimed.id, expires_at)


def _hand_out(connection: Connection, study_name: str, annotator_id: int, now: datetime
              ) -> tuple[StudyView, Handed] | None:
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
    if row.resumable_id is not None:  # resuming work that is not overdue needs no turn
        return study, Handed(row.resumable_id, hot_sql.read_moment(row.expires_at))
    minutes, pairwise = study.config.design.assignment_minutes, study.config.is_pairwise
    for _ in range(MAX_CLAIM_ATTEMPTS):
        try:
            with write_transaction(connection):
                _take_turn(connection, annotator_id)
                # Expiry, the active check and the claim in one turn: another tab cannot be expiring her
                # assignment (and claiming the next) while this one reads it as still hers.
                handed = (_active_after_expiry(connection, study.id, annotator_id, now)
                          or _claim_first_fitting(connection, study.id, annotator_id, now=now, minutes=minutes,
                                                  pairwise=pairwise))
                return None if handed is None else (study, handed)
        except IntegrityError:
            # This annotator's concurrent claim committed first (one active assignment per study, one seen row
            # per context): the next attempt reads it back.
            continue
    raise Conflict(f"could not hand out an assignment of study {study_name!r} after {MAX_CLAIM_ATTEMPTS} "
                   f"attempts (very many claims at once): try again")


def next_assignment(engine: Engine, study_name: str, annotator_id: int, *, now: datetime | None = None) -> int | None:
    """The id of the assignment this annotator should work on now (resumed or newly claimed), or None when
    nothing suitable is left. StudyClosed or AccessRevoked when she may not work on this study."""
    with engine.connect() as connection:
        handed = _hand_out(connection, study_name, annotator_id, now or now_utc())
    return None if handed is None else handed[1].id


def next_assignment_payload(engine: Engine, study_name: str, annotator_id: int, *,
                            now: datetime | None = None) -> dict[str, Any] | None:
    """What the task UI shows of the assignment next_assignment hands out (see assignment_payload), or None when
    nothing suitable is left: one statement more than handing it out, on the same connection."""
    with engine.connect() as connection:
        handed = _hand_out(connection, study_name, annotator_id, now or now_utc())
        if handed is None:
            return None
        study, (assignment_id, expires_at) = handed
        if study.config.is_pairwise:
            return pairwise_payload(study, assignment_id, AssignmentStatus.ASSIGNED, expires_at,
                                    pairwise_items(connection, assignment_id))
        return _payload(study, assignment_id, AssignmentStatus.ASSIGNED, expires_at, _items(connection, assignment_id))


def _contexts_of(assignment_id: int) -> Any:
    """SQL: the distinct contexts of an assignment, of its items (Likert) and of its pairs (pairwise)."""
    return union(
        select(Response.context_id.label("context_id"))
        .join(StudyItem, StudyItem.response_id == Response.id)
        .join(AssignmentItem, AssignmentItem.item_id == StudyItem.id)
        .where(AssignmentItem.assignment_id == assignment_id),
        select(PairItem.context_id)
        .join(AssignmentPair, AssignmentPair.pair_item_id == PairItem.id)
        .where(AssignmentPair.assignment_id == assignment_id),
    ).subquery("contexts")


def _record_seen(connection: Executor, assignment_id: int, annotator_id: int, now: datetime) -> None:
    """One seen_context row per context of the assignment, for this annotator, under its study and under the study
    its compare_with names, if any: one INSERT ... SELECT.

    Raises IntegrityError when she has already seen one of its contexts in the study or in the linked one."""
    hot_sql.run(connection, hot_sql.RECORD_SEEN,
                {"assignment": assignment_id, "annotator": annotator_id, "now": hot_sql.moment(connection, now)})


def claim(session: Session, assignment_id: int, annotator_id: int, *, now: datetime, minutes: int | None) -> bool:
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
    _record_seen(session, assignment_id, annotator_id, now)
    return True


def contexts_seen_before(session: Session, assignment_id: int, annotator_id: int) -> list[tuple[int, int]]:
    """(context id, assignment id) for each context of this assignment (of its items or of its pairs) that the
    annotator was shown in another assignment of its study or of the study linked to it (by either's
    compare_with): claiming it would fail on the seen key. Empty when she may take it."""
    own_study = select(Assignment.study_id).where(Assignment.id == assignment_id).scalar_subquery()
    contexts = _contexts_of(assignment_id)
    return [(context_id, seen_in) for context_id, seen_in in session.execute(
        select(SeenContext.context_id, SeenContext.assignment_id).distinct()
        .where(SeenContext.context_id.in_(select(contexts.c.context_id)),
               SeenContext.study_id.in_(_studies_seen_in(own_study)),
               SeenContext.annotator_id == annotator_id, SeenContext.assignment_id != assignment_id)
        .order_by(SeenContext.context_id, SeenContext.assignment_id)
    ).all()]


def release(session: Session, assignment_id: int, annotator_id: int) -> bool:
    """Undo a claim whose work was not stored: the assignment goes back to the pool as it was, if this
    annotator still holds it unsubmitted, and the seen rows its claim wrote go with it (those under a linked
    study too: every row names the assignment whose claim wrote it). True when it was released."""
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


def _items(connection: Executor, assignment_id: int) -> list[dict[str, Any]]:
    """The assignment's items in stored order, each with its response and the context's turns: one statement (a
    row per turn), however many items."""
    items: list[dict[str, Any]] = []
    for row in hot_sql.run(connection, hot_sql.ITEMS, {"assignment": assignment_id}):
        position, item_id, response, role, text = tuple(row)
        if not items or items[-1]["position"] != position:
            items.append({"item_id": item_id, "position": position, "response": response, "context": []})
        if role is not None:
            items[-1]["context"].append({"role": role, "text": text})
    return items


@lru_cache(maxsize=256)
def _criteria_json(criteria: tuple[Criterion, ...]) -> tuple[dict[str, Any], ...]:
    return tuple(asdict(c) for c in criteria)


@lru_cache(maxsize=256)
def _scale_json(scale: Scale) -> dict[str, Any]:
    return {**asdict(scale), "labels": list(scale.labels)}


def _payload(study: Study | StudyView, assignment_id: int, status: str, expires_at: datetime | None,
             items: list[dict[str, Any]]) -> dict[str, Any]:
    config = study.config
    scale = _scale_json(config.scale)
    return {
        "assignment_id": assignment_id,
        "status": status,
        "expires_at": iso_utc(expires_at),
        "study": {"name": study.name, "title": config.title or "Rate responses in conversations",
                  "instructions": config.instructions},
        "criteria": [dict(c) for c in _criteria_json(config.criteria)],  # copies: the caller may change them
        "scale": {**scale, "labels": list(scale["labels"])},
        "items": items,
    }


def assignment_payload(engine: Engine, assignment_id: int) -> dict[str, Any]:
    """What the task UI needs to show an assignment. System names and control flags are not included."""
    with Session(engine) as session:
        row = session.execute(select(Assignment.status, Assignment.expires_at, Study)
                              .join(Study, Study.id == Assignment.study_id)
                              .where(Assignment.id == assignment_id)).first()
        if row is None:
            raise NotFound(f"no assignment {assignment_id}")
        status, expires_at, study = row
        if study.config.is_pairwise:
            return pairwise_payload(study, assignment_id, status, expires_at, pairwise_items(session, assignment_id))
        return _payload(study, assignment_id, status, expires_at, _items(session, assignment_id))
