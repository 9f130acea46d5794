"""Which crowd job `crowd status`, `stop` and `review` act on without --job: a launch that failed never becomes
the study's current job while an earlier run is live (or ran), a launch while a run is live is refused before
any job is written, and `crowd status` prints its values in one column. The job bookkeeping only: job
directories as `create_job` writes them, statuses as the runner writes them, a live run stood in for by a live
process, and a stand-in runner that fails as Mephisto's does on a busy port. No Mephisto needed."""
from __future__ import annotations

import dataclasses
import json
import re
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from empeval.tasks.crowd import contract, jobs
from tests.crowd.conftest import empeval, fake_result


@pytest.fixture
def live_process():
    """A process standing in for a live runner; stopped afterwards."""
    process = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    yield process
    if process.poll() is None:
        process.kill()
    process.wait(timeout=10)


def new_job(engine, job_id: str) -> Path:
    """A job of study `pilot` (one unit) as `create_job` writes it, under the id `job_id` (ids sort by time)."""
    written, _ = jobs.create_job(engine, "pilot", provider="mock", units=1)
    job_dir = written.with_name(job_id)
    written.rename(job_dir)
    contract.write_job(job_dir, dataclasses.replace(contract.read_job(job_dir), job_id=job_id))
    return job_dir


def set_status(job_dir: Path, state: str, **fields) -> None:
    contract.write_status(job_dir, contract.JobStatus(job_id=job_dir.name, state=state, **fields))


def add_result(job_dir: Path, worker: str) -> str:
    unit = next(iter(contract.read_items(job_dir).values()))
    line = fake_result(unit, worker, job_dir.name, unit_id=41)
    with open(job_dir / contract.RESULTS_FILE, "a", encoding="utf-8") as results:
        results.write(json.dumps(line) + "\n")
    return line["unit_id"]


def status_rows(output: str) -> dict[str, str]:
    return {line.split()[0]: line.split(None, 1)[1] for line in output.strip().splitlines()}


def failing_runner(tmp_path: Path) -> Path:
    """A stand-in for the crowd interpreter whose runner fails as Mephisto's does when its port is taken: it
    writes a failed status (no run id) and exits 1."""
    script = tmp_path / "failing-python"
    script.write_text("#!/bin/sh\n"
                      'name=$(basename "$3")\n'
                      'printf \'{"job_id": "%s", "state": "failed", "error": "OSError: [Errno 98] Address already in '
                      'use: 3031"}\' "$name" > "$3/status.json"\n'
                      "echo 'metrics port 3031 in use'\n"
                      "exit 1\n", encoding="utf-8")
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return script


def test_a_failed_launch_while_a_run_is_live_never_becomes_the_current_job(crowd_dir, crowd_store, live_process):
    live = new_job(crowd_store, "20260101-100000-aaaaaa")
    failed = new_job(crowd_store, "20260101-110000-bbbbbb")  # newer
    set_status(live, contract.RUNNING, run_id="7", url="http://127.0.0.1:3000", units_total=1,
               pid=live_process.pid)
    set_status(failed, contract.FAILED, error="OSError: [Errno 98] Address already in use")  # as the runner does
    unit = add_result(live, "worker-1")

    assert jobs.job_dir_for("pilot") == live
    shown = empeval("crowd", "status", "pilot")
    assert shown.exit_code == 0, shown.output
    assert status_rows(shown.output)["job"] == live.name and status_rows(shown.output)["state"] == "running"
    reviewed = empeval("crowd", "review", "pilot")
    assert reviewed.exit_code == 0, reviewed.output
    assert re.search(rf"^\s*{unit}\s", reviewed.output, re.MULTILINE), reviewed.output

    stopped = empeval("crowd", "stop", "pilot", "--wait", "1")
    assert stopped.exit_code == 0, stopped.output
    assert f"job {live.name}:" in stopped.output
    assert (live / contract.STOP_FILE).exists() and not (failed / contract.STOP_FILE).exists()
    assert live_process.wait(timeout=30) is not None  # the live run was the one stopped


