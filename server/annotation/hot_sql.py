"""The SQL of the annotation hot path (`next` and `submit`), written once as text and prepared at import.

Building a statement with SQLAlchemy's expression language costs more CPU per call than SQLite takes to run it
(coercions, cache keys, ORM compile and result processing: about 10 ms of a `next` and a `submit` together,
against about 1 ms in the database), and on SQLite that CPU is spent while holding the one write lock. So the
statements `next` and `submit` run every time are SQL strings built once (at import, or once per study kind
from the table names of its annotation part: `kind_statements`), one per database where SQLite and
PostgreSQL differ (reading the study's `compare_with` from its JSON configuration; PostgreSQL's FOR UPDATE SKIP
LOCKED; the driver's parameter style), sent as they are with `Connection.exec_driver_sql` (no compilation, no
bind or result processing: datetimes are passed and read as each database stores them, see `moment`); still
through the engine, so its events (and tests/annotation/test_statement_counts.py) see every one.
The rules they keep are the ones handout.py and submission.py describe; the tests under tests/annotation run them on
both databases.

A study's stored configuration is read as text and parsed once per distinct text (`study_view`): a changed
configuration is a new text, so it is never read stale.
"""
from __future__ import annotations

import functools
import json
import re
from datetime import datetime
from typing import TYPE_CHECKING, Any, NamedTuple

from sqlalchemy import Connection, CursorResult
from sqlalchemy.orm import Session

from empeval.server.store.statuses import AssignmentStatus, QualificationStatus, StudyStatus
from empeval.server.store.study_config import StudyConfig

if TYPE_CHECKING:
    from empeval.server.annotation.kinds import AnnotationKind

# The statuses as the SQL text below spells them.
OPEN, ASSIGNED = AssignmentStatus.OPEN, AssignmentStatus.ASSIGNED
SUBMITTED, EXPIRED = AssignmentStatus.SUBMITTED, AssignmentStatus.EXPIRED
# The provider of Prolific participants (server/annotation/prolific.py's PROVIDER; that module imports this one).
PROLIFIC = "prolific"

# What the hot path executes on: a Core connection, or the session of a caller that has one (crowd ingest).
Executor = Connection | Session



class ByDialect(NamedTuple):
    """One statement, as SQLite's driver (named parameters `:name`) and PostgreSQL's (`%(name)s`) take it."""

    sqlite: str
    postgresql: str


def _connection(executor: Executor) -> Connection:
    return executor.connection() if isinstance(executor, Session) else executor


def dialect_of(executor: Executor) -> str:
    """The executor's database: "sqlite" or "postgresql"."""
    return _connection(executor).dialect.name


def run(executor: Executor, statement: ByDialect, parameters: dict[str, Any] | list[dict[str, Any]]
        ) -> CursorResult[Any]:
    """Send `statement` with `parameters` (a list of them: one executemany) as it is, in the executor's
    transaction. Datetimes go in as `moment` makes them; rows come back as the driver gives them."""
    connection = _connection(executor)
    sql = statement.postgresql if connection.dialect.name == "postgresql" else statement.sqlite
    return connection.exec_driver_sql(sql, parameters)


def store_of(executor: Executor) -> Any:
    """Which database the executor talks to (its engine's URL): a key for what a process remembers per store."""
    return _connection(executor).engine.url


def moment(executor: Executor, value: datetime | None) -> datetime | str | None:
    """A datetime parameter as the store keeps it: on SQLite the text SQLAlchemy's DateTime writes there (naive,
    the fields as given: our moments are UTC), so that stored moments compare as text; on PostgreSQL the datetime."""
    if value is None or dialect_of(executor) == "postgresql":
        return value
    return sqlite_moment(value)


def sqlite_moment(value: datetime) -> str:
    """The text SQLAlchemy's DateTime writes to SQLite for `value` (see moment)."""
    return (f"{value.year:04d}-{value.month:02d}-{value.day:02d} "
            f"{value.hour:02d}:{value.minute:02d}:{value.second:02d}.{value.microsecond:06d}")


