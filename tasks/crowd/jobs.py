"""Crowd jobs on the app side: write a job directory for the runner, start and stop the runner, read status.

A job directory (under $EMPEVAL_CROWD_DIR, default ./crowd-runs/<study>/<job_id>/) holds the contract that
tasks/likert/runner.py documents: job.json and items.jsonl written here, results.jsonl, status.json and
review.jsonl written by the runner, runner.log with its output, and `stop` to end the run.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, select
from sqlalchemy.orm import Session

from server.annotation.handout import assignment_payload
from server.errors import BadInput
from server.store.models import Assignment, AssignmentItem, Response, StudyItem
from server.store.queries import study_by_name
from server.store.study_config import Pay
from tasks.ui import MEPHISTO_BUNDLE

REPO = Path(__file__).resolve().parents[2]
RUNNER = REPO / "tasks" / "likert" / "runner.py"
ONBOARDING = REPO / "tasks" / "likert" / "onboarding.json"
BUNDLE = MEPHISTO_BUNDLE
PROVIDERS = ("mock", "mturk_sandbox", "mturk")


class CrowdError(BadInput):
    """Something the researcher can fix; the message says what."""


def crowd_python() -> Path:
    """The crowd virtualenv's interpreter ($EMPEVAL_CROWD_PYTHON, else .venv-crowd in the repository)."""
    python = Path(os.environ.get("EMPEVAL_CROWD_PYTHON", REPO / ".venv-crowd" / "bin" / "python"))
    if not python.exists():
        raise CrowdError(f"the crowd environment is missing ({python}): run `make crowd` (it needs Python 3.10)")
    return python


def crowd_root() -> Path:
    return Path(os.environ.get("EMPEVAL_CROWD_DIR", "crowd-runs")).resolve()


@dataclass
class Cost:
    units: int
    reward: float
    fee_rate: float
    currency: str

    @property
    def total(self) -> float:
        return Pay(per_assignment=self.reward, platform_fee=self.fee_rate).cost(self.units) or 0.0

    def describe(self, provider: str) -> str:
        text = (f"{self.units} units x {self.reward:.2f} {self.currency} reward + {self.fee_rate:.0%} fees = "
                f"{self.total:.2f} {self.currency}")
        if provider != "mturk":
            text += " (nothing is paid on " + ("the mock provider)" if provider == "mock" else "the MTurk sandbox)")
        return text


def open_assignments(session: Session, study_id: int) -> list[int]:
    return list(session.scalars(select(Assignment.id).where(Assignment.study_id == study_id, Assignment.status == "open")
                                .order_by(Assignment.design_index, Assignment.id)))


def unit_line(engine: Engine, session: Session, assignment_id: int) -> dict[str, Any]:
    rows = session.execute(
        select(StudyItem.id, StudyItem.is_control, StudyItem.control_target, Response.context_id)
        .join(AssignmentItem, AssignmentItem.item_id == StudyItem.id)
        .join(Response, Response.id == StudyItem.response_id)
        .where(AssignmentItem.assignment_id == assignment_id)
    ).all()
    return {"assignment_id": assignment_id,
            "context_ids": sorted({context_id for *_, context_id in rows}),
            "controls": [{"item_id": item_id, "target": target} for item_id, is_control, target, _ in rows if is_control],
            "payload": assignment_payload(engine, assignment_id)}


def seen_contexts(study: str) -> dict[str, list[int]]:
    """Contexts each worker rated in earlier jobs of the study (from their results.jsonl and items.jsonl), so
    the runner never hands a worker a context twice across jobs."""
    seen: dict[str, set[int]] = {}
    for job_dir in sorted((crowd_root() / study).glob("*/")):
        results, items = job_dir / "results.jsonl", job_dir / "items.jsonl"
        if not results.exists() or not items.exists():
            continue
        contexts = {}
        for line in items.read_text(encoding="utf-8").splitlines():
            if line.strip():
                unit = json.loads(line)
                contexts[unit["assignment_id"]] = unit["context_ids"]
        for record in read_results(results):
            seen.setdefault(record["worker_name"], set()).update(contexts.get(record["assignment_id"], []))
    return {worker: sorted(ids) for worker, ids in seen.items()}


def read_results(path: Path) -> list[dict]:
    """The complete lines of a results.jsonl (a last line cut short by a crash is skipped)."""
    records = []
    if not path.exists():
        return records
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            records.append(json.loads(line))
        except json.JSONDecodeError:
            continue
    return records


