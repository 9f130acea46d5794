"""The crowd runner: one Mephisto run of a Likert study, driven by files. Runs inside .venv-crowd
(Python 3.10) and imports only Mephisto (with Hydra, the configuration system its task configs are written
in), the standard library, and two files loaded by path: the crowd contract (tasks/crowd/contract.py, the
job files, defined once for the runner and the app) and tasks/crowd/mephisto_compat.py (every Mephisto
1.1.1 workaround, each restored when the run ends).

The job directory (see the contract): job.json and items.jsonl in; results.jsonl (one line per submitted
unit), status.json, review.jsonl and owned-processes.json (the router processes and server dirs this
runner started, so cleanup touches nothing else) out; a file named `stop` ends the run (SIGTERM and SIGINT
do too).

Commands:
  runner.py launch JOB_DIR            launch, follow and shut down the run (exit 0 only if it completed or
                                      was stopped on request; 3 on timeout; 2 when the launch failed)
  runner.py collect JOB_DIR           after a crash: append any submitted unit missing from results.jsonl
  runner.py review JOB_DIR ACTIONS    approve / reject / bonus / block, ACTIONS a JSON list of
                                      {"unit_id", "action", "reason", "amount"}
  runner.py register NAME             write AWS keys from $AWS_ACCESS_KEY_ID / $AWS_SECRET_ACCESS_KEY to
                                      the ~/.aws/credentials profile NAME (Mephisto's own helper)
"""
from __future__ import annotations

import argparse
import contextlib
import dataclasses
import importlib.util
import json
import logging
import os
import signal
import sys
import threading
import time
import types
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
CONFIG_DIR = HERE / "hydra_configs"
CONFIG_FOR_PROVIDER = {"mock": "local", "mturk_sandbox": "sandbox", "mturk": "live"}
SUBMITTED_AGENT_STATES = {"completed", "approved", "rejected", "soft_rejected"}
SWEEP_SECONDS = 2.0

log = logging.getLogger("empeval.runner")


def _load_by_path(name: str, path: Path) -> types.ModuleType:
    """Our own modules, by file: the runner runs as a script in the crowd virtualenv, where the app's
    packages are not importable (and must not be)."""
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses look up their module by name
    spec.loader.exec_module(module)
    return module


contract = _load_by_path("empeval_crowd_contract", HERE / "contract.py")
compat = _load_by_path("empeval_mephisto_compat", HERE / "mephisto_compat.py")


def onboarding_passed(answers: dict, onboarding: dict) -> bool:
    right = sum(answers.get(q["key"]) == q["answer"] for q in onboarding["questions"])
    return right >= onboarding.get("pass_mark", len(onboarding["questions"]))


def requester_name(job: Any) -> str:
    return f"{job.aws_profile}_sandbox" if job.provider == "mturk_sandbox" else job.aws_profile


def hydra_config(job: Any, datapath: Path, router: Path) -> Any:
    from hydra import compose, initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra
    from mephisto.operations.hydra_config import (
        build_default_task_config,
        register_script_config,
    )

    register_script_config(name="taskconfig", module=build_default_task_config(CONFIG_FOR_PROVIDER[job.provider]))
    task = {"task_name": job.task_name, "task_title": job.title, "task_description": job.description,
            "task_reward": job.reward, "task_tags": ",".join(job.tags),
            "assignment_duration_in_seconds": job.assignment_duration_seconds,
            "task_lifetime_in_seconds": job.lifetime_seconds}
    overrides = [f"+mephisto.datapath={datapath}",
                 f"mephisto.blueprint.task_source={job.bundle}",
                 f"mephisto.blueprint.units_per_assignment={job.units_per_assignment}",
                 f"mephisto.architect.port={job.port}",
                 f"mephisto.architect.server_source_path={router}"]
    if job.hostname:
        overrides.append(f"mephisto.architect.hostname={job.hostname}")
    overrides += [f"mephisto.task.{key}={json.dumps(value)}" for key, value in task.items()]
    if job.onboarding:
        overrides.append(f"+mephisto.blueprint.onboarding_qualification={job.onboarding_qualification}")
    if job.provider != "mock":
        overrides.append(f"mephisto.provider.requester_name={requester_name(job)}")
    overrides += job.overrides
    GlobalHydra.instance().clear()
    with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base="1.1"):
        return compose(config_name="taskconfig", overrides=overrides)


