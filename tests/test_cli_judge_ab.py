"""`empeval judge` on an A/B study with a human share, on a real SQLite file: a pairwise-http-judge (a local stub
endpoint) compares exactly the pairs the design compares, on every context of the study (people's sample and the
judge-only contexts alike), none of the pairs the design leaves out and no control; judge_pair_scores reads them
back; a judge that scores responses one at a time is refused before any work, saying what to use, and so is the learned
difference judge before people have made choices to learn from (tests/annotation/test_decisions_pairwise_judged.py
runs it on a judged study)."""
from __future__ import annotations

import pytest
from click.testing import CliRunner
from sqlalchemy import select

from empeval.cli import cli
from empeval.server.backend.judges.pair_scores import judge_pair_scores
from empeval.server.store import make_engine, unit_of_work
from empeval.server.store.kinds.likert import StudyContext
from empeval.server.store.model_assisted_tables import JudgePairScore
from empeval.server.store.models import JudgeScore
from empeval.tasks.study_create import create_study
from empeval.tasks.study_file import parse_study
from tests.annotation.conftest import CONTROLS, SYSTEMS, add_responses
from tests.backend.test_judge_pairwise_http import server  # noqa: F401 - the stub endpoint fixture
from tests.conftest import sample_store_copy


def ab_study(share=0.5, count=8):
    return parse_study({
        "name": "ab", "kind": "pairwise", "seed": 3, "contexts": {"split": "test", "count": count},
        "systems": {"names": SYSTEMS, "anchor": SYSTEMS[0], "controls": CONTROLS[:1]},
        "design": {"judgments_per_pair": 2, "items_per_assignment": 5, "control_rate": 0.2, "human_share": share}})


@pytest.fixture
def store(sqlite_url):
    engine = sample_store_copy(sqlite_url)
    add_responses(engine, SYSTEMS + CONTROLS[:1], 20,
                  text=lambda system, cid: f"{system} says" + " more" * (cid % 3 + (system == 'sys-a')))
    create_study(engine, ab_study())
    engine.dispose()
    return sqlite_url


def config(tmp_path, server):  # noqa: F811
    path = tmp_path / "judges.toml"
    path.write_text(f'[systems.gold]\nkind = "gold"\n\n[judges.pairs]\nkind = "pairwise-http-judge"\n'
                    f'base_url = "http://127.0.0.1:{server.server_port}/"\nmodel = "m"\n\n'
                    '[judges.length]\nkind = "length-judge"\n\n'
                    '[judges.learned]\nkind = "learned-difference-judge"\n', encoding="utf-8")
    return path


def judge(store, path, *names):
    return CliRunner().invoke(cli, ["--database-url", store, "judge", "ab", "--judges", ",".join(names),
                                    "--criteria", "empathy", "--config", str(path)])


def test_a_judge_of_differences_compares_the_designs_pairs_on_every_context(store, server, tmp_path):  # noqa: F811
    result = judge(store, config(tmp_path, server), "pairs")
    assert result.exit_code == 0, result.output
    # 8 contexts x 2 pairs (the anchor sys-a against sys-b and sys-c), judged or not by people; not sys-b|sys-c.
    assert "16 pairs compared, 0 failed, 0 already compared, of 16 pair-criterion combinations" in result.output
    assert len(server.calls) == 32  # both orders
    engine = make_engine(store)
    table = judge_pair_scores(engine, "ab", "pairs")
    with unit_of_work(engine) as session:
        contexts = dict(session.execute(select(StudyContext.context_id, StudyContext.human_rated)).all())
    engine.dispose()
    assert {frozenset(p) for p in zip(table["system_a"], table["system_b"], strict=True)} == {
        frozenset({"sys-a", "sys-b"}), frozenset({"sys-a", "sys-c"})}
    assert set(table["context_id"]) == set(contexts) and sum(contexts.values()) == 4
    # The stub prefers the longer response by one step: sys-a's is longer on every context.
    oriented = [diff if a == "sys-a" else -diff for a, diff in zip(table["system_a"], table["judge_diff"], strict=True)]
    assert set(oriented) == {1.0}


@pytest.mark.parametrize(("name", "words"), [
    ("length", "scores responses one at a time, has nothing to predict: use a judge of differences "
               "(pairwise-http-judge or learned-difference-judge)"),
    ("learned", "learns from the study's own human choices, and study 'ab' has none yet on empathy: collect choices "
                "first"),
])
def test_judges_that_cannot_predict_the_choices_yet_are_refused_and_store_nothing(store, server, tmp_path,  # noqa: F811
                                                                                  name, words):
    result = judge(store, config(tmp_path, server), name)
    assert result.exit_code != 0 and words in result.output, result.output
    engine = make_engine(store)
    with unit_of_work(engine) as session:
        assert session.scalars(select(JudgeScore)).all() == [] and session.scalars(select(JudgePairScore)).all() == []
    engine.dispose()
