"""The installed distribution adds one import name, `empeval`: the wheel built from this tree, installed into a fresh
virtualenv (its dependencies read from the project's environment, nothing downloaded), runs a small study end to end
from a folder of the user's, where `import analysis` fails, and a folder of hers named analysis/ (or server/,
tasks/) changes nothing of ours."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import sysconfig
import textwrap
import venv
import zipfile
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # seconds to minutes: a fresh install, a real server fuzzed; first in the run

REPO = Path(__file__).resolve().parents[1]

STUDY = """
name = "wheel"
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

# Rates the study through the app (a test client of the installed package) and prints what was stored.
RATE = textwrap.dedent("""
    import json, sys
    from empeval.wiring import make_app
    from empeval.server.annotation.annotators import invite
    from empeval.server.store import open_store
    url = sys.argv[1]
    _, token = invite(open_store(url), "rita", "wheel")
    client = make_app(url).test_client()
    headers = {"Authorization": f"Bearer {token}"}
    stored = 0
    while (assignment := client.get("/api/annotate/next", headers=headers).get_json()["assignment"]) is not None:
        keys = [c["key"] for c in assignment["criteria"]]
        body = {"submission_id": f"wheel-{assignment['assignment_id']:04d}", "ratings": [
            {"item_id": item["item_id"], "scores": {k: 3 + i % 2 for k in keys}}
            for i, item in enumerate(assignment["items"])]}
        stored += client.post(f"/api/assignments/{assignment['assignment_id']}/submit", json=body,
                              headers=headers).get_json()["ratings"]
    import empeval
    print(json.dumps({"stored": stored, "package": empeval.__file__}))
""")


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> Path:
    """A fresh virtualenv with the wheel built from this tree installed; the project environment's site-packages
    on its path (a .pth file) for the dependencies only: .pth files are not processed there, so the editable
    install's link tree is not."""
    work = tmp_path_factory.mktemp("wheel")
    built = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--quiet",
                            "--wheel-dir", str(work / "dist"), str(REPO)], capture_output=True, text=True, timeout=600)
    assert built.returncode == 0, built.stderr[-3000:]
    (wheel,) = (work / "dist").glob("empeval-*.whl")
    tops = {Path(name).parts[0] for name in zipfile.ZipFile(wheel).namelist()}
    assert {top for top in tops if not top.endswith((".dist-info", ".data"))} == {"empeval"}
    env_dir = work / "venv"
    venv.create(env_dir, with_pip=False)
    python = env_dir / "bin" / "python"
    site = Path(subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                               capture_output=True, text=True, check=True).stdout.strip())
    (site / "project-dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n", encoding="utf-8")
    done = subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install", "--no-deps", "--no-index",
                           "--quiet", str(wheel)], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    return env_dir


def _run(env_dir: Path, *args: str, cwd: Path) -> subprocess.CompletedProcess:
    env = {key: value for key, value in os.environ.items() if key not in ("PYTHONPATH", "VIRTUAL_ENV")}
    return subprocess.run([str(env_dir / "bin" / args[0]), *args[1:]], capture_output=True, text=True, cwd=cwd,
                          env=env, timeout=600)


def test_the_wheel_adds_only_empeval_and_runs_a_study(installed, tmp_path):
    names = _run(installed, "python", "-c", "import importlib.util as u; print([n for n in ('empeval', 'analysis', "
                 "'server', 'tasks', 'entry', 'training') if u.find_spec(n)])", cwd=tmp_path)
    assert names.stdout.strip() == "['empeval']", names.stderr
    url = f"sqlite:///{tmp_path / 'wheel.db'}"
    (tmp_path / "wheel.toml").write_text(STUDY, encoding="utf-8")
    for command in (["data", "import-sample"], ["generate", "--systems", "gold,control-generic", "--limit", "20"],
                    ["study", "create", "wheel.toml"]):
        done = _run(installed, "empeval", "--database-url", url, *command, cwd=tmp_path)
        assert done.returncode == 0, (command, done.stderr[-2000:])
    rated = _run(installed, "python", "-c", RATE, url, cwd=tmp_path)
    assert rated.returncode == 0, rated.stderr[-2000:]
    outcome = json.loads(rated.stdout.strip().splitlines()[-1])
    # 4 contexts x 2 systems in 2 assignments of 4 items; a rater sees each context once: one of them, 4 x 3 ratings
    assert outcome["stored"] == 4 * 3 and "site-packages" in outcome["package"]
    report = _run(installed, "empeval", "--database-url", url, "report", "wheel", "--out", "report", cwd=tmp_path)
    assert report.returncode == 0, report.stderr[-2000:]
    assert (tmp_path / "report" / "report.html").is_file()


def test_a_users_own_analysis_folder_changes_nothing_of_ours(installed, tmp_path):
    for folder in ("analysis", "server", "tasks"):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "__init__.py").write_text("MINE = True\n", encoding="utf-8")
    probe = ("import analysis, empeval.analysis as ours\n"
             "from empeval.analysis import read_export, rater_quality\n"
             "import empeval.server.store, empeval.tasks.study_file\n"
             "print(analysis.MINE, ours.__file__, read_export.__module__)")
    done = _run(installed, "python", "-c", probe, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    mine, ours, reader = done.stdout.split()
    assert mine == "True" and "site-packages" in ours and reader == "empeval.analysis.kinds.likert.load"
    (tmp_path / "elsewhere").mkdir()
    alone = _run(installed, "python", "-c", "import analysis", cwd=tmp_path / "elsewhere")
    assert alone.returncode != 0 and "No module named 'analysis'" in alone.stderr