def ensure_requester(db: Any, job: Any) -> None:
    """MTurk runs need a requester row in this job's database; its keys are the AWS profile's."""
    if job.provider == "mock":
        return
    from mephisto.abstractions.providers.mturk.mturk_utils import check_aws_credentials
    from mephisto.operations.registry import get_crowd_provider_from_type

    if not check_aws_credentials(job.aws_profile):
        raise RuntimeError(f"no AWS profile {job.aws_profile!r} in {os.environ['AWS_SHARED_CREDENTIALS_FILE']}: "
                           f"run `empeval crowd register {job.aws_profile}` with AWS_ACCESS_KEY_ID and "
                           f"AWS_SECRET_ACCESS_KEY set")
    if not db.find_requesters(requester_name=requester_name(job)):
        get_crowd_provider_from_type(job.provider).RequesterClass.new(db, requester_name(job))


# ---------------------------------------------------------------- the run

class Run:
    """One job as Mephisto's hooks see it: the job, its units, results.jsonl and status.json."""

    def __init__(self, job_dir: Path, job: Any, units: dict, results: Any, status: Any):
        self.job_dir = job_dir
        self.job = job
        self.units = units
        self.results = results
        self.status = status
        self.stop_requested = threading.Event()
        self._assignment_of_unit: dict[str, int] = {}

    @classmethod
    def open(cls, job_dir: Path) -> Run:
        """The job as its files stand; status.json is left as it is (a new run calls `begin`)."""
        job = contract.read_job(job_dir)
        units = contract.read_items(job_dir)
        results = contract.ResultsFile(job_dir / contract.RESULTS_FILE)
        for problem in results.problems:
            log.warning("results.jsonl: %s (left for the app to report)", problem)
        status = contract.read_status(job_dir) or contract.JobStatus(job_id=job.job_id, state=contract.STARTING,
                                                                     units_total=len(units))
        return cls(job_dir, job, units, results, status)

    def begin(self) -> None:
        self.status = contract.JobStatus(job_id=self.job.job_id, state=contract.STARTING, units_total=len(self.units),
                                         pid=os.getpid(), started_at=time.time())
        self.write_status()

    def write_status(self, **changes: Any) -> None:
        self.status = dataclasses.replace(self.status, **changes, units_done=len(self.results), updated_at=time.time())
        contract.write_status(self.job_dir, self.status)

    # --- hooks Mephisto calls
    def assignment_of(self, unit: Any) -> int:
        key = unit.assignment_id
        if key not in self._assignment_of_unit:
            self._assignment_of_unit[key] = int(unit.get_assignment_data().shared["assignment_id"])
        return self._assignment_of_unit[key]

    def worker_can_do_unit(self, worker: Any, unit: Any) -> bool:
        """No worker sees a context twice: not in this job, nor in earlier jobs of the study."""
        wanted = set(self.units[self.assignment_of(unit)].context_ids)
        seen = set(self.job.seen_contexts.get(worker.worker_name, []))
        run_id = unit.get_assignment().get_task_run().db_id
        for agent in worker.get_agents():
            other = agent.get_unit()
            if other.db_id != unit.db_id and other.get_assignment().get_task_run().db_id == run_id:
                seen |= set(self.units[self.assignment_of(other)].context_ids)
        return not wanted & seen

    def validate_onboarding(self, data: dict) -> bool:
        answers = (data.get("outputs") or {}).get("answers") or {}
        return onboarding_passed(answers, self.job.onboarding)

    def on_unit_submitted(self, unit: Any) -> None:
        self.record(unit)

    # --- results
    def record(self, unit: Any) -> bool:
        agent = unit.get_assigned_agent()
        if agent is None or agent.get_status() not in SUBMITTED_AGENT_STATES:
            return False
        outputs = agent.state.get_data().get("outputs")
        if not outputs:
            return False
        assignment_id = self.assignment_of(unit)
        worker = agent.get_worker()
        controls = contract.score_controls(outputs, self.units[assignment_id].controls)
        result = contract.CrowdResult(
            submission_id=f"{self.job.job_id}.u{unit.db_id}", job_id=self.job.job_id, study=self.job.study,
            provider=self.job.provider, run_id=str(unit.task_run_id), unit_id=str(unit.db_id),
            mephisto_assignment_id=str(unit.assignment_id), agent_id=str(agent.db_id), worker_name=worker.worker_name,
            assignment_id=assignment_id, outputs=outputs, controls=controls,
            passed_controls=controls.ok(min_pass_rate=self.job.min_control_pass_rate), recorded_at=time.time())
        written = self.results.append(result)
        if written:
            log.info("unit %s (assignment %s) by %s recorded", unit.db_id, assignment_id, worker.worker_name)
        return written

    def sweep(self, db: Any, run_id: str | None) -> int:
        """Record every submitted unit of the run that results.jsonl lacks (after a crash, or a missed hook)."""
        if run_id is None:
            return 0
        return sum(1 for unit in db.find_units(task_run_id=run_id) if unit.unit_index >= 0 and self.record(unit))


