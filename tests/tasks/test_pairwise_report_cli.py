"""`empeval report` on a pairwise (A/B) study judged by simulated raters through the real API, linked to a
Likert study rated the same way: the A/B report's files, its counts against the choices in SQL, the Likert means
beside it, the Likert report's note about the link, and the same report from the exports."""
from __future__ import annotations

from collections import Counter
from pathlib import Path

import pandas as pd
import pytest
from click.testing import CliRunner
from sqlalchemy import select
from sqlalchemy.orm import Session, aliased

from empeval.cli import cli
from empeval.server.annotation.annotators import invite
from empeval.server.store.kinds.pairwise import AssignmentPair, Choice, PairItem
from empeval.server.store.models import Response, System
from empeval.server.web import create_app
from empeval.tasks.simulate import DEFAULT_QUALITY, CrowdModel, draw_crowd
from tests.annotation.conftest import CONTROLS, SYSTEMS, add_responses, make_study
from tests.annotation.pairwise_fixtures import make_ab_study, neutral_text
from tests.browser import live_server
from tests.tasks.crowds import run_study_crowd

# "Ours", in the middle of the sorted names, so that rows oriented by name alone would read otherwise.
ANCHOR, BETTER, WORSE = "sys-b", "sys-a", "sys-c"
AB_SYSTEMS = {"names": SYSTEMS, "anchor": ANCHOR, "controls": CONTROLS}
MODEL = CrowdModel(quality={**DEFAULT_QUALITY, ANCHOR: DEFAULT_QUALITY["moel"], BETTER: DEFAULT_QUALITY["gold"],
                            WORSE: {"empathy": 2.0, "relevance": 2.0, "fluency": 2.5}})


@pytest.fixture
def linked_studies(sample_engine, tmp_path_factory):
    """A Likert study 'pilot' and a pairwise study 'ab' (compare_with = "pilot") on the same 8 contexts, each done
    by its own simulated crowd through the app's HTTP API."""
    add_responses(sample_engine, SYSTEMS + CONTROLS, 30, text=neutral_text)
    make_study(sample_engine, count=8, k=2, per_assignment=5, control_rate=0.2, seed=5)
    make_ab_study(sample_engine, with_responses=False, count=8, k=2, per_assignment=5, seed=5, compare_with="pilot",
                  systems=AB_SYSTEMS)
    likert_raters = draw_crowd(12, MODEL, seed=1, bad=0)
    ab_raters = draw_crowd(16, MODEL, seed=2, bad=0, prefix="sim-ab")
    invites = {r.name: invite(sample_engine, r.name, "pilot")[1] for r in likert_raters}
    invites |= {r.name: invite(sample_engine, r.name, "ab")[1] for r in ab_raters}
    url = sample_engine.url.render_as_string(hide_password=False)
    with live_server(create_app({"DATABASE_URL": url})) as base:
        likert = run_study_crowd(base, invites, likert_raters, sample_engine, "pilot", model=MODEL, seed=4,
                                 max_workers=1)
        ab = run_study_crowd(base, invites, ab_raters, sample_engine, "ab", model=MODEL, seed=4, max_workers=1)
    assert likert.errors == [] and ab.errors == []
    assert ab.answers > 0
    return url, ab


def _report(url: str, *args: str):
    # 100 resamples: these tests are about what the report holds, not how steady its interval ends are
    result = CliRunner().invoke(cli, ["--database-url", url, "report", *args, "--n-boot", "100"])
    assert result.exit_code == 0, result.output
    return result


def _choices_in_sql(engine) -> Counter:
    """(criterion, other system, outcome for the anchor) -> choices, straight from the choice table."""
    response_a, response_b = aliased(Response), aliased(Response)
    system_a, system_b = aliased(System), aliased(System)
    with Session(engine) as session:
        rows = session.execute(
            select(Choice.criterion, Choice.choice, AssignmentPair.shown_left, system_a.name, system_b.name)
            .join(AssignmentPair, (AssignmentPair.assignment_id == Choice.assignment_id)
                  & (AssignmentPair.pair_item_id == Choice.pair_item_id))
            .join(PairItem, PairItem.id == Choice.pair_item_id)
            .join(response_a, response_a.id == PairItem.response_a_id)
            .join(system_a, system_a.id == response_a.system_id)
            .join(response_b, response_b.id == PairItem.response_b_id)
            .join(system_b, system_b.id == response_b.system_id)
            .where(~PairItem.is_control)).all()
    counts: Counter = Counter()
    for criterion, side, shown_left, name_a, name_b in rows:
        left, right = (name_a, name_b) if shown_left == "a" else (name_b, name_a)
        preferred = {"left": left, "right": right}.get(side, "tie")
        other = name_b if name_a == ANCHOR else name_a
        outcome = "tie" if preferred == "tie" else ("win" if preferred == ANCHOR else "loss")
        counts[criterion, other, outcome] += 1
    return counts


