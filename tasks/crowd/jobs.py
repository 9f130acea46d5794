"""Crowd jobs on the app side: write a job directory for the runner, start and stop the runner, read status.

A job directory (under $EMPEVAL_CROWD_DIR, default ./crowd-runs/<study>/<job_id>/) holds the files that
tasks.crowd.contract defines: job.json and items.jsonl written here, results.jsonl, status.json and
review.jsonl written by the runner (tasks/crowd/runner.py), runner.log with its output, and `stop` to end
the run; `launch-failed` (this side's own bookkeeping) marks a job whose run never went live.

A study's current job, the one `crowd status`, `stop`, `ingest` and `review` act on without --job, is its newest
live job, else its newest job that went live at some point: a launch that failed never hides the run before it.
"""
from __future__ import annotations

import dataclasses
import json
import os
import signal
import subprocess
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from sqlalchemy import Engine, select
from sqlalchemy.orm import Session

from empeval.server.annotation.crowd_units import CrowdUnitToken, make_unit_token
from empeval.server.annotation.handout import assignment_payload
from empeval.server.annotation.secrets import secret_key
from empeval.server.errors import BadInput
from empeval.server.store.models import Assignment, Study
from empeval.server.store.queries import study_by_name
from empeval.server.store.statuses import AssignmentStatus, StudyStatus
from empeval.server.store.study_config import StudyConfig
from empeval.server.store.study_parts import Pay
from empeval.tasks.crowd import contract
from empeval.tasks.crowd.contract import CrowdJob, CrowdUnit, JobStatus
from empeval.tasks.kinds import TaskKind, task_kind
from empeval.tasks.ui import MEPHISTO_BUNDLE

REPO = Path(__file__).resolve().parents[2]
RUNNER = REPO / "tasks" / "crowd" / "runner.py"
ONBOARDING = REPO / "tasks" / "crowd" / "onboarding.json"
BUNDLE = MEPHISTO_BUNDLE
PROVIDERS = contract.PROVIDERS
ENDED = set(contract.FINAL_STATES)
LAUNCH_FAILED_FILE = "launch-failed"


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
    pay: Pay

    @property
    def currency(self) -> str:
        return self.pay.currency

    @property
    def total(self) -> float:
        return self.pay.cost(self.units, reward=self.reward, fee_rate=self.fee_rate) or 0.0

    def describe(self, provider: str) -> str:
        text = (f"{self.units} units x {self.reward:.2f} {self.currency} reward + {self.fee_rate:.0%} fees = "
                f"{self.total:.2f} {self.currency}")
        if provider != "mturk":
            text += " (nothing is paid on " + ("the mock provider)" if provider == "mock" else "the MTurk sandbox)")
        return text


def open_assignments(session: Session, study_id: int) -> list[int]:
    return list(session.scalars(select(Assignment.id)
                                .where(Assignment.study_id == study_id, Assignment.status == AssignmentStatus.OPEN)
                                .order_by(Assignment.design_index, Assignment.id)))


def unit_line(engine: Engine, session: Session, assignment_id: int, kind: TaskKind,
              live: Callable[[int], dict[str, str]] | None = None) -> CrowdUnit:
    """The assignment as one crowd unit: its contexts, its controls (as the study's kind scores them) and what the
    task page shows; for a kind whose systems answer live, `live(assignment_id)` (where the page reaches this
    server, and the unit's token) goes into the payload as "live"."""
    context_ids, controls = kind.crowd_controls(session, assignment_id)
    payload = assignment_payload(engine, assignment_id)
    if live is not None:
        payload["live"] = live(assignment_id)
    return CrowdUnit(assignment_id=assignment_id, context_ids=context_ids, controls=controls, payload=payload)


