"""`empeval judge` with a judge of differences from the config: a pairwise-http-judge (a local stub endpoint)
compares every pair of responses to one context, in both orders, into judge_pair_score; a rerun asks nothing it
has compared. Needs the kind in server/backend/registry.py's JUDGE_KINDS."""
from __future__ import annotations

import pytest
from click.testing import CliRunner

from empeval.cli import cli
from empeval.server.backend.judges.pair_scores import judge_pair_scores
from empeval.server.store import make_engine
from tests.backend.test_judge_pairwise_http import server  # noqa: F401 - the stub endpoint fixture
from tests.backend.test_judge_store import judged_store


@pytest.fixture
def store(tmp_path):
    engine = judged_store(tmp_path / "cli.db", contexts=3)
    engine.dispose()
    return f"sqlite:///{tmp_path / 'cli.db'}"


def test_a_pairwise_judge_compares_every_pair_then_a_rerun_skips_them(store, server, tmp_path):  # noqa: F811
    config = tmp_path / "judges.toml"
    config.write_text(f'[systems.gold]\nkind = "gold"\n\n[judges.pairs]\nkind = "pairwise-http-judge"\n'
                      f'base_url = "http://127.0.0.1:{server.server_port}/biased"\nmodel = "m"\n', encoding="utf-8")
    first = CliRunner().invoke(cli, ["--database-url", store, "judge", "pilot", "--judges", "pairs", "--criteria",
                                     "empathy", "--config", str(config)])
    assert first.exit_code == 0, first.output
    assert "9 pairs compared, 0 failed, 0 already compared, of 9 pair-criterion combinations" in first.output
    assert len(server.calls) == 18
    again = CliRunner().invoke(cli, ["--database-url", store, "judge", "pilot", "--judges", "pairs", "--criteria",
                                     "empathy", "--config", str(config)])
    assert again.exit_code == 0 and "0 pairs compared, 0 failed, 9 already compared" in again.output
    assert len(server.calls) == 18
    engine = make_engine(store)
    table = judge_pair_scores(engine, "pilot", "pairs")
    engine.dispose()
    assert len(table) == 9 and set(table["judge_diff"].abs()) == {1.0}
