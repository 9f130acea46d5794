"""`empeval report STUDY --judge NAME` on an A/B study with a human share, through the commands on a real SQLite
file: raters judge the sampled contexts through the kind's submit path, `empeval judge` compares every context's
pair with a pairwise-http-judge (a local stub endpoint that prefers the longer reply, as the raters do), and the
report gains the model-assisted net preferences (report.md and tables/ab_model_assisted.csv): PPI++ beside the
human-only mean, narrower, covering the study's own net preference over all its contexts; a study without a human
share says why it has none; a judge that compared nothing is refused naming the command to run."""
from __future__ import annotations

import pandas as pd
import pytest
from click.testing import CliRunner

from empeval.cli import cli
from tests.annotation.test_decisions_pairwise_judged import _judge_everything, _study
from tests.backend.test_judge_pairwise_http import server  # noqa: F401 - the stub endpoint fixture
from tests.conftest import sample_store_copy


@pytest.fixture
def store(sqlite_url):
    engine = sample_store_copy(sqlite_url)
    _study(engine, share=0.5, count=24)
    _judge_everything(engine)
    _study(engine, share=None, count=8, name="ab-all", responses=False)
    _judge_everything(engine, "ab-all")
    engine.dispose()
    return sqlite_url


def run(store, *args):
    return CliRunner().invoke(cli, ["--database-url", store, *args])


def judge(store, tmp_path, server, study):  # noqa: F811
    config = tmp_path / "judges.toml"
    config.write_text(f'[systems.gold]\nkind = "gold"\n\n[judges.pairs]\nkind = "pairwise-http-judge"\n'
                      f'base_url = "http://127.0.0.1:{server.server_port}/"\nmodel = "m"\n', encoding="utf-8")
    result = run(store, "judge", study, "--judges", "pairs", "--config", str(config))
    assert result.exit_code == 0, result.output


def test_the_ab_report_gains_model_assisted_net_preferences(store, server, tmp_path):  # noqa: F811
    refused = run(store, "report", "ab-judged", "--judge", "pairs", "--out", str(tmp_path / "none"))
    assert refused.exit_code != 0 and "run `empeval judge ab-judged --judges pairs` first" in refused.output
    judge(store, tmp_path, server, "ab-judged")
    out = tmp_path / "report"
    result = run(store, "report", "ab-judged", "--judge", "pairs", "--out", str(out), "--n-boot", "100")
    assert result.exit_code == 0, result.output
    table = pd.read_csv(out / "tables" / "ab_model_assisted.csv")
    assert list(table["criterion"]) == ["empathy", "fluency", "relevance"]
    assert set(table["n_human"]) == {12} and set(table["n_judge_only"]) == {12}
    assert table["note"].isna().all() and (table["width_ratio"] < 0.85).all()
    assert (table["correlation"] > 0.99).all()  # the raters choose as the stub judge does
    # The study's own net preference (every context's, 24): A is the pair's first system, sys-a.
    truth = sum(((1 + c % 3 > 2) - (1 + c % 3 < 2)) for c in _context_ids(store)) / 24
    assert ((table["ppi_ci_low"] <= truth) & (truth <= table["ppi_ci_high"])).all()
    markdown = (out / "report.md").read_text()
    assert "## Model-assisted net preferences" in markdown
    assert "People judged the pairs of 12 of the study's 24 contexts" in markdown and "**pairs**" in markdown


def test_without_a_human_share_the_report_says_why_it_has_no_model_assisted_numbers(store, server,  # noqa: F811
                                                                                     tmp_path):
    judge(store, tmp_path, server, "ab-all")
    out = tmp_path / "report"
    result = run(store, "report", "ab-all", "--judge", "pairs", "--out", str(out), "--n-boot", "100")
    assert result.exit_code == 0, result.output
    table = pd.read_csv(out / "tables" / "ab_model_assisted.csv")
    assert set(table["note"]) == {"no context only the judge compared (a study with design.human_share has some)"}
    assert table["ppi_diff"].isna().all() and table["human_diff"].notna().all()
    assert "n/a: no context only the judge compared" in (out / "report.md").read_text()


def test_an_actively_sampled_ab_study_is_judged_drawn_rated_and_reported_weighted(store, server,  # noqa: F811
                                                                                  tmp_path):
    """design.sampling = "active" through the commands: two judges of differences compare every pair, `empeval study
    sample` draws (they agree everywhere, so uniformly, and it says why), people judge the drawn contexts only, and
    the report's model-assisted table is the inverse-probability weighted one, its interval covering the study's own
    net preference over all its contexts."""
    from sqlalchemy import select

    from empeval.server.store import make_engine, unit_of_work
    from empeval.server.store.kinds.likert import StudyContext
    from empeval.server.store.kinds.pairwise import AssignmentPair, PairItem
    from empeval.server.store.models import Study

    engine = make_engine(store)
    drawn = _drawn_active_study(store, engine, server, tmp_path)
    assert "study ab-active: drew" in drawn and "(12.0 expected" in drawn
    _judge_everything(engine, "ab-active")
    with unit_of_work(engine) as session:
        sid = session.scalar(select(Study.id).where(Study.name == "ab-active"))
        sampled = dict(session.execute(select(StudyContext.context_id, StudyContext.human_rated)
                                       .where(StudyContext.study_id == sid)).all())
        placed = set(session.scalars(select(PairItem.context_id).where(PairItem.study_id == sid)
                                     .join(AssignmentPair, AssignmentPair.pair_item_id == PairItem.id)))
    engine.dispose()
    assert placed == {c for c, human in sampled.items() if human}
    out = tmp_path / "report"
    result = run(store, "report", "ab-active", "--judge", "pairs", "--out", str(out), "--n-boot", "100")
    assert result.exit_code == 0, result.output
    table = pd.read_csv(out / "tables" / "ab_model_assisted.csv")
    n_drawn = sum(sampled.values())
    assert set(table["n_human"]) == {n_drawn} and set(table["n_judge_only"]) == {24 - n_drawn}
    assert table["note"].isna().all() and table["ppi_diff"].notna().all()
    truth = sum(((1 + c % 3 > 2) - (1 + c % 3 < 2)) for c in sampled) / 24
    assert ((table["ppi_ci_low"] <= truth) & (truth <= table["ppi_ci_high"])).all()
    markdown = " ".join((out / "report.md").read_text().split())
    assert f"People judged the pairs of an active sample, {n_drawn} of the study's 24 contexts (12.0 expected)" \
        in markdown


