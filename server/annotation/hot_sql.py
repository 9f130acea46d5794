"""The SQL of the annotation hot path (`next` and `submit`), written once as text and prepared at import.

Building a statement with SQLAlchemy's expression language costs more CPU per call than SQLite takes to run it
(coercions, cache keys, ORM compile and result processing: about 10 ms of a `next` and a `submit` together,
against about 1 ms in the database), and on SQLite that CPU is spent while holding the one write lock. So the
statements `next` and `submit` run every time are module-level SQL strings, one per database where SQLite and
PostgreSQL differ (reading the study's `compare_with` from its JSON configuration; PostgreSQL's FOR UPDATE SKIP
LOCKED; the driver's parameter style), sent as they are with `Connection.exec_driver_sql` (no compilation, no
bind or result processing: datetimes are passed and read as each database stores them, see `moment`); still
through the engine, so its events (and tests/annotation/test_statement_counts.py) see every one.
The rules they keep are the ones handout.py and submit.py describe; the tests under tests/annotation run them on
both databases.

A study's stored configuration is read as text and parsed once per distinct text (`study_view`): a changed
configuration is a new text, so it is never read stale.
"""
from __future__ import annotations

import functools
import json
import re
from datetime import datetime
from typing import Any, NamedTuple

from sqlalchemy import Connection, CursorResult
from sqlalchemy.orm import Session

from empeval.server.store.statuses import AssignmentStatus, StudyStatus
from empeval.server.store.study_config import StudyConfig

# The statuses as the SQL text below spells them.
OPEN, ASSIGNED = AssignmentStatus.OPEN, AssignmentStatus.ASSIGNED
SUBMITTED, EXPIRED = AssignmentStatus.SUBMITTED, AssignmentStatus.EXPIRED

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


def _statement(sql: str) -> ByDialect:
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
}


def dialect_sql(sql: str) -> tuple[str, str]:
    """`sql` as SQLite and as PostgreSQL run it: its {compare_with}, {config}, {skip_locked}, {lock_candidate} and
    {per_candidate} filled in from _DIALECT_PARTS."""
    return (sql.format(**{name: parts[0] for name, parts in _DIALECT_PARTS.items()}),
            sql.format(**{name: parts[1] for name, parts in _DIALECT_PARTS.items()}))


def _both(sql: str) -> ByDialect:
    """The statement for both databases (see dialect_sql)."""
    sqlite, postgresql = dialect_sql(sql)
    return ByDialect(sqlite, _pyformat(postgresql))


def _revoked(study: str) -> str:
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

# Whether she may work (study status, revocations) and what she holds that is not overdue, in one read.
STUDY_AND_RESUMABLE = _both(
    "SELECT study.id, study.status, {config} AS config, " + _revoked("study.id") + " AS revoked, "
    "resumable.id AS resumable_id, resumable.expires_at "
    "FROM study LEFT OUTER JOIN assignment AS resumable ON resumable.study_id = study.id "
    f"AND resumable.annotator_id = :annotator AND resumable.status = '{ASSIGNED}' "
    "AND (resumable.expires_at IS NULL OR resumable.expires_at >= :now) "
    "WHERE study.name = :study")

# Her claims take turns (see handout._take_turn): a no-op UPDATE of her row, first in the claim's transaction.
TAKE_TURN = _statement("UPDATE annotator SET display_name = annotator.display_name WHERE annotator.id = :annotator")

# The study's active assignments that are hers or overdue (as many as raters at work, not as the study).
ACTIVE_OR_OVERDUE = _both(
    "SELECT assignment.id, assignment.annotator_id, assignment.expires_at, "
    "assignment.expires_at < :now AS overdue FROM assignment "
    f"WHERE assignment.study_id = :study AND assignment.status = '{ASSIGNED}' "
    "AND (assignment.annotator_id = :annotator OR assignment.expires_at < :now) {skip_locked}")


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


# A candidate holds a context she has seen (in the study or the linked one): one per kind of study.
_SEEN_IN_ITEMS = (
    "SELECT 1 FROM assignment_item JOIN study_item ON study_item.id = assignment_item.item_id "
    "JOIN response ON response.id = study_item.response_id "
    "WHERE assignment_item.assignment_id = candidate.id AND " + _seen("response.context_id"))
_SEEN_IN_PAIRS = (
    "SELECT 1 FROM assignment_pair JOIN pair_item ON pair_item.id = assignment_pair.pair_item_id "
    "WHERE assignment_pair.assignment_id = candidate.id AND " + _seen("pair_item.context_id"))


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


