"""`empeval report STUDY` on a study rated by simulated raters through the real API."""
from __future__ import annotations

from click.testing import CliRunner

from empeval.cli import cli
from empeval.server.annotation.annotators import invite
from empeval.server.web import create_app
from empeval.tasks.simulate import CrowdModel, draw_crowd
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
    assert "Holm" in markdown and "gold" in markdown and "moel" in markdown
    assert "<img" in html and "data:image/png;base64," in html  # self-contained figures
    empty = CliRunner().invoke(cli, ["--database-url", url, "report", "nope"])
    assert empty.exit_code == 2 and "no study named 'nope'" in empty.output
