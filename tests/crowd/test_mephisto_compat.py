"""tasks/crowd/mephisto_compat.py: each Mephisto workaround puts back exactly what it patched (checked in
the crowd virtualenv, where Mephisto imports), the version is asserted, and cleanup kills only the
processes the runner recorded as its own."""
from __future__ import annotations

import importlib.metadata
import importlib.util
import json
import os
import signal
import subprocess
import sys
import types
from pathlib import Path

import pytest

from tests.conftest import REPO

PROBE = Path(__file__).with_name("compat_probe.py")


def load_compat():
    """The compatibility module by path; its module level is standard library only, so it loads here too."""
    spec = importlib.util.spec_from_file_location("mephisto_compat_under_test",
                                                  REPO / "tasks" / "crowd" / "mephisto_compat.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


compat = load_compat()


@pytest.fixture
def job_dir(tmp_path):
    path = tmp_path / "crowd-runs" / "pilot" / "job-1"
    path.mkdir(parents=True)
    return path


def probe(crowd_python, name: str, job_dir: Path, **env: str | None) -> dict:
    environment = {k: v for k, v in os.environ.items() if k not in ("AWS_SHARED_CREDENTIALS_FILE", "AWS_CONFIG_FILE")}
    environment.update({k: v for k, v in env.items() if v is not None})
    done = subprocess.run([str(crowd_python), str(PROBE), name, str(job_dir)], capture_output=True, text=True,
                          timeout=120, env=environment, stdin=subprocess.DEVNULL)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


# ---------------------------------------------------------------- each patch restores what it patched

def test_the_router_gets_longer_than_ten_seconds_to_open_its_channel_and_mephisto_gets_its_value_back(
        crowd_python, job_dir):
    seen = probe(crowd_python, "channel", job_dir)
    assert seen == {"before": 10, "inside": compat.CHANNEL_START_SECONDS, "after": 10}
    assert compat.CHANNEL_START_SECONDS > 10


def test_a_registration_resent_before_its_answer_is_registered_once_and_answered_on_the_latest_channel(
        crowd_python, job_dir):
    seen = probe(crowd_python, "registration", job_dir)
    # 1.1.1 as it is: the repeat starts a second registration for the same request (the race that answered a
    # worker "no available work" while a unit was reserved for nobody).
    assert seen["unpatched"]["registered"] == ["r1", "r1", "r2"]
    assert seen["patched"]["registered"] == ["r1", "r2"]
    assert seen["patched"]["answer_to"] == {"r1": "channel-b", "r2": "channel-c"}
    assert seen["replaced"] and seen["restored"]


def test_home_moves_into_the_job_while_mephisto_runs_and_comes_back(crowd_python, job_dir, tmp_path):
    home = tmp_path / "home"
    seen = probe(crowd_python, "home", job_dir, HOME=str(home))
    assert seen["inside"]["HOME"] == str(job_dir / "home")
    assert seen["config"] == f"core:\n  main_data_directory: {job_dir / 'mephisto'}\n"
    assert seen["datapath"] == str(job_dir / "mephisto")
    # AWS keeps reading the real home's files while HOME is moved.
    assert seen["inside"]["AWS_SHARED_CREDENTIALS_FILE"] == str(home / ".aws" / "credentials")
    assert seen["inside"]["AWS_CONFIG_FILE"] == str(home / ".aws" / "config")
    assert seen["after"] == seen["before"] == {"HOME": str(home), "AWS_SHARED_CREDENTIALS_FILE": None,
                                               "AWS_CONFIG_FILE": None, "EMPEVAL_ROUTER_HOST": None}


def test_aws_files_chosen_before_the_run_are_kept_and_left_in_place(crowd_python, job_dir, tmp_path):
    credentials = str(tmp_path / "lab-credentials")
    seen = probe(crowd_python, "home", job_dir, HOME=str(tmp_path / "home"), AWS_SHARED_CREDENTIALS_FILE=credentials)
    assert seen["inside"]["AWS_SHARED_CREDENTIALS_FILE"] == seen["after"]["AWS_SHARED_CREDENTIALS_FILE"] == credentials


def test_input_is_answered_without_stdin_and_the_original_input_comes_back(crowd_python, job_dir, tmp_path):
    seen = probe(crowd_python, "input", job_dir, HOME=str(tmp_path / "home"))
    assert seen == {"replaced": True, "answer": "yes", "prompts": ["Launch on live MTurk? "], "restored": True}


def test_the_metrics_server_listens_on_127_0_0_1_only_and_mephistos_starter_comes_back(crowd_python, job_dir, tmp_path):
    seen = probe(crowd_python, "metrics", job_dir, HOME=str(tmp_path / "home"))
    assert seen == {"replaced": True, "served": 200, "address": "0100007F", "restored": True}


def test_the_router_host_variable_is_set_for_the_run_only(crowd_python, job_dir, tmp_path):
    seen = probe(crowd_python, "router_host", job_dir, HOME=str(tmp_path / "home"))
    assert seen["inside"]["EMPEVAL_ROUTER_HOST"] == "127.0.0.1"
    assert seen["after"]["EMPEVAL_ROUTER_HOST"] is seen["before"]["EMPEVAL_ROUTER_HOST"] is None


def test_the_deploy_patches_nest_report_the_router_and_the_public_url_and_unwind_in_order(crowd_python, job_dir,
                                                                                         tmp_path):
    seen = probe(crowd_python, "deploy", job_dir, HOME=str(tmp_path / "home"))
    assert seen["url"] == "https://tasks.example.org"
    assert seen["started"] == [[4242, "/tmp/mephisto-tmp/local_server_7"]]
    assert seen["inner_restored"] and seen["outer_restored"]
    assert seen["version"] == "1.1.1"


def test_another_mephisto_version_is_refused_saying_which_and_what_to_do(monkeypatch):
    monkeypatch.setattr(importlib.metadata, "version", lambda name: "1.4.0")
    with pytest.raises(RuntimeError, match=r"written for Mephisto 1\.1\.1 and .* has 1\.4\.0.*make crowd"):
        compat.require_mephisto_version()


def test_moving_home_after_mephisto_was_imported_is_refused(monkeypatch, job_dir):
    imported = types.ModuleType("mephisto.operations.config_handler")
    imported.DEFAULT_CONFIG_FILE = "/root/.mephisto/config.yml"
    monkeypatch.setitem(sys.modules, "mephisto.operations.config_handler", imported)
    with pytest.raises(RuntimeError, match="Mephisto was imported before HOME was moved"):
        with compat.home_in_job(job_dir):
            pass


# ---------------------------------------------------------------- processes: only what was recorded

@pytest.fixture
def sleepers(tmp_path):
    """Start `sleep` processes whose cwd is a router dir under a stand-in Mephisto tmp dir; kill leftovers."""
    started: list[subprocess.Popen] = []

    def start(run_id: int) -> subprocess.Popen:
        cwd = tmp_path / "site-tmp" / f"local_server_{run_id}" / "server"
        cwd.mkdir(parents=True, exist_ok=True)
        process = subprocess.Popen(["sleep", "300"], cwd=cwd)
        started.append(process)
        return process

    yield start
    for process in started:
        if process.poll() is None:
            process.send_signal(signal.SIGKILL)
            process.wait(timeout=10)


def test_cleanup_kills_the_recorded_router_and_leaves_an_unrecorded_process_in_the_same_tmp_dir(sleepers, job_dir,
                                                                                                tmp_path):
    ours, stranger = sleepers(1), sleepers(2)
    compat.record_owned(job_dir, pid=ours.pid, directory=str(tmp_path / "site-tmp" / "local_server_1"))
    cleaned = compat.clean_owned(job_dir)
    assert ours.wait(timeout=10) == -signal.SIGKILL
    assert stranger.poll() is None and compat.process_identity(stranger.pid) is not None
    assert cleaned == [f"process {ours.pid} (sleep 300)", str(tmp_path / "site-tmp" / "local_server_1")]
    assert not (tmp_path / "site-tmp" / "local_server_1").exists()
    assert compat.clean_owned(job_dir) == []  # forgotten once cleaned


def test_a_recorded_pid_that_now_runs_another_program_is_left_alone(sleepers, job_dir):
    reused = sleepers(3)
    identity = compat.process_identity(reused.pid)
    (job_dir / compat.OWNED_FILE).write_text(json.dumps({"processes": [
        {"pid": reused.pid, "cmdline": ["node", "server.js"], "start_time": identity["start_time"]},
        {"pid": reused.pid, "cmdline": identity["cmdline"], "start_time": identity["start_time"] - 1}], "dirs": []}))
    assert compat.clean_owned(job_dir) == []
    assert reused.poll() is None


def test_taking_the_venv_lock_cleans_what_the_killed_previous_run_recorded_and_nothing_else(sleepers, job_dir,
                                                                                           tmp_path):
    site_tmp = tmp_path / "site-tmp"
    earlier_job = job_dir.parent / "job-0"
    earlier_job.mkdir()
    with compat.one_run_per_venv(earlier_job, site_tmp):
        left_behind = sleepers(1)
        compat.record_owned(earlier_job, pid=left_behind.pid, directory=str(site_tmp / "local_server_1"))
    stranger = sleepers(2)  # someone else's process with its cwd in Mephisto's tmp dir: never ours to kill
    with compat.one_run_per_venv(job_dir, site_tmp) as cleaned:
        assert f"process {left_behind.pid} (sleep 300)" in cleaned
        assert json.loads((site_tmp / compat.LOCK_FILE).read_text()) == {"pid": os.getpid(), "job_dir": str(job_dir)}
    assert left_behind.wait(timeout=10) == -signal.SIGKILL
    assert stranger.poll() is None


def test_a_second_run_in_the_same_virtualenv_is_refused_while_the_first_holds_the_lock(job_dir, tmp_path):
    with compat.one_run_per_venv(job_dir, tmp_path / "site-tmp"):
        with pytest.raises(compat.VenvBusy, match=f"another crowd run is live in this virtualenv .*{job_dir}"):
            with compat.one_run_per_venv(job_dir.parent / "job-2", tmp_path / "site-tmp"):
                pass