def _claim(seen: str) -> ByDialect:
    """The first fitting candidate after her last claim, else the first from the start (COALESCE evaluates the
    second walk only when the first finds nothing), claimed by the UPDATE whose WHERE chooses it; RETURNING its id
    and design position."""
    after_her_last, from_the_start = _first_fitting(seen, _AFTER_HER_LAST_CLAIM), _first_fitting(seen)
    return _both(f"UPDATE assignment SET status = '{ASSIGNED}', annotator_id = :annotator, started_at = :now, "
                 f"expires_at = :expires_at WHERE assignment.id = COALESCE(({after_her_last}), ({from_the_start})) "
                 f"AND assignment.status = '{OPEN}' RETURNING assignment.id, assignment.design_index")


CLAIM_FIRST_FITTING = _claim(_SEEN_IN_ITEMS)  # a Likert study: the contexts of its items
CLAIM_FIRST_FITTING_PAIR = _claim(_SEEN_IN_PAIRS)  # a pairwise one: the contexts of its pairs
# The candidate choice on its own (SQLite, PostgreSQL), for the query plan benchmarks/annotation_load.py checks.
FIRST_FITTING_SQL = dialect_sql(_first_fitting(_SEEN_IN_ITEMS))
FIRST_FITTING_AFTER_SQL = dialect_sql(_first_fitting(_SEEN_IN_ITEMS, _AFTER_HER_LAST_CLAIM))  # the claim's first walk

# One seen row per context of the assignment (of its items and of its pairs), under its study and under the
# study its compare_with names: one INSERT ... SELECT.
RECORD_SEEN = _both(
    "INSERT INTO seen_context (study_id, annotator_id, context_id, assignment_id, seen_at) "
    "SELECT studies.study_id, :annotator, contexts.context_id, :assignment, :now FROM ("
    + _studies_seen_in("(SELECT assignment.study_id FROM assignment WHERE assignment.id = :assignment)")
    + ") AS studies JOIN ("
    "SELECT response.context_id AS context_id FROM response "
    "JOIN study_item ON study_item.response_id = response.id "
    "JOIN assignment_item ON assignment_item.item_id = study_item.id "
    "WHERE assignment_item.assignment_id = :assignment "
    "UNION SELECT pair_item.context_id FROM pair_item "
    "JOIN assignment_pair ON assignment_pair.pair_item_id = pair_item.id "
    "WHERE assignment_pair.assignment_id = :assignment) AS contexts ON 1 = 1")

# The assignment's items in stored order, each with its response and the context's turns (a row per turn).
ITEMS = _statement(
    "SELECT assignment_item.position, study_item.id, response.text, turn.role, turn.text "
    "FROM assignment_item JOIN study_item ON study_item.id = assignment_item.item_id "
    "JOIN response ON response.id = study_item.response_id JOIN context ON context.id = response.context_id "
    "LEFT OUTER JOIN turn ON turn.dialogue_id = context.dialogue_id AND turn.idx <= context.n_turns "
    "WHERE assignment_item.assignment_id = :assignment ORDER BY assignment_item.position, turn.idx")

# The pairs in stored order, the response shown left first, with the context's turns (a row per turn).
PAIRS = _statement(
    "SELECT assignment_pair.position, assignment_pair.pair_item_id, "
    "CASE WHEN assignment_pair.shown_left = 'a' THEN response_a.text ELSE response_b.text END, "
    "CASE WHEN assignment_pair.shown_left = 'a' THEN response_b.text ELSE response_a.text END, turn.role, turn.text "
    "FROM assignment_pair JOIN pair_item ON pair_item.id = assignment_pair.pair_item_id "
    "JOIN response AS response_a ON response_a.id = pair_item.response_a_id "
    "JOIN response AS response_b ON response_b.id = pair_item.response_b_id "
    "JOIN context ON context.id = pair_item.context_id "
    "LEFT OUTER JOIN turn ON turn.dialogue_id = context.dialogue_id AND turn.idx <= context.n_turns "
    "WHERE assignment_pair.assignment_id = :assignment ORDER BY assignment_pair.position, turn.idx")

# --- submit ------------------------------------------------------------------------------------------------

