"""The crowd runner: one Mephisto run of a Likert study, driven by files. Runs inside .venv-crowd
(Python 3.10) and imports only Mephisto and the standard library.

Contract (DESIGN.md: the runner and the app share only these files, in one job directory):
  in   job.json      what to run: job_id, study, provider (mock | mturk_sandbox | mturk), task texts and
                     pay, port, timeout, onboarding test, review rule (min_control_pass_rate), contexts
                     each worker saw in earlier jobs (seen_contexts, by Mephisto worker name)
       items.jsonl   one line per unit: {"assignment_id", "context_ids", "controls": [{"item_id",
                     "target"}], "payload": <what the task UI shows, as server.annotation's assignment_payload>}
  out  results.jsonl one line per submitted unit, appended, flushed and fsynced: {"submission_id" (stable:
                     job id + Mephisto unit id), "assignment_id", "worker_name", "agent_id", "unit_id",
                     "outputs": {"ratings", "comment"}, "controls": {"n", "passed"}, "passed_controls", ...}
       status.json   {"job_id", "state", "run_id", "url", "units_total", "units_done", "pid", "updated_at",
                     "error"}; state: starting, running, completed, stopped, timeout, failed
       review.jsonl  one line per review action carried out (`review` command)
  control          a file named `stop` in the job directory ends the run (SIGTERM and SIGINT do too)

Commands:
  runner.py launch JOB_DIR            launch, follow and shut down the run (exit 0 only if it completed or
                                      was stopped on request; non-zero when the launch failed)
  runner.py collect JOB_DIR           after a crash: append any submitted unit missing from results.jsonl
  runner.py review JOB_DIR ACTIONS    approve / reject / bonus / block, ACTIONS a JSON list of
                                      {"unit_id", "action", "reason", "amount"}
  runner.py register NAME             write AWS keys from $AWS_ACCESS_KEY_ID / $AWS_SECRET_ACCESS_KEY to
                                      the ~/.aws/credentials profile NAME (Mephisto's own helper)

Mephisto 1.1.1 quirks handled here (../shared/notes/mephisto-1.1.1.md): it reads $HOME/.mephisto at import
(HOME is moved into the job directory, AWS files stay where they were); only one run per virtualenv (a lock
file, and stale routers and server dirs are cleaned before launch); launch_task_run returns None on failure
(checked); its router and metrics server listen on every interface (both are bound to 127.0.0.1 here).
"""
from __future__ import annotations

import argparse
import builtins
import fcntl
import json
import logging
import os
import shutil
import signal
import sys
import threading
import time
from pathlib import Path
from typing import Any, Callable

HERE = Path(__file__).resolve().parent
CONFIG_DIR = HERE / "hydra_configs"
ONBOARDING_QUALIFICATION = "empeval-likert-onboarding"
CONFIG_FOR_PROVIDER = {"mock": "local", "mturk_sandbox": "sandbox", "mturk": "live"}
SUBMITTED_AGENT_STATES = {"completed", "approved", "rejected", "soft_rejected"}
FINAL_STATES = {"completed", "stopped", "timeout", "failed"}

log = logging.getLogger("empeval.runner")


# ---------------------------------------------------------------- job files (no Mephisto needed)

def read_json(path: Path) -> Any:
    return json.loads(path.read_text(encoding="utf-8"))


def write_json_atomic(path: Path, value: Any) -> None:
    temporary = path.with_name(path.name + ".tmp")
    with open(temporary, "w", encoding="utf-8") as handle:
        json.dump(value, handle, indent=1, sort_keys=True)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(temporary, path)


def read_items(job_dir: Path) -> dict[int, dict]:
    items = {}
    with open(job_dir / "items.jsonl", encoding="utf-8") as handle:
        for line in handle:
            if line.strip():
                unit = json.loads(line)
                items[int(unit["assignment_id"])] = unit
    return items


class ResultsFile:
    """results.jsonl: append-only, one line per submission id, each line flushed and fsynced.

    A line cut short by a crash (no newline at the end) is dropped on open, so the next line starts clean."""

    def __init__(self, path: Path):
        self.path = path
        self.lock = threading.Lock()
        self.ids: set[str] = set()
        if path.exists():
            data = path.read_bytes()
            if data and not data.endswith(b"\n"):
                keep = data.rfind(b"\n") + 1
                with open(path, "r+b") as handle:
                    handle.truncate(keep)
                data = data[:keep]
            for line in data.decode("utf-8").splitlines():
                if line.strip():
                    self.ids.add(json.loads(line)["submission_id"])

    def __len__(self) -> int:
        return len(self.ids)

    def append(self, record: dict) -> bool:
        with self.lock:
            if record["submission_id"] in self.ids:
                return False
            with open(self.path, "a", encoding="utf-8") as handle:
                handle.write(json.dumps(record, sort_keys=True) + "\n")
                handle.flush()
                os.fsync(handle.fileno())
            self.ids.add(record["submission_id"])
            return True


