"""A reduced `make demo`, end to end: sample import, backend responses, a study, a simulated crowd through
the real HTTP API, and the report."""
from __future__ import annotations

import pandas as pd
import pytest
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from entry.demo import run_demo
from server.store import make_engine
from server.store.models import Assignment, Rating


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
    engine.dispose()
