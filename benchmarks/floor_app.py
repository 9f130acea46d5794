"""The least an annotation API can do, for `annotation_load.py --floor`: the same two routes as empeval's
(`GET /api/annotate/next`, `POST /api/assignments/<id>/submit`), the same JSON shapes, served by the same gunicorn
settings, but with the database work cut to the bone: raw sqlite3, one short write transaction to claim an
assignment (and read its ten items), one to store its ratings; no ORM, no token check, no validation, no seen
contexts, no expiry. Its requests/s against the trivial endpoint's is the ratio no real annotation API on this
stack can beat, which is what empeval's own ratio should be read against.

Run by gunicorn as `floor_app:app` with FLOOR_DB naming an SQLite file that `prepare(path, assignments)` made.
"""
from __future__ import annotations

import os
import sqlite3
import sys
import threading

from flask import Flask, request

ITEMS = 10
app = Flask(__name__)
_local = threading.local()
_writer = threading.Lock()  # one writer per process at a time, as empeval's SQLite store does
# The GIL switch interval empeval's gunicorn workers use (server.web.gunicorn_app.WORKER_SWITCH_INTERVAL_S), so
# that the floor runs under the same settings.
sys.setswitchinterval(0.0005)


def prepare(path: str, assignments: int) -> None:
    """An SQLite file with `assignments` open assignments of ITEMS items each and an empty ratings table."""
    connection = sqlite3.connect(path)
    connection.execute("PRAGMA journal_mode=WAL")
    connection.executescript(
        "CREATE TABLE assignment (id INTEGER PRIMARY KEY, status TEXT NOT NULL);"
        "CREATE INDEX assignment_status ON assignment (status, id);"
        "CREATE TABLE item (id INTEGER PRIMARY KEY, assignment_id INTEGER NOT NULL, text TEXT NOT NULL);"
        "CREATE INDEX item_assignment ON item (assignment_id);"
        "CREATE TABLE rating (id INTEGER PRIMARY KEY, assignment_id INTEGER, item_id INTEGER, criterion TEXT,"
        " score INTEGER, UNIQUE (assignment_id, item_id, criterion));")
    connection.executemany("INSERT INTO assignment VALUES (?, 'open')", ((a,) for a in range(1, assignments + 1)))
    connection.executemany("INSERT INTO item (assignment_id, text) VALUES (?, ?)",
                           ((a, f"turn one of {a}. turn two of {a}. a reply of about this length.")
                            for a in range(1, assignments + 1) for _ in range(ITEMS)))
    connection.commit()
    connection.close()


def _connection() -> sqlite3.Connection:
    connection = getattr(_local, "connection", None)
    if connection is None:
        connection = sqlite3.connect(os.environ["FLOOR_DB"], timeout=60, isolation_level=None)
        connection.execute("PRAGMA journal_mode=WAL")
        connection.execute("PRAGMA synchronous=FULL")  # as empeval's store (server.store.engine.SQLITE_SYNCHRONOUS)
        _local.connection = connection
    return connection


@app.get("/healthz")
def healthz():
    return {"status": "ok"}


@app.get("/api/annotate/next")
def next_assignment():
    connection = _connection()
    with _writer:
        connection.execute("BEGIN IMMEDIATE")
        row = connection.execute("UPDATE assignment SET status = 'assigned' WHERE id = (SELECT id FROM assignment "
                                 "WHERE status = 'open' ORDER BY id LIMIT 1) RETURNING id").fetchone()
        items = connection.execute("SELECT id, text FROM item WHERE assignment_id = ?",
                                   (row[0],)).fetchall() if row else []
        connection.execute("COMMIT")
    if row is None:
        return {"assignment": None}
    return {"assignment": {"assignment_id": row[0], "items": [{"item_id": i, "context": [text], "response": text}
                                                              for i, text in items]}}


@app.post("/api/assignments/<int:assignment_id>/submit")
def submit(assignment_id: int):
    body = request.get_json()
    rows = [(assignment_id, entry["item_id"], criterion, score)
            for entry in body["ratings"] for criterion, score in entry["scores"].items()]
    connection = _connection()
    with _writer:
        connection.execute("BEGIN IMMEDIATE")
        connection.executemany("INSERT INTO rating (assignment_id, item_id, criterion, score) VALUES (?, ?, ?, ?)",
                               rows)
        connection.execute("UPDATE assignment SET status = 'submitted' WHERE id = ?", (assignment_id,))
        connection.execute("COMMIT")
    return {"status": "stored", "submission_id": body["submission_id"], "ratings": len(rows)}