def score_controls(outputs: dict, controls: list[dict], *, min_pass_rate: float) -> dict:
    """Did the worker score each control below their own mean for real items on the criterion the control
    is built to fail (the rule of analysis.quality.control_results)? Controls with no real item to compare
    with are not counted."""
    by_item = {r.get("item_id"): r.get("scores", {}) for r in outputs.get("ratings", []) if isinstance(r, dict)}
    control_ids = {c["item_id"] for c in controls}
    n = passed = 0
    for control in controls:
        scores = by_item.get(control["item_id"], {})
        target = control["target"]
        real = [s[target] for item, s in by_item.items() if item not in control_ids and isinstance(s.get(target), int)]
        if not real or not isinstance(scores.get(target), int):
            continue
        n += 1
        passed += scores[target] < sum(real) / len(real)
    return {"n": n, "passed": passed, "ok": n == 0 or passed / n >= min_pass_rate}


def onboarding_passed(answers: dict, onboarding: dict) -> bool:
    right = sum(answers.get(q["key"]) == q["answer"] for q in onboarding["questions"])
    return right >= onboarding.get("pass_mark", len(onboarding["questions"]))


# ---------------------------------------------------------------- the Mephisto environment

def prepare_home(job_dir: Path) -> Path:
    """Point HOME at the job directory before Mephisto is imported (it reads $HOME/.mephisto/config.yml at
    import and asks on stdin when that lacks a data directory); AWS keep reading the real ~/.aws."""
    real_home = Path(os.environ.get("HOME", str(Path.home())))
    os.environ.setdefault("AWS_SHARED_CREDENTIALS_FILE", str(real_home / ".aws" / "credentials"))
    os.environ.setdefault("AWS_CONFIG_FILE", str(real_home / ".aws" / "config"))
    datapath = job_dir / "mephisto"
    home = job_dir / "home"
    (home / ".mephisto").mkdir(parents=True, exist_ok=True)
    datapath.mkdir(exist_ok=True)
    (home / ".mephisto" / "config.yml").write_text(f"core:\n  main_data_directory: {datapath}\n", encoding="utf-8")
    os.environ["HOME"] = str(home)
    return datapath


def site_tmp_dir() -> Path:
    from mephisto.utils.dirs import get_mephisto_tmp_dir

    return Path(get_mephisto_tmp_dir())


def acquire_venv_lock() -> Any:
    """One run per virtualenv (fixed metrics port, shared router build dir): a lock held for the run."""
    tmp = site_tmp_dir()
    tmp.mkdir(parents=True, exist_ok=True)
    handle = open(tmp / "empeval-runner.lock", "a+")
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        handle.seek(0)
        raise SystemExit(f"another crowd run is live in this virtualenv ({handle.read().strip()}); "
                         f"stop it first (`empeval crowd stop`) or wait for it to end")
    handle.seek(0)
    handle.truncate()
    handle.write(f"pid {os.getpid()}")
    handle.flush()
    return handle


def clean_stale_servers() -> list[str]:
    """Kill router processes left running from this virtualenv's tmp dir and remove stale server dirs
    (a SIGTERM'd run can leave both, and they break the next launch). Called with the venv lock held, so
    nothing found here belongs to a live run."""
    tmp = site_tmp_dir()
    cleaned = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            cwd = os.readlink(proc / "cwd")
        except OSError:
            continue
        if cwd.startswith(str(tmp) + os.sep):
            try:
                os.kill(int(proc.name), signal.SIGKILL)
                cleaned.append(f"process {proc.name} in {cwd}")
            except ProcessLookupError:
                pass
    for server_dir in tmp.glob("local_server_*"):
        shutil.rmtree(server_dir, ignore_errors=True)
        cleaned.append(str(server_dir))
    return cleaned


