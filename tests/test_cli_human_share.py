"""End to end on a real SQLite file, through the `empeval` commands: a study file with design.human_share = 0.5 on
the bundled sample; `empeval study create` says how many contexts people rate; `empeval judge --judges length`
scores every item, the unsampled contexts' too; only the sampled contexts are in assignments; a simulated crowd
rates them through the real API, and status, list, export and report work on a study with items nobody is
assigned. A share of 0 exits 2 naming the option and writes nothing."""
from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner
from sqlalchemy import func, select

from empeval.cli import cli
from empeval.server.annotation.annotators import invite
from empeval.server.backend.judges.scores import human_sample, judge_scores
from empeval.server.store import unit_of_work
from empeval.server.store.kinds.likert import AssignmentItem, StudyItem
from empeval.server.store.models import Response, Study
from empeval.server.web import create_app
from empeval.tasks.simulate import CrowdModel, draw_crowd
from tests.annotation.conftest import CONTROLS, add_responses
from tests.browser import live_server
from tests.conftest import sample_store_copy
from tests.tasks.crowds import run_study_crowd


@pytest.fixture
def store(tmp_path) -> Iterator[tuple[str, object]]:
    url = f"sqlite:///{tmp_path / 'judged.db'}"
    engine = sample_store_copy(url)
    add_responses(engine, ["gold", "moel", *CONTROLS], 40)
    yield url, engine
    engine.dispose()


def study_file(tmp_path: Path, share: str) -> Path:
    path = tmp_path / "judged.toml"
    path.write_text(f"""name = "judged"
seed = 4
[contexts]
split = "test"
count = 12
[systems]
names = ["gold", "moel"]
controls = ["control-generic"]
[design]
ratings_per_response = 2
items_per_assignment = 5
control_rate = 0.2
human_share = {share}
""", encoding="utf-8")
    return path


def empeval(url: str, *args: str):
    return CliRunner().invoke(cli, ["--database-url", url, *args])


def test_a_share_of_zero_exits_2_naming_the_option_and_writes_nothing(store, tmp_path):
    url, engine = store
    result = empeval(url, "study", "create", str(study_file(tmp_path, "0")))
    assert result.exit_code == 2
    assert "judged.toml: design.human_share: must be strictly between 0 and 1, got 0" in " ".join(
        result.output.split())
    with unit_of_work(engine) as session:
        assert session.scalar(select(func.count()).select_from(Study)) == 0


@pytest.mark.slow
def test_judges_score_every_context_and_people_rate_the_sample(store, tmp_path):
    url, engine = store
    created = empeval(url, "study", "create", str(study_file(tmp_path, "0.5")))
    assert created.exit_code == 0, created.output
    said = " ".join(created.output.split())
    assert "12 contexts x 2 systems = 24 items, all for the judges" in said
    assert "people rate 6 of the 12 contexts (design.human_share 0.5, seed 4): 12 items" in said
    assert "8 assignments" in said  # 2 rounds x 2 blocks of the 6 sampled contexts x 2 systems
    assert "next: `empeval judge judged --judges NAME`" in said

    judged = empeval(url, "judge", "judged", "--judges", "length")
    assert judged.exit_code == 0, judged.output
    assert "72 scored, 0 failed, 0 already scored, of 72 item-criterion pairs" in judged.output
    scores = judge_scores(engine, "judged", "length")
    sample = human_sample(engine, "judged")
    sampled = set(sample.loc[sample["sampled"], "context_id"])
    assert len(sample) == 12 and len(sampled) == 6
    assert set(scores["context_id"]) == set(sample["context_id"])  # the unsampled contexts are judged too
    assert scores.groupby(["context_id", "criterion"]).size().eq(2).all() and scores["judge_score"].notna().all()
    with unit_of_work(engine) as session:
        assigned = set(session.scalars(select(Response.context_id).join(StudyItem, StudyItem.response_id == Response.id)
                                       .join(AssignmentItem, AssignmentItem.item_id == StudyItem.id)))
    assert assigned == sampled

    raters = draw_crowd(10, CrowdModel(), seed=4)
    invites = {r.name: invite(engine, r.name, "judged")[1] for r in raters}
    with live_server(create_app({"DATABASE_URL": url})) as base:
        run_study_crowd(base, invites, raters, engine, "judged", seed=4, max_workers=2)
    status = empeval(url, "study", "status", "judged")
    assert status.exit_code == 0 and "open" in status.output
    assert [line.split() for line in status.output.splitlines()[1:]][:3] == [["open", "0"], ["assigned", "0"],
                                                                              ["submitted", "8"]]
    listed = empeval(url, "study", "list")
    assert listed.exit_code == 0 and "judged" in listed.output
    out = tmp_path / "judged.csv"
    exported = empeval(url, "export", "judged", "--format", "csv", "--out", str(out))
    assert exported.exit_code == 0, exported.output
    import pandas as pd

    rows = pd.read_csv(out)
    real = rows[~rows["is_control"]]
    assert set(real["context_id"]) == sampled
    assert real.groupby(["context_id", "system", "criterion"]).size().eq(2).all()
    assert len(real) == 6 * 2 * 2 * 3
    report = empeval(url, "report", "judged", "--out", str(tmp_path / "report"))
    assert report.exit_code == 0, report.output
    assert (tmp_path / "report" / "report.md").exists()
    judged_report = empeval(url, "report", "judged", "--judge", "length", "--out", str(tmp_path / "judged_report"))
    assert judged_report.exit_code == 0, judged_report.output
    text = " ".join((tmp_path / "judged_report" / "report.md").read_text().split())
    assert ("By design (human share 0.5, seed 4), people rate a seeded uniform random sample of 6 of the study's 12 "
            "contexts; all 6 have human ratings.") in text