def read_moment(value: datetime | str | None) -> datetime | None:
    """A datetime read back: SQLite gives the stored text (naive UTC), PostgreSQL a datetime."""
    return datetime.fromisoformat(value) if isinstance(value, str) else value


def _pyformat(sql: str) -> str:
    return re.sub(r"(?<![:\w]):(\w+)", r"%(\1)s", sql)


def statement(sql: str) -> ByDialect:
    """The same statement for both databases."""
    return ByDialect(sql, _pyformat(sql))


_DIALECT_PARTS = {
    # the study's compare_with, read from its configuration (as own_study.config)
    "compare_with": ("CAST(json_extract(own_study.config, '$.compare_with') AS TEXT)",
                     "(own_study.config ->> 'compare_with')"),
    # the configuration as its JSON text (PostgreSQL's driver would parse a json column)
    "config": ("study.config", "CAST(study.config AS TEXT)"),
    # row locks that raters asking at once skip instead of queueing on (SQLite has one writer at a time)
    "skip_locked": ("", "FOR UPDATE SKIP LOCKED"),
    "lock_candidate": ("", "FOR UPDATE OF candidate SKIP LOCKED"),
    # Keeps PostgreSQL from turning the NOT EXISTS of the seen check into an anti-join, which it plans from her
    # seen rows outwards (every item of every response of every context she has seen, materialised per claim: a
    # rater with history made each claim cost tens of milliseconds, more the more she had rated, and 32 raters
    # held the store to 12-15 submissions/s). A subquery with OFFSET is not pulled up: it runs per candidate, by
    # index, and stops at the first candidate that fits. SQLite already runs it per candidate.
    "per_candidate": ("", " OFFSET 0"),
    # a Prolific study's places, from its configuration (as cap_study.config; NULL when not given)
    "places": ("CAST(json_extract(cap_study.config, '$.recruitment.places') AS INTEGER)",
               "CAST(cap_study.config -> 'recruitment' ->> 'places' AS BIGINT)"),
}


def dialect_sql(sql: str) -> tuple[str, str]:
    """`sql` as SQLite and as PostgreSQL run it: its {compare_with}, {config}, {skip_locked}, {lock_candidate},
    {per_candidate} and {places} filled in from _DIALECT_PARTS."""
    return (sql.format(**{name: parts[0] for name, parts in _DIALECT_PARTS.items()}),
            sql.format(**{name: parts[1] for name, parts in _DIALECT_PARTS.items()}))


def _both(sql: str) -> ByDialect:
    """The statement for both databases (see dialect_sql)."""
    sqlite, postgresql = dialect_sql(sql)
    return ByDialect(sqlite, _pyformat(postgresql))


def revoked_sql(study: str) -> str:
    """SQL truth value: the annotator (:annotator) is revoked in every study, or in `study` (a column)."""
    return ("(EXISTS (SELECT 1 FROM annotator WHERE annotator.id = :annotator AND annotator.revoked_at IS NOT NULL)"
            " OR EXISTS (SELECT 1 FROM study_revocation WHERE study_revocation.study_id = " + study +
            " AND study_revocation.annotator_id = :annotator))")


def _studies_seen_in(study: str) -> str:
    """SQL: the id `study` (a parameter or a scalar subquery) and that of the study its compare_with names: the
    studies whose seen rows a claim in `study` writes and must fit."""
    return (f"SELECT {study} AS study_id UNION ALL SELECT linked_study.id FROM study AS linked_study "
            f"JOIN study AS own_study ON linked_study.name = {{compare_with}} WHERE own_study.id = {study}")


# --- next --------------------------------------------------------------------------------------------------

