"""The MTurk sandbox path, offline: Mephisto's real mturk_sandbox provider code with every MTurk operation
answered by a botocore before-call handler (sandbox_harness.py), a browser worker submitting through the
real page, and review actions checked call by call with botocore's Stubber."""
from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session

from empeval.server.store.models import Annotator
from empeval.tasks.crowd import contract, jobs
from tests.browser import chromium_page
from tests.crowd.conftest import empeval, free_port, leftovers, wait_until
from tests.crowd.workers import (
    answer_mturk_submit_locally,
    do_unit,
    wait_for_task_or_block,
)

pytestmark = pytest.mark.slow
HARNESS = Path(__file__).with_name("sandbox_harness.py")
ENDED = jobs.ENDED


@pytest.fixture
def aws_profile(tmp_path, monkeypatch):
    credentials = tmp_path / "aws-credentials"
    credentials.write_text("[empeval-test]\naws_access_key_id = not-a-real-access-key\n"
                           "aws_secret_access_key = not-a-real-secret\n")
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(credentials))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "aws-config"))
    return "empeval-test"


def test_a_sandbox_hit_is_created_worked_on_in_a_browser_and_reviewed_through_mturk_calls(
        crowd_python, crowd_dir, crowd_store, aws_profile, tmp_path):
    port = free_port()
    job_dir, cost = jobs.create_job(crowd_store, "pilot", provider="mturk_sandbox", units=2, port=port,
                                    public_url=f"http://127.0.0.1:{port}", aws_profile=aws_profile, onboarding=False,
                                    timeout_seconds=180)
    assert cost.total == 1.20  # 2 units x 0.50 + 20% MTurk fee
    with open(job_dir / "runner.log", "ab") as log:
        runner = subprocess.Popen([str(crowd_python), str(HARNESS), "launch", str(job_dir)], stdout=log,
                                  stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True,
                                  env={**os.environ, "EMPEVAL_HARNESS_HIT_SECONDS": "1.5"})
    try:
        status = wait_until(lambda: (s := jobs.read_status(job_dir)).state not in ("starting", "not started") and s, 60,
                            "the launch")
        assert status.state == "running", (job_dir / "runner.log").read_text()[-3000:]
        # Mephisto creates the HITs from a launcher thread after launch_task_run returns; the run is called
        # live only once they exist (a worker who came earlier was told there was no work: the blocked page).
        hits = json.loads((job_dir / "hits.json").read_text())
        assert [h["HITId"] for h in hits] == ["HIT-1", "HIT-2"]
        assert hits[0]["url"].startswith(f"http://127.0.0.1:{port}")
        for n, hit in enumerate(hits, start=1):
            with chromium_page() as page:
                answer_mturk_submit_locally(page)
                page.goto(f"{hit['url']}?assignmentId=ASG-{n}&hitId={hit['HITId']}&workerId=SANDBOXWORKER{n}"
                          f"&turkSubmitTo=https://workersandbox.mturk.com")
                assert wait_for_task_or_block(page) == "task"
                do_unit(page, scores=lambda i: ("4", "4", "5"), done_selector="#mturk-submitted")
        final = wait_until(lambda: (s := jobs.read_status(job_dir)).state in ENDED and s, 90, "the run to end")
        assert final.state == "completed", (job_dir / "runner.log").read_text()[-3000:]
        assert runner.wait(timeout=30) == 0
    finally:
        if runner.poll() is None:
            (job_dir / "stop").touch()
            try:
                runner.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(runner.pid, 9)
                runner.wait()
    calls = [json.loads(line)["operation"] for line in (job_dir / "mturk_calls.jsonl").read_text().splitlines()]
    assert {"CreateHITType", "CreateHITWithHITType", "GetHIT"} <= set(calls)
    assert calls.count("CreateHITWithHITType") == 2

    ingested = empeval("crowd", "ingest", "pilot")
    assert "2 results: 2 stored" in ingested.output, ingested.output
    with Session(crowd_store) as session:
        pseudonyms = session.scalars(select(Annotator.pseudonym).where(Annotator.provider == "mturk_sandbox")).all()
    assert len(pseudonyms) == 2 and not any("SANDBOXWORKER" in p for p in pseudonyms)

    units = {r.worker_name: r.unit_id for r in contract.read_results(job_dir / "results.jsonl").records}
    actions = [{"unit_id": units["SANDBOXWORKER1_sandbox"], "action": "approve"},
               {"unit_id": units["SANDBOXWORKER1_sandbox"], "action": "bonus", "amount": 0.25,
                "reason": "Thoughtful comments"},
               {"unit_id": units["SANDBOXWORKER2_sandbox"], "action": "reject",
                "reason": "Every response got the same scores, whatever it said."},
               {"unit_id": units["SANDBOXWORKER2_sandbox"], "action": "block", "reason": "Straight-lined every item"}]
    expected = [
        {"operation": "approve_assignment", "params": {"AssignmentId": "ASG-1", "OverrideRejection": True}},
        # Mephisto checks the balance before paying a bonus.
        {"operation": "get_account_balance", "params": {}, "response": {"AvailableBalance": "100.00"}},
        {"operation": "send_bonus", "params": {"WorkerId": "SANDBOXWORKER1", "BonusAmount": "0.25",
                                               "AssignmentId": "ASG-1", "Reason": "Thoughtful comments",
                                               "UniqueRequestToken": "ANY"}},
        {"operation": "reject_assignment", "params": {"AssignmentId": "ASG-2", "RequesterFeedback":
                                                      "Every response got the same scores, whatever it said."}},
        {"operation": "create_worker_block",
         "params": {"WorkerId": "SANDBOXWORKER2", "Reason": "Straight-lined every item"}},
    ]
    (tmp_path / "actions.json").write_text(json.dumps(actions))
    (tmp_path / "expected.json").write_text(json.dumps(expected))
    reviewed = subprocess.run([str(crowd_python), str(HARNESS), "review", str(job_dir), str(tmp_path / "actions.json"),
                               str(tmp_path / "expected.json")], capture_output=True, text=True, timeout=120)
    assert reviewed.returncode == 0, reviewed.stdout + reviewed.stderr[-3000:]
    outcomes = [json.loads(line) for line in reviewed.stdout.splitlines() if line.startswith("{")]
    assert [o["ok"] for o in outcomes] == [True] * 4
    listing = empeval("crowd", "review", "pilot")
    assert "approved" in listing.output and "rejected" in listing.output
    assert leftovers() == []
