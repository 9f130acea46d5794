"""kill -9 during `empeval db upgrade` (issue 29): how many kills leave a SQLite store that is not exactly a revision.

For each revision R, a small store holding a few rows of every early table, cleanly at the revision before R, is
upgraded to R and killed (SIGKILL), then opened: it must be at R-1 or at R with the same schema (every table's
columns and constraints, every index's SQL) and rows as a clean upgrade to that revision, and a following
`empeval db upgrade R` must bring it to R exactly. Two ways of killing:

- random times: a real `empeval db upgrade R` process (a fresh interpreter), killed a random time after its first
  SQL statement, uniform over the time from its first statement to its last in a clean run of a real
  process (some land after the end: a loaded machine varies), --per-revision times per revision (default 20),
  --jobs at once;
- every statement (--every-statement, on by default): a child forked from this process (which has imported
  empeval already) kills itself just before its n-th statement, for every n.

Printed: the kills of each kind, how they ended (rolled back to R-1, R committed, finished before the kill) and the
figures: stores not exactly at a revision, and re-runs of `db upgrade` that failed (goals: 0 each).
tests/store/test_migrations_killed.py uses this module's harness for the suite's deterministic version.

    .venv/bin/python -m benchmarks migrations_killed
    .venv/bin/python -m benchmarks migrations_killed --per-revision 5 --revisions 0002,0003 --no-every-statement
"""

from __future__ import annotations

import argparse
import contextlib
import io
import itertools
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from sqlalchemy import Engine, event, text  # noqa: E402

from benchmarks.figures import Figure, at_most  # noqa: E402
from benchmarks.session import report, run_script  # noqa: E402
from empeval.cli import cli  # noqa: E402
from empeval.server.store import make_engine  # noqa: E402
from empeval.server.store.migrate import current_revision, next_revision, upgrade  # noqa: E402

REVISIONS: list[str | None] = [None]
while (_following := next_revision(REVISIONS[-1])) is not None:
    REVISIONS.append(_following)

UNSEEDED = "first revision, no rows"  # the key of the first revision's state before SEED_ROWS went in

SEED_ROWS = [  # a few rows of the first revision's tables, so that table copies and backfills have work to do
    "INSERT INTO study (id, name, config, seed, status, created_at) VALUES (1, 's', '{}', 1, 'open', '2026-01-01')",
    "INSERT INTO annotator (id, provider, pseudonym, created_at) VALUES (1, 'local', 'ann', '2026-01-01')",
    "INSERT INTO dataset (id, name, source, license, created_at) VALUES (1, 'd', 'src', 'cc', '2026-01-01')",
    "INSERT INTO dialogue (id, dataset_id, conv_id, split, content_hash) VALUES (1, 1, 'c1', 'test', 'h')",
    "INSERT INTO turn (id, dialogue_id, idx, role, text) VALUES (1, 1, 1, 'speaker', 'hello'), "
    "(2, 1, 2, 'listener', 'hi')",
    "INSERT INTO context (id, dialogue_id, n_turns, reference_turn_id) VALUES (1, 1, 1, 2)",
    "INSERT INTO system (id, name, kind, version, parameters, created_at) "
    "VALUES (1, 'm', 'k', 'v', '{}', '2026-01-01')",
    "INSERT INTO response (id, context_id, system_id, text, provenance, created_at) "
    "VALUES (1, 1, 1, 'there', '{}', '2026-01-01')",
    "INSERT INTO study_item (id, study_id, response_id, is_control, design) VALUES (1, 1, 1, false, '{}')",
    "INSERT INTO assignment (id, study_id, annotator_id, status, created_at, started_at) "
    "VALUES (1, 1, 1, 'assigned', '2026-01-01', '2026-01-01'), (2, 1, NULL, 'open', '2026-01-01', NULL)",
    "INSERT INTO assignment_item (id, assignment_id, item_id, position) VALUES (1, 1, 1, 0), (2, 2, 1, 0)",
    "INSERT INTO rating (id, assignment_id, item_id, annotator_id, criterion, score, submitted_at, submission_id) "
    "VALUES (1, 1, 1, 1, 'empathy', 3, '2026-01-01', 'sub-1')",
]

CONSTRAINT_STARTS = ("CONSTRAINT ", "PRIMARY KEY", "UNIQUE", "CHECK", "FOREIGN KEY")
# Statements that change nothing stored (reads, reflection, the connection's own foreign key switch before its
# first transaction): a kill just after one leaves what a kill just before it does.
READS = ("SELECT", "PRAGMA MAIN.", "PRAGMA TEMP.", "PRAGMA FOREIGN_KEY_CHECK", "PRAGMA FOREIGN_KEYS=OFF")

