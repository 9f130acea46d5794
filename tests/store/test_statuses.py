"""Statuses are types: the ORM reads and writes the enums, the schema's CHECK constraint lists the enum's values,
and no status (of an assignment, a study or a rater's qualification) is spelt as a bare string anywhere else in the
code (the migrations, which are history, aside)."""
from __future__ import annotations

import re
import subprocess
from pathlib import Path

from sqlalchemy import CheckConstraint, text

from empeval.server.store import open_store
from empeval.server.store.engine import unit_of_work
from empeval.server.store.models import Assignment, Study
from empeval.server.store.statuses import AssignmentStatus, QualificationStatus, StudyStatus
from empeval.server.store.study_config import StudyConfig

REPO = Path(__file__).resolve().parents[2]
VALUES = "|".join(sorted({s.value for s in (*AssignmentStatus, *StudyStatus, *QualificationStatus)}))
LITERAL = re.compile(r"(['\"])(" + VALUES + r")\1")


def test_the_assignment_check_constraint_lists_exactly_the_enum_values():
    checks = [c for c in Assignment.__table__.constraints if isinstance(c, CheckConstraint)
              and str(c.sqltext).startswith("status IN")]
    assert len(checks) == 1
    assert set(re.findall(r"'(\w+)'", str(checks[0].sqltext))) == {s.value for s in AssignmentStatus}


def test_statuses_are_read_back_as_enums_and_stored_as_their_text(sqlite_url):
    engine = open_store(sqlite_url)
    with unit_of_work(engine) as session:
        study = Study(name="s", config=StudyConfig(name="s", systems=("gold",)), seed=0, status=StudyStatus.OPEN)
        session.add(study)
        session.flush()
        session.add(Assignment(study_id=study.id, status=AssignmentStatus.OPEN))
    with unit_of_work(engine) as session:
        assignment = session.query(Assignment).one()
        assert assignment.status is AssignmentStatus.OPEN and session.query(Study).one().status is StudyStatus.OPEN
    with engine.connect() as connection:
        assert connection.execute(text("SELECT status FROM assignment")).scalar() == "open"
    engine.dispose()


def test_no_status_is_a_bare_string_outside_the_statuses_module():
    tracked = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "entry", "server", "tasks", "analysis",
                              "training"], cwd=REPO, capture_output=True, text=True, check=True).stdout.split()
    found = []
    for name in tracked:
        if not name.endswith((".py", ".html")) or "/migrations/" in name or name.endswith("store/statuses.py"):
            continue
        for number, line in enumerate((REPO / name).read_text(encoding="utf-8").splitlines(), 1):
            code = line.split("#", 1)[0] if name.endswith(".py") else line
            if LITERAL.search(code) and "status" in code.lower():
                found.append(f"{name}:{number}: {line.strip()}")
    assert found == []


def test_a_qualification_outcome_may_hold_only_the_decided_statuses():
    from empeval.server.store.qualification_tables import QualificationOutcome
    from empeval.server.store.statuses import DECIDED

    checks = [c for c in QualificationOutcome.__table__.constraints if isinstance(c, CheckConstraint)
              and str(c.sqltext).startswith("status IN")]
    assert len(checks) == 1
    assert set(re.findall(r"'(\w+)'", str(checks[0].sqltext))) == {s.value for s in DECIDED} == {"passed", "failed"}
