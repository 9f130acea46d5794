"""Withdrawal and the files written before it (issue 29, finding 8): every export is logged with the raters whose
answers it held, and `annotators forget` names the earlier files that still carry hers, and only those."""
from __future__ import annotations

import pytest

from empeval.server.annotation.annotators import invite
from empeval.server.annotation.study_log import EXPORT, REPORT, study_log
from tests.annotation.researcher_helpers import cli_run, work


@pytest.fixture(autouse=True)
def signing_secret(monkeypatch):
    monkeypatch.setenv("EMPEVAL_SECRET_KEY", "withdraw-releases-tests-" + "k" * 32)


def test_forget_names_the_exports_that_held_her_answers(study_engine, tmp_path):
    engine = study_engine
    alice, _ = invite(engine, "alice", "pilot")
    bob, _ = invite(engine, "bob", "pilot")
    work(engine, bob.id)
    before_her = tmp_path / "before.csv"
    assert cli_run(engine, "export", "pilot", "--out", str(before_her)).exit_code == 0
    work(engine, alice.id)
    with_her = tmp_path / "with-her.csv"
    assert cli_run(engine, "export", "pilot", "--out", str(with_her)).exit_code == 0
    streamed = cli_run(engine, "export", "pilot", "--format", "jsonl")
    assert streamed.exit_code == 0
    report = tmp_path / "report"
    reported = cli_run(engine, "report", "pilot", "--out", str(report))
    assert reported.exit_code == 0, reported.output

    reports = [entry for entry in study_log(engine, "pilot") if entry.event == REPORT]
    assert [entry.detail["where"] for entry in reports] == [str(report.resolve())]
    exports = [entry for entry in study_log(engine, "pilot") if entry.event == EXPORT]
    assert [entry.detail["where"] for entry in exports] == [str(before_her.resolve()), str(with_her.resolve()),
                                                              "standard output"]
    assert exports[0].detail["annotator_ids"] == [bob.id]
    assert sorted(exports[1].detail["annotator_ids"]) == sorted([alice.id, bob.id])

    done = cli_run(engine, "annotators", "forget", "alice", "--study", "pilot")
    assert done.exit_code == 0, done.output
    assert "still in 3 export(s) or report(s) written before" in done.output
    assert str(with_her.resolve()) in done.output and "standard output" in done.output
    assert f"report to {report.resolve()}" in done.output
    assert str(before_her.resolve()) not in done.output
    withdrawal = [entry for entry in study_log(engine, "pilot") if entry.event == "withdrawal"][-1]
    assert len(withdrawal.detail["released_before"]) == 3

    after = tmp_path / "after.csv"
    assert cli_run(engine, "export", "pilot", "--out", str(after)).exit_code == 0
    assert [entry for entry in study_log(engine, "pilot") if entry.event == EXPORT][-1].detail["annotator_ids"] == [
        bob.id]  # her withdrawn work is in no later export