def create_job(engine: Engine, study_name: str, *, provider: str, units: int | None = None, port: int = 3000,
               reward: float | None = None, timeout_seconds: int = 3600, public_url: str | None = None,
               aws_profile: str | None = None, onboarding: bool = True, min_control_pass_rate: float = 0.5,
               lifetime_seconds: int = 86400) -> tuple[Path, Cost]:
    """Write the job directory for a crowd run of the study's open assignments (the first `units` of them)."""
    if provider not in PROVIDERS:
        raise CrowdError(f"unknown provider {provider!r}; expected one of {', '.join(PROVIDERS)}")
    if provider != "mock" and not public_url:
        raise CrowdError(f"{provider} needs the public HTTPS URL of the task server (--public-url https://...), "
                         f"forwarded to 127.0.0.1:{port}: MTurk workers cannot reach this machine's 127.0.0.1")
    if provider != "mock" and not aws_profile:
        raise CrowdError(f"{provider} needs --aws-profile NAME (see `empeval crowd register`)")
    if not BUNDLE.exists():
        raise CrowdError(f"the Mephisto task bundle is missing ({BUNDLE}): run `make crowd`")
    with Session(engine) as session:
        study = study_by_name(session, study_name)
        config = study.config
        assignment_ids = open_assignments(session, study.id)
        if units is not None:
            assignment_ids = assignment_ids[:units]
        if not assignment_ids:
            raise CrowdError(f"study {study_name!r} has no open assignments left to put on the crowd")
        lines = [unit_line(engine, session, a) for a in assignment_ids]
    pay = config.pay
    unit_reward = reward if reward is not None else pay.per_assignment
    if unit_reward is None:
        raise CrowdError(f"study {study_name!r} has no pay.per_assignment: give --reward")
    fee = 0.0 if provider == "mock" else pay.platform_fee
    cost = Cost(units=len(lines), reward=float(unit_reward), fee_rate=fee, currency=pay.currency)

    job_id = f"{time.strftime('%Y%m%d-%H%M%S')}-{uuid.uuid4().hex[:6]}"
    job_dir = crowd_root() / study_name / job_id
    job_dir.mkdir(parents=True)
    job = {
        "job_id": job_id, "study": study_name, "provider": provider, "created_at": time.time(),
        "task_name": f"empeval-{study_name}",
        "title": config.title or "Rate replies in conversations about feelings",
        "description": ("Read short conversations in which someone shares an experience, and rate one reply in "
                        "each for empathy, relevance and fluency (1-5)."),
        "reward": cost.reward, "currency": cost.currency, "fee_rate": fee, "estimated_cost": cost.total,
        "tags": ["empathy", "dialogue", "rating", "conversation", "research"],
        "assignment_duration_seconds": config.design.assignment_minutes * 60,
        "lifetime_seconds": lifetime_seconds, "units_per_assignment": 1,
        "port": port, "hostname": "http://127.0.0.1", "router_host": "127.0.0.1", "public_url": public_url,
        "timeout_seconds": timeout_seconds, "bundle": str(BUNDLE),
        "aws_profile": aws_profile,
        "onboarding": json.loads(ONBOARDING.read_text(encoding="utf-8")) if onboarding else None,
        "min_control_pass_rate": min_control_pass_rate,
        "seen_contexts": seen_contexts(study_name),
    }
    (job_dir / "job.json").write_text(json.dumps(job, indent=1), encoding="utf-8")
    with open(job_dir / "items.jsonl", "w", encoding="utf-8") as handle:
        for line in lines:
            handle.write(json.dumps(line) + "\n")
    return job_dir, cost


def start_runner(job_dir: Path, *, env: dict[str, str] | None = None) -> subprocess.Popen:
    """Start the runner in the crowd virtualenv, in its own session (so a Ctrl-C at the app's terminal does
    not reach it; `empeval crowd stop` does), with its output in runner.log."""
    log = open(job_dir / "runner.log", "ab")
    try:
        return subprocess.Popen([str(crowd_python()), str(RUNNER), "launch", str(job_dir)], stdin=subprocess.DEVNULL,
                                stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
                                env={**os.environ, **(env or {})}, cwd=str(job_dir))
    finally:
        log.close()


def read_status(job_dir: Path) -> dict[str, Any]:
    path = job_dir / "status.json"
    if not path.exists():
        return {"state": "not started"}
    status = json.loads(path.read_text(encoding="utf-8"))
    if status.get("state") in ("starting", "running") and not _alive(status.get("pid")):
        status["state"] = "dead"  # killed without a chance to say so; `crowd ingest` recovers its units
    return status


def _alive(pid: int | None) -> bool:
    if not pid:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:  # a zombie (our own exited child not yet reaped) is not alive
        return Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] != "Z"
    except OSError:
        return True


def wait_for(job_dir: Path, states: set[str], *, timeout: float) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while True:
        status = read_status(job_dir)
        if status.get("state") in states or time.monotonic() > deadline:
            return status
        time.sleep(0.2)


def stop(job_dir: Path, *, wait: float = 60.0) -> dict[str, Any]:
    """Ask the runner to stop (the stop file); after `wait` seconds without an answer, SIGTERM it."""
    (job_dir / "stop").touch()
    status = wait_for(job_dir, {"completed", "stopped", "timeout", "failed", "dead", "not started"}, timeout=wait)
    if status.get("state") in ("starting", "running") and _alive(status.get("pid")):
        os.kill(status["pid"], signal.SIGTERM)
        status = wait_for(job_dir, {"completed", "stopped", "timeout", "failed", "dead"}, timeout=30)
    return status


def run_in_crowd_env(*args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    """One runner command (collect, review, register) in the crowd virtualenv."""
    return subprocess.run([str(crowd_python()), str(RUNNER), *args], capture_output=True, text=True,
                          timeout=timeout, stdin=subprocess.DEVNULL)


def job_dir_for(study: str, job_id: str | None = None) -> Path:
    """The named job of the study, else its newest."""
    base = crowd_root() / study
    if job_id:
        path = base / job_id
        if not (path / "job.json").exists():
            raise CrowdError(f"no crowd job {job_id!r} for study {study!r} under {base}")
        return path
    jobs = sorted(p for p in base.glob("*/") if (p / "job.json").exists())
    if not jobs:
        raise CrowdError(f"study {study!r} has no crowd job under {base}: run `empeval crowd launch {study}`")
    return jobs[-1]


__all__ = ["CrowdError", "Cost", "create_job", "start_runner", "read_status", "stop", "wait_for", "job_dir_for",
           "read_results", "run_in_crowd_env", "crowd_python", "crowd_root"]
