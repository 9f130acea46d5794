"""Scoring a study with a judge into the judge_score table, and reading it back: resumable runs that retry
failures only, failures stored as errors and never as scores (a schema constraint), one row per (response,
criterion, judge, version), the reader's tidy table. Real SQLite files; the length judge (no model needed)
and a scripted judge whose answers the test chooses."""
from __future__ import annotations

import threading
import uuid
from collections.abc import Sequence

import numpy as np
import pytest
from sqlalchemy import func, select
from sqlalchemy.exc import IntegrityError

from empeval.server.backend.judges.base import Judge, JudgedItem, Verdict
from empeval.server.backend.judges.length_judge import LengthJudge
from empeval.server.backend.judges.run import judge_study
from empeval.server.backend.judges.scores import SCORE_COLUMNS, judge_scores
from empeval.server.backend.judges.study_items import load_judged_study
from empeval.server.errors import BadInput, NotFound
from empeval.server.store import unit_of_work
from empeval.server.store.kinds.likert import Rating, Scale, StudyItem
from empeval.server.store.models import Annotator, Assignment, JudgeScore, Response, Study, System
from empeval.server.store.study_parts import Criterion
from tests.annotation.conftest import add_responses, make_study
from tests.conftest import sample_store_copy

SYSTEMS = ["sys-terse", "sys-warm", "sys-plain"]
TEXTS = {"sys-terse": "ok.",
         "sys-warm": "Oh no, I am so sorry to hear that, it must have been really painful for you and your family.",
         "sys-plain": "That sounds hard. What happened next?"}


def judged_store(path, *, contexts: int = 12, url: str | None = None):
    """A store (SQLite at `path`, or `url`) with the ED sample's test split, three systems whose responses never
    name them, and a Likert study `pilot` over `contexts` contexts (no controls, k = 2)."""
    engine = sample_store_copy(url or f"sqlite:///{path}")
    add_responses(engine, SYSTEMS, 40, text=lambda system, context_id: TEXTS[system])
    make_study(engine, name="pilot", count=contexts, k=2, per_assignment=6, systems=SYSTEMS, controls=[])
    return engine


def add_ratings(engine, study: str, *, contexts: Sequence[int] | None = None, criteria=("empathy",),
                score=lambda system, context_id, rater: 3) -> None:
    """Two raters' ratings of every item of `study` on the given contexts (default: all), as submitted work."""
    with unit_of_work(engine) as session:
        study_id = session.scalar(select(Study.id).where(Study.name == study))
        items = session.execute(select(StudyItem.id, Response.context_id, System.name)
                                .join(Response, Response.id == StudyItem.response_id)
                                .join(System, System.id == Response.system_id)
                                .where(StudyItem.study_id == study_id)).all()
        for rater in range(2):
            annotator = Annotator(provider="local", pseudonym=f"rater-{uuid.uuid4().hex[:8]}")
            session.add(annotator)
            session.flush()
            assignment = Assignment(study_id=study_id, annotator_id=annotator.id, status="submitted",
                                    submission_id=uuid.uuid4().hex)
            session.add(assignment)
            session.flush()
            for item_id, context_id, system in items:
                if contexts is not None and context_id not in contexts:
                    continue
                for criterion in criteria:
                    session.add(Rating(assignment_id=assignment.id, item_id=item_id, annotator_id=annotator.id,
                                       criterion=criterion, score=score(system, context_id, rater),
                                       submission_id=assignment.submission_id))


class ScriptedJudge(Judge):
    """A judge whose verdicts the test scripts: it fails on the response ids in `failing` and records every
    item it was asked about."""

    kind = "scripted"

    def __init__(self, name="scripted", failing=()):
        super().__init__(name, {})
        self.failing = set(failing)
        self.asked: list[tuple[int, str]] = []

    def base_version(self) -> str:
        return "scripted-v1"

    def score_batch(self, items: Sequence[JudgedItem], criterion: Criterion, scale: Scale) -> list[Verdict]:
        verdicts = []
        for item in items:
            self.asked.append((item.response_id, criterion.key))
            if item.response_id in self.failing:
                verdicts.append(Verdict(item.response_id, None, "I cannot say", 1.0, "h", error="no number"))
            else:
                verdicts.append(Verdict(item.response_id, 4.0, "4", 1.0, "h"))
        return verdicts


@pytest.fixture
def engine(tmp_path):
    engine = judged_store(tmp_path / "judge.db")
    yield engine
    engine.dispose()


