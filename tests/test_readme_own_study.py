"""The README's "From an empty folder: the whole flow" runs as written (issue 30 #2): its two blocks of commands are
read from README.md between their markers and run by bash in an empty temporary folder, with only the project's
environment on PATH, like a researcher who pastes them. Between the blocks, where people would do the rating, twelve
simulated raters work through the invite links the setup block printed, over HTTP, against the `empeval serve` it
ends with (started in the background on a free port: the one change to the commands, as a second terminal would).
"""
from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import requests

from empeval.server.store import make_engine
from empeval.tasks.kinds import task_kind
from empeval.tasks.simulate import CrowdModel, draw_crowd, run_crowd_over_http

REPO = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent


def readme_block(name: str) -> str:
    """The shell block between `<!-- own-study:NAME -->` and its closing marker."""
    found = re.search(rf"<!-- own-study:{name} -->\n```sh\n(.*?)```\n<!-- /own-study:{name} -->",
                      (REPO / "README.md").read_text(encoding="utf-8"), re.S)
    assert found, f"README.md has no own-study:{name} block"
    return found.group(1)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def bash(script: str, cwd: Path, env: dict) -> subprocess.CompletedProcess:
    done = subprocess.run(["bash", "-c", "set -euo pipefail\n" + script], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=600)
    assert done.returncode == 0, f"exit {done.returncode}\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return done


@pytest.mark.slow
def test_the_readmes_own_study_runs_as_written_in_an_empty_folder(tmp_path):
    env = {"PATH": f"{BIN}:/usr/bin:/bin", "HOME": str(tmp_path / "home"), "LANG": "C.UTF-8",
           "MPLBACKEND": "Agg", "EMPEVAL_N_BOOT": "200", "EMPEVAL_CACHE_DIR": os.environ.get(
               "EMPEVAL_CACHE_DIR", str(Path.home() / ".cache" / "empeval"))}
    setup = readme_block("setup").rstrip("\n").split("\n")
    serve = setup.pop()
    assert serve.split("#")[0].split() == ["empeval", "serve"], "the setup block ends with `empeval serve`"
    done = bash("\n".join(setup) + "\npwd", tmp_path, env)
    folder = Path(done.stdout.strip().splitlines()[-1])
    assert folder.parent == tmp_path and (folder / "empeval.db").is_file()
    tokens = re.findall(r"^ann\d+\t\S+/annotate#(\S+)$", done.stdout, re.M)
    assert len(tokens) == 12, done.stdout

    port = free_port()
    server = subprocess.Popen(["bash", "-c", f"exec {serve.split('#')[0].strip()} --port {port}"], cwd=folder,
                              env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 90
        while True:
            try:
                if requests.get(f"{base}/healthz", timeout=2).status_code == 200:
                    break
            except requests.ConnectionError:
                pass
            if server.poll() is not None or time.monotonic() > deadline:
                server.kill()
                pytest.fail(f"empeval serve did not come up:\n{server.communicate(timeout=10)[0][-3000:]}")
            time.sleep(0.3)
        engine = make_engine(f"sqlite:///{folder / 'empeval.db'}")
        try:
            crowd = draw_crowd(12, CrowdModel(), seed=3, bad=0)
            answer = task_kind("likert").simulated_answers(engine, "pilot", CrowdModel(), 3)
        finally:
            engine.dispose()
        invites = {rater.name: token for rater, token in zip(crowd, tokens, strict=True)}
        # A rater told "nothing for you now" (the rest is held by others or shows contexts she has seen) stops, as a
        # person would, and comes back later: three rounds leave nothing undone.
        for round_ in range(3):
            worked = run_crowd_over_http(base, invites, crowd, answer, counted="ratings", seed=3 + round_)
            assert worked.errors == []

        results = bash(readme_block("results"), folder, env)
        assert re.search(r"^submitted\s+12$", results.stdout, re.M), results.stdout  # every assignment done
        assert len((folder / "pilot.csv").read_text().splitlines()) == 1 + 180  # k x items x criteria + controls
        assert (folder / "reports" / "pilot" / "report.md").is_file()
        notebook = json.loads((folder / "study_walkthrough.ipynb").read_text())
        outputs = [o for cell in notebook["cells"] if cell["cell_type"] == "code" for o in cell["outputs"]]
        assert outputs and not [o for o in outputs if o["output_type"] == "error"]
        printed = "".join("".join(o["text"]) if isinstance(o["text"], list) else o["text"]
                          for o in outputs if "text" in o)
        assert "ratings from pilot.csv" in printed
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(server.pid, signal.SIGTERM)
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, signal.SIGKILL)
            server.wait(timeout=10)
