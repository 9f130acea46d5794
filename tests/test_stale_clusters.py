"""The test PostgreSQL clusters live in memory (/dev/shm) when there is room; one that a killed session left there
holds RAM until the machine restarts, so the next session removes it (tests/conftest.py remove_stale_clusters),
and never a cluster whose server runs or one another session may still be making (initdb's steps leave a
postmaster.pid of a process that has ended). The sessions' temporary folders too (memory_basetemp): a failed
session's folder stays until its process is gone, never one of a session still running."""
from __future__ import annotations

import os
import subprocess
import sys
import time

from tests.conftest import STALE_AFTER_S, memory_basetemp, remove_stale_clusters


def _cluster(folder, name, pid=None, age_s=0.0):
    root = folder / f"empeval-pg-{name}"
    (root / "data").mkdir(parents=True)
    if pid is not None:
        (root / "data" / "postmaster.pid").write_text(f"{pid}\n/some/data\n")
    then = time.time() - age_s
    os.utime(root, (then, then))
    return root


def test_only_the_clusters_whose_server_is_gone_are_removed(tmp_path):
    ended = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True,
                           check=True)
    dead = _cluster(tmp_path, "dead", pid=int(ended.stdout), age_s=STALE_AFTER_S + 60)  # that process has exited
    running = _cluster(tmp_path, "running", pid=os.getpid(), age_s=STALE_AFTER_S + 60)
    starting = _cluster(tmp_path, "starting")  # initdb still at work: no postmaster.pid yet
    # initdb between two bootstrap steps: the postmaster.pid of a step that has ended
    bootstrapping = _cluster(tmp_path, "bootstrapping", pid=int(ended.stdout))
    abandoned = _cluster(tmp_path, "abandoned", age_s=STALE_AFTER_S + 60)
    other = tmp_path / "not-ours"
    other.mkdir()
    assert sorted(remove_stale_clusters(tmp_path)) == sorted([dead, abandoned])
    assert running.is_dir() and starting.is_dir() and bootstrapping.is_dir() and other.is_dir()
    assert not dead.exists() and not abandoned.exists()


def test_a_sessions_memory_folder_is_removed_once_its_process_is_gone_and_never_before(tmp_path):
    ended = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True,
                           check=True)
    root = tmp_path / f"empeval-pytest-{os.getuid()}"
    gone, alive = root / f"session-{ended.stdout.strip()}", root / f"session-{os.getppid()}"
    for folder in (gone / "popen-gw0" / "test_x0", alive / "popen-gw1"):
        folder.mkdir(parents=True)
    (root / "notes.txt").write_text("not a session")
    mine = memory_basetemp(tmp_path)
    assert mine == root / f"session-{os.getpid()}" and not mine.exists()  # pytest makes it
    assert not gone.exists() and alive.is_dir() and (root / "notes.txt").is_file()