def live_units(engine: Engine, *, study: str, job_id: str, provider: str, live_url: str,
               until: float) -> Callable[[int], dict[str, str]]:
    """For a chat study's job: each unit's {"url": where its page reaches this server's live routes, "token": the
    unit's token (server.annotation.crowd_units), valid until `until`}."""
    secret = secret_key(engine)

    def live(assignment_id: int) -> dict[str, str]:
        token = make_unit_token(secret, CrowdUnitToken(
            assignment_id=assignment_id, study=study, job_id=job_id, provider=provider,
            name_suffix=contract.RECORDED_NAME_SUFFIX[provider], expires=until))
        return {"url": live_url, "token": token}

    return live


def checked_live_url(provider: str, live_url: str | None) -> str:
    """The address a chat unit's page calls for its partner's replies: given, http(s) with a host, and HTTPS on
    MTurk (an HTTPS task page may not call plain HTTP)."""
    if not live_url:
        raise CrowdError("a chat study's partners answer live from `empeval serve`: give --live-url, the address "
                         "at which the workers' browsers reach it (e.g. http://127.0.0.1:5000 for the mock provider, "
                         "the public HTTPS address on MTurk), and keep it serving while the run is live")
    parsed = urlsplit(live_url)
    if parsed.scheme not in ("http", "https") or not parsed.netloc or parsed.query or parsed.fragment:
        raise CrowdError(f"--live-url {live_url!r} is not an http(s) address such as https://eval.example.org")
    if provider != "mock" and parsed.scheme != "https":
        raise CrowdError(f"--live-url {live_url!r}: on {provider} the task page is served over HTTPS, and a browser "
                         "refuses its calls to plain HTTP; give the HTTPS address of `empeval serve`")
    return live_url.rstrip("/")


def linked_studies(session: Session, study: Study) -> list[str]:
    """The studies linked to this one by compare_with, either way: the one it names and those naming it."""
    named = [study.config.compare_with] if study.config.compare_with else []
    naming = [other.name for other in session.scalars(select(Study).where(Study.id != study.id))
              if other.config.compare_with == study.name]
    return sorted(set(named + naming))


def seen_contexts(study: str, *, linked: list[str] | tuple[str, ...] = ()) -> dict[str, list[int]]:
    """Contexts each worker rated in earlier jobs of the study and of the studies linked to it (from their
    results.jsonl and items.jsonl), so the runner never hands a worker a context twice across jobs, nor one she
    judged in a linked study (ingest would refuse that work)."""
    seen: dict[str, set[int]] = {}
    for job_dir in sorted(p for name in (study, *linked) for p in (crowd_root() / name).glob("*/")):
        if not (job_dir / contract.RESULTS_FILE).exists() or not (job_dir / contract.ITEMS_FILE).exists():
            continue
        units = _contract(contract.read_items, job_dir)
        for result in contract.read_results(job_dir / contract.RESULTS_FILE).records:
            unit = units.get(result.assignment_id)
            seen.setdefault(result.worker_name, set()).update(unit.context_ids if unit else [])
    return {worker: sorted(ids) for worker, ids in seen.items()}


def _contract(read, *args):
    """A contract reader, its errors as CrowdError (a BadInput: the CLI maps it to exit 2)."""
    try:
        return read(*args)
    except contract.ContractError as error:
        raise CrowdError(f"{error}") from None


def load_job(job_dir: Path) -> CrowdJob:
    return _contract(contract.read_job, job_dir)