def test_every_non_control_item_is_scored_once_per_criterion_and_a_rerun_skips_them_all(engine):
    study = load_judged_study(engine, "pilot")
    assert len(study.items) == 12 * 3 and [c.key for c in study.criteria] == ["empathy", "relevance", "fluency"]
    judge = ScriptedJudge()
    first = judge_study(engine, judge, study, batch_size=5)
    assert (first.scored, first.failed, first.skipped, first.items) == (108, 0, 0, 108)
    assert len(set(judge.asked)) == 108 == len(judge.asked)
    again = ScriptedJudge()
    second = judge_study(engine, again, study)
    assert (second.scored, second.failed, second.skipped) == (0, 0, 108) and again.asked == []
    with unit_of_work(engine) as session:
        assert session.scalar(select(func.count(JudgeScore.id))) == 108


def test_a_rerun_retries_the_failures_only_and_replaces_their_rows(engine):
    study = load_judged_study(engine, "pilot", criteria=["empathy"])
    failing = [study.items[0].response_id, study.items[5].response_id]
    first = judge_study(engine, ScriptedJudge(failing=failing), study)
    assert (first.scored, first.failed) == (34, 2) and {e[0] for e in first.errors} == set(failing)
    with unit_of_work(engine) as session:
        failures = session.scalars(select(JudgeScore).where(JudgeScore.score.is_(None))).all()
        assert sorted(f.response_id for f in failures) == sorted(failing)
        assert all(f.error == "no number" and f.raw_output == "I cannot say" for f in failures)
    retry = ScriptedJudge()
    second = judge_study(engine, retry, study)
    assert sorted(r for r, _ in retry.asked) == sorted(failing)
    assert (second.scored, second.failed, second.skipped, second.retried) == (2, 0, 34, 2)
    with unit_of_work(engine) as session:
        assert session.scalar(select(func.count(JudgeScore.id))) == 36
        assert session.scalar(select(func.count(JudgeScore.id)).where(JudgeScore.score.is_(None))) == 0


class InterleavedJudge(ScriptedJudge):
    """Before scoring its first batch it lets another run of the same judge version finish: a second `empeval
    judge` started beside it, which stores every key while this one still holds its plan of what to score."""

    def __init__(self, engine, study, *, other_failing=()):
        super().__init__()
        self.engine, self.study, self.other_failing, self.other = engine, study, other_failing, None

    def score_batch(self, items, criterion, scale):
        if self.other is None:
            self.other = judge_study(self.engine, ScriptedJudge(failing=self.other_failing), self.study)
        return super().score_batch(items, criterion, scale)


def test_a_run_beside_another_keeps_the_others_scores_and_stores_each_key_once(engine):
    study = load_judged_study(engine, "pilot", criteria=["empathy"])
    first = InterleavedJudge(engine, study)
    report = judge_study(engine, first, study, batch_size=5)
    assert (first.other.scored, first.other.skipped) == (36, 0)
    # It still asked its judge (its plan was made before the other run stored), but kept the other's scores.
    assert (report.scored, report.failed, report.skipped) == (0, 0, 36) and len(first.asked) == 36
    with unit_of_work(engine) as session:
        assert session.scalar(select(func.count(JudgeScore.id))) == 36


def test_a_failure_stored_by_a_run_beside_it_is_replaced_by_this_runs_score(engine):
    study = load_judged_study(engine, "pilot", criteria=["empathy"])
    first = InterleavedJudge(engine, study, other_failing={item.response_id for item in study.items})
    report = judge_study(engine, first, study)
    assert (first.other.scored, first.other.failed) == (0, 36)
    assert (report.scored, report.failed, report.skipped) == (36, 0, 0)
    with unit_of_work(engine) as session:
        assert session.scalar(select(func.count(JudgeScore.id))) == 36
        assert session.scalar(select(func.count(JudgeScore.id)).where(JudgeScore.score.is_(None))) == 0


def test_two_runs_at_once_store_each_key_once_on_both_stores(tmp_path, store_url):
    engine = judged_store(tmp_path / "judge.db", url=store_url)
    try:
        study = load_judged_study(engine, "pilot")
        reports, errors = [], []

        def run() -> None:
            try:
                reports.append(judge_study(engine, ScriptedJudge(), study, batch_size=3))
            except Exception as error:  # noqa: BLE001 - the test reports it
                errors.append(error)

        threads = [threading.Thread(target=run) for _ in range(3)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=120)
        assert errors == []
        assert sum(r.scored for r in reports) == 108 and all(r.scored + r.skipped == 108 for r in reports)
        with unit_of_work(engine) as session:
            assert session.scalar(select(func.count(JudgeScore.id))) == 108
    finally:
        engine.dispose()


