"""empeval's own SQL at the floor's cost in Python, for `annotation_load.py --floor`: the two routes of floor_app.py
(`GET /api/annotate/next`, `POST /api/assignments/<id>/submit`), served by the same gunicorn settings, on a store
that empeval's migrations made, sending the statements empeval's hot path sends (server.annotation.hot_sql, the same
text, in the same transactions, taken in turn at the same writer gate, on connections with the same pragmas) through
raw sqlite3: no SQLAlchemy, no validation, no token signature check (a token is looked up in a file the benchmark
wrote), no JSON beyond what the client reads. floor_app.py says what the stack allows for a schema with no
constraints; this says what empeval's schema and statements allow (its foreign keys, unique keys, seen contexts and
expiry), which no Python on top of them can beat. Expiry: overdue assignments are only counted, never met here
(the benchmark's assignments do not expire while it runs).

Run by gunicorn as `schema_floor_app:app` with SCHEMA_FLOOR_DB naming the SQLite file and SCHEMA_FLOOR_TOKENS a
JSON file {token: [annotator_id, study name]}.
"""
from __future__ import annotations

import json
import os
import sqlite3
import sys
import threading
from datetime import UTC, datetime, timedelta
from pathlib import Path

from flask import Flask, abort, request

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from empeval.server.annotation import hot_sql  # noqa: E402
from empeval.server.annotation.kinds import annotation_kind  # noqa: E402
from empeval.server.annotation.kinds.likert import INSERT_RATINGS, ITEMS  # noqa: E402
from empeval.server.store.engine import (  # noqa: E402  (empeval's gate, so writers queue alike)
    BUSY_TIMEOUT_S,
    SQLITE_SYNCHRONOUS,
    _WriterGate,
)
from empeval.server.web.gunicorn_app import WORKER_SWITCH_INTERVAL_S  # noqa: E402

# The Likert kind's statements, as empeval's hand-out and submission run them.
LIKERT = hot_sql.kind_statements(annotation_kind("likert"))

app = Flask(__name__)
_local = threading.local()
_gate = _WriterGate(Path(os.environ.get("SCHEMA_FLOOR_DB", "unset.db")))
_tokens: dict[str, tuple[int, str]] = {}
_hints: dict[int, tuple[int, int]] = {}  # each rater's last claim (design index, id), as handout._walk_hints
_NO_HINT = (2**62, 0)
sys.setswitchinterval(WORKER_SWITCH_INTERVAL_S)


def _connection() -> sqlite3.Connection:
    connection = getattr(_local, "connection", None)
    if connection is None:
        connection = sqlite3.connect(os.environ["SCHEMA_FLOOR_DB"], timeout=BUSY_TIMEOUT_S, isolation_level=None,
                                     check_same_thread=False)
        for pragma in ("foreign_keys=ON", "journal_mode=WAL", f"synchronous={SQLITE_SYNCHRONOUS}", "secure_delete=ON",
                       f"busy_timeout={BUSY_TIMEOUT_S * 1000}"):  # server.store.engine._sqlite_pragmas'
            connection.execute(f"PRAGMA {pragma}")
        _local.connection = connection
    return connection


def _annotator() -> tuple[int, str]:
    if not _tokens:
        _tokens.update({token: (annotator, study) for token, (annotator, study)
                        in json.loads(Path(os.environ["SCHEMA_FLOOR_TOKENS"]).read_text()).items()})
    known = _tokens.get(request.headers.get("Authorization", "").removeprefix("Bearer "))
    if known is None:
        abort(403)
    return known


@app.get("/healthz")
def healthz():
    return {"status": "ok"}


@app.get("/api/annotate/next")
def next_assignment():
    annotator, study_name = _annotator()
    connection = _connection()
    now = datetime.now(UTC)
    stored_now = hot_sql.sqlite_moment(now)
    study_id, _status, _config, _revoked, resumable, expires_at = connection.execute(
        hot_sql.STUDY_AND_RESUMABLE.sqlite, {"study": study_name, "annotator": annotator, "now": stored_now}
    ).fetchone()
    if resumable is None:
        expires_at = hot_sql.sqlite_moment(now + timedelta(minutes=30))
        from_index, from_id = _hints.get(annotator, _NO_HINT)
        with _gate:
            connection.execute("BEGIN IMMEDIATE")
            try:
                connection.execute(hot_sql.TAKE_TURN.sqlite, {"annotator": annotator})
                connection.execute(hot_sql.ACTIVE_OR_OVERDUE.sqlite,
                                   {"study": study_id, "annotator": annotator, "now": stored_now}).fetchall()
                claimed = connection.execute(LIKERT.claim.sqlite, {
                    "study": study_id, "annotator": annotator, "now": stored_now, "expires_at": expires_at,
                    "from_index": from_index, "from_id": from_id}).fetchall()
                if not claimed:
                    connection.execute("ROLLBACK")
                    return {"assignment": None}
                resumable, design_index = claimed[0]
                _hints[annotator] = (design_index, resumable)
                connection.execute(LIKERT.record_seen.sqlite,
                                   {"assignment": resumable, "annotator": annotator, "now": stored_now})
                connection.execute("COMMIT")
            except BaseException:
                connection.execute("ROLLBACK")
                raise
    items: list[dict] = []
    for position, item_id, response, role, text in connection.execute(ITEMS.sqlite,
                                                                       {"assignment": resumable}):
        if not items or items[-1]["position"] != position:
            items.append({"item_id": item_id, "position": position, "response": response, "context": []})
        if role is not None:
            items[-1]["context"].append({"role": role, "text": text})
    return {"assignment": {"assignment_id": resumable, "expires_at": expires_at, "items": items}}


@app.post("/api/assignments/<int:assignment_id>/submit")
def submit(assignment_id: int):
    annotator, _study = _annotator()
    body = request.get_json()
    connection = _connection()
    now = hot_sql.sqlite_moment(datetime.now(UTC))
    connection.execute(hot_sql.ASSIGNMENT_FOR_SUBMIT.sqlite,
                       {"assignment": assignment_id, "annotator": annotator}).fetchone()
    connection.execute(LIKERT.item_ids.sqlite, {"assignment": assignment_id}).fetchall()
    submission = body["submission_id"]
    with _gate:
        connection.execute("BEGIN IMMEDIATE")
        try:
            connection.execute(hot_sql.MARK_SUBMITTED.sqlite, {
                "assignment": assignment_id, "annotator": annotator, "submission": submission, "now": now,
                "comment": None}).fetchall()
            connection.executemany(LIKERT.time_on_item.sqlite, [
                {"assignment": assignment_id, "item": entry["item_id"], "seconds": entry["seconds"]}
                for entry in body["ratings"]])
            rows = [{"assignment": assignment_id, "item": entry["item_id"], "annotator": annotator,
                     "criterion": criterion, "score": score, "now": now, "submission": submission}
                    for entry in body["ratings"] for criterion, score in entry["scores"].items()]
            connection.executemany(INSERT_RATINGS.sqlite, rows)
            connection.execute("COMMIT")
        except BaseException:
            connection.execute("ROLLBACK")
            raise
    return {"status": "stored", "assignment_id": assignment_id, "submission_id": submission, "ratings": len(rows)}