def router_source(job_dir: Path) -> Path:
    """Mephisto's node router, installed as Mephisto does it, copied into the job and bound to one host
    (EMPEVAL_ROUTER_HOST, 127.0.0.1 unless the job says otherwise) instead of every interface."""
    from mephisto.abstractions.architects.router.build_router import (
        NODE_SERVER_SOURCE_ROOT,
        install_router_files,
    )

    install_router_files()
    target = job_dir / "router"
    shutil.rmtree(target, ignore_errors=True)
    shutil.copytree(NODE_SERVER_SOURCE_ROOT, target, symlinks=True)
    server_js = target / "server.js"
    code = server_js.read_text(encoding="utf-8")
    listen = "server.listen(PORT, function () {"
    if listen not in code:
        raise RuntimeError(f"unexpected router source in {NODE_SERVER_SOURCE_ROOT}: cannot bind it to one host")
    server_js.write_text(code.replace(listen, "server.listen(PORT, process.env.EMPEVAL_ROUTER_HOST || '127.0.0.1', function () {"),
                         encoding="utf-8")
    return target


def bind_metrics_to_localhost() -> None:
    """Mephisto's Prometheus client listens on 0.0.0.0:3031; keep it on 127.0.0.1."""
    import mephisto.operations.operator as operator_module
    from prometheus_client import start_http_server

    def start_metrics_server(args=None):
        try:
            start_http_server(3031, addr="127.0.0.1")
        except OSError as error:
            log.warning("metrics server not started on 127.0.0.1:3031 (%s)", error)

    operator_module.start_metrics_server = start_metrics_server


def announce_public_url(public_url: str) -> None:
    """MTurk must send workers to the public HTTPS URL (a tunnel or proxy to 127.0.0.1:<port>), while the
    runner keeps talking to its router on 127.0.0.1: LocalArchitect would hand MTurk "hostname:port"."""
    from mephisto.abstractions.architects.local_architect import LocalArchitect

    deploy = LocalArchitect.deploy

    def deploy_behind_public_url(self):
        deploy(self)
        return public_url.rstrip("/")

    LocalArchitect.deploy = deploy_behind_public_url


def hydra_config(job: dict, job_dir: Path, datapath: Path, router: Path) -> Any:
    from hydra import compose, initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra
    from mephisto.operations.hydra_config import (
        build_default_task_config,
        register_script_config,
    )

    config_name = CONFIG_FOR_PROVIDER[job["provider"]]
    register_script_config(name="taskconfig", module=build_default_task_config(config_name))
    task = {"task_name": job["task_name"], "task_title": job["title"], "task_description": job["description"],
            "task_reward": job["reward"], "task_tags": ",".join(job["tags"]),
            "assignment_duration_in_seconds": job["assignment_duration_seconds"],
            "task_lifetime_in_seconds": job["lifetime_seconds"]}
    overrides = [f"+mephisto.datapath={datapath}",
                 f"mephisto.blueprint.task_source={job['bundle']}",
                 f"mephisto.blueprint.units_per_assignment={job.get('units_per_assignment', 1)}",
                 f"mephisto.architect.port={job['port']}",
                 f"mephisto.architect.server_source_path={router}"]
    if job.get("hostname"):
        overrides.append(f"mephisto.architect.hostname={job['hostname']}")
    overrides += [f"mephisto.task.{key}={json.dumps(value)}" for key, value in task.items()]
    if job.get("onboarding"):
        overrides.append(f"+mephisto.blueprint.onboarding_qualification={job.get('onboarding_qualification', ONBOARDING_QUALIFICATION)}")
    if job["provider"] != "mock":
        overrides.append(f"mephisto.provider.requester_name={requester_name(job)}")
    overrides += job.get("overrides", [])
    GlobalHydra.instance().clear()
    with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base="1.1"):
        return compose(config_name="taskconfig", overrides=overrides)


def requester_name(job: dict) -> str:
    profile = job["aws_profile"]
    return f"{profile}_sandbox" if job["provider"] == "mturk_sandbox" else profile


def ensure_requester(db: Any, job: dict) -> None:
    """MTurk runs need a requester row in this job's database; its keys are the AWS profile's."""
    if job["provider"] == "mock":
        return
    from mephisto.abstractions.providers.mturk.mturk_utils import check_aws_credentials
    from mephisto.operations.registry import get_crowd_provider_from_type

    name = requester_name(job)
    if not check_aws_credentials(job["aws_profile"]):
        raise SystemExit(f"no AWS profile {job['aws_profile']!r} in {os.environ['AWS_SHARED_CREDENTIALS_FILE']}: "
                         f"run `empeval crowd register {job['aws_profile']}` with AWS_ACCESS_KEY_ID and "
                         f"AWS_SECRET_ACCESS_KEY set")
    if not db.find_requesters(requester_name=name):
        get_crowd_provider_from_type(job["provider"]).RequesterClass.new(db, name)


