"""design.sampling = "active" (issue 28, item 2), on SQLite and PostgreSQL: the study file's option; a study created
with it has every item for the judges and no assignment; `empeval study sample` refuses (naming what is missing)
until every judge scored every item, and refuses a study that is not actively sampled; the draw writes every
context's probability and human_rated, the drawn contexts' assignments (every system's item k times, controls
included) and a log entry in one transaction; it follows the judges' disagreement; a second run changes nothing;
two draws at once make exactly one; `human_sample` hands the probabilities to the estimates."""
from __future__ import annotations

import math
import threading
from collections import Counter

import pytest
from click.testing import CliRunner
from sqlalchemy import func, select

from empeval.cli import cli
from empeval.sampling import sample_study
from empeval.server.annotation.study_log import study_log
from empeval.server.backend.judges.scores import human_sample
from empeval.server.errors import BadInput
from empeval.server.store import make_engine, unit_of_work
from empeval.server.store.kinds.likert import AssignmentItem, StudyContext, StudyItem
from empeval.server.store.models import Assignment, Context, Dialogue, JudgeScore, Response, Study
from empeval.server.store.study_config import StudyConfig
from empeval.tasks.kind_parts import StudyFileError
from empeval.tasks.kinds.likert_active import ACTIVE_DRAW, draw_poisson
from empeval.tasks.study_create import create_study
from empeval.tasks.study_file import parse_study
from tests.annotation.conftest import CONTROLS, SYSTEMS, add_responses

COUNT, SHARE = 24, 0.25


def active_spec(*, name="active", sampling="active", share=SHARE) -> StudyConfig:
    design = {"ratings_per_response": 2, "items_per_assignment": 5, "control_rate": 0.2, "sampling": sampling}
    if share is not None:
        design["human_share"] = share
    return parse_study({"name": name, "seed": 3, "contexts": {"split": "test", "count": COUNT},
                        "systems": {"names": SYSTEMS, "controls": list(CONTROLS)}, "design": design})


@pytest.fixture
def active(sample_engine):
    add_responses(sample_engine, SYSTEMS + CONTROLS, 40)
    create_study(sample_engine, active_spec())
    return sample_engine


def study_id(engine, name="active") -> int:
    with unit_of_work(engine) as session:
        return session.scalar(select(Study.id).where(Study.name == name))


def store_scores(engine, judge: str, score, *, skip: int = 0, study: str = "active") -> None:
    """A judge's stored scores of every real item of `study` on every criterion (the last `skip` left out):
    score(context index, system, criterion) -> float."""
    sid = study_id(engine, study)
    with unit_of_work(engine) as session:
        rows = session.execute(select(StudyItem.response_id, Response.context_id, StudyItem.design)
                               .join(Response, Response.id == StudyItem.response_id)
                               .where(StudyItem.study_id == sid, StudyItem.is_control.is_(False))
                               .order_by(Response.context_id, StudyItem.id)).all()
        contexts = sorted({cid for _, cid, _ in rows})
        scores = [JudgeScore(response_id=response_id, criterion=criterion, judge=judge, judge_kind="test-scores",
                             judge_version="1", prompt_hash="-", score=score(contexts.index(cid), design["system"],
                                                                             criterion))
                  for response_id, cid, design in rows for criterion in ("empathy", "relevance", "fluency")]
        session.add_all(scores[:len(scores) - skip])


def quality(i: int, system: str, criterion: str) -> float:
    return 3 + math.sin(i + SYSTEMS.index(system)) + 0.1 * len(criterion)