def test_the_schema_refuses_a_row_with_both_a_score_and_an_error_or_neither(engine):
    study = load_judged_study(engine, "pilot", criteria=["empathy"])
    response_id = study.items[0].response_id
    for score, error in ((4.0, "no number"), (None, None)):
        with pytest.raises(IntegrityError), unit_of_work(engine) as session:
            session.add(JudgeScore(response_id=response_id, criterion="empathy", judge="j", judge_kind="k",
                                   judge_version="v", prompt_hash="h", score=score, error=error))


def test_the_schema_keeps_one_row_per_response_criterion_judge_and_version(engine):
    study = load_judged_study(engine, "pilot", criteria=["empathy"])
    response_id = study.items[0].response_id
    with unit_of_work(engine) as session:
        session.add(JudgeScore(response_id=response_id, criterion="empathy", judge="j", judge_kind="k",
                               judge_version="v", prompt_hash="h", score=3.0))
    with pytest.raises(IntegrityError), unit_of_work(engine) as session:
        session.add(JudgeScore(response_id=response_id, criterion="empathy", judge="j", judge_kind="k",
                               judge_version="v", prompt_hash="h", score=4.0))
    with unit_of_work(engine) as session:  # another version of the same judge is another row
        session.add(JudgeScore(response_id=response_id, criterion="empathy", judge="j", judge_kind="k",
                               judge_version="v2", prompt_hash="h", score=4.0))


def test_length_judge_scores_by_words_clipped_to_the_scale(engine):
    study = load_judged_study(engine, "pilot", criteria=["fluency"])
    items = {item.system: item for item in study.items}
    verdicts = LengthJudge("length", {"words_per_point": 5}).score_batch(
        [items["sys-terse"], items["sys-plain"], items["sys-warm"]], study.criteria[0], Scale())
    assert [v.score for v in verdicts] == [1.2, 2.2, 5.0]  # 1 word, 6 words, 20 words (clipped at 5)
    assert all(v.ok and v.raw_output.endswith("words") for v in verdicts)
    with pytest.raises(ValueError, match="words_per_point"):
        LengthJudge("length", {"words_per_point": 0})


def test_reader_gives_the_tidy_table_with_nan_for_failures_and_the_error(engine):
    study = load_judged_study(engine, "pilot", criteria=["empathy"])
    failing = study.items[1]
    judge_study(engine, ScriptedJudge(failing=[failing.response_id]), study)
    table = judge_scores(engine, "pilot", "scripted")
    assert list(table.columns) == SCORE_COLUMNS and len(table) == 36
    failed = table.loc[table["judge_score"].isna()]
    assert len(failed) == 1 and failed.iloc[0]["error"] == "no number"
    assert (failed.iloc[0]["context_id"], failed.iloc[0]["system"]) == (failing.context.context_id, failing.system)
    assert np.all(table.loc[table["judge_score"].notna(), "judge_score"] == 4.0)
    assert table.loc[table["judge_score"].notna(), "error"].isna().all()


def test_reader_picks_the_latest_version_unless_told_and_refuses_unknown_ones(engine):
    study = load_judged_study(engine, "pilot", criteria=["empathy"])
    judge_study(engine, LengthJudge("length", {"words_per_point": 5}), study)
    newer = LengthJudge("length", {"words_per_point": 2})
    judge_study(engine, newer, study)
    latest = judge_scores(engine, "pilot", "length")
    assert latest["judge_score"].max() == 5.0 and sorted(latest["judge_score"].unique())[:1] == [1.5]
    first_version = LengthJudge("length", {"words_per_point": 5}).version(study)
    older = judge_scores(engine, "pilot", "length", version=first_version)
    assert sorted(older["judge_score"].unique())[:1] == [1.2]
    with pytest.raises(BadInput, match="no score of study 'pilot' at version 'nope'"):
        judge_scores(engine, "pilot", "length", version="nope")
    with pytest.raises(BadInput, match="empeval judge pilot --judges never-ran"):
        judge_scores(engine, "pilot", "never-ran")
    with pytest.raises(NotFound, match="no study named 'ghost'"):
        judge_scores(engine, "ghost", "length")


def test_a_study_whose_criteria_define_the_rubric_differently_gets_another_version(engine):
    study = load_judged_study(engine, "pilot", criteria=["empathy"])
    redefined = type(study)(study.name, study.items, (Criterion("empathy", "Empathy", "Did it care?", "other"),),
                            study.scale, study.human_ratings)
    judge = LengthJudge("length")
    assert judge.version(study) != judge.version(redefined)


