"""No file refers to a file that does not exist: Markdown links in the documents, and repository paths named in the
documents, the source, the tests, the benchmarks and the configuration (`server/annotation/submission.py`,
`tasks/studies/demo.toml`, ...), which go stale when a module moves."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
ROOMS = ("server", "tasks", "analysis", "entry", "training", "tests", "benchmarks", "docs", "mutation")
SKIP_PARTS = {"node_modules", "dist", "build", ".venv", ".crowd-venv", "__pycache__", ".git", "var"}
SUFFIXES = {".py", ".md", ".toml", ".cfg", ".ini", ".jsx", ".js", ".mako", ".yaml", ".txt"}
# A repository path: a room, then path characters, ending in a file name with a suffix (a folder ends in "/").
PATH = re.compile(r"(?<![\w./-])((?:" + "|".join(ROOMS) + r")/[\w./-]*[\w-](?:\.[a-z]{1,5}|/))(?![\w/-])")
LINK = re.compile(r"\[[^\]\n]*\]\(([^)\s#]+)(?:#[^)]*)?\)")
# Paths that name what a run writes, not a file of the repository (created by tests or commands).
MADE_BY_RUNS = re.compile(r"^(tests/fixtures/.*/(expected_tables|new)/|benchmarks/results/|mutation/work/"
                          r"|docs/.*\.json$)")


def text_files() -> list[Path]:
    files = [REPO / name for name in ("README.md", "Makefile", "pyproject.toml", "setup.py") if (REPO / name).exists()]
    for room in ROOMS:
        for path in sorted((REPO / room).rglob("*")):
            if path.is_file() and path.suffix in SUFFIXES and not SKIP_PARTS & set(path.relative_to(REPO).parts):
                files.append(path)
    return files


def dangling(path: Path) -> list[str]:
    """The references in `path` to files that do not exist: '<reference>' for each."""
    text = path.read_text(encoding="utf-8", errors="replace")
    missing = []
    if path.suffix == ".md":
        for target in LINK.findall(text):
            if re.match(r"^[a-z]+:", target):
                continue
            if not (path.parent / target).exists():
                missing.append(target)
    for reference in PATH.findall(text):
        candidate = reference.rstrip(".")
        if MADE_BY_RUNS.match(candidate) or any(mark in candidate for mark in ("NAME", "NNNN", "<", "*")):
            continue
        if not (REPO / candidate).exists():
            missing.append(candidate)
    return sorted(set(missing))


def test_the_reference_finder_sees_a_stale_path_and_a_broken_link(tmp_path):
    page = tmp_path / "page.md"
    gone = "server/annotation/" + "submit.py"  # spelt in two parts, so that this file names no missing file
    page.write_text(f"See `{gone}` and [the guide](nowhere.md); "
                    "`server/annotation/submission.py` and [the design](page.md) exist.", encoding="utf-8")
    assert dangling(page) == ["nowhere.md", gone]


@pytest.mark.parametrize("path", text_files(), ids=lambda p: str(p.relative_to(REPO)))
def test_every_file_named_exists(path):
    assert dangling(path) == [], f"{path.relative_to(REPO)} names files that do not exist"
