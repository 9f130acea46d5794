"""`pairwise-http-judge` against a real local HTTP server on 127.0.0.1 answering like an OpenAI-compatible chat
endpoint: each pair is asked in both orders and the two verdicts averaged, so a planted position bias cancels;
malformed and failed answers are stored as errors with both raw answers and asked again on the next run; a re-run
asks nothing already compared; pairs are stored in one order, the score negated when a verdict names them the
other way round; the reader gives the tidy table the analysis takes."""
from __future__ import annotations

import json
import re

import pytest
from sqlalchemy import select

from empeval.server.backend.base import ContextTurn, DialogueContext
from empeval.server.backend.judges.base import JudgedItem, JudgedPair, PairVerdict
from empeval.server.backend.judges.pair_run import judge_study_pairs, store_pair_verdict
from empeval.server.backend.judges.pair_scores import judge_pair_scores, pair_judges
from empeval.server.backend.judges.pairwise_http_judge import PairwiseHttpJudge
from empeval.server.backend.judges.study_items import load_judged_study
from empeval.server.store import unit_of_work
from empeval.server.store.kinds.likert import Scale
from empeval.server.store.model_assisted_tables import JudgePairScore
from empeval.server.store.models import Response, System
from empeval.server.store.study_parts import Criterion
from tests.backend.stub_http import JsonStubHandler, stub_server
from tests.backend.test_judge_store import TEXTS, judged_store

EMPATHY = Criterion("empathy", "Empathy", "Did the response show understanding of the feelings of the person?",
                    "Recognises the speaker's feelings and responds to them with care.")
CONTEXT = DialogueContext(turns=(ContextTurn("speaker", "My dog died yesterday."),), context_id=1)
LONG = JudgedItem(3, CONTEXT, "I am so sorry, losing a dog is losing family. How are you holding up?", "sys-warm")
SHORT = JudgedItem(8, CONTEXT, "ok.", "sys-terse")
SHOWN = re.compile(r'Response (\d):\n"""\n(.*?)\n"""', re.S)


class FakePairJudge(JsonStubHandler):
    """{ROUTE}/chat/completions. The remote model prefers the longer response by one step; on /biased it also
    leans one step towards whichever response it reads first (position bias), on /first-only it always answers
    "Response 1 much better"; /garbled answers words, /fail500 fails; /by-criterion compares on empathy only."""

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        route = self.path.removesuffix("/chat/completions")
        self.server.calls.append((route, body, dict(self.headers)))
        if route == "/fail500":
            return self.send_json(500, {"error": "judge crashed"})
        if route == "/garbled":
            return self.send_json(200, {"choices": [{"message": {"content": "Response 1 is better"}}]})
        if route == "/by-criterion" and "Criterion: Empathy" not in body["messages"][0]["content"]:
            return self.send_json(200, {"choices": [{"message": {"content": "both fine"}}]})
        shown = dict(SHOWN.findall(body["messages"][1]["content"]))
        first, second = len(shown["1"]), len(shown["2"])
        advantage = (first > second) - (first < second) + (1 if route == "/biased" else 0)
        if route == "/first-only":
            advantage = 2
        answer = 3 - max(-2, min(2, advantage))
        self.send_json(200, {"choices": [{"message": {"content": f"Answer: {answer}"}}]})


@pytest.fixture()
def server():
    with stub_server(FakePairJudge) as httpd:
        yield httpd


def pairwise(server, route, **parameters):
    return PairwiseHttpJudge("pairs", {"base_url": f"http://127.0.0.1:{server.server_port}{route}",
                                       "model": "tiny-judge", "timeout": 10.0, "retries": 1, "backoff": 0.01,
                                       **parameters})


def test_each_pair_is_asked_in_both_orders_and_the_verdicts_averaged(server):
    [verdict] = pairwise(server, "/fair").score_pairs([JudgedPair(LONG, SHORT)], EMPATHY, Scale())
    assert verdict.ok and verdict.score == 1.0 and (verdict.response_a_id, verdict.response_b_id) == (3, 8)
    (_, ab, _), (_, ba, _) = server.calls
    assert dict(SHOWN.findall(ab["messages"][1]["content"]))["1"] == LONG.response
    assert dict(SHOWN.findall(ba["messages"][1]["content"]))["1"] == SHORT.response
    assert json.loads(verdict.raw_output) == {"ab": "Answer: 2", "ba": "Answer: 4"}
    prompt = ab["messages"][0]["content"]
    assert EMPATHY.definition in prompt and "Answer with a single whole number from 1 to 5" in prompt
    assert "sys-warm" not in json.dumps(ab) and "sys-terse" not in json.dumps(ba)


