"""Comparing a study's pairs into judge_pair_score (server.backend.judges.pair_run) on both stores: runs at once
store each (pair, criterion, judge, version) once, a failure stored earlier is replaced by the next run's verdict,
and the reader turns the stored order into the table the analysis takes. A scripted judge of differences whose
verdicts the test chooses (no model needed)."""
from __future__ import annotations

import threading
from collections.abc import Sequence

from sqlalchemy import func, select

from empeval.server.backend.judges.base import JudgedPair, PairJudge, PairVerdict
from empeval.server.backend.judges.pair_run import judge_study_pairs
from empeval.server.backend.judges.pair_scores import judge_pair_scores
from empeval.server.backend.judges.study_items import load_judged_study
from empeval.server.store import unit_of_work
from empeval.server.store.kinds.likert import Scale
from empeval.server.store.model_assisted_tables import JudgePairScore
from empeval.server.store.study_parts import Criterion
from tests.backend.test_judge_store import judged_store

WORDS = {"sys-terse": 1, "sys-plain": 6, "sys-warm": 20}


class WordCountJudge(PairJudge):
    """A's words minus B's over ten, or a failure for every pair when `failing`."""

    kind = "word-count-pairs"

    def __init__(self, failing: bool = False):
        super().__init__("words")
        self.failing = failing

    def base_version(self) -> str:
        return "words-v1"

    def score_pairs(self, pairs: Sequence[JudgedPair], criterion: Criterion, scale: Scale) -> list[PairVerdict]:
        return [PairVerdict(p.first.response_id, p.second.response_id, None if self.failing else
                            (len(p.first.response.split()) - len(p.second.response.split())) / 10, "raw", 0.1, "h",
                            error="scripted failure" if self.failing else None) for p in pairs]


def test_runs_at_once_store_each_pair_once_on_both_stores(tmp_path, store_url):
    engine = judged_store(tmp_path / "pairs.db", url=store_url, contexts=6)
    try:
        study = load_judged_study(engine, "pilot", criteria=["empathy", "fluency"])
        reports, errors = [], []

        def run() -> None:
            try:
                reports.append(judge_study_pairs(engine, WordCountJudge(), study, batch_size=2))
            except Exception as error:  # noqa: BLE001 - the test reports it
                errors.append(error)

        threads = [threading.Thread(target=run) for _ in range(3)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=120)
        assert errors == []
        assert sum(r.scored for r in reports) == 36 and all(r.scored + r.skipped == 36 for r in reports)
        with unit_of_work(engine) as session:
            assert session.scalar(select(func.count(JudgePairScore.id))) == 36
    finally:
        engine.dispose()


def test_a_stored_failure_is_asked_again_and_replaced(tmp_path):
    engine = judged_store(tmp_path / "retry.db", contexts=4)
    study = load_judged_study(engine, "pilot", criteria=["empathy"])
    failed = judge_study_pairs(engine, WordCountJudge(failing=True), study)
    assert (failed.scored, failed.failed) == (0, 12)
    table = judge_pair_scores(engine, "pilot")
    assert table["judge_diff"].isna().all() and (table["error"] == "scripted failure").all()
    again = judge_study_pairs(engine, WordCountJudge(), study)
    assert (again.scored, again.failed, again.retried) == (12, 0, 12)
    with unit_of_work(engine) as session:
        assert session.scalar(select(func.count(JudgePairScore.id))) == 12
    table = judge_pair_scores(engine, "pilot", "words")
    assert table["error"].isna().all() and table.attrs["kind"] == "word-count-pairs"
    engine.dispose()