def test_the_failed_job_named_with_job_says_it_failed_and_is_not_current(crowd_dir, crowd_store, live_process):
    live = new_job(crowd_store, "20260101-100000-aaaaaa")
    failed = new_job(crowd_store, "20260101-110000-bbbbbb")
    set_status(live, contract.RUNNING, run_id="7", pid=live_process.pid)
    set_status(failed, contract.FAILED, error="OSError: [Errno 98] Address already in use")
    shown = empeval("crowd", "status", "pilot", "--job", failed.name)
    rows = status_rows(shown.output)
    assert rows["job"] == failed.name and rows["state"] == "failed"
    assert rows["launch"].startswith("failed: this job never went live and is not the study's current job")


def test_launching_while_a_run_is_live_is_refused_before_any_job_is_written(crowd_dir, crowd_store, live_process,
                                                                            monkeypatch):
    monkeypatch.setenv("EMPEVAL_CROWD_PYTHON", sys.executable)
    live = new_job(crowd_store, "20260101-100000-aaaaaa")
    set_status(live, contract.RUNNING, run_id="7", pid=live_process.pid)
    refused = empeval("crowd", "launch", "pilot")
    assert refused.exit_code == 2
    message = " ".join(refused.output.split())
    assert f"a crowd run is live already: job {live.name} of study 'pilot' (run 7)" in message
    assert f"`empeval crowd stop pilot --job {live.name}`" in message
    assert [p.name for p in (crowd_dir / "pilot").iterdir()] == [live.name]


def test_a_launch_whose_runner_fails_is_marked_and_the_run_before_stays_current(crowd_dir, crowd_store, tmp_path,
                                                                               monkeypatch):
    monkeypatch.setenv("EMPEVAL_CROWD_PYTHON", str(failing_runner(tmp_path)))
    earlier = new_job(crowd_store, "20000101-000000-aaaaaa")
    set_status(earlier, contract.COMPLETED, run_id="7", units_total=1, units_done=1, finished_at=time.time())
    launched = empeval("crowd", "launch", "pilot")
    assert launched.exit_code == 1
    assert "the run did not start (failed: OSError: [Errno 98]" in launched.output
    assert "is not the study's current job" in launched.output and "metrics port 3031 in use" in launched.output
    (failed,) = [p for p in (crowd_dir / "pilot").iterdir() if p != earlier]
    assert (failed / jobs.LAUNCH_FAILED_FILE).read_text().startswith("failed: OSError")
    assert jobs.job_dir_for("pilot") == earlier
    assert status_rows(empeval("crowd", "status", "pilot").output)["job"] == earlier.name


def test_a_marked_launch_stays_out_even_if_its_status_was_never_written(crowd_dir, crowd_store):
    earlier = new_job(crowd_store, "20260101-100000-aaaaaa")
    set_status(earlier, contract.STOPPED, run_id="7")
    never = new_job(crowd_store, "20260101-110000-bbbbbb")  # no status.json: the runner never wrote one
    assert jobs.job_dir_for("pilot") == never  # it may still be starting ...
    jobs.mark_launch_failed(never, "not started: None")
    assert jobs.job_dir_for("pilot") == earlier  # ... until launch gives up on it


def test_when_every_launch_failed_the_newest_is_shown_so_its_error_can_be_read(crowd_dir, crowd_store):
    first = new_job(crowd_store, "20260101-100000-aaaaaa")
    second = new_job(crowd_store, "20260101-110000-bbbbbb")
    for job_dir in (first, second):
        set_status(job_dir, contract.FAILED, error="no node")
    rows = status_rows(empeval("crowd", "status", "pilot").output)
    assert rows["job"] == second.name and rows["error"] == "no node" and rows["launch"].startswith("failed")


def test_crowd_status_prints_every_value_in_one_column(crowd_dir, crowd_store, live_process):
    job_dir = new_job(crowd_store, "20260101-100000-aaaaaa")
    set_status(job_dir, contract.RUNNING, run_id="12345", url="http://127.0.0.1:3000", units_total=2,
               units_done=12, pid=live_process.pid, error="a long error message " * 3)
    output = empeval("crowd", "status", "pilot").output
    lines = output.strip().splitlines()
    keys = {line.split()[0] for line in lines}
    assert {"job", "state", "run_id", "url", "units_total", "units_done", "error", "results"} <= keys
    starts = set()
    for line in lines:
        match = re.match(r"^(\S+)( {2,})\S", line)
        assert match, f"key and value run together: {line!r}"
        starts.add(len(match.group(1)) + len(match.group(2)))
    assert len(starts) == 1, output
