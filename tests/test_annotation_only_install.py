"""An annotation-only install (no `backend` extra: no torch, sentence-transformers, scikit-learn, sacrebleu)
runs a whole local study: import, gold and control responses, a study, the app's hand-out and submit, the
report; a system that needs the extra says which package to install instead of a traceback."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from empeval.server.annotation.annotators import invite
from empeval.server.backend.registry import BACKEND_EXTRA
from empeval.server.store import make_engine
from tests.rate_one import rate_one_script

pytestmark = pytest.mark.slow  # seconds to minutes: a fresh install, a real server fuzzed; first in the run

REPO = Path(__file__).resolve().parents[1]

# Every import of a backend-extra package fails, as it would where the extra is not installed.
BLOCKER = textwrap.dedent(f"""
    import importlib.abc, sys
    BLOCKED = {set(BACKEND_EXTRA)!r}
    class WithoutBackendExtra(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] in BLOCKED:
                raise ModuleNotFoundError(f"No module named {{name!r}}", name=name)
            return None
    sys.meta_path.insert(0, WithoutBackendExtra())
""")

CLI = BLOCKER + "from empeval.cli import main\nsys.argv[0] = 'empeval'\nmain()\n"

RATE = BLOCKER + rate_one_script(BACKEND_EXTRA)

STUDY = """
name = "lean"
seed = 1
[contexts]
count = 4
[systems]
names = ["gold", "control-generic"]
[design]
ratings_per_response = 1
items_per_assignment = 8
control_rate = 0.0
"""


def _run(script: str, *args: str, cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.run([sys.executable, "-c", script, *args], capture_output=True, text=True, cwd=cwd, env=env,
                          timeout=300)


def test_a_study_runs_without_the_backend_extra(tmp_path):
    url = f"sqlite:///{tmp_path / 'lean.db'}"
    (tmp_path / "lean.toml").write_text(STUDY, encoding="utf-8")
    for command in (["data", "import-sample"], ["generate", "--systems", "gold,control-generic", "--limit", "20"],
                    ["study", "create", "lean.toml"]):
        done = _run(CLI, "--database-url", url, *command, cwd=tmp_path)
        assert done.returncode == 0, (command, done.stderr[-2000:])
    engine = make_engine(url)
    _, token = invite(engine, "rita", "lean")
    engine.dispose()
    rated = _run(RATE, url, token, cwd=tmp_path)
    assert rated.returncode == 0, rated.stderr[-2000:]
    outcome = json.loads(rated.stdout.strip().splitlines()[-1])
    assert outcome["status"] == 200 and outcome["loaded"] == []
    assert outcome["ratings"] == outcome["expected"] > 0


def test_a_system_that_needs_the_extra_names_it(tmp_path):
    url = f"sqlite:///{tmp_path / 'lean.db'}"
    assert _run(CLI, "--database-url", url, "data", "import-sample", cwd=tmp_path).returncode == 0
    done = _run(CLI, "--database-url", url, "generate", "--systems", "retrieval", "--limit", "5", cwd=tmp_path)
    assert done.returncode == 2, done.stderr[-2000:]
    assert "empeval[backend]" in done.stderr and "Traceback" not in done.stderr
