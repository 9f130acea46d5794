"""A reduced `make demo`, end to end: sample import, backend responses, a Likert study and its linked A/B study,
two simulated crowds through the real HTTP API, and both reports."""
from __future__ import annotations

import pandas as pd
import pytest
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from empeval.demo import run_demo
from empeval.server.store import make_engine
from empeval.server.store.models import Annotator, Assignment, Choice, PairItem, Rating, Response, Study, StudyItem


@pytest.mark.slow
def test_reduced_demo_runs_end_to_end_and_its_report_ranks_gold_first(tmp_path, embedding_cache_dir):
    result = run_demo(tmp_path / "demo", contexts=12, raters=36, bad_raters=3, cache_dir=embedding_cache_dir,
                      echo=lambda *_: None)
    engine = make_engine(f"sqlite:///{result.database}")
    with Session(engine) as s:
        stored = s.scalar(select(func.count(Rating.id)))
        open_try_it = s.scalar(select(func.count(Assignment.id)).where(Assignment.status == "open"))
    assert result.ratings == stored > 0
    assert open_try_it > 0  # the try-it-yourself study is left for the person running the demo
    means = pd.read_csv(result.report["table_system_means"])
    for criterion in ("empathy", "relevance"):
        by_system = means[means["criterion"] == criterion].set_index("system")["mean"]
        assert set(by_system.index) == {"gold", "retrieval", "moel", "mime", "kemp"}
        assert by_system.idxmax() == "gold"
    markdown = result.report["markdown"].read_text()
    controls = markdown.split("control last there")[1].split("\n\n")[0]
    assert controls.count("| yes |") == 3 and "| NO |" not in controls
    assert result.report["html"].stat().st_size > 50_000
    assert "**demo-ab**, a pairwise (A/B) study" in markdown  # the Likert report names its linked A/B study

    # The A/B study: every assignment judged, on the Likert study's contexts, by other people.
    assert result.ab_study == "demo-ab" and result.ab_report is not None
    with Session(engine) as s:
        choices = s.scalar(select(func.count(Choice.id)))
        statuses = dict(s.execute(select(Assignment.status, func.count()).join(Study)
                                  .where(Study.name == "demo-ab").group_by(Assignment.status)).all())
        ab_contexts = set(s.scalars(select(PairItem.context_id).join(Study).where(Study.name == "demo-ab",
                                                                                  ~PairItem.is_control)))
        likert_contexts = set(s.scalars(select(Response.context_id).join(StudyItem).join(Study)
                                        .where(Study.name == "demo", ~StudyItem.is_control)))
        raters = {name: set(s.scalars(select(Annotator.display_name).join(Assignment).join(Study)
                                      .where(Study.name == name))) for name in ("demo", "demo-ab")}
    assert statuses == {"submitted": result.ab_submissions}
    assert result.choices == choices > 0
    assert ab_contexts == likert_contexts and len(ab_contexts) == 12
    assert raters["demo"] and raters["demo-ab"] and not raters["demo"] & raters["demo-ab"]
    ab = pd.read_csv(result.ab_report["table_ab_table"])
    assert set(ab["system_a"]) == {"moel"} and set(ab["system_b"]) == {"gold", "retrieval", "mime", "kemp"}
    assert ab["judgments"].sum() == 12 * 4 * 3 * 3  # contexts x pairs x judgments per pair x criteria
    gold = ab.loc[(ab["system_b"] == "gold") & (ab["criterion"] == "relevance")].iloc[0]
    assert gold["lose_pct"] > gold["win_pct"] + 20  # gold beats MoEL in A/B as in the Likert means
    beside = pd.read_csv(result.ab_report["table_likert_beside_ab"])
    assert len(beside) == len(ab) and beside["likert_mean_a"].notna().all()
    ab_markdown = result.ab_report["markdown"].read_text()
    assert "Linked Likert study: **demo**" in ab_markdown and result.ab_report["html"].is_file()
    engine.dispose()
