"""Every workaround the crowd runner needs for Mephisto 1.1.1, in one place (../shared/notes/mephisto-1.1.1.md).

Standard library and Mephisto only, and Mephisto is imported inside the functions, never at module level:
Mephisto reads $HOME/.mephisto/config.yml when it is first imported, so `home_in_job` must come first.

Each patch is a context manager that records what it replaces and puts exactly that back on exit, so the
patches nest (an ExitStack unwinds them in reverse) and a process can run the runner twice:

  home_in_job            HOME moved into the job directory (Mephisto's config and data go there); AWS files
                         keep being read from the real home
  answering_input        builtins.input answered (Mephisto asks for confirmation before MTurk launches)
  metrics_on_localhost   the operator's Prometheus client bound to 127.0.0.1 instead of every interface
  router_on_host         the node router (copied by `router_source`) bound to one interface
  recording_router       LocalArchitect.deploy reports the router process it started and its server dir
  deploy_behind_public_url  LocalArchitect.deploy hands MTurk the public URL instead of "hostname:port"
  patient_channel_start  the operator waits 60 s (not 10) for the router to open a launching run's channel
  one_registration_per_request  a registration resent under the same request id is answered once

Waits: `units_launched` keeps the loop running until launch_task_run's unit thread has launched every unit
(before that, an arriving worker is blocked with "no available work").

Processes: the runner records every router it starts (pid, command line and start time) in the job
directory (OWNED_FILE); `clean_owned` kills only those, and only while /proc still shows the same command
line and start time (a pid the kernel has since given to another program is left alone).
"""
import builtins
import contextlib
import fcntl
import importlib.metadata
import json
import logging
import os
import shutil
import signal
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

MEPHISTO_VERSION = "1.1.1"
OWNED_FILE = "owned-processes.json"
LOCK_FILE = "empeval-runner.lock"
ROUTER_HOST_ENV = "EMPEVAL_ROUTER_HOST"
METRICS_PORT = 3031  # fixed in Mephisto 1.1.1

log = logging.getLogger("empeval.mephisto_compat")
_MISSING = object()


def require_mephisto_version() -> str:
    """Refuse to run on another Mephisto than the one these workarounds were measured on."""
    try:
        found = importlib.metadata.version("mephisto")
    except importlib.metadata.PackageNotFoundError:
        raise RuntimeError(f"Mephisto is not installed for {sys.executable}: run `make crowd` to build the crowd "
                           f"virtualenv (.venv-crowd, Mephisto {MEPHISTO_VERSION})") from None
    if found != MEPHISTO_VERSION:
        raise RuntimeError(f"the crowd runner is written for Mephisto {MEPHISTO_VERSION} and {sys.executable} has "
                           f"{found}: tasks/crowd/mephisto_compat.py patches {MEPHISTO_VERSION}'s internals. "
                           f"Reinstall with `make crowd`, or port the workarounds and change MEPHISTO_VERSION")
    return found


# ---------------------------------------------------------------- recorded patches

@contextlib.contextmanager
def _replaced(owner: Any, name: str, replacement: Any) -> Iterator[Any]:
    """Set owner.name to `replacement`; on exit, put back what was there (or remove it if nothing was)."""
    original = owner.__dict__.get(name, _MISSING) if isinstance(owner, type) else getattr(owner, name, _MISSING)
    setattr(owner, name, replacement)
    try:
        yield original
    finally:
        if original is _MISSING:
            delattr(owner, name)
        else:
            setattr(owner, name, original)


@contextlib.contextmanager
def _environment(**values: str | None) -> Iterator[None]:
    """Set (or, for None, unset) environment variables; on exit, restore each one as it was."""
    before = {key: os.environ.get(key) for key in values}
    for key, value in values.items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value
    try:
        yield
    finally:
        for key, value in before.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