# ---------------------------------------------------------------- the run

class Run:
    def __init__(self, job_dir: Path):
        self.job_dir = job_dir
        self.job = read_json(job_dir / "job.json")
        self.items = read_items(job_dir)
        self.results = ResultsFile(job_dir / "results.jsonl")
        self.status: dict[str, Any] = {"job_id": self.job["job_id"], "state": "starting", "run_id": None, "url": None,
                                       "units_total": len(self.items), "units_done": len(self.results),
                                       "pid": os.getpid(), "error": None, "started_at": time.time()}
        self.stop_requested = threading.Event()
        self._assignment_of_unit: dict[str, int] = {}
        self.write_status()

    def write_status(self, **changes: Any) -> None:
        self.status.update(changes, units_done=len(self.results), updated_at=time.time())
        write_json_atomic(self.job_dir / "status.json", self.status)

    # --- hooks Mephisto calls
    def assignment_of(self, unit: Any) -> int:
        key = unit.assignment_id
        if key not in self._assignment_of_unit:
            self._assignment_of_unit[key] = int(unit.get_assignment_data().shared["assignment_id"])
        return self._assignment_of_unit[key]

    def worker_can_do_unit(self, worker: Any, unit: Any) -> bool:
        """No worker sees a context twice: not in this job, nor in earlier jobs of the study."""
        wanted = set(self.items[self.assignment_of(unit)]["context_ids"])
        seen = set(self.job.get("seen_contexts", {}).get(worker.worker_name, []))
        for agent in worker.get_agents():
            other = agent.get_unit()
            if other.db_id != unit.db_id and other.get_assignment().get_task_run().db_id == unit.get_assignment().get_task_run().db_id:
                seen |= set(self.items[self.assignment_of(other)]["context_ids"])
        return not wanted & seen

    def validate_onboarding(self, data: dict) -> bool:
        answers = (data.get("outputs") or {}).get("answers") or {}
        return onboarding_passed(answers, self.job["onboarding"])

    def on_unit_submitted(self, unit: Any) -> None:
        self.record(unit)

    # --- results
    def record(self, unit: Any) -> bool:
        agent = unit.get_assigned_agent()
        if agent is None or agent.get_status() not in SUBMITTED_AGENT_STATES:
            return False
        data = agent.state.get_data()
        outputs = data.get("outputs")
        if not outputs:
            return False
        assignment_id = self.assignment_of(unit)
        worker = agent.get_worker()
        controls = score_controls(outputs, self.items[assignment_id].get("controls", []),
                                  min_pass_rate=float(self.job.get("min_control_pass_rate", 0.5)))
        record = {"submission_id": f"{self.job['job_id']}.u{unit.db_id}", "job_id": self.job["job_id"],
                  "study": self.job["study"], "provider": self.job["provider"],
                  "run_id": unit.task_run_id, "unit_id": unit.db_id, "mephisto_assignment_id": unit.assignment_id,
                  "agent_id": agent.db_id, "worker_name": worker.worker_name, "assignment_id": assignment_id,
                  "outputs": outputs, "controls": {"n": controls["n"], "passed": controls["passed"]},
                  "passed_controls": controls["ok"], "recorded_at": time.time()}
        written = self.results.append(record)
        if written:
            log.info("unit %s (assignment %s) by %s recorded", unit.db_id, assignment_id, worker.worker_name)
        return written

    def sweep(self, db: Any, run_id: str | None) -> int:
        """Record every submitted unit of the run that results.jsonl lacks (after a crash, or a missed hook)."""
        if run_id is None:
            return 0
        added = 0
        for unit in db.find_units(task_run_id=run_id):
            if unit.unit_index >= 0 and self.record(unit):
                added += 1
        return added


def install_stop_handlers(run: Run) -> dict:
    def request_stop(signum, frame):
        log.info("signal %s: stopping the run", signum)
        run.stop_requested.set()

    return {sig: signal.signal(sig, request_stop) for sig in (signal.SIGINT, signal.SIGTERM)}