# A real `empeval db upgrade` that SIGKILLs itself argv[1] seconds after its first SQL statement (a daemon timer:
# a run that ends first exits normally, printing the seconds from its first statement to its last).
KILL_LATER = """
import atexit, os, signal, sys, threading, time
from sqlalchemy import event
from sqlalchemy.engine import Engine
delay, timers, times = float(sys.argv[1]), [], []
def arm(*_args):
    times.append(time.perf_counter())
    if not timers:
        timers.append(threading.Timer(delay, os.kill, (os.getpid(), signal.SIGKILL)))
        timers[0].daemon = True
        timers[0].start()
event.listen(Engine, "before_cursor_execute", arm)
atexit.register(lambda: print(f"window {times[-1] - times[0]:.6f}"))
from empeval.cli import main
sys.argv = ["empeval", "--database-url", sys.argv[2], "db", "upgrade", sys.argv[3]]
main()
"""


def table_definition(sql: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """A CREATE TABLE statement as (its column definitions in order, its constraints sorted): batch mode writes a
    recreated table's constraints in an order that varies from run to run."""
    body = sql[sql.index("(") + 1:sql.rindex(")")]
    parts, depth, start = [], 0, 0
    for position, character in enumerate(body):
        depth += {"(": 1, ")": -1}.get(character, 0)
        if character == "," and depth == 0:
            parts.append(body[start:position].strip())
            start = position + 1
    parts.append(body[start:].strip())
    constraints = tuple(sorted(part for part in parts if part.upper().startswith(CONSTRAINT_STARTS)))
    return tuple(part for part in parts if not part.upper().startswith(CONSTRAINT_STARTS)), constraints


def sqlite_state(engine: Engine) -> dict[str, object]:
    """What a SQLite store is: its revision, every schema object's definition (each index's SQL text, each table's
    columns and constraints), every table's rows."""
    with engine.connect() as connection:
        objects = connection.execute(text(
            "SELECT type, name, tbl_name, sql FROM sqlite_master ORDER BY type, name")).all()
        schema = [(sort, name, table, table_definition(sql) if sort == "table" else sql)
                  for sort, name, table, sql in objects]  # sort: sqlite_master's type (table, index, ...)
        tables = [name for sort, name, _table, _sql in objects if sort == "table" and not name.startswith("sqlite_")]
        rows = {name: connection.execute(text(f'SELECT * FROM "{name}" ORDER BY 1')).all() for name in tables}
    return {"revision": current_revision(engine), "schema": schema, "rows": rows}


def checkpointed_copy(source: Path, target: Path) -> None:
    """Copy a SQLite store whose connections are all closed (WAL folded into the file) to `target`, alone."""
    for suffix in ("", "-wal", "-shm"):
        Path(f"{target}{suffix}").unlink(missing_ok=True)
    shutil.copyfile(source, target)


def upgrade_command(url: str, revision: str) -> None:
    """`empeval db upgrade REVISION` on `url`, run in this process, its output dropped (SystemExit if the command
    fails)."""
    with contextlib.redirect_stdout(io.StringIO()):
        cli.main(["--database-url", url, "db", "upgrade", revision], prog_name="empeval", standalone_mode=False)


def run_killed(url: str, revision: str, kill_before: int) -> int:
    """Run `empeval db upgrade REVISION` on `url` in a child forked from this process that SIGKILLs itself just
    before its `kill_before`-th SQL statement (1 = the first); the child's wait status. No connection of this
    process may be open to the store (the child must not share one)."""
    pid = os.fork()
    if pid == 0:  # the child: never returns into the caller
        code = 1
        try:
            null = os.open(os.devnull, os.O_WRONLY)
            os.dup2(null, 1)
            os.dup2(null, 2)
            counter = itertools.count(1)

            def kill_at_statement(*_args: object) -> None:
                if next(counter) >= kill_before:
                    os.kill(os.getpid(), signal.SIGKILL)

            event.listen(Engine, "before_cursor_execute", kill_at_statement)
            upgrade_command(url, revision)
            code = 0
        finally:
            os._exit(code)
    return os.waitpid(pid, 0)[1]


def statements_of_upgrade(url: str, revision: str) -> tuple[list[str], float]:
    """The SQL statements `empeval db upgrade REVISION` sends on `url` (run here, in this process), and the seconds
    from the first to the last."""
    sent: list[str] = []
    times: list[float] = []

    def record(_connection: object, _cursor: object, statement: str, *_args: object) -> None:
        sent.append(statement)
        times.append(time.perf_counter())

    event.listen(Engine, "before_cursor_execute", record)
    try:
        upgrade_command(url, revision)
    finally:
        event.remove(Engine, "before_cursor_execute", record)
    return sent, times[-1] - times[0]


def kill_points(statements: list[str]) -> list[int]:
    """Where to kill (before which statement, 1 = the first): before the first, and after every statement that
    changes something (BEGIN, each DDL and DML statement, foreign keys back on after the COMMIT), up to before
    the last."""
    return [1] + [number + 1 for number, statement in enumerate(statements, start=1)
                  if number < len(statements) and not statement.lstrip().upper().startswith(READS)]


def build_clean_stores(folder: Path) -> dict[str | None, tuple[Path, dict[str, object]]]:
    """For each revision, a store file in `folder` migrated cleanly to it (holding SEED_ROWS from the first revision
    on) and its state; under UNSEEDED, the first revision's state before the rows went in."""
    work = folder / "work.db"
    stores: dict[str | None, tuple[Path, dict[str, object]]] = {}
    for revision in REVISIONS:
        engine = make_engine(f"sqlite:///{work}")
        if revision is not None:
            upgrade(engine, revision)
        if revision == REVISIONS[1]:
            stores[UNSEEDED] = (folder / "unseeded.db", sqlite_state(engine))
            with engine.begin() as connection:
                for statement in SEED_ROWS:
                    connection.execute(text(statement))
        state = sqlite_state(engine)
        engine.dispose()
        checkpointed_copy(work, folder / f"at-{revision or 'base'}.db")
        stores[revision] = (folder / f"at-{revision or 'base'}.db", state)
    return stores


def expected_states(stores: dict, revision: str) -> dict[str | None, dict[str, object]]:
    """The two states a store upgraded to `revision` and killed may be in: the one before, or `revision`'s."""
    before = REVISIONS[REVISIONS.index(revision) - 1]
    return {before: stores[before][1], revision: stores[UNSEEDED if revision == REVISIONS[1] else revision][1]}


def check_after_kill(url: str, revision: str, expected: dict) -> tuple[str, str | None]:
    """Open the killed store at `url`: (where it was, 'before' or 'committed'; None, or what was wrong), after
    running `db upgrade REVISION` on it again (in this process)."""
    engine = make_engine(url)
    try:
        state = sqlite_state(engine)
        at = state["revision"]
        if at not in expected:
            return "?", f"at revision {at}, neither of {sorted(map(str, expected))}"
        outcome = "committed" if at == revision else "before"
        if state != expected[at]:
            return outcome, f"at revision {at} but not as a clean upgrade to it leaves the store"
        with engine.connect() as connection:
            if connection.exec_driver_sql("PRAGMA integrity_check").scalar() != "ok":
                return outcome, "integrity_check failed"
            if connection.exec_driver_sql("PRAGMA foreign_key_check").all():
                return outcome, "rows point at rows that do not exist"
        try:
            upgrade_command(url, revision)
        except (Exception, SystemExit) as error:  # noqa: BLE001 - reported, not raised
            return outcome, f"db upgrade again failed: {type(error).__name__}: {error}"
        if sqlite_state(engine) != expected[revision]:
            return outcome, "db upgrade again did not leave a clean revision"
        return outcome, None
    finally:
        engine.dispose()


def real_window(stores: dict, scratch: Path, revision: str) -> float:
    """Seconds from the first SQL statement of a real `empeval db upgrade REVISION` process to its last (a fresh
    interpreter is slower than this warm one)."""
    store = scratch / f"window-{revision}.db"
    checkpointed_copy(stores[REVISIONS[REVISIONS.index(revision) - 1]][0], store)
    done = subprocess.run([sys.executable, "-c", KILL_LATER, "1e9", f"sqlite:///{store}", revision],
                          capture_output=True, text=True, timeout=300, check=True)
    return float(done.stdout.rsplit("window ", 1)[1])


def kill_at_random_times(stores: dict, scratch: Path, revisions: list[str], windows: dict[str, float],
                         per_revision: int, jobs: int, rng: random.Random) -> tuple[dict[str, int], list[str]]:
    """Real `empeval db upgrade` processes killed at random times: (how they ended, by outcome; what was wrong)."""
    tasks = [(revision, number, rng.uniform(0, windows[revision]))
             for revision in revisions for number in range(per_revision)]

    def run(task: tuple[str, int, float]) -> tuple[str, int, float, Path, int]:
        revision, number, delay = task
        store = scratch / f"random-{revision}-{number}.db"
        before = REVISIONS[REVISIONS.index(revision) - 1]
        checkpointed_copy(stores[before][0], store)
        done = subprocess.run([sys.executable, "-c", KILL_LATER, f"{delay:.6f}", f"sqlite:///{store}", revision],
                              capture_output=True, text=True, timeout=300, check=False)
        return revision, number, delay, store, done.returncode

    outcomes = {"before": 0, "committed": 0, "finished": 0, "?": 0}
    problems = []
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        for revision, number, delay, store, code in pool.map(run, tasks):
            if code not in (0, -signal.SIGKILL):
                problems.append(f"{revision} #{number} (kill after {delay * 1000:.1f} ms): exit {code}")
                continue
            outcome, problem = check_after_kill(f"sqlite:///{store}", revision, expected_states(stores, revision))
            outcomes["finished" if code == 0 else outcome] += 1
            if problem:
                problems.append(f"{revision} #{number} (kill after {delay * 1000:.1f} ms): {problem}")
            for suffix in ("", "-wal", "-shm", "-writer.lock"):
                Path(f"{store}{suffix}").unlink(missing_ok=True)
    return outcomes, problems


def kill_at_every_statement(stores: dict, scratch: Path, revisions: list[str],
                            statements: dict[str, list[str]]) -> tuple[dict[str, int], list[str]]:
    """Forked children killed before each statement of each revision's upgrade: (outcomes; what was wrong)."""
    outcomes = {"before": 0, "committed": 0, "?": 0}
    problems = []
    store = scratch / "every.db"
    url = f"sqlite:///{store}"
    for revision in revisions:
        before = REVISIONS[REVISIONS.index(revision) - 1]
        for kill_before in range(1, len(statements[revision]) + 1):
            checkpointed_copy(stores[before][0], store)
            status = run_killed(url, revision, kill_before)
            if not (os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL):
                problems.append(f"{revision} before statement {kill_before}: not killed (status {status})")
                continue
            outcome, problem = check_after_kill(url, revision, expected_states(stores, revision))
            outcomes[outcome] += 1
            if problem:
                problems.append(f"{revision} before statement {kill_before}: {problem}")
    return outcomes, problems


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks migrations_killed", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--per-revision", type=int, default=20, help="random-time kills per revision (default 20)")
    parser.add_argument("--jobs", type=int, default=2, help="killed processes run at once (default 2)")
    parser.add_argument("--revisions", default="", help="comma-separated revisions (default: every one)")
    parser.add_argument("--seed", type=int, default=29, help="of the random kill times (default 29)")
    parser.add_argument("--every-statement", action=argparse.BooleanOptionalAction, default=True,
                        help="also kill forked children before every statement (default: yes)")
    args = parser.parse_args()
    revisions = [name.strip() for name in args.revisions.split(",") if name.strip()] or [r for r in REVISIONS if r]
    unknown = [name for name in revisions if name not in REVISIONS[1:]]
    if unknown:
        parser.error(f"unknown revision(s) {', '.join(unknown)}; known: {', '.join(map(str, REVISIONS[1:]))}")

    print(f"load average at start: {' '.join(f'{x:.2f}' for x in os.getloadavg())}; cpus: {os.cpu_count()}")
    scratch = Path(tempfile.mkdtemp(prefix="empeval-killed-"))
    try:
        stores = build_clean_stores(scratch)
        statements, windows = {}, {}
        for revision in revisions:
            before = REVISIONS[REVISIONS.index(revision) - 1]
            checkpointed_copy(stores[before][0], scratch / "count.db")
            statements[revision] = statements_of_upgrade(f"sqlite:///{scratch / 'count.db'}", revision)[0]
        with ThreadPoolExecutor(max_workers=args.jobs) as pool:
            windows = dict(zip(revisions, pool.map(lambda name: real_window(stores, scratch, name), revisions),
                               strict=True))
        for revision in revisions:
            print(f"{revision}: {len(statements[revision])} statements, {windows[revision] * 1000:.1f} ms from the "
                  f"first to the last in a clean run of a real process")
        started = time.perf_counter()
        outcomes, problems = kill_at_random_times(stores, scratch, revisions, windows, args.per_revision,
                                                  args.jobs, random.Random(args.seed))
        print(f"\nrandom times: {sum(outcomes.values())} real processes in {time.perf_counter() - started:.0f} s: "
              f"{outcomes['before']} rolled back, {outcomes['committed']} at the new revision, "
              f"{outcomes['finished']} finished before the kill")
        every: dict[str, int] = {}
        if args.every_statement:
            started = time.perf_counter()
            every, more = kill_at_every_statement(stores, scratch, revisions, statements)
            problems += more
            print(f"every statement: {sum(every.values())} forked children in {time.perf_counter() - started:.0f} s:"
                  f" {every['before']} rolled back, {every['committed']} at the new revision")
        for problem in problems[:20]:
            print(f"  wrong: {problem}")
        bad_states = [problem for problem in problems if "db upgrade again" not in problem]
        report(Figure("killed upgrades leaving a store not exactly at a revision", len(bad_states), goal=at_most(0),
                      note=f"{sum(outcomes.values())} random-time kills of real processes "
                           f"({args.per_revision} per revision), {sum(every.values())} kills at statements"))
        report(Figure("db upgrade after a kill that failed or left no clean revision",
                      len(problems) - len(bad_states), goal=at_most(0)))
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    print(f"\nload average at end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    run_script(__file__, main)
