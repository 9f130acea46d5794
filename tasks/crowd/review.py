"""Reviewing crowd work: which submissions to approve, which to hold, and the actions run through Mephisto.

The rule (set per job at launch, `--min-control-pass-rate`): a submission whose worker scored the control
items as a careful rater would (tasks.crowd.contract.score_controls) is approved automatically; the others
are held for the researcher, who approves, rejects (with a reason the worker reads), bonuses or blocks.

MTurk's rules that this follows: a rejection must tell the worker why (RequesterFeedback) and lowers their
approval rate, so it needs a reason and is allowed only for held work (failed controls) unless forced;
approved work cannot be rejected; work not reviewed in time is approved by MTurk itself; blocking is for
workers who abuse the task, not for honest mistakes.
"""
from __future__ import annotations

import json
import tempfile
from dataclasses import dataclass
from pathlib import Path

from empeval.tasks.crowd import contract
from empeval.tasks.crowd.jobs import CrowdError, run_in_crowd_env

MIN_REJECT_REASON = 20


@dataclass
class Submission:
    unit_id: str
    assignment_id: int
    worker_name: str
    controls_n: int
    controls_passed: int
    passed_controls: bool
    decision: str  # pending, approved, rejected


def reviewed(job_dir: Path) -> dict[str, list[dict]]:
    """Review actions already carried out, by unit id."""
    done: dict[str, list[dict]] = {}
    path = job_dir / contract.REVIEW_FILE
    if path.exists():
        for line in path.read_text(encoding="utf-8").splitlines():
            if line.strip():
                action = json.loads(line)
                done.setdefault(str(action["unit_id"]), []).append(action)
    return done


def submissions(job_dir: Path) -> list[Submission]:
    """One entry per submitted unit in results.jsonl (lines that are not valid records are `crowd ingest`'s
    to report), with the review decision carried out so far."""
    done = reviewed(job_dir)
    result = []
    seen = set()
    for record in contract.read_results(job_dir / contract.RESULTS_FILE).records:
        if record.unit_id in seen:
            continue
        seen.add(record.unit_id)
        decision = "pending"
        for action in done.get(record.unit_id, []):
            if action.get("ok") and action["action"] in ("approve", "reject"):
                decision = "approved" if action["action"] == "approve" else "rejected"
        result.append(Submission(unit_id=record.unit_id, assignment_id=record.assignment_id,
                                 worker_name=record.worker_name, controls_n=record.controls.n,
                                 controls_passed=record.controls.passed, passed_controls=record.passed_controls,
                                 decision=decision))
    return result


def auto_actions(job_dir: Path) -> tuple[list[dict], list[Submission]]:
    """Approve actions for pending work that passed its controls, and the pending work held for review."""
    pending = [s for s in submissions(job_dir) if s.decision == "pending"]
    approve = [{"unit_id": s.unit_id, "action": "approve"} for s in pending if s.passed_controls]
    held = [s for s in pending if not s.passed_controls]
    return approve, held


def check_actions(job_dir: Path, actions: list[dict], *, force: bool = False) -> None:
    """Refuse what the platform's rules (module docstring) or the data do not allow, before anything is sent."""
    by_unit = {s.unit_id: s for s in submissions(job_dir)}
    for action in actions:
        unit = by_unit.get(str(action["unit_id"]))
        if unit is None:
            raise CrowdError(f"unit {action['unit_id']} has no submission in {job_dir / contract.RESULTS_FILE}")
        verb = action["action"]
        if verb == "reject":
            reason = (action.get("reason") or "").strip()
            if len(reason) < MIN_REJECT_REASON:
                raise CrowdError(f"unit {unit.unit_id}: a rejection needs a reason the worker can read "
                                 f"(--reason, at least {MIN_REJECT_REASON} characters)")
            if unit.decision == "approved":
                raise CrowdError(f"unit {unit.unit_id} is approved already; approved work cannot be rejected")
            if unit.passed_controls and not force:
                raise CrowdError(f"unit {unit.unit_id} passed its controls; rejecting it needs --force")
        elif verb == "bonus":
            if not action.get("amount") or float(action["amount"]) <= 0:
                raise CrowdError(f"unit {unit.unit_id}: a bonus needs a positive --amount")
            if not (action.get("reason") or "").strip():
                raise CrowdError(f"unit {unit.unit_id}: a bonus needs a --reason (the worker sees it)")
        elif verb == "block":
            if not (action.get("reason") or "").strip():
                raise CrowdError(f"unit {unit.unit_id}: blocking needs a --reason")
        elif verb != "approve":
            raise CrowdError(f"unknown review action {verb!r}")


def carry_out(job_dir: Path, actions: list[dict]) -> list[dict]:
    """Run the actions through Mephisto in the crowd virtualenv; returns one outcome per action."""
    if not actions:
        return []
    with tempfile.NamedTemporaryFile("w", suffix=".json", dir=job_dir, delete=False) as handle:
        json.dump(actions, handle)
    try:
        done = run_in_crowd_env("review", str(job_dir), handle.name)
    finally:
        Path(handle.name).unlink(missing_ok=True)
    outcomes = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    if len(outcomes) != len(actions):
        raise CrowdError(f"review through Mephisto failed (exit {done.returncode}): {done.stderr.strip()[-2000:]}")
    return outcomes