def create_job(engine: Engine, study_name: str, *, provider: str, units: int | None = None, port: int = 3000,
               reward: float | None = None, timeout_seconds: int = 3600, public_url: str | None = None,
               aws_profile: str | None = None, onboarding: bool = True, min_control_pass_rate: float = 0.5,
               lifetime_seconds: int = 86400, live_url: str | None = None) -> tuple[Path, Cost]:
    """Write the job directory for a crowd run of the study's open assignments (the first `units` of them). A chat
    study's units carry `live_url` (where `empeval serve` answers their turns) and each its own token."""
    if provider not in PROVIDERS:
        raise CrowdError(f"unknown provider {provider!r}; expected one of {', '.join(PROVIDERS)}")
    if provider != "mock" and not public_url:
        raise CrowdError(f"{provider} needs the public HTTPS URL of the task server (--public-url https://...), "
                         f"forwarded to 127.0.0.1:{port}: MTurk workers cannot reach this machine's 127.0.0.1")
    if provider != "mock" and not aws_profile:
        raise CrowdError(f"{provider} needs --aws-profile NAME (see `empeval crowd register`)")
    if not BUNDLE.exists():
        raise CrowdError(f"the Mephisto task bundle is missing ({BUNDLE}): run `make crowd`")
    for busy_dir, busy in live_jobs():
        # Mephisto runs one task at a time per environment (a fixed metrics port, shared server folders): a
        # second launch would fail, or break the live run.
        raise CrowdError(f"a crowd run is live already: job {busy_dir.name} of study {busy_dir.parent.name!r} "
                         f"(run {busy.run_id or 'starting'}); Mephisto runs one task at a time on this machine: stop "
                         f"it first (`empeval crowd stop {busy_dir.parent.name} --job {busy_dir.name}`) or wait "
                         "until it ends")
    with Session(engine) as session:
        study = study_by_name(session, study_name)
        if study.status == StudyStatus.CLOSED:
            raise CrowdError(f"study {study_name!r} is closed (`empeval study close`): it takes no more ratings, "
                             "so no crowd run is started for it")
        config = study.config
        assignment_ids = open_assignments(session, study.id)
        linked = linked_studies(session, study)
        if units is not None:
            assignment_ids = assignment_ids[:units]
        if not assignment_ids:
            raise CrowdError(f"study {study_name!r} has no open assignments left to put on the crowd")
        kind = task_kind(study.config.kind)
        job_id = f"{time.strftime('%Y%m%d-%H%M%S')}-{uuid.uuid4().hex[:6]}"
        live = None
        if kind.live_systems:
            live = live_units(engine, study=study_name, job_id=job_id, provider=provider,
                              live_url=checked_live_url(provider, live_url),
                              until=time.time() + lifetime_seconds + config.design.assignment_minutes * 60 + 86400)
        lines = [unit_line(engine, session, a, kind, live) for a in assignment_ids]
    pay = config.pay
    unit_reward = reward if reward is not None else pay.per_assignment
    if unit_reward is None:
        raise CrowdError(f"study {study_name!r} has no pay.per_assignment: give --reward")
    fee = 0.0 if provider == "mock" else pay.platform_fee
    cost = Cost(units=len(lines), reward=float(unit_reward), fee_rate=fee, pay=pay)

    job_dir = crowd_root() / study_name / job_id
    job = CrowdJob(
        job_id=job_id, study=study_name, provider=provider, reward=cost.reward, created_at=time.time(),
        task_name=f"empeval-{study_name}", currency=cost.currency, fee_rate=fee, estimated_cost=cost.total,
        assignment_duration_seconds=config.design.assignment_minutes * 60, lifetime_seconds=lifetime_seconds,
        port=port, public_url=public_url, timeout_seconds=timeout_seconds, bundle=str(BUNDLE), aws_profile=aws_profile,
        onboarding=json.loads(ONBOARDING.read_text(encoding="utf-8")) if onboarding else None,
        min_control_pass_rate=min_control_pass_rate, seen_contexts=seen_contexts(study_name, linked=linked),
        **_listing(config),
    )
    job_dir.mkdir(parents=True)
    contract.write_job(job_dir, job)
    contract.write_items(job_dir, lines)
    return job_dir, cost


def _listing(config: StudyConfig) -> dict[str, Any]:
    """What the HIT listing and the preview page say: the study kind's listing (an A/B study asks for choices, not
    ratings), the study's own title first."""
    listing: dict[str, Any] = dict(task_kind(config.kind).listing)
    if config.title:
        listing["title"] = config.title
    return listing


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