def test_pairwise_report_counts_the_choices_in_sql_and_puts_the_linked_likert_means_beside(
        linked_studies, sample_engine, tmp_path):
    url, _ = linked_studies
    printed = _report(url, "ab", "--out", str(tmp_path / "ab")).output
    out = tmp_path / "ab"
    for name in ("report.md", "report.html", "tables/ab_table.csv", "tables/choice_agreement.csv",
                 "tables/position_bias.csv", "tables/control_pairs.csv", "tables/ranking.csv",
                 "tables/likert_beside_ab.csv"):
        assert (out / name).is_file(), name

    ab = pd.read_csv(out / "tables" / "ab_table.csv")
    assert set(ab["system_a"]) == {ANCHOR} and set(ab["system_b"]) == {BETTER, WORSE}  # ours vs each baseline
    sql = _choices_in_sql(sample_engine)
    for row in ab.itertuples(index=False):
        assert (row.wins, row.losses, row.ties) == (sql[row.criterion, row.system_b, "win"],
                                                    sql[row.criterion, row.system_b, "loss"],
                                                    sql[row.criterion, row.system_b, "tie"])
    assert ab["judgments"].sum() == sum(sql.values())
    by_pair = ab.groupby("system_b")[["wins", "losses"]].sum()
    assert by_pair.loc[BETTER, "losses"] > 2 * by_pair.loc[BETTER, "wins"]  # the better system wins A/B
    assert by_pair.loc[WORSE, "wins"] > 2 * by_pair.loc[WORSE, "losses"]

    # The linked Likert study's means beside the A/B table are those of its own report (flagged raters out).
    _report(url, "pilot", "--out", str(tmp_path / "pilot"))
    means = pd.read_csv(tmp_path / "pilot" / "tables" / "system_means.csv").set_index(["criterion", "system"])["mean"]
    beside = pd.read_csv(out / "tables" / "likert_beside_ab.csv")
    for row in beside.itertuples(index=False):
        assert row.likert_mean_a == pytest.approx(means[row.criterion, row.system_a], abs=1e-9)
        assert row.likert_mean_b == pytest.approx(means[row.criterion, row.system_b], abs=1e-9)
    assert beside["same_direction"].all()

    markdown = (out / "report.md").read_text()
    assert "Linked Likert study: **pilot**" in markdown and f"| empathy | {ANCHOR} vs {BETTER} |" in markdown
    assert f"{ANCHOR} vs {WORSE}" in printed and "report:" in printed
    likert_markdown = (tmp_path / "pilot" / "report.md").read_text()
    assert "## Linked pairwise (A/B) studies" in likert_markdown and "**ab**, a pairwise (A/B) study" in likert_markdown
    assert "Linked pairwise (A/B) studies</h2>" in (tmp_path / "pilot" / "report.html").read_text()


def test_pairwise_report_from_the_exports_equals_the_one_from_the_store(linked_studies, tmp_path):
    url, _ = linked_studies
    runner = CliRunner()
    for study, file in (("ab", tmp_path / "ab.csv"), ("pilot", tmp_path / "pilot.jsonl")):
        fmt = file.suffix.lstrip(".")
        exported = runner.invoke(cli, ["--database-url", url, "export", study, "--format", fmt, "--out", str(file)])
        assert exported.exit_code == 0, exported.output
    _report(url, "ab", "--out", str(tmp_path / "store"))
    _report(url, "ab", "--export", str(tmp_path / "ab.csv"), "--likert-export", str(tmp_path / "pilot.jsonl"),
            "--out", str(tmp_path / "file"))
    for name in ("ab_table", "likert_beside_ab", "ranking", "position_bias"):
        pd.testing.assert_frame_equal(pd.read_csv(tmp_path / "file" / "tables" / f"{name}.csv"),
                                      pd.read_csv(tmp_path / "store" / "tables" / f"{name}.csv"))
    misplaced = runner.invoke(cli, ["report", "pilot", "--export", str(tmp_path / "pilot.jsonl"),
                                    "--likert-export", str(tmp_path / "pilot.jsonl"), "--out", str(tmp_path / "x")])
    assert misplaced.exit_code == 2 and "Likert export" in misplaced.output


def test_a_pairwise_study_without_choices_is_refused_by_name(sample_engine, tmp_path):
    add_responses(sample_engine, SYSTEMS + CONTROLS, 30, text=neutral_text)
    make_ab_study(sample_engine, with_responses=False, count=4, k=1, per_assignment=5)
    url = sample_engine.url.render_as_string(hide_password=False)
    result = CliRunner().invoke(cli, ["--database-url", url, "report", "ab", "--out", str(tmp_path / "r")])
    assert result.exit_code == 2 and "study 'ab' has no choices yet" in result.output
    assert not Path(tmp_path / "r" / "report.md").exists()
