"""A report replaces its folder whole or not at all (issue 29, finding 7): its files are written to a new folder
beside it and renamed into place, so a run that fails or is killed halfway leaves the previous report as it was
(or no folder, when there was none) and never a folder holding some of the new files."""
from __future__ import annotations

import os
from pathlib import Path

import pandas as pd
import pytest

from empeval.analysis.kinds import ReportRefused
from empeval.analysis.report import sections
from empeval.analysis.report.document import Paragraph
from empeval.analysis.report.sections import Report, Section, write_report


def _report(text: str) -> Report:
    return Report(f"Human evaluation report: {text}", [
        Section("summary", [Paragraph(text)], tables={"means": pd.DataFrame({"system": ["a"], "mean": [4.0]})},
                figures={"means": b"\x89PNG not really"}),
        Section("agreement", [Paragraph("alpha")], tables={"agreement": pd.DataFrame({"alpha": [0.5]})})])


def _files(folder: Path) -> dict[str, bytes]:
    return {str(path.relative_to(folder)): path.read_bytes() for path in sorted(folder.rglob("*")) if path.is_file()}


def _fail_after_the_tables(monkeypatch) -> None:
    def broken(_document):
        raise RuntimeError("the disk went away while writing report.html")

    monkeypatch.setattr(sections, "to_html", broken)


def test_a_report_that_fails_halfway_leaves_the_previous_report_as_it_was(tmp_path, monkeypatch):
    target = tmp_path / "pilot"
    write_report(_report("first run"), target)
    before = _files(target)
    _fail_after_the_tables(monkeypatch)  # tables, figures and report.md are written by then
    with pytest.raises(RuntimeError, match="disk went away"):
        write_report(_report("second run"), target)
    assert _files(target) == before
    assert sorted(path.name for path in tmp_path.iterdir()) == ["pilot"]  # no half-written folder beside it


def test_a_first_report_that_fails_halfway_leaves_no_folder(tmp_path, monkeypatch):
    _fail_after_the_tables(monkeypatch)
    with pytest.raises(RuntimeError):
        write_report(_report("first run"), tmp_path / "pilot")
    assert list(tmp_path.iterdir()) == []


def test_a_report_replaces_the_previous_one_whole(tmp_path):
    target = tmp_path / "pilot"
    write_report(_report("first run"), target, latex=True)
    (target / "tables" / "from_an_older_version.csv").write_text("x\n1\n")
    paths = write_report(_report("second run"), target, files={"report.json": "{}"})
    assert "second run" in (target / "report.md").read_text()
    assert not (target / "tables" / "from_an_older_version.csv").exists()
    assert set(_files(target)) == {"report.md", "report.html", "report.json", "tables/means.csv",
                                   "tables/agreement.csv", "figures/means.png"}
    assert paths["table_means"] == target / "tables" / "means.csv" and paths["markdown"] == target / "report.md"
    assert sorted(path.name for path in tmp_path.iterdir()) == ["pilot"]


def test_a_folder_holding_other_files_is_refused_before_anything_is_written(tmp_path):
    target = tmp_path / "paper"
    target.mkdir()
    (target / "draft.tex").write_text("my paper")
    with pytest.raises(ReportRefused, match=r"holds files a report does not write \(draft.tex\)"):
        write_report(_report("run"), target)
    assert _files(target) == {"draft.tex": b"my paper"}


def test_the_working_folders_a_killed_run_left_are_removed_by_the_next_run(tmp_path):
    dead = 2**22 + 1  # above the largest pid Linux hands out (PID_MAX_LIMIT): no process has it
    leftovers = [tmp_path / f".pilot.partial-{dead}-0a1b2c3d", tmp_path / f".pilot.replaced-{dead}-4e5f6a7b"]
    alive = tmp_path / f".pilot.partial-{os.getpid()}-0a1b2c3d"  # this process: maybe still writing it
    for folder in (*leftovers, alive):
        folder.mkdir()
        (folder / "report.md").write_text("half")
    write_report(_report("run"), tmp_path / "pilot")
    assert sorted(path.name for path in tmp_path.iterdir()) == sorted([alive.name, "pilot"])