def qualified_sql(study: str) -> str:
    """SQL truth value: the annotator (:annotator) may be handed real work of `study` (a column or parameter) as far as
    its qualification goes: the study has no gold items, or her outcome there is passed (server/store/
    qualification_tables.py)."""
    return (f"(NOT EXISTS (SELECT 1 FROM qualification_item WHERE qualification_item.study_id = {study}) "
            f"OR EXISTS (SELECT 1 FROM qualification_outcome WHERE qualification_outcome.study_id = {study} "
            "AND qualification_outcome.annotator_id = :annotator AND qualification_outcome.status = "
            f"'{QualificationStatus.PASSED}'))")


def done_on_prolific_sql(study: str) -> str:
    """SQL truth value: the annotator (:annotator) came from Prolific and has submitted an assignment of `study` (a
    column or parameter): Prolific pays one submission per participant, so she is given her completion code again
    and no more work (server/annotation/prolific.py)."""
    return (f"EXISTS (SELECT 1 FROM annotator AS participant JOIN assignment AS done ON done.annotator_id = "
            f"participant.id WHERE participant.id = :annotator AND participant.provider = '{PROLIFIC}' "
            f"AND done.study_id = {study} AND done.status = '{SUBMITTED}')")


def room_on_prolific_sql(study: str) -> str:
    """SQL truth value (for dialect_sql: it holds {places}): a claim by the annotator (:annotator) in `study` (a column
    or parameter) keeps within the study's Prolific places (its configuration's recruitment.places; none given, no
    limit): she is not from Prolific, or fewer than `places` of the study's assignments are held or submitted by
    Prolific participants. At most `places` participants take part in a Prolific study at once (a returned or
    timed-out place goes to someone else once `prolific sync` or expiry frees its work), so a claim beyond that is no
    participant Prolific sent. On SQLite claims take turns under the write lock, so the count is exact; on
    PostgreSQL claims committing at the same moment do not see each other's rows, so the places can be exceeded by
    the claims in flight at once (at most the server's threads)."""
    return (f"(NOT EXISTS (SELECT 1 FROM annotator AS claimant WHERE claimant.id = :annotator "
            f"AND claimant.provider = '{PROLIFIC}') OR COALESCE((SELECT count(*) FROM assignment AS taken JOIN "
            f"annotator AS taker ON taker.id = taken.annotator_id WHERE taken.study_id = {study} AND taken.status IN "
            f"('{ASSIGNED}', '{SUBMITTED}') AND taker.provider = '{PROLIFIC}') < (SELECT {{places}} FROM study AS "
            f"cap_study WHERE cap_study.id = {study}), 1 = 1))")


# Whether she may work (study status, revocations, her qualification, a Prolific participant's one submission),
# what she holds that is not overdue, and whether the study still hands out new work (claims_closed_at), in one read.
STUDY_AND_RESUMABLE = _both(
    "SELECT study.id, study.status, {config} AS config, " + revoked_sql("study.id") + " AS revoked, "
    + qualified_sql("study.id") + " AS qualified, " + done_on_prolific_sql("study.id") + " AS done_on_prolific, "
    "(SELECT qualification_outcome.status FROM qualification_outcome WHERE qualification_outcome.study_id = study.id "
    "AND qualification_outcome.annotator_id = :annotator) AS qualification, "
    "resumable.id AS resumable_id, resumable.expires_at, study.claims_closed_at "
    "FROM study LEFT OUTER JOIN assignment AS resumable ON resumable.study_id = study.id "
    f"AND resumable.annotator_id = :annotator AND resumable.status = '{ASSIGNED}' "
    "AND (resumable.expires_at IS NULL OR resumable.expires_at >= :now) "
    "WHERE study.name = :study")

# Her claims take turns (see handout._take_turn): a no-op UPDATE of her row, first in the claim's transaction.
TAKE_TURN = statement("UPDATE annotator SET display_name = annotator.display_name WHERE annotator.id = :annotator")

