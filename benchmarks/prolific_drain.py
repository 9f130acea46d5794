"""Draining a Prolific study with made-up participant ids (issue 29): assignments one client obtains against the cap.

The drain script of the issue: one client opens the study link with --attempts made-up PROLIFIC_PIDs, one after the
other as fast as the app answers, and asks `next` for work with each (no page, no consent). Run against the real
app (its WSGI stack, in process) over a real SQLite file holding a Prolific study with as many assignments as the
issue's (46 by default), first with no places given (only the per-address limit of new participants,
recruitment.admissions_per_minute, protects it), then from --addresses addresses, one made-up participant each, with
recruitment.places = --places. Printed: the assignments obtained beside each cap, the requests it took, and whether a
real participant from another address still gets work afterwards.

    .venv/bin/python -m benchmarks prolific_drain
    .venv/bin/python -m benchmarks prolific_drain --attempts 200 --places 10
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from itertools import count
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.figures import Figure, at_least, at_most  # noqa: E402
from benchmarks.session import report, run_script  # noqa: E402
from empeval.server.annotation.prolific import make_study_token  # noqa: E402
from empeval.server.annotation.secrets import secret_key  # noqa: E402
from empeval.server.store import make_engine, upgrade  # noqa: E402
from empeval.server.store.study_parts import DEFAULT_ADMISSIONS_PER_MINUTE  # noqa: E402
from empeval.server.web import create_app  # noqa: E402
from empeval.tasks.study_create import create_study  # noqa: E402
from empeval.tasks.study_file import parse_study  # noqa: E402

PROLIFIC_STUDY_ID, CODE, SESSION_ID = "5f0c1e2d3a4b5c6d7e8f9a0b", "C1A2B3C4", "6b5a4f3e2d1c0b9a8f7e6d5c"
CSRF = {"X-Requested-With": "empeval"}
_pids = count(1)


def _store(folder: Path, contexts: int, places: int | None) -> tuple[object, str]:
    """A SQLite file with the bundled sample, two stand-in systems and a Prolific study "drain" over `contexts`
    contexts (2 systems x 2 ratings, 3 items an assignment); its engine and the study link's path."""
    from empeval.server.datasets.ed_csv import parse_ed_csv
    from empeval.server.datasets.importer import import_dialogues
    from tests.annotation.conftest import add_responses
    from tests.conftest import SAMPLE_ED

    engine = make_engine(f"sqlite:///{folder / 'drain.db'}")
    upgrade(engine)
    import_dialogues(engine, parse_ed_csv(SAMPLE_ED / "test.csv", "test"), dataset="empatheticdialogues")
    add_responses(engine, ["sys-a", "sys-b"], contexts)
    recruitment: dict[str, object] = {"platform": "prolific", "prolific_study_id": PROLIFIC_STUDY_ID,
                                      "completion_code": CODE}
    if places is not None:
        recruitment["places"] = places
    create_study(engine, parse_study({
        "name": "drain", "seed": 1, "contexts": {"split": "test", "count": contexts},
        "systems": {"names": ["sys-a", "sys-b"]}, "design": {"ratings_per_response": 2, "items_per_assignment": 3},
        "recruitment": recruitment}))
    return engine, f"/prolific/{make_study_token(secret_key(engine), 'drain')}"


def _open_assignments(engine) -> int:
    from sqlalchemy import func, select
    from sqlalchemy.orm import Session

    from empeval.server.store.models import Assignment
    from empeval.server.store.statuses import AssignmentStatus

    with Session(engine) as session:
        return session.scalar(select(func.count()).select_from(Assignment)
                              .where(Assignment.status == AssignmentStatus.OPEN))


def _participant(app, path: str, address: str) -> tuple[int, bool]:
    """A fresh browser at `address` opening the link as a made-up participant and asking for work: (requests sent,
    whether she obtained an assignment)."""
    client = app.test_client()
    client.environ_base["REMOTE_ADDR"] = address
    answer = client.get(path, query_string={"PROLIFIC_PID": f"{next(_pids):024x}", "STUDY_ID": PROLIFIC_STUDY_ID,
                                            "SESSION_ID": SESSION_ID})
    if answer.status_code != 303:
        return 1, False
    return 2, client.get("/api/annotate/next", headers=CSRF).get_json()["assignment"] is not None


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks prolific_drain", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--contexts", type=int, default=35, help="contexts of the study (35: 48 assignments)")
    parser.add_argument("--attempts", type=int, default=94, help="made-up participants of the one-client drain")
    parser.add_argument("--addresses", type=int, default=30, help="addresses of the spread drain")
    parser.add_argument("--places", type=int, default=10, help="recruitment.places of the spread drain's study")
    args = parser.parse_args()
    scratch = Path(tempfile.mkdtemp(prefix="empeval-drain-"))
    try:
        (scratch / "one").mkdir()
        engine, path = _store(scratch / "one", args.contexts, places=None)
        app = create_app({"DATABASE_URL": str(engine.url), "TESTING": True})
        total = _open_assignments(engine)
        started, requests, obtained = time.perf_counter(), 0, 0
        for _ in range(args.attempts):
            sent, got = _participant(app, path, "203.0.113.7")
            requests, obtained = requests + sent, obtained + got
        seconds = time.perf_counter() - started
        real = _participant(app, path, "198.51.100.20")[1]
        cap = DEFAULT_ADMISSIONS_PER_MINUTE
        report(Figure("one client, made-up ids: assignments obtained", obtained, goal=at_most(cap),
                      note=f"of {total} open, {args.attempts} made-up ids in {requests} requests, {seconds:.1f} s; "
                           f"cap: {cap} new participants per address and minute"))
        report(Figure("a real participant from another address gets work afterwards", int(real), goal=at_least(1)))
        engine.dispose()

        (scratch / "spread").mkdir()
        engine, path = _store(scratch / "spread", args.contexts, places=args.places)
        app = create_app({"DATABASE_URL": str(engine.url), "TESTING": True})
        total = _open_assignments(engine)
        obtained = sum(_participant(app, path, f"192.0.2.{1 + n % 250}")[1] for n in range(args.addresses))
        report(Figure(f"{args.addresses} addresses, made-up ids: assignments obtained", obtained,
                      goal=at_most(args.places), note=f"of {total} open; cap: recruitment.places = {args.places}"))
        engine.dispose()
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    run_script(__file__, main)