def install_stop_handlers(run: Run) -> dict:
    def request_stop(signum, frame):
        log.info("signal %s: stopping the run", signum)
        run.stop_requested.set()

    return {sig: signal.signal(sig, request_stop) for sig in (signal.SIGINT, signal.SIGTERM)}


def launch(job_dir: Path, *, prepare_operator: Callable[[Any], None] | None = None) -> int:
    """Launch the job's run, follow it until completion, the stop file or the timeout, then shut it down."""
    try:
        run = Run.open(job_dir)
    except contract.ContractError as error:
        log.error("%s", error)
        contract.write_status(job_dir, contract.JobStatus(job_id=job_dir.name, state=contract.FAILED, error=str(error),
                                                          pid=os.getpid(), updated_at=time.time()))
        return 2
    run.begin()
    job = run.job
    previous_handlers = install_stop_handlers(run)
    try:
        # The patches unwind in reverse when the run ends, whatever the outcome: our router is cleaned up
        # while the virtualenv lock is still held, then each Mephisto patch is undone, then HOME.
        with contextlib.ExitStack() as patches:
            operator = None
            try:
                compat.require_mephisto_version()
                datapath = patches.enter_context(compat.home_in_job(job_dir))
                for stale in patches.enter_context(compat.one_run_per_venv(job_dir)):
                    log.warning("cleaned up before launch: %s", stale)
                patches.callback(clean_up_after, job_dir)
                # Mephisto asks on stdin before MTurk launches; the app has asked the researcher already.
                patches.enter_context(compat.answering_input(""))
                patches.enter_context(compat.router_on_host(job.router_host))
                patches.enter_context(compat.metrics_on_localhost())
                patches.enter_context(compat.patient_channel_start())
                patches.enter_context(compat.one_registration_per_request())
                patches.enter_context(compat.recording_router(
                    lambda pid, server_dir: compat.record_owned(job_dir, pid=pid, directory=server_dir)))
                if job.public_url:
                    patches.enter_context(compat.deploy_behind_public_url(job.public_url))
                from mephisto.abstractions.blueprints.abstract.static_task.static_blueprint import (
                    SharedStaticTaskState,
                )
                from mephisto.tools.scripts import (
                    get_db_from_config,
                    process_config_and_get_operator,
                )

                cfg = hydra_config(job, datapath, compat.router_source(job_dir))
                ensure_requester(get_db_from_config(cfg), job)
                operator, cfg = process_config_and_get_operator(cfg)
                if prepare_operator is not None:
                    prepare_operator(operator)
                state = SharedStaticTaskState(
                    static_task_data=[{"assignment_id": a, "payload": unit.payload} for a, unit in run.units.items()],
                    worker_can_do_unit=run.worker_can_do_unit,
                    on_unit_submitted=run.on_unit_submitted,
                )
                # What the preview page says (the job's title and description: Likert ratings or A/B choices);
                # Mephisto hands task_config to the page as taskConfig.
                state.task_config = {"preview_title": job.title, "preview_text": job.description}
                if job.onboarding:
                    # The browser gets the questions without their answers.
                    state.onboarding_data = {"instructions": job.onboarding.get("instructions", ""),
                                             "questions": [{k: v for k, v in q.items() if k != "answer"}
                                                           for q in job.onboarding["questions"]]}
                    state.validate_onboarding = run.validate_onboarding
                started = time.monotonic()
                run_id = operator.launch_task_run(cfg.mephisto, shared_state=state)
                if run_id is None:
                    raise RuntimeError("Mephisto could not launch the run (launch_task_run returned None; see the "
                                       "log above)")
                # Live means a worker who arrives now gets a unit (launching many MTurk HITs takes a while).
                if not compat.units_launched(operator, run_id, job.timeout_seconds):
                    log.warning("run %s: the units were still being launched at the job's timeout", run_id)
                url = job.public_url or f"http://127.0.0.1:{job.port}"
                run.write_status(state=contract.RUNNING, run_id=str(run_id), url=url,
                                 launch_seconds=round(time.monotonic() - started, 2))
                # Mephisto (and the libraries it starts) may have replaced our handlers: put them back.
                install_stop_handlers(run)
                log.info("run %s live at %s (%d units)", run_id, url, len(run.units))

                outcome = follow(run, operator, run_id, deadline=started + job.timeout_seconds)
                log.info("run %s: %s, shutting down", run_id, outcome)
                run.sweep(operator.db, run_id)
                if outcome == contract.COMPLETED:
                    operator.shutdown()
                else:
                    operator.force_shutdown(timeout=5)
                operator = None
                run.sweep(get_db_from_config(cfg), run_id)
                run.write_status(state=outcome, finished_at=time.time())
                return 0 if outcome in (contract.COMPLETED, contract.STOPPED) else 3
            except BaseException as error:  # noqa: BLE001 - the status file must say what happened, whatever it was
                log.exception("run failed")
                run.write_status(state=contract.FAILED, error=f"{type(error).__name__}: {error}",
                                 finished_at=time.time())
                if operator is not None:
                    try:
                        operator.force_shutdown(timeout=5)
                    except Exception:  # noqa: BLE001
                        log.exception("shutdown after failure failed")
                return 2
    finally:
        for sig, handler in previous_handlers.items():
            signal.signal(sig, handler)