def test_the_version_does_not_depend_on_the_criteria_a_run_chose(engine):
    judge = LengthJudge("length")
    one = load_judged_study(engine, "pilot", criteria=["empathy"])
    every = load_judged_study(engine, "pilot")
    assert judge.version(one) == judge.version(every)
    judge_study(engine, judge, one)
    rest = judge_study(engine, judge, every)
    assert (rest.scored, rest.skipped) == (72, 36)


def test_unknown_criteria_and_unknown_studies_are_refused_naming_what_exists(engine):
    with pytest.raises(BadInput, match="no criterion 'kindness'; its criteria are empathy, relevance, fluency"):
        load_judged_study(engine, "pilot", criteria=["kindness"])
    with pytest.raises(NotFound, match="no study named 'ghost'"):
        load_judged_study(engine, "ghost")


def test_human_ratings_of_the_study_are_read_as_the_table_the_analysis_takes(engine):
    add_ratings(engine, "pilot", score=lambda system, context_id, rater: 2 + rater)
    study = load_judged_study(engine, "pilot")
    ratings = study.human_ratings
    assert list(ratings.columns) == ["context_id", "system", "criterion", "annotator", "score"]
    assert len(ratings) == 36 * 2 and set(ratings["score"]) == {2, 3}


def test_a_pairwise_study_is_read_as_its_pairs_and_a_best_worst_one_is_refused(engine):
    from empeval.tasks.study_create import create_study
    from empeval.tasks.study_file import parse_study

    create_study(engine, parse_study({
        "name": "ab", "kind": "pairwise", "seed": 1, "contexts": {"split": "test", "count": 6},
        "systems": {"names": SYSTEMS, "anchor": SYSTEMS[0], "controls": []},
        "design": {"judgments_per_pair": 2, "items_per_assignment": 6, "control_rate": 0.0},
        "pay": {"per_assignment": 0.5, "currency": "USD"}}))
    ab = load_judged_study(engine, "ab")
    assert ab.pairs is not None and len(ab.pairs) == 6 * (len(SYSTEMS) - 1) and ab.human_ratings.empty
    assert {(p.first.system, p.second.system) for p in ab.pairs} <= {(SYSTEMS[0], s) for s in SYSTEMS[1:]} | {
        (s, SYSTEMS[0]) for s in SYSTEMS[1:]}  # the anchor against each other system, never the others together
    assert all(p.first.response_id < p.second.response_id for p in ab.pairs)
    create_study(engine, parse_study({
        "name": "bw", "kind": "best_worst", "seed": 1, "contexts": {"split": "test", "count": 6},
        "systems": {"names": SYSTEMS}, "pay": {"per_assignment": 0.5, "currency": "USD"}}))
    with pytest.raises(BadInput, match="study 'bw' is a best-worst"):
        load_judged_study(engine, "bw")


def test_judges_are_read_from_the_config_and_an_unknown_kind_is_refused_listing_the_kinds(tmp_path):
    from empeval.server.backend.registry import ConfigError, load_judges

    assert [(s.name, s.kind) for s in load_judges(None)] == [
        ("length", "length-judge"), ("learned", "learned-judge"), ("llm", "http-judge")]
    plain = tmp_path / "systems.toml"
    plain.write_text('[systems.gold]\nkind = "gold"\n', encoding="utf-8")
    assert load_judges(plain) == []
    odd = tmp_path / "odd.toml"
    odd.write_text('[judges.oracle]\nkind = "telepathy"\n', encoding="utf-8")
    with pytest.raises(ConfigError, match="judge 'oracle' needs a `kind`, one of http-judge, learned-judge, "
                                          "length-judge"):
        load_judges(odd)


def test_an_interrupted_run_keeps_its_finished_batches_and_the_next_run_resumes_after_them(engine):
    study = load_judged_study(engine, "pilot", criteria=["empathy"])

    class CrashingJudge(ScriptedJudge):
        def score_batch(self, items, criterion, scale):
            if len(self.asked) >= 20:  # the third batch of ten never comes back
                raise KeyboardInterrupt
            return super().score_batch(items, criterion, scale)

    with pytest.raises(KeyboardInterrupt):
        judge_study(engine, CrashingJudge(), study, batch_size=10)
    with unit_of_work(engine) as session:
        assert session.scalar(select(func.count(JudgeScore.id))) == 20
    resumed = ScriptedJudge()
    report = judge_study(engine, resumed, study, batch_size=10)
    assert (report.scored, report.skipped) == (16, 20) and len(resumed.asked) == 16
