"""A whole crowd run on Mephisto's mock provider, through the real Mephisto page in headless Chromium."""
from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

import pytest
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from empeval.server.store.kinds.likert import Rating
from empeval.server.store.models import Annotator, Assignment
from empeval.tasks.crowd import contract, jobs
from tests.browser import chromium_page
from tests.crowd.conftest import empeval, free_port, leftovers, wait_until
from tests.crowd.workers import (
    ONBOARDING_RIGHT,
    ONBOARDING_WRONG,
    do_unit,
    pass_or_fail_onboarding,
    wait_for_task_or_block,
)

pytestmark = pytest.mark.slow
ENDED = jobs.ENDED


def launch(port: int, *extra: str):
    result = empeval("crowd", "launch", "pilot", "--provider", "mock", "--units", "2", "--port", str(port),
                     "--timeout", "240", *extra)
    assert result.exit_code == 0, result.output
    return result


def rating_count(engine) -> int:
    with Session(engine) as session:
        return session.scalar(select(func.count(Rating.id)))


def test_two_browser_workers_complete_a_mock_run_and_their_ratings_land_in_sql(crowd_python, crowd_dir, crowd_store):
    port = free_port()
    url = f"http://127.0.0.1:{port}/?worker_id={{}}&assignment_id={{}}"
    started = time.monotonic()
    result = launch(port)
    launched = time.monotonic() - started
    assert "cost: 2 units x 0.50 USD reward + 0% fees = 1.00 USD" in result.output
    job_dir = next(crowd_dir.glob("pilot/*/"))
    try:
        # A worker who fails the onboarding test is blocked, and stays blocked.
        with chromium_page() as page:
            page.goto(url.format("careless", "x1"))
            assert wait_for_task_or_block(page) == "onboarding"
            pass_or_fail_onboarding(page, ONBOARDING_WRONG)
            page.wait_for_selector("#blocked", timeout=30000)
            page.goto(url.format("careless", "x2"))
            settled = wait_for_task_or_block(page)
            assert settled.startswith("blocked") and "not currently qualified" in settled, settled

        for n, worker in enumerate(("w1", "w2")):
            with chromium_page() as page:
                page.goto(url.format(worker, f"a{n}"))
                assert wait_for_task_or_block(page) == "onboarding"
                pass_or_fail_onboarding(page, ONBOARDING_RIGHT)
                page.wait_for_selector("#consent", timeout=30000)
                do_unit(page, comment=f"{worker}: clear task")
            wait_until(lambda lines=n + 1: len(contract.read_results(job_dir / "results.jsonl")) == lines, 30,
                       f"{worker}'s result line")
            if n == 0:  # ingest while the run is live
                live = empeval("crowd", "ingest", "pilot")
                assert "1 results: 1 stored" in live.output, live.output
                assert rating_count(crowd_store) == 9

        final = wait_until(lambda: (s := jobs.read_status(job_dir)).state in ENDED and s, 90,
                           "the run to end by itself")
        duration = time.monotonic() - started
    finally:
        if jobs.read_status(job_dir).live:
            jobs.stop(job_dir, wait=30)
    assert final.state == "completed" and final.units_done == 2

    first = empeval("crowd", "ingest", "pilot")
    assert "2 results: 1 stored, 1 already" in first.output, first.output
    again = empeval("crowd", "ingest", "pilot")
    assert "2 results: 2 already" in again.output
    assert rating_count(crowd_store) == 18

    with Session(crowd_store) as session:
        annotators = session.scalars(select(Annotator).where(Annotator.provider == "mock")).all()
        submitted = session.scalars(select(Assignment).where(Assignment.status == "submitted")).all()
    assert len(annotators) == 2 and all("w1" not in a.pseudonym and "w2" not in a.pseudonym for a in annotators)
    assert {a.comment for a in submitted} == {"w1: clear task", "w2: clear task"}
    records = contract.read_results(job_dir / "results.jsonl").records
    assert len({r.submission_id for r in records}) == 2
    # Every item got empathy 2, the control included: not below the real items, so the control is failed
    # and the work is held for review rather than approved automatically.
    assert all(r.controls == contract.ControlScore(n=1, passed=0) and not r.passed_controls for r in records)

    review = empeval("crowd", "review", "pilot")
    assert review.exit_code == 0 and review.output.count("held: failed controls") == 2
    assert leftovers() == []
    print(f"\nmock run: launch {launched:.1f}s, two workers and shutdown {duration:.1f}s")


def test_killing_the_runner_mid_run_then_ingesting_loses_nothing_and_duplicates_nothing(crowd_python, crowd_dir,
                                                                                        crowd_store):
    port = free_port()
    launch(port, "--no-onboarding")
    job_dir = next(crowd_dir.glob("pilot/*/"))
    results = job_dir / "results.jsonl"
    try:
        with chromium_page() as page:
            page.goto(f"http://127.0.0.1:{port}/?worker_id=w1&assignment_id=a1")
            assert wait_for_task_or_block(page) == "task"
            do_unit(page)
        wait_until(lambda: results.exists() and results.read_text().endswith("\n"), 30, "the result line")
    finally:
        os.kill(jobs.read_status(job_dir).pid, signal.SIGKILL)
    # As if the kill had come in the middle of writing the line: only a torn fragment is on disk.
    line = results.read_text()
    results.write_text(line[:40])
    wait_until(lambda: jobs.read_status(job_dir).state == "dead", 10, "status to show the runner died")
    # The killed runner's router is still serving; the runner had recorded it as its own.
    owned = json.loads((job_dir / "owned-processes.json").read_text())["processes"]
    assert [entry["cmdline"] for entry in owned] == [["node", "server.js"]]
    router = owned[0]["pid"]
    assert Path(f"/proc/{router}").exists()

    first = empeval("crowd", "ingest", "pilot")
    assert "recovered 1 submitted units" in first.output and "1 results: 1 stored" in first.output, first.output
    assert json.loads(results.read_text())["submission_id"] == json.loads(line)["submission_id"]
    again = empeval("crowd", "ingest", "pilot")
    assert "1 results: 1 already" in again.output and "recovered" not in again.output
    assert rating_count(crowd_store) == 9
    assert leftovers() == []  # ingest cleaned up the killed run's router and server dir
    # SIGKILL is delivered at once but the process may take a moment to go (and linger as a zombie until its
    # new parent reaps it): wait, boundedly, for it to be gone or a zombie.
    wait_until(lambda: _ended(router), 10, "the killed run's router to end")


def _ended(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return True
    return state in ("Z", "X")