# The study's active assignments that are hers or overdue (as many as raters at work, not as the study).
ACTIVE_OR_OVERDUE = _both(
    "SELECT assignment.id, assignment.annotator_id, assignment.expires_at, "
    "assignment.expires_at < :now AS overdue FROM assignment "
    f"WHERE assignment.study_id = :study AND assignment.status = '{ASSIGNED}' "
    "AND (assignment.annotator_id = :annotator OR assignment.expires_at < :now) {skip_locked}")


# How many assignments of the study she has ever claimed (held, submitted or expired; a released claim is open
# again and no longer hers): what a kind's bound on claims per annotator counts.
CLAIMED_BY_HER = statement(
    "SELECT count(*) FROM assignment WHERE assignment.study_id = :study AND assignment.annotator_id = :annotator")


def _seen(context: str) -> str:
    """SQL truth value: she (:annotator) has seen the context `context` (a column) in the study (:study) or the
    linked one. Probed per context, by seen_context's unique key (study, annotator, context), behind the
    {per_candidate} fence: PostgreSQL would otherwise join her seen rows with the candidate's items in whichever
    order its statistics favour, and statistics taken while seen_context was still small (as in every new study,
    until autovacuum analyzes it again) made it walk all of her seen rows and, for each, the candidate's items
    again: 140,000 buffer reads and 13 ms per claim under 32 raters, measured (benchmarks/annotation_load.py, the
    plan logged by auto_explain)."""
    return (f"EXISTS (SELECT 1 FROM seen_context WHERE seen_context.context_id = {context} "
            f"AND seen_context.annotator_id = :annotator AND seen_context.study_id IN ({_studies_seen_in(':study')})"
            "{per_candidate})")


def _seen_in(kind: AnnotationKind) -> str:
    """SQL: the candidate assignment holds a context she has seen (in the study or the linked one)."""
    return (f"SELECT 1 FROM {kind.contexts_from} WHERE {kind.contexts_assignment} = candidate.id AND "
            + _seen(kind.context_column))


def _first_fitting(seen: str, bound: str = "") -> str:
    """SQL: the first open assignment of the study in design order holding no context she has seen, walked by
    index (study, status, design order) and stopping at the first that fits; `bound` narrows where the walk starts.
    SKIP LOCKED (PostgreSQL): raters asking at once try different candidates instead of queueing on the first;
    SQLite has one writer anyway."""
    return ("SELECT candidate.id FROM assignment AS candidate "
            f"WHERE candidate.study_id = :study AND candidate.status = '{OPEN}' {bound}"
            f"AND NOT EXISTS ({seen}{{per_candidate}}) "
            "ORDER BY candidate.design_index, candidate.id LIMIT 1 {lock_candidate}")


# Where a walk may start: after (:from_index, :from_id) in design order (see handout._claim_first_fitting).
_AFTER_HER_LAST_CLAIM = ("AND candidate.design_index >= :from_index "
                         "AND (candidate.design_index > :from_index OR candidate.id > :from_id) ")


# SQL truth value: the study (:study) still hands out new work: its claims were not closed (study.claims_closed_at,
# set once its pre-registered comparisons are decided or its budget is spent: server/annotation/decisions.py).
# One column test by primary key inside the claim's UPDATE; resuming and submitting held work do not read it.
CLAIMS_OPEN = ("NOT EXISTS (SELECT 1 FROM study AS closing WHERE closing.id = :study "
               "AND closing.claims_closed_at IS NOT NULL)")


