"""Files the CLI writes (exports, plans, ...) through entry/cli/common.py's write_whole: whole or not at all, and the
temporaries a killed writer left beside the target are removed by the next write (issue 29: `.partial` files)."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

from empeval.cli.common import write_whole

DEAD = 2**22 + 1  # above the largest pid Linux hands out (PID_MAX_LIMIT): no process has it


def test_write_whole_removes_a_killed_writers_partial_and_keeps_a_live_ones(tmp_path):
    target = tmp_path / "ratings.csv"
    stale = tmp_path / f".ratings.csv.partial-{DEAD}"
    live = tmp_path / f".ratings.csv.partial-{os.getppid()}"  # a process that runs: it may still be writing
    other = tmp_path / f".other.csv.partial-{DEAD}"  # another target's: not ours to judge
    for path in (stale, live, other):
        path.write_text("half")
    write_whole(target, "a,b\n1,2\n")
    assert target.read_text() == "a,b\n1,2\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([target.name, live.name, other.name])


def test_a_writer_killed_midway_leaves_the_old_file_and_the_next_write_cleans_up(tmp_path):
    target = tmp_path / "export.csv"
    target.write_text("old\n")
    # A writer that dies (kill -9) after its temporary is written and before the rename.
    script = (
        "import os, sys, time\n"
        "from pathlib import Path\n"
        "import empeval.cli.common as common\n"
        "real = os.replace\n"
        "def stall(*args):\n"
        "    print('written', flush=True); time.sleep(60)\n"
        "os.replace = stall\n"
        f"common.write_whole(Path({str(target)!r}), 'new\\n' * 1000)\n"
    )
    writer = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    try:
        assert writer.stdout.readline().strip() == "written"
        writer.send_signal(signal.SIGKILL)
        writer.wait(timeout=30)
    finally:
        if writer.poll() is None:
            writer.kill()
    assert target.read_text() == "old\n"
    left = [p.name for p in tmp_path.iterdir() if p.name.startswith(".export.csv.partial-")]
    assert left == [f".export.csv.partial-{writer.pid}"]
    time.sleep(0.05)
    write_whole(target, "newest\n")
    assert target.read_text() == "newest\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["export.csv"]