def test_a_planted_position_bias_cancels_in_the_swapped_mean(server):
    fair = pairwise(server, "/fair").score_pairs([JudgedPair(LONG, SHORT), JudgedPair(SHORT, LONG)], EMPATHY,
                                                  Scale())
    biased = pairwise(server, "/biased").score_pairs([JudgedPair(LONG, SHORT), JudgedPair(SHORT, LONG)], EMPATHY,
                                                      Scale())
    assert [v.score for v in biased] == [v.score for v in fair] == [1.0, -1.0]
    # One order alone would be biased: A shown first gets the bias's step on top of the true one.
    assert biased[0].details["ab"] == 2 and biased[0].details["ba"] == 0
    assert biased[0].details["position_effect"] == 1.0 and fair[0].details["position_effect"] == 0.0
    # A judge that only ever prefers what it reads first knows nothing: its verdict is a tie.
    [blind] = pairwise(server, "/first-only").score_pairs([JudgedPair(LONG, SHORT)], EMPATHY, Scale())
    assert blind.score == 0.0 and blind.details["position_effect"] == 2.0


def test_points_per_step_scales_the_verdict(server):
    [verdict] = pairwise(server, "/fair", points_per_step=0.5).score_pairs([JudgedPair(LONG, SHORT)], EMPATHY,
                                                                           Scale())
    assert verdict.score == 0.5


@pytest.mark.parametrize(("route", "reason", "calls"), [
    ("/garbled", "AB order: expected a single whole number from 1 to 5 and nothing else", 1),
    ("/fail500", "AB order: ", 2),
])
def test_a_malformed_or_failed_answer_is_an_error_with_the_raw_answer(server, route, reason, calls):
    [verdict] = pairwise(server, route).score_pairs([JudgedPair(LONG, SHORT)], EMPATHY, Scale())
    assert not verdict.ok and verdict.score is None and reason in verdict.error
    assert len(server.calls) == calls
    if route == "/garbled":
        assert json.loads(verdict.raw_output) == {"ab": "Response 1 is better"}


def test_a_bad_points_per_step_is_refused():
    with pytest.raises(ValueError, match="points_per_step must be a positive number"):
        PairwiseHttpJudge("pairs", {"base_url": "http://x", "model": "m", "points_per_step": 0})


def test_a_study_compared_over_http_stores_verdicts_and_failures_and_a_rerun_asks_only_the_failures(server,
                                                                                                      tmp_path):
    engine = judged_store(tmp_path / "pairs.db", contexts=4)
    study = load_judged_study(engine, "pilot", criteria=["empathy", "fluency"])
    judge = pairwise(server, "/by-criterion")
    report = judge_study_pairs(engine, judge, study, batch_size=5)
    assert (report.pairs, report.scored, report.failed) == (24, 12, 12)
    assert len(server.calls) == 12 * 2 + 12  # a failed pair stops at its first order's answer
    with unit_of_work(engine) as session:
        rows = session.scalars(select(JudgePairScore)).all()
        system_of = dict(session.execute(select(Response.id, System.name).join(System)).all())
    assert all(r.response_a_id < r.response_b_id and r.judge_kind == "pairwise-http-judge" for r in rows)
    for row in rows:
        if row.criterion == "empathy":
            a, b = len(TEXTS[system_of[row.response_a_id]]), len(TEXTS[system_of[row.response_b_id]])
            assert row.score == (1.0 if a > b else -1.0) and row.error is None
            assert set(json.loads(row.raw_output)) == {"ab", "ba"}
        else:
            assert row.score is None and "nothing else, got 'both fine'" in row.error and "both fine" in row.raw_output
    again = judge_study_pairs(engine, judge, study)
    assert (again.scored, again.failed, again.skipped, again.retried) == (0, 12, 12, 12)
    assert len(server.calls) == 36 + 12
    with unit_of_work(engine) as session:
        assert len(session.scalars(select(JudgePairScore)).all()) == 24  # failures replaced, not added
    table = judge_pair_scores(engine, "pilot")
    assert pair_judges(engine, "pilot") == ["pairs"] and table.attrs["kind"] == "pairwise-http-judge"
    assert len(table) == 24 and table["judge_diff"].notna().sum() == 12
    warm_terse = table.loc[(table["criterion"] == "empathy")
                           & (table[["system_a", "system_b"]].apply(set, axis=1) == {"sys-warm", "sys-terse"})]
    assert len(warm_terse) == 4
    assert all((d > 0) == (a == "sys-warm") for a, d in zip(warm_terse["system_a"], warm_terse["judge_diff"],
                                                              strict=True))
    engine.dispose()


def test_a_verdict_naming_the_pair_the_other_way_round_is_stored_sorted_and_negated(tmp_path):
    engine = judged_store(tmp_path / "order.db", contexts=1)
    judge = PairwiseHttpJudge("pairs", {"base_url": "http://127.0.0.1:1/v1", "model": "m"})
    with unit_of_work(engine) as session:
        first, second = sorted(session.scalars(select(Response.id)).all())[:2]
        stored: dict = {}
        verdict = PairVerdict(second, first, 1.5, "{}", 1.0, "h")
        assert store_pair_verdict(session, judge, "v1", "empathy", verdict, stored) == "scored"
        assert store_pair_verdict(session, judge, "v1", "empathy", PairVerdict(first, second, -9.0, "{}", 1.0, "h"),
                                  stored) == "skipped"
    with unit_of_work(engine) as session:
        [row] = session.scalars(select(JudgePairScore)).all()
        assert (row.response_a_id, row.response_b_id, row.score) == (first, second, -1.5)
    engine.dispose()