@contextlib.contextmanager
def home_in_job(job_dir: Path) -> Iterator[Path]:
    """HOME points into the job directory, whose .mephisto/config.yml names the job's Mephisto data
    directory (yielded): Mephisto reads that file at import and asks on stdin when it lacks one. The AWS
    credentials and config files stay the real home's. Everything is restored on exit."""
    if "mephisto.operations.config_handler" in sys.modules:
        config_file = sys.modules["mephisto.operations.config_handler"].DEFAULT_CONFIG_FILE
        if not config_file.startswith(str(Path(job_dir) / "home") + os.sep):
            raise RuntimeError(f"Mephisto was imported before HOME was moved (it reads {config_file}): enter "
                               f"home_in_job before anything imports mephisto")
    real_home = Path(os.environ.get("HOME") or Path.home())
    datapath = Path(job_dir) / "mephisto"
    home = Path(job_dir) / "home"
    (home / ".mephisto").mkdir(parents=True, exist_ok=True)
    datapath.mkdir(exist_ok=True)
    (home / ".mephisto" / "config.yml").write_text(f"core:\n  main_data_directory: {datapath}\n", encoding="utf-8")
    with _environment(
        HOME=str(home),
        AWS_SHARED_CREDENTIALS_FILE=(os.environ.get("AWS_SHARED_CREDENTIALS_FILE")
                                     or str(real_home / ".aws" / "credentials")),
        AWS_CONFIG_FILE=os.environ.get("AWS_CONFIG_FILE") or str(real_home / ".aws" / "config"),
    ):
        yield datapath


@contextlib.contextmanager
def answering_input(answer: str = "") -> Iterator[list[str]]:
    """builtins.input answers `answer` without reading stdin (the app has asked the researcher already);
    yields the list of prompts asked. The original input is restored on exit."""
    prompts: list[str] = []

    def answered(prompt: str = "") -> str:
        prompts.append(str(prompt))
        log.info("answered %r to: %s", answer, prompt)
        return answer

    with _replaced(builtins, "input", answered):
        yield prompts


@contextlib.contextmanager
def metrics_on_localhost(port: int = METRICS_PORT) -> Iterator[None]:
    """The Operator starts a Prometheus client on 0.0.0.0:3031 (mephisto.utils.metrics); start it on
    127.0.0.1 instead, and only warn when the port is taken."""
    import mephisto.operations.operator as operator_module
    import mephisto.utils.metrics as metrics_module

    def start_metrics_server(args: Any = None) -> None:
        try:
            metrics_module.start_http_server(port, addr="127.0.0.1")
        except OSError as error:
            log.warning("metrics server not started on 127.0.0.1:%s (%s)", port, error)

    with _replaced(operator_module, "start_metrics_server", start_metrics_server):
        yield


# How long the Operator waits for the node router to open its channel: Mephisto gives it 10 s
# (client_io_handler.START_DEATH_TIME) and then abandons the launch. On a loaded 2-core machine the router has
# taken longer (a launch failed so in a full test run, 2026-12-01, and passed alone in 17 s); a router that does
# not come up at all still fails the launch, only later.
CHANNEL_START_SECONDS = 60


@contextlib.contextmanager
def patient_channel_start(seconds: float = CHANNEL_START_SECONDS) -> Iterator[None]:
    """Give the router `seconds` (not Mephisto's 10) to open the channel of a launching run."""
    import mephisto.operations.client_io_handler as client_io_module

    with _replaced(client_io_module, "START_DEATH_TIME", seconds):
        yield


@contextlib.contextmanager
def one_registration_per_request() -> Iterator[None]:
    """A worker's registration packet that arrives again while the first one with its request id is still being
    answered is not registered a second time; the pending answer goes to the channel the repeat came on.

    In 1.1.1 the client resends its registration (same request_id) when its socket reconnects before the answer
    came. ClientIOHandler._register_agent then starts a second WorkerPool.register_worker for it: when only one
    unit is left, one of the two reserves it and the other is answered NO_AVAILABLE_UNITS, and that answer
    (enqueue_agent_details) deletes the request id, so the first crashes with KeyError in
    associate_agent_with_registration and the worker is shown "no available work" with the unit reserved for
    nobody (seen in a full test run, 2026-12-04)."""
    from mephisto.operations.client_io_handler import ClientIOHandler

    register = ClientIOHandler._register_agent

    def register_once(self: Any, packet: Any, channel_id: str) -> None:
        request_id = packet.data["request_id"]
        if request_id in self.request_id_to_channel_id:
            log.warning("registration %s arrived again while it is being answered: answering it once, on the "
                        "channel it came on last", request_id)
            self.request_id_to_channel_id[request_id] = channel_id
            return
        register(self, packet, channel_id)

    with _replaced(ClientIOHandler, "_register_agent", register_once):
        yield


@contextlib.contextmanager
def router_on_host(host: str) -> Iterator[None]:
    """The router copied by `router_source` listens on $EMPEVAL_ROUTER_HOST (set here, restored on exit)."""
    with _environment(**{ROUTER_HOST_ENV: host}):
        yield


