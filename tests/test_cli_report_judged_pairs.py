"""`empeval report STUDY --judge J` with a judge of differences beside it (the wiring of entry/reporting.py): the
pair judge's verdicts stored by `empeval judge` reach the judged report, which names it, uses its differences for
the paired differences and prints its correlation with the people's differences beside the item judge's."""
from __future__ import annotations

import csv

from click.testing import CliRunner

from empeval.cli import cli
from empeval.server.annotation.annotators import invite
from tests.annotation.researcher_helpers import work
from tests.backend.test_judge_pairwise_http import server  # noqa: F401 - the stub endpoint fixture
from tests.backend.test_judge_store import judged_store


def test_the_judged_report_uses_and_names_the_pair_judge(tmp_path, server):  # noqa: F811
    engine = judged_store(tmp_path / "store.db", contexts=12)
    for index in range(6):  # six raters do one assignment each, through the real hand-out and submit
        rater, _ = invite(engine, f"rater-{index}", "pilot")
        work(engine, rater.id, score=1 + index % 5)
    engine.dispose()
    url = f"sqlite:///{tmp_path / 'store.db'}"
    config = tmp_path / "judges.toml"
    config.write_text(f'[judges.length]\nkind = "length-judge"\n\n[judges.pairs]\nkind = "pairwise-http-judge"\n'
                      f'base_url = "http://127.0.0.1:{server.server_port}"\nmodel = "m"\n', encoding="utf-8")

    def run(*args: str):
        done = CliRunner().invoke(cli, ["--database-url", url, *args])
        assert done.exit_code == 0, done.output
        return done.output

    run("judge", "pilot", "--judges", "length,pairs", "--criteria", "empathy", "--config", str(config))
    out = tmp_path / "report"
    run("report", "pilot", "--judge", "length", "--out", str(out))
    text = (out / "report.md").read_text(encoding="utf-8")
    assert "with the judge of differences pairs's verdicts as the predictor" in text
    assert "differences r, judge of differences" in text
    with open(out / "tables" / "judge_correlations.csv", encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    assert rows, "the correlations table is written"
    assert rows[0]["n_pair_contexts"] == "12" and rows[0]["pair_difference_r"] not in ("", "nan")