def _drawn_active_study(store, engine, server, tmp_path) -> str:  # noqa: F811
    """An active A/B study of 24 contexts, every pair compared by two judges of differences and the human sample
    drawn (`empeval study sample`); what the draw printed."""
    from empeval.tasks.study_create import create_study
    from empeval.tasks.study_file import parse_study

    create_study(engine, parse_study({
        "name": "ab-active", "kind": "pairwise", "seed": 3, "contexts": {"split": "test", "count": 24},
        "systems": {"names": ["sys-a", "sys-b"]},
        "design": {"judgments_per_pair": 2, "items_per_assignment": 4, "control_rate": 0.0, "human_share": 0.5,
                   "sampling": "active"}}, "ab-active.toml"))
    config = tmp_path / "judges.toml"
    endpoint = f"http://127.0.0.1:{server.server_port}/"
    config.write_text("".join(f'[judges.{name}]\nkind = "pairwise-http-judge"\nbase_url = "{endpoint}"\nmodel = "m"\n\n'
                              for name in ("pairs", "pairs2")), encoding="utf-8")
    judged = run(store, "judge", "ab-active", "--judges", "pairs,pairs2", "--config", str(config))
    assert judged.exit_code == 0, judged.output
    drawn = run(store, "study", "sample", "ab-active")
    assert drawn.exit_code == 0, drawn.output
    return drawn.output


def test_an_active_ab_study_with_no_judgment_or_one_raters_few_is_reported_with_reasons(store, server,  # noqa: F811
                                                                                         tmp_path):
    """The degenerate active A/B study: drawn, then nobody has judged yet (the report is refused, saying so, and
    writes nothing), then one rater judged one assignment (every row of the weighted table says why it has no
    interval, or has one; no number is NaN without a note)."""
    from empeval.server.annotation.handout import next_assignment_payload
    from empeval.server.store import make_engine
    from tests.annotation.test_decisions_pairwise_judged import _rater, _submit

    engine = make_engine(store)
    try:
        drawn = _drawn_active_study(store, engine, server, tmp_path)
        empty = tmp_path / "empty"
        refused = run(store, "report", "ab-active", "--judge", "pairs", "--out", str(empty), "--n-boot", "100")
        assert refused.exit_code != 0 and "Traceback" not in refused.output, refused.output
        assert "study 'ab-active' has no choices yet: nothing to report" in refused.output, refused.output
        assert not empty.exists() or not any(empty.iterdir())
        rater, _ = _rater(engine, "only-one", "ab-active")
        _submit(engine, rater.id, next_assignment_payload(engine, "ab-active", rater.id), lambda c, left, r: left)
        out = tmp_path / "one"
        result = run(store, "report", "ab-active", "--judge", "pairs", "--out", str(out), "--n-boot", "100")
        assert result.exit_code == 0, result.output
        table = pd.read_csv(out / "tables" / "ab_model_assisted.csv")
        assert len(table) == 3 and set(table["n_human"]) <= {1, 2, 3, 4}
        for row in table.itertuples():
            if row.n_human < 2:
                assert "PPI++ needs at least 2" in row.note and pd.isna(row.ppi_diff)
            else:
                assert pd.notna(row.human_diff) and (pd.notna(row.ppi_diff) or isinstance(row.note, str))
                # A judge given no weight cannot make a few contexts count for many: weighting by the draw's
                # probabilities alone took the drawn contexts not judged yet for judged (a 4x narrower interval
                # and p = 0.05 from 3 contexts); scaled by the share judged, the interval is the human one's.
                assert row.lam > 0 or row.width_ratio > 0.9, row
        drawn_count = int(drawn.split("drew ")[1].split()[0])
        assert f"**Only {table['n_human'].max()} of the {drawn_count} drawn contexts are judged so far**" in " ".join(
            (out / "report.md").read_text().split())
    finally:
        engine.dispose()


def _context_ids(store) -> list[int]:
    from sqlalchemy import select

    from empeval.server.store import make_engine, unit_of_work
    from empeval.server.store.kinds.likert import StudyContext
    from empeval.server.store.models import Study

    engine = make_engine(store)
    with unit_of_work(engine) as session:
        ids = list(session.scalars(select(StudyContext.context_id).join(Study, Study.id == StudyContext.study_id)
                                   .where(Study.name == "ab-judged")))
    engine.dispose()
    return ids