def clean_up_after(job_dir: Path) -> None:
    """Whatever this job's router and server dir left (Mephisto stops its router itself on a clean
    shutdown; after a failure or a forced shutdown it may not have)."""
    for leftover in compat.clean_owned(job_dir):
        log.info("cleaned up after the run: %s", leftover)


def follow(run: Run, operator: Any, run_id: str, *, deadline: float) -> str:
    """Run Mephisto's loop until the run completes, is asked to stop (stop file, signal) or times out;
    results.jsonl and status.json are brought up to date every few seconds meanwhile. Returns the state."""
    stop_file = run.job_dir / contract.STOP_FILE
    outcome = {"state": contract.COMPLETED}
    last_sweep = 0.0

    def should_stop() -> bool:
        nonlocal last_sweep
        if time.monotonic() - last_sweep > SWEEP_SECONDS:
            last_sweep = time.monotonic()
            run.sweep(operator.db, run_id)
            run.write_status()
        if not operator.get_running_task_runs():
            outcome["state"] = contract.COMPLETED
        elif run.stop_requested.is_set() or stop_file.exists():
            outcome["state"] = contract.STOPPED
        elif time.monotonic() > deadline:
            outcome["state"] = contract.TIMEOUT
        else:
            return False
        return True

    while not compat.run_loop_until(operator, should_stop, 5.0):
        pass
    return outcome["state"]


def open_job_db(job_dir: Path) -> Any:
    """The job's Mephisto database (call inside compat.home_in_job)."""
    from mephisto.abstractions.databases.local_database import LocalMephistoDB

    return LocalMephistoDB(database_path=str(job_dir / "mephisto" / "database.db"))


def collect(job_dir: Path) -> int:
    """Append the submitted units that results.jsonl lacks (e.g. after the runner was killed)."""
    compat.require_mephisto_version()
    run = Run.open(job_dir)
    had_status = (job_dir / contract.STATUS_FILE).exists()
    with compat.home_in_job(job_dir):
        try:
            with compat.one_run_per_venv(job_dir) as cleaned:
                # The lock was free, so no runner is live: a router this job recorded belongs to a killed run.
                for stale in cleaned:
                    log.warning("cleaned up after a killed run: %s", stale)
                if run.status.live:
                    run.status = dataclasses.replace(run.status, state=contract.DEAD)
        except compat.VenvBusy:
            pass  # a run is live in this virtualenv: leave what it owns alone
        db = open_job_db(job_dir)
        added = sum(run.sweep(db, task_run.db_id) for task_run in db.find_task_runs())
    if had_status:
        run.write_status()
    print(json.dumps({"added": added, "results": len(run.results)}))
    return 0