def launch(job_dir: Path, *, prepare_operator: Callable[[Any], None] | None = None) -> int:
    """Launch the job's run, follow it until completion, the stop file or the timeout, then shut it down."""
    datapath = prepare_home(job_dir)
    run = Run(job_dir)
    job = run.job
    try:
        lock = acquire_venv_lock()
    except SystemExit as error:
        run.write_status(state="failed", error=str(error))
        raise
    operator = None
    previous_handlers = install_stop_handlers(run)
    # Mephisto asks on stdin before MTurk launches; the app has asked the researcher already.
    builtins.input = lambda prompt="": log.info("confirmed: %s", prompt) or ""
    os.environ["EMPEVAL_ROUTER_HOST"] = job.get("router_host", "127.0.0.1")
    try:
        for stale in clean_stale_servers():
            log.warning("cleaned up before launch: %s", stale)
        bind_metrics_to_localhost()
        from mephisto.abstractions.blueprints.abstract.static_task.static_blueprint import (
            SharedStaticTaskState,
        )
        from mephisto.tools.scripts import (
            get_db_from_config,
            process_config_and_get_operator,
        )

        if job.get("public_url"):
            announce_public_url(job["public_url"])
        cfg = hydra_config(job, job_dir, datapath, router_source(job_dir))
        ensure_requester(get_db_from_config(cfg), job)
        operator, cfg = process_config_and_get_operator(cfg)
        if prepare_operator is not None:
            prepare_operator(operator)
        onboarding = job.get("onboarding")
        state = SharedStaticTaskState(
            static_task_data=[{"assignment_id": a, "payload": unit["payload"]} for a, unit in run.items.items()],
            worker_can_do_unit=run.worker_can_do_unit,
            on_unit_submitted=run.on_unit_submitted,
        )
        if onboarding:
            # The browser gets the questions without their answers.
            state.onboarding_data = {"instructions": onboarding.get("instructions", ""),
                                     "questions": [{k: v for k, v in q.items() if k != "answer"} for q in onboarding["questions"]]}
            state.validate_onboarding = run.validate_onboarding
        started = time.monotonic()
        run_id = operator.launch_task_run(cfg.mephisto, shared_state=state)
        if run_id is None:
            raise RuntimeError("Mephisto could not launch the run (launch_task_run returned None; see the log above)")
        url = job.get("public_url") or f"http://127.0.0.1:{job['port']}"
        run.write_status(state="running", run_id=run_id, url=url, launch_seconds=round(time.monotonic() - started, 2))
        # Mephisto (and the libraries it starts) may have replaced our handlers: put them back.
        install_stop_handlers(run)
        log.info("run %s live at %s (%d units)", run_id, url, len(run.items))

        deadline = started + float(job.get("timeout_seconds", 3600))
        stop_file = job_dir / "stop"
        outcome = {"state": "completed"}
        last_sweep = 0.0

        def should_stop() -> bool:
            nonlocal last_sweep
            if time.monotonic() - last_sweep > 2.0:
                last_sweep = time.monotonic()
                run.sweep(operator.db, run_id)
                run.write_status()
            if not operator.get_running_task_runs():
                outcome["state"] = "completed"
                return True
            if run.stop_requested.is_set() or stop_file.exists():
                outcome["state"] = "stopped"
                return True
            if time.monotonic() > deadline:
                outcome["state"] = "timeout"
                return True
            return False

        while not operator._run_loop_until(should_stop, 5.0):
            pass
        log.info("run %s: %s, shutting down", run_id, outcome["state"])
        run.sweep(operator.db, run_id)
        if outcome["state"] == "completed":
            operator.shutdown()
        else:
            operator.force_shutdown(timeout=5)
        operator = None
        run.sweep(get_db_from_config(cfg), run_id)
        run.write_status(state=outcome["state"], finished_at=time.time())
        return 0 if outcome["state"] in ("completed", "stopped") else 3
    except BaseException as error:  # noqa: BLE001 - the status file must say what happened, whatever it was
        log.exception("run failed")
        run.write_status(state="failed", error=f"{type(error).__name__}: {error}")
        if operator is not None:
            try:
                operator.force_shutdown(timeout=5)
            except Exception:  # noqa: BLE001
                log.exception("shutdown after failure failed")
        return 2
    finally:
        for leftover in clean_stale_servers():
            log.warning("cleaned up after the run: %s", leftover)
        for sig, handler in previous_handlers.items():
            signal.signal(sig, handler)
        builtins.input = input
        lock.close()