def router_source(job_dir: Path) -> Path:
    """Mephisto's node router, installed as Mephisto does it, copied into the job and patched to listen on
    $EMPEVAL_ROUTER_HOST (127.0.0.1 when unset) instead of every interface."""
    from mephisto.abstractions.architects.router.build_router import (
        NODE_SERVER_SOURCE_ROOT,
        install_router_files,
    )

    install_router_files()
    target = Path(job_dir) / "router"
    shutil.rmtree(target, ignore_errors=True)
    shutil.copytree(NODE_SERVER_SOURCE_ROOT, target, symlinks=True)
    server_js = target / "server.js"
    code = server_js.read_text(encoding="utf-8")
    listen = "server.listen(PORT, function () {"
    if listen not in code:
        raise RuntimeError(f"unexpected router source in {NODE_SERVER_SOURCE_ROOT}: cannot bind it to one host")
    server_js.write_text(code.replace(listen, f"server.listen(PORT, process.env.{ROUTER_HOST_ENV} || '127.0.0.1', "
                                              f"function () {{"), encoding="utf-8")
    return target


@contextlib.contextmanager
def recording_router(on_started: Callable[[int, str | None], None]) -> Iterator[None]:
    """LocalArchitect.deploy starts the node router (subprocess.Popen, in its own process group, kept as
    `server_process`) and copies its server dir; call on_started(pid, server dir) the moment deploy returns,
    so the runner can record what it owns. (deploy sleeps a second after starting the router: a runner
    killed within that second leaves a router nobody recorded.)"""
    from mephisto.abstractions.architects.local_architect import LocalArchitect

    deploy = LocalArchitect.deploy

    def deploy_and_record(self: Any) -> str:
        try:
            return deploy(self)
        finally:
            process = getattr(self, "server_process", None)
            running_dir = getattr(self, "running_dir", None)
            if process is not None:
                # deploy copies the router to <tmp>/local_server_<run id>/server: the whole
                # local_server_<run id> directory is this run's.
                on_started(process.pid, os.path.dirname(running_dir) if running_dir else None)

    with _replaced(LocalArchitect, "deploy", deploy_and_record):
        yield


@contextlib.contextmanager
def deploy_behind_public_url(public_url: str) -> Iterator[None]:
    """MTurk must send workers to the public HTTPS URL (a tunnel or proxy to 127.0.0.1:<port>), while the
    runner keeps talking to its router on 127.0.0.1; LocalArchitect.deploy would hand MTurk
    "hostname:port"."""
    from mephisto.abstractions.architects.local_architect import LocalArchitect

    deploy = LocalArchitect.deploy

    def deploy_then_public_url(self: Any) -> str:
        deploy(self)
        return public_url.rstrip("/")

    with _replaced(LocalArchitect, "deploy", deploy_then_public_url):
        yield


def run_loop_until(operator: Any, condition: Callable[[], bool], timeout: float) -> bool:
    """Run the operator's event loop until `condition()` or `timeout` seconds; True when the condition held.

    The public wait of 1.1.1, Operator.wait_for_runs_then_shutdown, only ends when every run is done (and
    polls its shutdown flag every 10 s); the runner must also end on its stop file, a signal or its
    timeout, so it uses the private loop runner that Mephisto's own tests use."""
    return operator._run_loop_until(condition, timeout)



def units_launched(operator: Any, run_id: str, timeout: float) -> bool:
    """Run the operator's loop until the run's units are all launched (or `timeout` seconds); True when they are.

    launch_task_run returns as soon as it has started the launcher's "unit-generator" thread: until that
    thread has launched a unit, a worker who arrives is told NO_AVAILABLE_UNITS and meets Mephisto's blocked
    page (seen on a loaded machine). So the run is called live only once the thread has ended."""
    live_run = operator.get_running_task_runs().get(run_id)
    thread = getattr(getattr(live_run, "task_launcher", None), "units_thread", None)
    if thread is None:
        return True
    return run_loop_until(operator, lambda: not thread.is_alive(), timeout)

# ---------------------------------------------------------------- processes and dirs the runner owns

def process_identity(pid: int) -> dict[str, Any] | None:
    """The command line and start time (clock ticks since boot) of a live process, from /proc; None when
    there is no such process (or only a zombie)."""
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().rstrip(b"\0").split(b"\0")
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat.rsplit(")", 1)[1].split()
    if fields[0] == "Z":
        return None
    return {"cmdline": [part.decode("utf-8", "replace") for part in cmdline], "start_time": int(fields[19])}


