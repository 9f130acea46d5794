"""Shared code never branches on a study kind, and no two modules import each other.

Outside the kinds' own modules (a file under a kinds/ folder, or one whose folder or name starts with a registered
kind's name: analysis/simulate/pairwise.py, tasks/kinds/pairwise_design.py, ...), nothing in the rooms or the
benchmarks matches `is_pairwise|\\.pairwise\\b|kind *== *['"]`: shared code asks the kind's part instead. And the
import graph of empeval (every import statement, also those inside functions and under TYPE_CHECKING) has no cycle:
no module reaches itself through its imports.
"""
from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from empeval.server.store.kinds import kind_names

REPO = Path(__file__).resolve().parents[1]
BRANCHING = re.compile(r"is_pairwise|\.pairwise\b|kind *== *['\"]")
SOURCES = (".py", ".js", ".jsx", ".mjs", ".html", ".css", ".toml", ".md")


def is_kinds_own(path: str) -> bool:
    """Whether a file belongs to a study kind (its own modules and registries)."""
    parts = path.split("/")
    if "kinds" in parts[:-1]:
        return True
    return any(part.startswith(kind) for part in parts for kind in kind_names())


def shared_sources() -> list[str]:
    tracked = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "entry", "server", "tasks", "analysis",
                              "training", "benchmarks", "scripts"], cwd=REPO, capture_output=True, text=True,
                             check=True).stdout.split()
    return [name for name in tracked if name.endswith(SOURCES) and "node_modules" not in name
            and "/dist/" not in name and not is_kinds_own(name)]


def test_the_rule_knows_whose_files_are_whose():
    assert is_kinds_own("server/annotation/kinds/likert.py") and is_kinds_own("analysis/kinds/pairwise/tables.py")
    assert is_kinds_own("analysis/simulate/pairwise.py") and is_kinds_own("tasks/webapp/src/kinds/index.js")
    assert not is_kinds_own("server/annotation/handout.py") and not is_kinds_own("analysis/report/sections.py")
    assert len(shared_sources()) > 100


def test_shared_code_never_branches_on_a_kind():
    found = []
    for name in shared_sources():
        for number, line in enumerate((REPO / name).read_text(encoding="utf-8").splitlines(), 1):
            if BRANCHING.search(line):
                found.append(f"{name}:{number}: {line.strip()}")
    assert found == []


def test_the_check_finds_a_branch_when_there_is_one(tmp_path):
    """The pattern matches what it is meant to catch (and the kind's own files are the only ones let through)."""
    for line in ('if config.is_pairwise:', 'setup = config.pairwise', 'if study.kind == "pairwise":',
                 "elif kind=='likert':", "from empeval.analysis.kinds.pairwise import tables"):
        assert BRANCHING.search(line), line
    for line in ("kind = task_kind(config.kind)", "pairwise_design.plan_pairwise(...)", "if rater.behaviour == 'x':"):
        assert not BRANCHING.search(line), line


def test_no_module_imports_itself_through_others():
    """grimp's import graph of the installed package (the link tree the Makefile keeps): for every import edge
    a -> b, no chain leads from b back to a."""
    probe = (
        "import grimp\n"
        "graph = grimp.build_graph('empeval')\n"
        "for a in sorted(graph.modules):\n"
        "    for b in sorted(graph.find_modules_directly_imported_by(a)):\n"
        "        if graph.chain_exists(importer=b, imported=a):\n"
        "            print(a, '->', b, ':', ' -> '.join(graph.find_shortest_chain(importer=b, imported=a)))\n"
        "print('modules', len(graph.modules))\n")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True, cwd="/")
    lines = done.stdout.splitlines()
    assert lines[-1].startswith("modules") and int(lines[-1].split()[1]) > 150
    assert lines[:-1] == []
