"""The rooms' import contracts (pyproject.toml, import-linter) hold, and a wrong import breaks them."""
from __future__ import annotations

import ast
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")

def _rooms() -> dict[str, str]:
    """Each room's folder -> where it goes in the installed package, as setup.py maps them."""
    tree = ast.parse((REPO / "setup.py").read_text(encoding="utf-8"))
    mapping = next(node.value for node in tree.body if isinstance(node, ast.Assign) and node.targets[0].id == "ROOMS")
    return {folder: package.replace(".", "/") for package, folder in ast.literal_eval(mapping).items()}


ROOMS = _rooms()


def _lint(root: Path) -> subprocess.CompletedProcess:
    return subprocess.run([str(LINT_IMPORTS), "--config", str(root / "pyproject.toml"), "--no-cache"], cwd=root,
                          capture_output=True, text=True, timeout=120, env={**os.environ, "PYTHONPATH": str(root)})


@pytest.fixture
def tree_copy(tmp_path) -> Path:
    """The project's Python sources and contracts, copied as installed (one package, empeval) so that a test can
    break them."""
    for room, installed in ROOMS.items():
        shutil.copytree(REPO / room, tmp_path / installed, dirs_exist_ok=True, ignore=shutil.ignore_patterns(
            "node_modules", "dist", "*.csv", "*.json", "*.png", "__pycache__"))
    shutil.copy(REPO / "pyproject.toml", tmp_path)
    return tmp_path


def test_the_rooms_keep_their_contracts():
    done = _lint(REPO)
    assert done.returncode == 0, done.stdout[-3000:]
    assert "0 broken" in done.stdout


@pytest.mark.parametrize(("module", "wrong_import", "contract"), [
    ("empeval/analysis/stats/agreement.py", "import empeval.server.store.models", "analysis imports nothing of ours"),
    ("empeval/server/annotation/submission.py", "import empeval.server.backend.registry", "server's rooms"),
    ("empeval/server/store/engine.py", "import empeval.server.web.app", "server's rooms"),
    ("empeval/tasks/design.py", "import empeval.wiring", "Rooms, top down"),
    ("empeval/server/web/admin.py", "import empeval.analysis.kinds.likert.report",
     "only these edges lead into analysis"),
    ("empeval/tasks/crowd/runner.py", "import empeval.tasks.crowd.jobs", "runner's modules import nothing of ours"),
])
def test_a_wrong_import_breaks_the_contracts(tree_copy, module, wrong_import, contract):
    path = tree_copy / module
    source = path.read_text(encoding="utf-8")
    marker = "from __future__ import annotations\n"
    patched = source.replace(marker, marker + wrong_import + "  # the wrong import under test\n", 1)
    assert patched != source
    path.write_text(patched, encoding="utf-8")
    done = _lint(tree_copy)
    assert done.returncode != 0
    assert "BROKEN" in done.stdout and contract in done.stdout.replace("\n", " ")
