"""`empeval judge` and `empeval plan --judge-correlation`: the real CLI on a real SQLite store. A study is
scored by a judge from the config and a rerun skips what is scored; unknown judges, studies and criteria exit 2
naming what exists; a failing http-judge (a local stub server) reports its failures; the plan prints the
planner's own figures and refuses a correlation outside (-1, 1)."""
from __future__ import annotations

import pytest
from click.testing import CliRunner

from empeval.analysis.stats.power import Components
from empeval.analysis.stats.ppi.planner import human_ratings_needed, label_sd_from_components
from empeval.cli import cli
from empeval.server.backend.judges.scores import judge_scores
from empeval.server.store import make_engine
from tests.backend.test_judge_http import server  # noqa: F401 - the stub endpoint fixture
from tests.backend.test_judge_store import judged_store


@pytest.fixture
def store(tmp_path):
    engine = judged_store(tmp_path / "cli.db")
    engine.dispose()
    return f"sqlite:///{tmp_path / 'cli.db'}"


def run(url, *args):
    return CliRunner().invoke(cli, ["--database-url", url, *args])


def test_judge_scores_every_item_then_a_rerun_skips_them(store):
    first = run(store, "judge", "pilot", "--judges", "length", "--criteria", "empathy,fluency", "--batch-size", "7")
    assert first.exit_code == 0, first.output
    assert "72 scored, 0 failed, 0 already scored, of 72 item-criterion pairs" in first.output
    second = run(store, "judge", "pilot", "--judges", "length")
    assert second.exit_code == 0, second.output
    assert "36 scored, 0 failed, 72 already scored, of 108 item-criterion pairs" in second.output
    engine = make_engine(store)
    table = judge_scores(engine, "pilot", "length")
    engine.dispose()
    assert len(table) == 108 and table["judge_score"].between(1, 5).all()


def test_an_unknown_judge_is_refused_listing_the_configured_ones(store):
    result = run(store, "judge", "pilot", "--judges", "length,oracle")
    assert result.exit_code == 2
    assert "unknown judge(s) oracle; configured judges: length, learned, llm" in " ".join(result.output.split())


def test_a_study_that_does_not_exist_exits_2_naming_it(store):
    result = run(store, "judge", "ghost", "--judges", "length")
    assert result.exit_code == 2 and "no study named 'ghost'" in result.output


def test_an_unknown_criterion_exits_2_listing_the_studys(store):
    result = run(store, "judge", "pilot", "--judges", "length", "--criteria", "kindness")
    assert result.exit_code == 2
    assert "its criteria are empathy, relevance, fluency" in " ".join(result.output.split())


def test_a_learned_judge_without_human_ratings_exits_2_saying_to_collect_them(store):
    result = run(store, "judge", "pilot", "--judges", "learned", "--criteria", "empathy")
    assert result.exit_code == 2 and "has none yet on empathy: collect ratings first" in " ".join(result.output.split())


def test_a_failing_http_judge_reports_its_failures_and_stores_no_score(store, server, tmp_path):  # noqa: F811
    config = tmp_path / "judges.toml"
    config.write_text(f'[systems.gold]\nkind = "gold"\n\n[judges.remote]\nkind = "http-judge"\n'
                      f'base_url = "http://127.0.0.1:{server.server_port}/fail500"\nmodel = "m"\nretries = 0\n'
                      f'timeout = 2\n', encoding="utf-8")
    result = run(store, "judge", "pilot", "--judges", "remote", "--criteria", "empathy", "--config", str(config))
    assert result.exit_code == 0, result.output
    assert "0 scored, 36 failed" in result.output and "HTTP 500" in result.output
    engine = make_engine(store)
    table = judge_scores(engine, "pilot", "remote")
    engine.dispose()
    assert table["judge_score"].isna().all() and table["error"].str.contains("HTTP 500").all()


def test_plan_with_a_judge_prints_the_planners_figures_beside_the_human_only_ones():
    result = CliRunner().invoke(cli, ["plan", "--judge-correlation", "0.7", "--ks", "1,3", "--systems", "3",
                                      "--half-width", "0.12"])
    assert result.exit_code == 0, result.output
    rows = {int(f[0]): f for f in (line.split() for line in result.output.splitlines())
            if len(f) == 7 and f[0].isdigit()}
    assert sorted(rows) == [1, 3]
    for k, fields in rows.items():
        sd = label_sd_from_components(Components(), raters_per_item=k)
        expected = human_ratings_needed(0.7, half_width=0.12, label_sd=sd, raters_per_item=k, n_systems=3).iloc[0]
        assert fields[1] == f"{sd:.3f}"
        assert [int(v) for v in fields[2:6]] == [expected.contexts_human_only, expected.contexts_with_judge,
                                                 expected.ratings_human_only, expected.ratings_with_judge]
        assert int(fields[3]) < int(fields[2])  # a judge of 0.7 needs fewer human-rated contexts


def test_plan_with_a_judge_over_a_bounded_pool_says_when_no_number_of_ratings_will_do():
    result = CliRunner().invoke(cli, ["plan", "--judge-correlation", "0.99", "--judge-contexts", "100", "--ks", "3"])
    assert result.exit_code == 0, result.output
    assert "no number of human ratings reaches half_width=0.1" in " ".join(result.output.split())


@pytest.mark.parametrize("value", ["1", "-1", "1.5", "-2", "nan"])
def test_plan_refuses_a_judge_correlation_outside_minus_one_to_one_naming_the_option(value):
    result = CliRunner().invoke(cli, ["plan", f"--judge-correlation={value}"])
    assert result.exit_code == 2 and "--judge-correlation" in result.output


def test_plan_with_pairwise_and_a_judge_correlation_adds_the_model_assisted_ab_plan(tmp_path):
    """A judge of differences' correlation plans the A/B study's human share (analysis.stats.power
    .net_preference_contexts; tests/analysis/test_net_preference_power.py checks its figures by simulation)."""
    result = CliRunner().invoke(cli, ["plan", "--judge-correlation", "0.7", "--pairwise", "--ks", "3"])
    assert result.exit_code == 0, result.output
    (line,) = [line for line in result.output.splitlines() if line.startswith("  k = 3: human-only")]
    assert line.startswith("  k = 3: human-only 46 contexts, 138 judgments; share 0.5: people judge 35 of 70 contexts")
    assert "share 0.25: people judge 29 of 116 contexts, 87 judgments (37% fewer)" in line