def _claim(seen: str) -> ByDialect:
    """The first fitting candidate after her last claim, else the first from the start (COALESCE evaluates the
    second walk only when the first finds nothing), claimed by the UPDATE whose WHERE chooses it, and only if the
    study's qualification lets her through (qualified_sql), she is not a Prolific participant who has submitted
    already (done_on_prolific_sql) and the study's Prolific places are not all taken (room_on_prolific_sql): each in
    the claim's own statement, so the database refuses her whatever Python read before (a second tab, a script);
    and only while the study takes new work (CLAIMS_OPEN: a decided study's claims are closed, its started
    assignments may still be resumed and submitted); RETURNING its id and design position."""
    after_her_last, from_the_start = _first_fitting(seen, _AFTER_HER_LAST_CLAIM), _first_fitting(seen)
    return _both(f"UPDATE assignment SET status = '{ASSIGNED}', annotator_id = :annotator, started_at = :now, "
                 f"expires_at = :expires_at WHERE assignment.id = COALESCE(({after_her_last}), ({from_the_start})) "
                 f"AND assignment.status = '{OPEN}' AND {CLAIMS_OPEN} AND {qualified_sql(':study')} "
                 f"AND NOT {done_on_prolific_sql(':study')} AND {room_on_prolific_sql(':study')} "
                 "RETURNING assignment.id, assignment.design_index")


def first_fitting_sql(kind: AnnotationKind, *, after_her_last_claim: bool = False) -> tuple[str, str]:
    """The candidate choice on its own (SQLite, PostgreSQL), for the query plans benchmarks/annotation_load.py
    checks; with `after_her_last_claim`, the claim's first walk."""
    return dialect_sql(_first_fitting(_seen_in(kind), _AFTER_HER_LAST_CLAIM if after_her_last_claim else ""))


class KindStatements(NamedTuple):
    """The statements of `next` and `submit` that depend on the study's kind, built from its annotation part's
    table names once per kind (kind_statements)."""

    claim: ByDialect  # the first fitting open assignment claimed, RETURNING id, design_index
    record_seen: ByDialect  # a seen row per context of the assignment, under its study and the linked one
    item_ids: ByDialect  # the assignment's units in position order
    time_on_item: RowsStatement  # the seconds measured on each unit
    count_answers: ByDialect  # the answers stored for the assignment
    copy_placements: ByDialect  # an expiry copy's placements, from those of the assignment it replaces


@functools.lru_cache(maxsize=64)
def kind_statements(kind: AnnotationKind) -> KindStatements:
    """The kind's statements, built once (a kind part is one object for the life of the process)."""
    placements, item = kind.placement_table, kind.item_column
    copied = ", ".join(kind.placement_columns)
    placed = ", ".join(f"placed.{column}" for column in kind.placement_columns)
    return KindStatements(
        claim=_claim(_seen_in(kind)),
        # One seen row per context of the assignment, under its study and under the study its compare_with names:
        # one INSERT ... SELECT.
        record_seen=_both(
            "INSERT INTO seen_context (study_id, annotator_id, context_id, assignment_id, seen_at) "
            "SELECT studies.study_id, :annotator, contexts.context_id, :assignment, :now FROM ("
            + _studies_seen_in("(SELECT assignment.study_id FROM assignment WHERE assignment.id = :assignment)")
            + f") AS studies JOIN (SELECT DISTINCT {kind.context_column} AS context_id FROM {kind.contexts_from} "
            f"WHERE {kind.contexts_assignment} = :assignment) AS contexts ON 1 = 1"),
        item_ids=statement(f"SELECT {item} FROM {placements} WHERE assignment_id = :assignment ORDER BY position"),
        time_on_item=rows_statement(
            f"UPDATE {placements} SET seconds_on_item = :seconds WHERE assignment_id = :assignment AND {item} = :item",
            f"UPDATE {placements} SET seconds_on_item = timed.seconds "
            "FROM unnest(:item::integer[], :seconds::double precision[]) AS timed(item, seconds) "
            f"WHERE {placements}.assignment_id = :assignment AND {placements}.{item} = timed.item"),
        count_answers=statement(f"SELECT count(*) FROM {kind.answer_table} WHERE assignment_id = :assignment"),
        copy_placements=statement(
            f"INSERT INTO {placements} (assignment_id, {copied}) SELECT copy.id, {placed} "
            f"FROM assignment AS copy JOIN {placements} AS placed ON placed.assignment_id = copy.replaces_id "
            "WHERE copy.replaces_id = :replaced"),
    )


