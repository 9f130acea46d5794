"""`empeval study sample` killed with SIGKILL in the middle of its draw, in a real process, on SQLite and
PostgreSQL: the draw is one transaction, so wherever the process dies (at its first assignment, or with everything
written and the commit about to be sent) the store holds no part of it: no probability, no human_rated context, no
assignment, no log entry. Run again, the command draws once, as if the killed run had never been.

The process kills itself at a chosen statement (SQLAlchemy's cursor and commit events) rather than on a timer, so
that each run dies where it is meant to."""
from __future__ import annotations

import signal
import subprocess
import sys

import pytest
from sqlalchemy import func, select

from empeval.server.annotation.study_log import study_log
from empeval.server.store import unit_of_work
from empeval.server.store.kinds.likert import StudyContext
from empeval.server.store.models import Assignment
from empeval.tasks.kinds.likert_active import ACTIVE_DRAW
from tests.tasks.test_pairwise_active_sampling import ab_active, judge_both, study_id  # noqa: F401 - fixture

# Runs `empeval ARGS...` (argv[2:]) and SIGKILLs itself at POINT (argv[1]): "assignment", the draw's first
# INSERT into assignment; "commit", the commit of the transaction that wrote the draw's log entry, before it is sent.
KILLER = """
import os, signal, sys
from sqlalchemy import event
from sqlalchemy.engine import Engine

point, logged = sys.argv[1], []

@event.listens_for(Engine, "before_cursor_execute")
def watch(connection, cursor, statement, parameters, context, executemany):
    words = statement.split()
    table = words[2].strip('"').lower() if len(words) > 2 and words[0].upper() == "INSERT" else None
    if point == "assignment" and table == "assignment":
        os.kill(os.getpid(), signal.SIGKILL)
    if table == "study_log":
        logged.append(statement)

@event.listens_for(Engine, "commit")
def commit(connection):
    if point == "commit" and logged:
        os.kill(os.getpid(), signal.SIGKILL)

sys.argv = ["empeval", *sys.argv[2:]]
from empeval.cli import main
main()
"""


def _sample(url: str, point: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", KILLER, point, "--database-url", url, "study", "sample", "ab"],
                          capture_output=True, text=True, timeout=300)


def _drawn_state(engine) -> tuple[int, int, int, int]:
    """(contexts with a probability, contexts human_rated, assignments, draw log entries) of study ab."""
    sid = study_id(engine)
    with unit_of_work(engine) as session:
        with_probability = session.scalar(select(func.count()).select_from(StudyContext).where(
            StudyContext.study_id == sid, StudyContext.inclusion_probability.is_not(None)))
        rated = session.scalar(select(func.count()).select_from(StudyContext).where(
            StudyContext.study_id == sid, StudyContext.human_rated))
        assignments = session.scalar(select(func.count()).select_from(Assignment).where(Assignment.study_id == sid))
    draws = sum(1 for entry in study_log(engine, "ab") if entry.event == ACTIVE_DRAW)
    return with_probability, rated, assignments, draws


@pytest.mark.slow  # three real command runs per store
def test_a_draw_killed_anywhere_leaves_nothing_of_it_and_the_next_run_draws_once(ab_active):  # noqa: F811
    engine = ab_active
    judge_both(engine)
    url = engine.url.render_as_string(hide_password=False)
    assert _drawn_state(engine) == (0, 0, 0, 0)
    for point in ("assignment", "commit"):
        killed = _sample(url, point)
        assert killed.returncode == -signal.SIGKILL, (point, killed.stdout[-2000:], killed.stderr[-2000:])
        assert _drawn_state(engine) == (0, 0, 0, 0), f"killed at {point}: part of the draw was kept"
    done = _sample(url, "none")
    assert done.returncode == 0, done.stderr[-3000:]
    assert "study ab: drew" in done.stdout
    with_probability, rated, assignments, draws = _drawn_state(engine)
    assert with_probability > 0 and 0 < rated < with_probability and assignments > 0 and draws == 1
    again = _sample(url, "none")  # and a second run changes nothing
    assert again.returncode == 0 and _drawn_state(engine) == (with_probability, rated, assignments, 1)