def _read_owned(job_dir: Path) -> dict[str, list[Any]]:
    path = Path(job_dir) / OWNED_FILE
    if not path.exists():
        return {"processes": [], "dirs": []}
    try:
        owned = json.loads(path.read_text(encoding="utf-8"))
    except ValueError:
        log.warning("%s is not valid JSON: nothing recorded there is cleaned up", path)
        return {"processes": [], "dirs": []}
    return {"processes": list(owned.get("processes", [])), "dirs": list(owned.get("dirs", []))}


def _write_owned(job_dir: Path, owned: dict[str, list[Any]]) -> None:
    path = Path(job_dir) / OWNED_FILE
    temporary = path.with_name(path.name + ".tmp")
    with open(temporary, "w", encoding="utf-8") as handle:
        json.dump(owned, handle, indent=1)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(temporary, path)


def record_owned(job_dir: Path, *, pid: int | None = None, directory: str | None = None) -> None:
    """Add a process the runner started (with the identity /proc gives it now) and/or a directory it made."""
    owned = _read_owned(job_dir)
    if pid is not None:
        identity = process_identity(pid)
        # Just after exec, /proc can show an empty command line for a moment: wait (briefly) for the real one.
        deadline = time.monotonic() + 2.0
        while identity is not None and identity["cmdline"] in ([], [""]) and time.monotonic() < deadline:
            time.sleep(0.01)
            identity = process_identity(pid)
        if identity is not None:
            owned["processes"].append({"pid": pid, **identity})
    if directory is not None:
        owned["dirs"].append(str(directory))
    _write_owned(job_dir, owned)


def clean_owned(job_dir: Path) -> list[str]:
    """Kill the recorded processes that still run the same command line since the same start time, and
    remove the recorded directories; forget both. Returns what was cleaned."""
    owned = _read_owned(job_dir)
    cleaned = []
    for entry in owned["processes"]:
        identity = process_identity(int(entry["pid"]))
        if identity is None:
            continue
        if identity != {"cmdline": entry.get("cmdline"), "start_time": entry.get("start_time")}:
            log.info("pid %s now belongs to another process (%s): left alone", entry["pid"],
                     " ".join(identity["cmdline"]))
            continue
        try:
            os.kill(int(entry["pid"]), signal.SIGKILL)
            cleaned.append(f"process {entry['pid']} ({' '.join(entry['cmdline'])})")
        except ProcessLookupError:
            pass
    for directory in owned["dirs"]:
        if os.path.isdir(directory):
            shutil.rmtree(directory, ignore_errors=True)
            cleaned.append(directory)
    if owned["processes"] or owned["dirs"]:
        _write_owned(job_dir, {"processes": [], "dirs": []})
    return cleaned


def site_tmp_dir() -> Path:
    """Mephisto's tmp dir inside its site-packages (router builds and local_server_<run> dirs)."""
    from mephisto.utils.dirs import get_mephisto_tmp_dir

    return Path(get_mephisto_tmp_dir())


class VenvBusy(RuntimeError):
    """Another crowd run holds this virtualenv."""


@contextlib.contextmanager
def one_run_per_venv(job_dir: Path, tmp_dir: Path | None = None) -> Iterator[list[str]]:
    """Hold this virtualenv's runner lock (Mephisto 1.1.1 allows one run per virtualenv: a fixed metrics
    port and shared server dirs). The lock file names the job holding it; on taking it, what the previous
    holder recorded is cleaned (it was killed if it still owns anything), and so are server dirs left in
    Mephisto's tmp dir (no run is live, so none is in use). Yields what was cleaned; raises VenvBusy."""
    tmp = Path(tmp_dir) if tmp_dir is not None else site_tmp_dir()
    tmp.mkdir(parents=True, exist_ok=True)
    handle = open(tmp / LOCK_FILE, "a+", encoding="utf-8")
    try:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.seek(0)
            raise VenvBusy(f"another crowd run is live in this virtualenv ({handle.read().strip()}); stop it "
                           f"first (`empeval crowd stop`) or wait for it to end") from None
        handle.seek(0)
        try:
            previous = json.loads(handle.read() or "{}")
        except ValueError:  # the plain-text lock of older runners
            previous = {}
        cleaned = []
        if previous.get("job_dir") and Path(previous["job_dir"]).is_dir():
            cleaned += clean_owned(Path(previous["job_dir"]))
        cleaned += clean_owned(job_dir)
        for server_dir in sorted(tmp.glob("local_server_*")):
            shutil.rmtree(server_dir, ignore_errors=True)
            cleaned.append(str(server_dir))
        handle.seek(0)
        handle.truncate()
        handle.write(json.dumps({"pid": os.getpid(), "job_dir": str(job_dir)}))
        handle.flush()
        yield cleaned
    finally:
        handle.close()
