"""`empeval report STUDY` on a study rated by simulated raters through the real API."""
from __future__ import annotations

import pandas as pd
from click.testing import CliRunner

from empeval.analysis.report.latex import escape
from empeval.cli import cli
from empeval.server.annotation.annotators import invite
from empeval.server.web import create_app
from empeval.tasks.simulate import CrowdModel, draw_crowd
from tests.analysis.latex_check import tabular_rows
from tests.annotation.conftest import add_responses, make_study
from tests.browser import live_server
from tests.tasks.crowds import run_study_crowd

SYSTEMS = ["gold", "moel", "control-generic", "control-mismatched", "control-scrambled"]


def test_report_ranks_the_systems_and_names_the_correction(sample_engine, tmp_path):
    add_responses(sample_engine, SYSTEMS, 40)
    make_study(sample_engine, count=20, k=3, per_assignment=6, control_rate=0.17, systems=["gold", "moel"])
    raters = draw_crowd(16, CrowdModel(), seed=2, bad=2)
    invites = {r.name: invite(sample_engine, r.name, "pilot")[1] for r in raters}
    url = sample_engine.url.render_as_string(hide_password=False)
    with live_server(create_app({"DATABASE_URL": url})) as base:
        run_study_crowd(base, invites, raters, sample_engine, "pilot", seed=2, max_workers=4)
    result = CliRunner().invoke(cli, ["--database-url", url, "report", "pilot", "--out", str(tmp_path / "r")])
    assert result.exit_code == 0, result.output
    markdown = (tmp_path / "r" / "report.md").read_text()
    html = (tmp_path / "r" / "report.html").read_text()
    assert "Holm" in markdown and "Gold" in markdown and "MoEL" in markdown  # display names of systems.toml
    assert "B = 2000" in markdown and "B = 200)" not in markdown  # the Likert default number of resamples
    assert "<img" in html and "data:image/png;base64," in html  # self-contained figures
    empty = CliRunner().invoke(cli, ["--database-url", url, "report", "nope"])
    assert empty.exit_code == 2 and "no study named 'nope'" in empty.output

    # The names a paper uses, from a systems config's display_name, and the systems by mean, from the store.
    config = tmp_path / "systems.toml"
    config.write_text('[systems.gold]\nkind = "gold"\ndisplay_name = "Human (gold)"\n'
                      '[systems.moel]\nkind = "replay"\nsource = "moel"\ndisplay_name = "MoEL & co"\n',
                      encoding="utf-8")
    named = CliRunner().invoke(cli, ["--database-url", url, "report", "pilot", "--out", str(tmp_path / "named"),
                                     "--latex", "--order", "mean", "--config", str(config), "--n-boot", "200"])
    assert named.exit_code == 0, named.output
    resampled = (tmp_path / "named" / "report.md").read_text()
    assert "B = 200" in resampled and "B = 2000" not in resampled  # --n-boot reaches every interval it names
    tex = (tmp_path / "named" / "latex" / "main_results.tex").read_text(encoding="utf-8")
    means = pd.read_csv(tmp_path / "named" / "tables" / "system_means.csv")
    by_mean = means.groupby("system")["mean"].mean().sort_values(ascending=False).index.tolist()
    assert sorted(by_mean) == ["Human (gold)", "MoEL & co"]
    _, *rows = tabular_rows(tex)
    assert [row[0] for row in rows] == [escape(name) for name in by_mean]
    assert "moel" not in tex.replace("MoEL", "")  # no system key left beside its display name
    refused = CliRunner().invoke(cli, ["--database-url", url, "report", "pilot", "--order", "best"])
    assert refused.exit_code == 2 and "'best' is not one of 'study', 'mean'" in refused.output
    too_few = CliRunner().invoke(cli, ["--database-url", url, "report", "pilot", "--n-boot", "20"])
    assert too_few.exit_code == 2 and "--n-boot" in too_few.output and "100" in too_few.output
