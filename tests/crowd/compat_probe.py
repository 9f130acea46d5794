"""Runs in the crowd virtualenv: enters one of tasks/crowd/mephisto_compat.py's patches, looks at what it
changed, leaves it, and prints one JSON object saying what was there before, inside and after.

    python compat_probe.py home|input|metrics|router_host|channel|registration|deploy JOB_DIR
"""
from __future__ import annotations

import asyncio
import builtins
import importlib.util
import json
import os
import socket
import sys
import types
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
spec = importlib.util.spec_from_file_location("mephisto_compat", REPO / "tasks" / "crowd" / "mephisto_compat.py")
compat = importlib.util.module_from_spec(spec)
spec.loader.exec_module(compat)

ENVIRONMENT = ("HOME", "AWS_SHARED_CREDENTIALS_FILE", "AWS_CONFIG_FILE", compat.ROUTER_HOST_ENV)


def environment() -> dict:
    return {key: os.environ.get(key) for key in ENVIRONMENT}


def probe_home(job_dir: Path) -> dict:
    before = environment()
    with compat.home_in_job(job_dir) as datapath:
        inside = environment()
        config = (Path(os.environ["HOME"]) / ".mephisto" / "config.yml").read_text()
    return {"before": before, "inside": inside, "after": environment(), "datapath": str(datapath), "config": config}


def probe_input(job_dir: Path) -> dict:
    original = builtins.input
    with compat.answering_input("yes") as prompts:
        replaced = builtins.input is not original
        answer = input("Launch on live MTurk? ")
    return {"replaced": replaced, "answer": answer, "prompts": prompts, "restored": builtins.input is original}


def listening_address(port: int) -> str | None:
    """The local address (hex, as /proc/net/tcp writes it) of the socket listening on `port`."""
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        local, state = line.split()[1], line.split()[3]
        address, local_port = local.split(":")
        if int(local_port, 16) == port and state == "0A":
            return address
    return None


def probe_metrics(job_dir: Path) -> dict:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with compat.home_in_job(job_dir):
        import mephisto.operations.operator as operator_module

        original = operator_module.start_metrics_server
        with compat.metrics_on_localhost(port):
            replaced = operator_module.start_metrics_server is not original
            operator_module.start_metrics_server()
            served = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).status
        restored = operator_module.start_metrics_server is original
    return {"replaced": replaced, "served": served, "address": listening_address(port), "restored": restored}


def probe_router_host(job_dir: Path) -> dict:
    before = environment()
    with compat.router_on_host("127.0.0.1"):
        inside = environment()
    return {"before": before, "inside": inside, "after": environment()}


def probe_channel(job_dir: Path) -> dict:
    import mephisto.operations.client_io_handler as client_io_module

    before = client_io_module.START_DEATH_TIME
    with compat.patient_channel_start():
        inside = client_io_module.START_DEATH_TIME
    return {"before": before, "inside": inside, "after": client_io_module.START_DEATH_TIME}


def probe_registration(job_dir: Path) -> dict:
    """The same registration packet twice (the second on another channel) before it is answered, then another
    request, through 1.1.1's real ClientIOHandler._register_agent with and without the patch; the worker pool
    is a stand-in that records what it was asked to register."""
    from mephisto.data_model.packet import PACKET_TYPE_REGISTER_AGENT, Packet
    from mephisto.operations.client_io_handler import ClientIOHandler

    def registration(request_id: str) -> Packet:
        return Packet(packet_type=PACKET_TYPE_REGISTER_AGENT, subject_id="mephisto",
                      data={"request_id": request_id,
                            "provider_data": {"worker_name": "w1", "agent_registration_id": "w1-reg"}})

    def run_twice() -> dict:
        handler = ClientIOHandler(db=None)
        registered = []

        def register_worker(crowd_data, request_id):
            registered.append(request_id)
            return asyncio.sleep(0)

        pool = types.SimpleNamespace(register_worker=register_worker)
        execute_coro = asyncio.run
        handler._live_run = types.SimpleNamespace(worker_pool=pool,
                                                  loop_wrap=types.SimpleNamespace(execute_coro=execute_coro))
        handler.get_live_run = lambda: handler._live_run
        handler._register_agent(registration("r1"), "channel-a")
        handler._register_agent(registration("r1"), "channel-b")
        handler._register_agent(registration("r2"), "channel-c")
        return {"registered": registered, "answer_to": dict(handler.request_id_to_channel_id)}

    original = ClientIOHandler._register_agent
    unpatched = run_twice()
    with compat.one_registration_per_request():
        replaced = ClientIOHandler._register_agent is not original
        patched = run_twice()
    return {"unpatched": unpatched, "patched": patched, "replaced": replaced,
            "restored": ClientIOHandler._register_agent is original}


def probe_deploy(job_dir: Path) -> dict:
    """Both deploy patches over a stand-in for 1.1.1's deploy (which would start a real router), nested as the
    runner nests them."""
    with compat.home_in_job(job_dir):
        from mephisto.abstractions.architects.local_architect import LocalArchitect

        original = LocalArchitect.deploy

        def stand_in(self):
            self.server_process = types.SimpleNamespace(pid=4242)
            self.running_dir = "/tmp/mephisto-tmp/local_server_7/server"
            return "http://127.0.0.1:3000"

        LocalArchitect.deploy = stand_in
        started = []
        try:
            with compat.recording_router(lambda pid, server_dir: started.append([pid, server_dir])):
                recording = LocalArchitect.deploy
                with compat.deploy_behind_public_url("https://tasks.example.org/"):
                    url = LocalArchitect.deploy(types.SimpleNamespace())
                inner_restored = LocalArchitect.deploy is recording
            outer_restored = LocalArchitect.deploy is stand_in
        finally:
            LocalArchitect.deploy = original
    return {"url": url, "started": started, "inner_restored": inner_restored, "outer_restored": outer_restored,
            "version": compat.require_mephisto_version()}


if __name__ == "__main__":
    probe = globals()[f"probe_{sys.argv[1]}"]
    print(json.dumps(probe(Path(sys.argv[2]))))