def read_status(job_dir: Path) -> JobStatus:
    """The run's status; NOT_STARTED before the runner writes one, DEAD for a live state whose runner is
    gone (killed without a chance to say so; `crowd ingest` recovers its units)."""
    status = _contract(contract.read_status, job_dir)
    if status is None:
        return JobStatus(job_id=job_dir.name, state=contract.NOT_STARTED)
    if status.live and not _alive(status.pid):
        status = dataclasses.replace(status, state=contract.DEAD)
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


def wait_for(job_dir: Path, states: set[str], *, timeout: float) -> JobStatus:
    """Poll status.json until its state is one of `states` or `timeout` seconds have passed."""
    deadline = time.monotonic() + timeout
    while True:
        status = read_status(job_dir)
        if status.state in states or time.monotonic() > deadline:
            return status
        time.sleep(0.2)


def stop(job_dir: Path, *, wait: float = 60.0) -> JobStatus:
    """Ask the runner to stop (the stop file); after `wait` seconds without an answer, SIGTERM it."""
    (job_dir / contract.STOP_FILE).touch()
    status = wait_for(job_dir, ENDED | {contract.NOT_STARTED}, timeout=wait)
    if status.live and _alive(status.pid):
        os.kill(status.pid, signal.SIGTERM)
        status = wait_for(job_dir, ENDED, timeout=30)
    return status


def run_in_crowd_env(*args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    """One runner command (collect, review, register) in the crowd virtualenv."""
    return subprocess.run([str(crowd_python()), str(RUNNER), *args], capture_output=True, text=True,
                          timeout=timeout, stdin=subprocess.DEVNULL)


def mark_launch_failed(job_dir: Path, reason: str) -> None:
    """Record that the job's run never went live, so the job never becomes its study's current one."""
    (job_dir / LAUNCH_FAILED_FILE).write_text(reason + "\n", encoding="utf-8")


def launch_failed(job_dir: Path) -> bool:
    """Whether the job's run never went live: marked so by `crowd launch`, or ended without a Mephisto run id
    (the runner gave up, or died, before its run was live). An unreadable status counts as not failed."""
    if (job_dir / LAUNCH_FAILED_FILE).exists():
        return True
    try:
        status = read_status(job_dir)
    except CrowdError:
        return False
    return status.state in ENDED and status.run_id is None


def _is_live(job_dir: Path) -> JobStatus | None:
    try:
        status = read_status(job_dir)
    except CrowdError:
        return None
    return status if status.live else None


def live_jobs() -> list[tuple[Path, JobStatus]]:
    """Every job under the crowd root, of any study, whose runner is live (its status says so and its process
    exists), oldest first."""
    found = []
    for job_dir in sorted(crowd_root().glob("*/*/")):
        if (job_dir / contract.JOB_FILE).exists() and (status := _is_live(job_dir)) is not None:
            found.append((job_dir, status))
    return found


def job_dir_for(study: str, job_id: str | None = None) -> Path:
    """The named job of the study, else its current one: the newest live job, else the newest that went live,
    else (every launch failed) the newest."""
    base = crowd_root() / study
    if job_id:
        path = base / job_id
        if not (path / contract.JOB_FILE).exists():
            raise CrowdError(f"no crowd job {job_id!r} for study {study!r} under {base}")
        return path
    jobs = sorted(p for p in base.glob("*/") if (p / contract.JOB_FILE).exists())
    if not jobs:
        raise CrowdError(f"study {study!r} has no crowd job under {base}: run `empeval crowd launch {study}`")
    live = [job for job in jobs if _is_live(job) is not None]
    started = [job for job in jobs if not launch_failed(job)]
    return (live or started or jobs)[-1]


__all__ = ["CrowdError", "Cost", "create_job", "load_job", "start_runner", "read_status", "stop", "wait_for",
           "job_dir_for", "run_in_crowd_env", "crowd_python", "crowd_root", "live_jobs", "launch_failed",
           "mark_launch_failed"]