def disagreeing(i: int, system: str, criterion: str) -> float:
    """Agrees with `quality` on the first half of the contexts, disagrees strongly on the second."""
    sign = 1 if (i + SYSTEMS.index(system)) % 2 else -1
    return quality(i, system, criterion) + (0.05 if i < COUNT // 2 else 1.0) * sign


def judge_both(engine) -> None:
    store_scores(engine, "first", quality)
    store_scores(engine, "second", disagreeing)


def assignment_count(engine) -> int:
    sid = study_id(engine)
    with unit_of_work(engine) as session:
        return session.scalar(select(func.count()).select_from(Assignment).where(Assignment.study_id == sid))


def test_the_option_is_checked_and_survives_the_stored_json():
    config = active_spec()
    assert config.setup.sampling == "active"
    assert StudyConfig.from_json(config.to_json(), study="active") == config
    assert config.to_json()["design"]["sampling"] == "active"
    assert "sampling" not in active_spec(sampling="uniform").to_json()["design"]  # stored as it always was
    with pytest.raises(StudyFileError, match=r"design\.sampling: must be one of 'uniform', 'active', got 'greedy'"):
        active_spec(sampling="greedy")
    with pytest.raises(StudyFileError, match=r"design\.sampling: \"active\" draws design\.human_share's contexts"):
        active_spec(share=None)


def test_creation_writes_every_item_for_the_judges_and_no_assignment(sample_engine):
    add_responses(sample_engine, SYSTEMS + CONTROLS, 40)
    summary = create_study(sample_engine, active_spec())
    assert (summary.contexts, summary.items, summary.assignments, summary.human_contexts) == (24, 72, 0, 6)
    assert "empeval study sample active" in summary.describe()
    sid = study_id(sample_engine)
    with unit_of_work(sample_engine) as session:
        contexts = session.execute(select(StudyContext.human_rated, StudyContext.inclusion_probability)
                                   .where(StudyContext.study_id == sid)).all()
    assert len(contexts) == 24 and all(rated is False and p is None for rated, p in contexts)
    assert assignment_count(sample_engine) == 0
    sample = human_sample(sample_engine, "active")
    assert list(sample.columns) == ["context_id", "sampled", "inclusion_probability"]
    assert sample["inclusion_probability"].isna().all() and sample.attrs["sampling"] == "active"


def test_the_draw_is_refused_until_every_judge_scored_every_item(active):
    with pytest.raises(BadInput, match=r"no judge has scored study 'active': run `empeval judge active --judges"):
        sample_study(active, "active")
    store_scores(active, "first", quality)
    store_scores(active, "second", disagreeing, skip=5)
    with pytest.raises(BadInput, match=r"judge 'second' has not scored every item of study 'active': 5 of 216 "
                                       r"item-criterion pairs lack a score \(first: system .*the judge never scored "
                                       r"it\).*`empeval judge active --judges second`"):
        sample_study(active, "active")
    with pytest.raises(BadInput, match=r"judge 'third' has scored no item of study 'active'"):
        sample_study(active, "active", judges=["first", "third"])
    assert assignment_count(active) == 0 and study_log(active, "active") == []


def test_a_study_that_is_not_actively_sampled_is_refused(sample_engine):
    add_responses(sample_engine, SYSTEMS + CONTROLS, 40)
    create_study(sample_engine, active_spec(name="uniform", sampling="uniform"))
    with pytest.raises(BadInput, match=r"study 'uniform' is not actively sampled \(design\.sampling is 'uniform': "
                                       r"its uniform sample was drawn when it was created\)"):
        sample_study(sample_engine, "uniform")


def test_the_draw_writes_probabilities_assignments_and_the_log_in_one_go_and_only_once(active):
    judge_both(active)
    draw = sample_study(active, "active")
    assert draw.new and draw.n_contexts == 24 and draw.expected == pytest.approx(6.0)
    assert draw.judges == ("first", "second") and "disagreement of judges first, second" in draw.basis
    sid = study_id(active)
    with unit_of_work(active) as session:
        rows = session.execute(select(StudyContext.context_id, StudyContext.human_rated,
                                      StudyContext.inclusion_probability, Dialogue.conv_id, Context.n_turns)
                               .join(Context, Context.id == StudyContext.context_id)
                               .join(Dialogue, Dialogue.id == Context.dialogue_id)
                               .where(StudyContext.study_id == sid).order_by(StudyContext.context_id)).all()
        placed = session.execute(select(Response.context_id, StudyItem.design, StudyItem.is_control)
                                 .join(StudyItem, StudyItem.response_id == Response.id)
                                 .join(AssignmentItem, AssignmentItem.item_id == StudyItem.id)
                                 .where(StudyItem.study_id == sid)).all()
    probabilities = [p for _, _, p, _, _ in rows]
    assert sum(probabilities) == pytest.approx(6.0) and all(0 < p <= 1 for p in probabilities)
    # the contexts the judges disagree on (the second half, in context order) are likelier to be drawn
    assert min(probabilities[COUNT // 2:]) > max(probabilities[:COUNT // 2])
    drawn = {cid for cid, rated, *_ in rows if rated}
    assert len(drawn) == draw.n_drawn
    assert draw_poisson([f"{conv}#{n}" for *_, conv, n in rows], probabilities, draw.seed) == [
        rated for _, rated, *_ in rows]
    # only drawn contexts have work: every system's item k = 2 times, and controls
    real = Counter((cid, design["system"]) for cid, design, is_control in placed if not is_control)
    assert set(real) == {(cid, system) for cid in drawn for system in SYSTEMS} and set(real.values()) == {2}
    assert any(is_control for *_, is_control in placed)
    assert {cid for cid, _, is_control in placed if is_control} <= drawn
    log = study_log(active, "active")
    assert [entry.event for entry in log] == [ACTIVE_DRAW]
    assert log[0].detail["n_drawn"] == len(drawn) and log[0].detail["assignments"] == draw.assignments
    assert draw.assignments == assignment_count(active) > 0
    sample = human_sample(active, "active")
    assert sample["inclusion_probability"].tolist() == pytest.approx(probabilities)
    assert set(sample.loc[sample["sampled"], "context_id"]) == drawn

    again = sample_study(active, "active", seed=99)
    assert not again.new and again.n_drawn == draw.n_drawn and again.assignments == draw.assignments
    assert "drawn already, nothing changed" in again.describe()
    assert assignment_count(active) == draw.assignments and len(study_log(active, "active")) == 1


def at_once(engine, calls: list, timeout: float) -> list:
    """Each of `calls` (a function of an engine) run at the same moment in its own thread with its own engine and
    connections, as separate requests or processes would have; what they returned, after checking none raised."""
    url = engine.url.render_as_string(hide_password=False)
    barrier, results, errors = threading.Barrier(len(calls)), [], []

    def run(call) -> None:
        own = make_engine(url)
        try:
            barrier.wait()
            results.append(call(own))
        except Exception as error:  # noqa: BLE001 - reported below
            errors.append(error)
        finally:
            own.dispose()

    threads = [threading.Thread(target=run, args=(call,)) for call in calls]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout)
    assert errors == []
    return results


def claims_at_once(engine, study: str, raters: list[int], timeout: float = 60) -> list:
    """`next_assignment` of `study` for each of `raters` at the same moment; the assignments claimed."""
    from empeval.server.annotation.handout import next_assignment

    return at_once(engine, [lambda own, rater=rater: next_assignment(own, study, rater) for rater in raters], timeout)


def draws_at_once(engine, study: str, timeout: float = 120) -> list:
    """`sample_study` of `study` run twice at the same moment; the draws made."""
    return at_once(engine, [lambda own: sample_study(own, study)] * 2, timeout)


def test_two_draws_at_once_make_exactly_one(active):
    judge_both(active)
    draws = draws_at_once(active, "active")
    assert sorted(draw.new for draw in draws) == [False, True]
    assert draws[0].n_drawn == draws[1].n_drawn
    made = next(draw for draw in draws if draw.new)
    assert assignment_count(active) == made.assignments and len(study_log(active, "active")) == 1
    sid = study_id(active)
    with unit_of_work(active) as session:
        per_item = session.execute(select(AssignmentItem.item_id, func.count()).group_by(AssignmentItem.item_id)
                                   .join(StudyItem, StudyItem.id == AssignmentItem.item_id)
                                   .where(StudyItem.study_id == sid, StudyItem.is_control.is_(False))
                                   ).all()
    assert {count for _, count in per_item} == {2}


def test_the_command_draws_and_says_so_and_a_second_run_changes_nothing(active):
    judge_both(active)
    url = active.url.render_as_string(hide_password=False)
    first = CliRunner().invoke(cli, ["--database-url", url, "study", "sample", "active"])
    assert first.exit_code == 0, first.output
    assert "study active: drew" in first.output and "of 24 contexts for people (6.0 expected" in first.output
    assert "next: `empeval annotators invite NAME --study active`" in first.output
    second = CliRunner().invoke(cli, ["--database-url", url, "study", "sample", "active", "--judges", "first"])
    assert second.exit_code == 0 and "drawn already, nothing changed" in second.output
    missing = CliRunner().invoke(cli, ["--database-url", url, "study", "sample", "nosuch"])
    assert missing.exit_code != 0 and "no study named 'nosuch'" in missing.output


def test_one_judge_alone_draws_with_uniform_probabilities_and_says_why(active):
    judge_both(active)
    url = active.url.render_as_string(hide_password=False)
    result = CliRunner().invoke(cli, ["--database-url", url, "study", "sample", "active", "--judges", "first"])
    assert result.exit_code == 0, result.output
    said = " ".join(result.output.split())
    assert "probabilities uniform: judge first alone gives no per-context uncertainty" in said
    sample = human_sample(active, "active")
    assert sample["inclusion_probability"].tolist() == pytest.approx([SHARE] * COUNT)
    assert study_log(active, "active")[0].detail["judges"] == ["first"]


def test_the_hand_out_follows_the_draw_under_concurrent_claims(active):
    """Before the draw nobody gets work; after it, raters claiming at once (each with its own engine) get only
    drawn contexts' items, and no assignment twice."""
    from empeval.server.annotation.annotators import invite
    from empeval.server.annotation.handout import next_assignment

    raters = [invite(active, f"rater-{i}", "active")[0].id for i in range(6)]
    assert next_assignment(active, "active", raters[0]) is None
    judge_both(active)
    draw = sample_study(active, "active")
    claimed = claims_at_once(active, "active", raters)
    assert None not in claimed and len(set(claimed)) == len(raters) <= draw.assignments
    sid = study_id(active)
    with unit_of_work(active) as session:
        drawn = set(session.scalars(select(StudyContext.context_id).where(StudyContext.study_id == sid,
                                                                          StudyContext.human_rated.is_(True))))
        handed = set(session.scalars(select(Response.context_id)
                                     .join(StudyItem, StudyItem.response_id == Response.id)
                                     .join(AssignmentItem, AssignmentItem.item_id == StudyItem.id)
                                     .where(AssignmentItem.assignment_id.in_(claimed))))
    assert handed and handed <= drawn


def test_after_a_real_judge_scored_every_item_the_command_draws(active, tmp_path):
    url = active.url.render_as_string(hide_password=False)
    refused = CliRunner().invoke(cli, ["--database-url", url, "study", "sample", "active"])
    assert refused.exit_code == 2 and "no judge has scored study 'active'" in " ".join(refused.output.split())
    judged = CliRunner().invoke(cli, ["--database-url", url, "judge", "active", "--judges", "length",
                                      "--cache-dir", str(tmp_path / "cache")])
    assert judged.exit_code == 0, judged.output
    drawn = CliRunner().invoke(cli, ["--database-url", url, "study", "sample", "active"])
    assert drawn.exit_code == 0, drawn.output
    assert "probabilities uniform: judge length alone" in " ".join(drawn.output.split())
    assert assignment_count(active) > 0