def review(job_dir: Path, actions: list[dict], *, prepare_db: Callable[[Any], None] | None = None) -> int:
    """Carry out review actions through Mephisto (and so through the crowd platform); one review.jsonl line
    per action with its outcome. Approving or rejecting work that is already decided is skipped."""
    compat.require_mephisto_version()
    with compat.home_in_job(job_dir):
        db = open_job_db(job_dir)
        if prepare_db is not None:
            prepare_db(db)
        with open(job_dir / contract.REVIEW_FILE, "a", encoding="utf-8") as out:
            failures = 0
            for action in actions:
                outcome = carry_out(db, action)
                failures += not outcome["ok"]
                out.write(json.dumps(outcome, sort_keys=True) + "\n")
                out.flush()
                os.fsync(out.fileno())
                print(json.dumps(outcome, sort_keys=True), flush=True)
    return 0 if failures == 0 else 1


def carry_out(db: Any, action: dict) -> dict:
    """One review action; the outcome says whether it worked (errors are reported, not raised)."""
    from mephisto.data_model.unit import Unit

    outcome = {**action, "ok": False, "at": time.time()}
    try:
        unit = Unit.get(db, str(action["unit_id"]))
        agent = unit.get_assigned_agent()
        if agent is None:
            raise ValueError(f"unit {action['unit_id']} has no submitted work")
        worker = agent.get_worker()
        verb = action["action"]
        status = agent.get_status()
        if verb == "approve":
            if status in ("approved", "rejected"):
                outcome.update(ok=True, skipped=f"already {status}")
            else:
                agent.approve_work()
                outcome["ok"] = True
        elif verb == "reject":
            if not action.get("reason"):
                raise ValueError("a rejection needs a reason the worker can read")
            if status in ("approved", "rejected"):
                outcome.update(ok=status == "rejected", skipped=f"already {status}")
            else:
                agent.reject_work(action["reason"])
                outcome["ok"] = True
        elif verb == "bonus":
            ok, message = worker.bonus_worker(float(action["amount"]), action.get("reason") or "bonus", unit)
            outcome.update(ok=ok, message=message)
        elif verb == "block":
            ok, message = worker.block_worker(action.get("reason") or "blocked", unit=unit,
                                              requester=unit.get_requester())
            outcome.update(ok=ok, message=message)
        else:
            raise ValueError(f"unknown review action {verb!r}; expected approve, reject, bonus or block")
    except Exception as error:  # noqa: BLE001 - reported per action; the others still run
        outcome["error"] = f"{type(error).__name__}: {error}"
    return outcome


def register(profile: str) -> int:
    from mephisto.abstractions.providers.mturk.mturk_utils import setup_aws_credentials

    keys = types.SimpleNamespace(access_key_id=os.environ.get("AWS_ACCESS_KEY_ID"),
                                 secret_access_key=os.environ.get("AWS_SECRET_ACCESS_KEY"))
    if not (keys.access_key_id and keys.secret_access_key):
        raise SystemExit("set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (an IAM user with "
                         "AmazonMechanicalTurkFullAccess)")
    setup_aws_credentials(profile, keys)
    print(f"AWS profile {profile!r} written to ~/.aws/credentials")
    return 0


def main(argv: list[str] | None = None, **hooks: Any) -> int:
    parser = argparse.ArgumentParser(prog="runner.py", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    for name in ("launch", "collect"):
        sub.add_parser(name).add_argument("job_dir", type=Path)
    review_parser = sub.add_parser("review")
    review_parser.add_argument("job_dir", type=Path)
    review_parser.add_argument("actions", type=Path)
    sub.add_parser("register").add_argument("profile")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s", stream=sys.stderr)
    if args.command == "launch":
        return launch(args.job_dir.resolve(), **hooks)
    if args.command == "collect":
        return collect(args.job_dir.resolve())
    if args.command == "review":
        return review(args.job_dir.resolve(), json.loads(args.actions.read_text(encoding="utf-8")), **hooks)
    return register(args.profile)


if __name__ == "__main__":
    sys.exit(main())