# --- submit ------------------------------------------------------------------------------------------------

# The assignment with its study, whether the rater may work, and her provider (a Prolific completion code).
ASSIGNMENT_FOR_SUBMIT = _both(
    "SELECT assignment.annotator_id, assignment.status, assignment.submission_id, assignment.late, "
    "assignment.submitted_at, study.id AS study_id, study.name, study.status AS study_status, {config} AS config, "
    + revoked_sql("study.id") + " AS revoked, annotator.provider FROM assignment "
    "JOIN study ON study.id = assignment.study_id "
    "LEFT OUTER JOIN annotator ON annotator.id = assignment.annotator_id WHERE assignment.id = :assignment")

# Marks the assignment submitted only if it still may be: hers, not submitted, study open, rater not revoked.
# Late when it had expired or its deadline has passed (SET reads the row as it was).
MARK_SUBMITTED = statement(
    f"UPDATE assignment SET status = '{SUBMITTED}', submission_id = :submission, submitted_at = :now, "
    f"comment = :comment, late = (assignment.status = '{EXPIRED}' OR "
    "(assignment.expires_at IS NOT NULL AND assignment.expires_at < :now)) "
    "WHERE assignment.id = :assignment AND assignment.annotator_id = :annotator "
    f"AND assignment.status != '{SUBMITTED}' AND EXISTS (SELECT 1 FROM study WHERE study.id = assignment.study_id "
    f"AND study.status != '{StudyStatus.CLOSED}') AND NOT " + revoked_sql("assignment.study_id") + " RETURNING late")


class RowsStatement(NamedTuple):
    """One statement for many rows (see run_rows): SQLite's, run once per row (executemany), and PostgreSQL's,
    run once with each of `per_row` (the parameters that differ from row to row) as an array."""

    sqlite: str
    postgresql: str
    per_row: tuple[str, ...]


def rows_statement(sqlite: str, postgresql: str) -> RowsStatement:
    """`postgresql` names each per-row parameter as `:name::type[]` (an array, unnested); they are its per_row."""
    per_row = tuple(re.findall(r"(?<![:\w]):(\w+)::", postgresql))
    return RowsStatement(sqlite, _pyformat(postgresql), per_row)


def run_rows(executor: Executor, statement: RowsStatement, shared: dict[str, Any], rows: list[dict[str, Any]]
             ) -> None:
    """`statement` for every row of `rows` (each row: its per_row parameters), with `shared` (the parameters
    all rows have alike). SQLite steps one prepared statement per row (executemany, in C: cheap in a library
    database). PostgreSQL gets one statement over arrays (unnest): run per row, as executemany does, its executor
    started and ended 30 times for a submission's 30 ratings (2.5 ms against 1.2 for the arrays, measured on a
    local server)."""
    connection = _connection(executor)
    if connection.dialect.name == "postgresql":
        arrays = {name: [row[name] for row in rows] for name in statement.per_row}
        connection.exec_driver_sql(statement.postgresql, {**shared, **arrays})
    else:
        connection.exec_driver_sql(statement.sqlite, [{**shared, **row} for row in rows])



# --- the study as the hot path sees it ---------------------------------------------------------------------


class StudyView(NamedTuple):
    """What `next` and `submit` need of a study row: the row's id, name and status and its typed configuration
    (the attributes of models.Study they read)."""

    id: int
    name: str
    status: str
    config: StudyConfig


@functools.lru_cache(maxsize=256)
def _config(name: str, stored: str) -> StudyConfig:
    return StudyConfig.from_json(json.loads(stored), study=name)


def study_view(study_id: int, name: str, status: str, stored_config: str) -> StudyView:
    """The study from its row, the configuration (`stored_config`, its JSON text) parsed once per distinct text
    (StudyConfigError, naming the study and the key, if it is invalid)."""
    return StudyView(study_id, name, status, _config(name, stored_config))