def open_job_db(job_dir: Path) -> Any:
    prepare_home(job_dir)
    from mephisto.abstractions.databases.local_database import LocalMephistoDB

    return LocalMephistoDB(database_path=str(job_dir / "mephisto" / "database.db"))


def collect(job_dir: Path) -> int:
    """Append the submitted units that results.jsonl lacks (e.g. after the runner was killed)."""
    status_path = job_dir / "status.json"
    status = read_json(status_path) if status_path.exists() else {}
    db = open_job_db(job_dir)
    try:
        lock = acquire_venv_lock()
    except SystemExit:
        lock = None  # a run is live in this virtualenv: leave its servers alone
    if lock is not None:
        # No run is live, so a router still serving from the tmp dir belongs to a killed runner.
        for stale in clean_stale_servers():
            log.warning("cleaned up after a killed run: %s", stale)
        if status.get("state") in ("starting", "running"):
            status["state"] = "dead"
        lock.close()
    run = Run.__new__(Run)
    run.job_dir, run.job, run.items = job_dir, read_json(job_dir / "job.json"), read_items(job_dir)
    run.results, run._assignment_of_unit = ResultsFile(job_dir / "results.jsonl"), {}
    added = sum(run.sweep(db, task_run.db_id) for task_run in db.find_task_runs())
    if status:
        status.update(units_done=len(run.results), updated_at=time.time())
        write_json_atomic(status_path, status)
    print(json.dumps({"added": added, "results": len(run.results)}))
    return 0


def review(job_dir: Path, actions: list[dict], *, prepare_db: Callable[[Any], None] | None = None) -> int:
    """Carry out review actions through Mephisto (and so through the crowd platform); one review.jsonl line
    per action with its outcome. Approving or rejecting work that is already decided is skipped."""
    db = open_job_db(job_dir)
    if prepare_db is not None:
        prepare_db(db)
    from mephisto.data_model.unit import Unit

    failures = 0
    with open(job_dir / "review.jsonl", "a", encoding="utf-8") as out:
        for action in actions:
            outcome = {**action, "ok": False, "at": time.time()}
            try:
                unit = Unit.get(db, str(action["unit_id"]))
                agent = unit.get_assigned_agent()
                if agent is None:
                    raise ValueError(f"unit {action['unit_id']} has no submitted work")
                worker = agent.get_worker()
                kind = action["action"]
                status = agent.get_status()
                if kind == "approve":
                    if status in ("approved", "rejected"):
                        outcome.update(ok=True, skipped=f"already {status}")
                    else:
                        agent.approve_work()
                        outcome["ok"] = True
                elif kind == "reject":
                    if not action.get("reason"):
                        raise ValueError("a rejection needs a reason the worker can read")
                    if status in ("approved", "rejected"):
                        outcome.update(ok=status == "rejected", skipped=f"already {status}")
                    else:
                        agent.reject_work(action["reason"])
                        outcome["ok"] = True
                elif kind == "bonus":
                    ok, message = worker.bonus_worker(float(action["amount"]), action.get("reason") or "bonus", unit)
                    outcome.update(ok=ok, message=message)
                elif kind == "block":
                    ok, message = worker.block_worker(action.get("reason") or "blocked", unit=unit,
                                                      requester=unit.get_requester())
                    outcome.update(ok=ok, message=message)
                else:
                    raise ValueError(f"unknown review action {kind!r}; expected approve, reject, bonus or block")
            except Exception as error:  # noqa: BLE001 - reported per action; the others still run
                outcome["error"] = f"{type(error).__name__}: {error}"
            failures += not outcome["ok"]
            out.write(json.dumps(outcome, sort_keys=True) + "\n")
            out.flush()
            os.fsync(out.fileno())
            print(json.dumps(outcome, sort_keys=True), flush=True)
    return 0 if failures == 0 else 1


def register(profile: str) -> int:
    from mephisto.abstractions.providers.mturk.mturk_utils import setup_aws_credentials
    from omegaconf import OmegaConf

    keys = {"access_key_id": os.environ.get("AWS_ACCESS_KEY_ID"), "secret_access_key": os.environ.get("AWS_SECRET_ACCESS_KEY")}
    if not all(keys.values()):
        raise SystemExit("set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (an IAM user with AmazonMechanicalTurkFullAccess)")
    setup_aws_credentials(profile, OmegaConf.create(keys))
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
        return review(args.job_dir.resolve(), read_json(args.actions), **hooks)
    return register(args.profile)


if __name__ == "__main__":
    sys.exit(main())