# The assignment with its study, whether the rater may work, and her provider (a Prolific completion code).
ASSIGNMENT_FOR_SUBMIT = _both(
    "SELECT assignment.annotator_id, assignment.status, assignment.submission_id, assignment.late, "
    "assignment.submitted_at, study.id AS study_id, study.name, study.status AS study_status, {config} AS config, "
    + _revoked("study.id") + " AS revoked, annotator.provider FROM assignment "
    "JOIN study ON study.id = assignment.study_id "
    "LEFT OUTER JOIN annotator ON annotator.id = assignment.annotator_id WHERE assignment.id = :assignment")

ITEM_IDS = _statement("SELECT item_id FROM assignment_item WHERE assignment_id = :assignment ORDER BY position")
PAIR_ITEM_IDS = _statement(
    "SELECT pair_item_id FROM assignment_pair WHERE assignment_id = :assignment ORDER BY position")

# Marks the assignment submitted only if it still may be: hers, not submitted, study open, rater not revoked.
# Late when it had expired or its deadline has passed (SET reads the row as it was).
MARK_SUBMITTED = _statement(
    f"UPDATE assignment SET status = '{SUBMITTED}', submission_id = :submission, submitted_at = :now, "
    f"comment = :comment, late = (assignment.status = '{EXPIRED}' OR "
    "(assignment.expires_at IS NOT NULL AND assignment.expires_at < :now)) "
    "WHERE assignment.id = :assignment AND assignment.annotator_id = :annotator "
    f"AND assignment.status != '{SUBMITTED}' AND EXISTS (SELECT 1 FROM study WHERE study.id = assignment.study_id "
    f"AND study.status != '{StudyStatus.CLOSED}') AND NOT " + _revoked("assignment.study_id") + " RETURNING late")


class RowsStatement(NamedTuple):
    """One statement for many rows (see run_rows): SQLite's, run once per row (executemany), and PostgreSQL's,
    run once with each of `per_row` (the parameters that differ from row to row) as an array."""

    sqlite: str
    postgresql: str
    per_row: tuple[str, ...]


def _rows_statement(sqlite: str, postgresql: str) -> RowsStatement:
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


TIME_ON_ITEM = _rows_statement(
    "UPDATE assignment_item SET seconds_on_item = :seconds WHERE assignment_id = :assignment AND item_id = :item",
    "UPDATE assignment_item SET seconds_on_item = timed.seconds "
    "FROM unnest(:item::integer[], :seconds::double precision[]) AS timed(item, seconds) "
    "WHERE assignment_item.assignment_id = :assignment AND assignment_item.item_id = timed.item")
TIME_ON_PAIR = _rows_statement(
    "UPDATE assignment_pair SET seconds_on_item = :seconds WHERE assignment_id = :assignment AND pair_item_id = :item",
    "UPDATE assignment_pair SET seconds_on_item = timed.seconds "
    "FROM unnest(:item::integer[], :seconds::double precision[]) AS timed(item, seconds) "
    "WHERE assignment_pair.assignment_id = :assignment AND assignment_pair.pair_item_id = timed.item")
INSERT_RATINGS = _rows_statement(
    "INSERT INTO rating (assignment_id, item_id, annotator_id, criterion, score, submitted_at, submission_id) "
    "VALUES (:assignment, :item, :annotator, :criterion, :score, :now, :submission)",
    "INSERT INTO rating (assignment_id, item_id, annotator_id, criterion, score, submitted_at, submission_id) "
    "SELECT :assignment, given.item, :annotator, given.criterion, given.score, :now, :submission "
    "FROM unnest(:item::integer[], :criterion::varchar[], :score::integer[]) AS given(item, criterion, score)")
INSERT_CHOICES = _rows_statement(
    "INSERT INTO choice (assignment_id, pair_item_id, annotator_id, criterion, choice, submitted_at, submission_id) "
    "VALUES (:assignment, :item, :annotator, :criterion, :choice, :now, :submission)",
    "INSERT INTO choice (assignment_id, pair_item_id, annotator_id, criterion, choice, submitted_at, submission_id) "
    "SELECT :assignment, given.item, :annotator, given.criterion, given.choice, :now, :submission "
    "FROM unnest(:item::integer[], :criterion::varchar[], :choice::varchar[]) AS given(item, criterion, choice)")

COUNT_RATINGS = _statement("SELECT count(*) FROM rating WHERE assignment_id = :assignment")
COUNT_CHOICES = _statement("SELECT count(*) FROM choice WHERE assignment_id = :assignment")


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

