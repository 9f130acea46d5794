"""The two-phase active design (issue 28), on SQLite and PostgreSQL: the first `empeval study sample` draws a
uniform burn-in (every context's probability p1, its assignments, a log entry with phase 1); the second is refused,
naming what is missing, until every burn-in item has k raters, then fits the residual model and draws phase 2 in one
transaction (overall probabilities p1 + (1 - p1) q spending the budget, phase 2's contexts disjoint from the
burn-in's and reproducible from the seed, assignments only for them, after the burn-in's in hand-out order); a third
run changes nothing; two phase-2 draws at once make exactly one; the command does the same by default; a study too
small for a burn-in is drawn in one go and says why."""
from __future__ import annotations

import math

import pytest
from click.testing import CliRunner
from sqlalchemy import func, select

from empeval.cli import cli
from empeval.sampling import MIN_BURN_IN_CONTEXTS, sample_study
from empeval.server.annotation.study_log import study_log
from empeval.server.backend.judges.scores import human_sample
from empeval.server.errors import BadInput
from empeval.server.store import unit_of_work
from empeval.server.store.kinds.likert import AssignmentItem, Rating, StudyContext, StudyItem
from empeval.server.store.models import Annotator, Assignment, Context, Dialogue, JudgeScore, Response, Study
from empeval.server.store.statuses import AssignmentStatus
from empeval.tasks.kinds.likert_active import BURN_IN, SECOND_PHASE, draw_poisson
from empeval.tasks.study_create import create_study
from empeval.tasks.study_file import parse_study
from tests.annotation.conftest import CONTROLS, SYSTEMS, add_responses
from tests.tasks.test_active_sampling import draws_at_once

COUNT, SHARE, BURN = 160, 0.5, 0.5  # 80 contexts expected in all, 40 in the burn-in
CRITERIA = ("empathy", "relevance", "fluency")


def spec(name: str, count: int, share: float = SHARE):
    return parse_study({"name": name, "seed": 5, "contexts": {"split": "test", "count": count},
                        "systems": {"names": SYSTEMS, "controls": list(CONTROLS)},
                        "design": {"ratings_per_response": 2, "items_per_assignment": 5, "control_rate": 0.2,
                                   "sampling": "active", "human_share": share}})


def hard(i: int) -> bool:
    return i % 4 == 0


def quality(i: int, system: str) -> float:
    return 3 + math.sin(1.7 * i + SYSTEMS.index(system))


def judge_study(engine, name: str) -> None:
    """Two judges: both near the quality, far apart (and far from it) on the hard contexts."""
    with unit_of_work(engine) as session:
        sid = session.scalar(select(Study.id).where(Study.name == name))
        rows = session.execute(select(StudyItem.response_id, Response.context_id, StudyItem.design)
                               .join(Response, Response.id == StudyItem.response_id)
                               .where(StudyItem.study_id == sid, StudyItem.is_control.is_(False))).all()
        contexts = sorted({cid for _, cid, _ in rows})
        for judge, sign in (("first", 1), ("second", -1)):
            session.add_all(JudgeScore(response_id=response_id, criterion=criterion, judge=judge,
                                       judge_kind="test-scores", judge_version="1", prompt_hash="-",
                                       score=quality(contexts.index(cid), design["system"])
                                       + sign * (1.2 if hard(contexts.index(cid)) else 0.05))
                            for response_id, cid, design in rows for criterion in CRITERIA)


@pytest.fixture
def phased(sample_engine):
    add_responses(sample_engine, SYSTEMS + CONTROLS, COUNT)
    create_study(sample_engine, spec("phased", COUNT))
    judge_study(sample_engine, "phased")
    return sample_engine


def rate_burn_in(engine, name: str, *, leave_out: int = 0) -> int:
    """Every open assignment of the study submitted by its own new annotator, with ratings of its real items
    (labels far from the judges on the hard contexts); the last `leave_out` assignments left open. Returns how
    many were submitted."""
    with unit_of_work(engine) as session:
        sid = session.scalar(select(Study.id).where(Study.name == name))
        contexts = sorted(session.scalars(select(StudyContext.context_id).where(StudyContext.study_id == sid)))
        assignments = list(session.scalars(select(Assignment).where(Assignment.study_id == sid,
                                                                     Assignment.status == AssignmentStatus.OPEN)
                                           .order_by(Assignment.id)))
        submitted = assignments[:len(assignments) - leave_out]
        for assignment in submitted:
            annotator = Annotator(provider="test", pseudonym=f"rater-{assignment.id}")
            session.add(annotator)
            session.flush()
            assignment.annotator_id, assignment.status = annotator.id, AssignmentStatus.SUBMITTED
            items = session.execute(select(StudyItem.id, Response.context_id, StudyItem.design)
                                    .join(AssignmentItem, AssignmentItem.item_id == StudyItem.id)
                                    .join(Response, Response.id == StudyItem.response_id)
                                    .where(AssignmentItem.assignment_id == assignment.id,
                                           StudyItem.is_control.is_(False))).all()
            for item_id, cid, design in items:
                i = contexts.index(cid)
                truth = quality(i, design["system"]) + (1.5 if hard(i) and design["system"] == SYSTEMS[0] else 0)
                session.add_all(Rating(assignment_id=assignment.id, item_id=item_id, annotator_id=annotator.id,
                                       criterion=criterion, score=max(1, min(5, round(truth))),
                                       submission_id=f"sub-{assignment.id}") for criterion in CRITERIA)
        return len(submitted)


def context_rows(engine, name: str):
    with unit_of_work(engine) as session:
        sid = session.scalar(select(Study.id).where(Study.name == name))
        return session.execute(select(StudyContext.context_id, StudyContext.human_rated,
                                      StudyContext.inclusion_probability, Dialogue.conv_id, Context.n_turns)
                               .join(Context, Context.id == StudyContext.context_id)
                               .join(Dialogue, Dialogue.id == Context.dialogue_id)
                               .where(StudyContext.study_id == sid).order_by(StudyContext.context_id)).all()


def assignments_of(engine, name: str) -> list[tuple[int, int, set[int]]]:
    """(id, design_index, the contexts of its real items) of every assignment of the study."""
    with unit_of_work(engine) as session:
        sid = session.scalar(select(Study.id).where(Study.name == name))
        rows = session.execute(select(Assignment.id, Assignment.design_index, Response.context_id)
                               .join(AssignmentItem, AssignmentItem.assignment_id == Assignment.id)
                               .join(StudyItem, StudyItem.id == AssignmentItem.item_id)
                               .join(Response, Response.id == StudyItem.response_id)
                               .where(Assignment.study_id == sid, StudyItem.is_control.is_(False))).all()
    found: dict[int, tuple[int, set[int]]] = {}
    for aid, index, cid in rows:
        found.setdefault(aid, (index, set()))[1].add(cid)
    return [(aid, index, cids) for aid, (index, cids) in sorted(found.items())]


def test_burn_in_then_the_residual_draw_then_nothing(phased):
    burn = sample_study(phased, "phased", burn_in=BURN)
    p1 = BURN * SHARE
    assert burn.new and burn.phase == BURN_IN and burn.expected == pytest.approx(COUNT * p1)
    assert "run `empeval study sample phased` again" in burn.describe()
    rows = context_rows(phased, "phased")
    assert all(p == pytest.approx(p1) for _, _, p, _, _ in rows)
    burnt = {cid for cid, rated, *_ in rows if rated}
    assert len(burnt) == burn.n_drawn >= MIN_BURN_IN_CONTEXTS - 10
    assert draw_poisson([f"{conv}#{n}" for *_, conv, n in rows], [p1] * len(rows), burn.seed) == [
        rated for _, rated, *_ in rows]
    first_assignments = assignments_of(phased, "phased")
    assert set().union(*(cids for *_, cids in first_assignments)) == burnt
    [entry] = study_log(phased, "phased")
    assert entry.detail["phase"] == BURN_IN and entry.detail["drawn"] == sorted(burnt)
    assert entry.detail["p1"] == pytest.approx(p1) and entry.detail["burn_in"] == BURN

    # Phase 2 waits for every burn-in item's k raters; nothing is written while it refuses.
    with pytest.raises(BadInput, match=r"study 'phased': the burn-in's ratings are not complete: \d+ of its "
                                       rf"{3 * len(burnt)} items have fewer than the design's 2 raters \(first: "
                                       r"context .*: 0 of 2\).*then sample again"):
        sample_study(phased, "phased")
    rate_burn_in(phased, "phased", leave_out=1)
    with pytest.raises(BadInput, match=r"the burn-in's ratings are not complete: [1-5] of its .*: 1 of 2\)"):
        sample_study(phased, "phased")
    assert len(study_log(phased, "phased")) == 1 and context_rows(phased, "phased") == rows
    rate_burn_in(phased, "phased")

    second = sample_study(phased, "phased", seed=123)  # phase 2 may take its own seed
    assert second.new and second.phase == SECOND_PHASE and second.seed == 123
    assert "residual model fitted on the uniform burn-in's" in second.basis
    rows = context_rows(phased, "phased")
    probability = {cid: p for cid, _, p, _, _ in rows}
    assert sum(probability.values()) == pytest.approx(COUNT * SHARE, rel=1e-6)  # the budget, in expectation
    assert min(probability.values()) >= p1 - 1e-12 and max(probability.values()) <= 1
    rated = {cid for cid, is_rated, *_ in rows if is_rated}
    entry = study_log(phased, "phased")[-1]
    drawn = set(entry.detail["drawn"])
    assert entry.detail["phase"] == SECOND_PHASE and rated == burnt | drawn and not burnt & drawn
    assert len(drawn) == second.n_drawn and len(entry.detail["taus"]) == 5
    rest = [(cid, conv, n) for cid, _, _, conv, n in rows if cid not in burnt]
    q = [(probability[cid] - p1) / (1 - p1) for cid, *_ in rest]
    assert draw_poisson([f"{conv}#{n}" for _, conv, n in rest], q, 123, stream="active-sample-2") == [
        cid in drawn for cid, *_ in rest]
    # The contexts the judges disagree on, where the burn-in's labels are far from them, are likelier drawn.
    ids = sorted(probability)
    hard_p = [probability[cid] for i, cid in enumerate(ids) if hard(i)]
    easy_p = [probability[cid] for i, cid in enumerate(ids) if not hard(i)]
    assert sum(hard_p) / len(hard_p) > 1.2 * sum(easy_p) / len(easy_p)
    new_assignments = [a for a in assignments_of(phased, "phased") if a[0] not in {b[0] for b in first_assignments}]
    assert len(new_assignments) == second.assignments > 0
    assert set().union(*(cids for *_, cids in new_assignments)) == drawn
    assert min(index for _, index, _ in new_assignments) > max(index for _, index, _ in first_assignments)
    sample = human_sample(phased, "phased")
    assert dict(zip(sample["context_id"], sample["inclusion_probability"], strict=True)) == pytest.approx(probability)
    assert set(sample.loc[sample["sampled"], "context_id"]) == rated

    third = sample_study(phased, "phased")
    assert not third.new and third.phase == SECOND_PHASE and third.n_drawn == second.n_drawn
    assert "drawn already, nothing changed" in third.describe()
    assert len(study_log(phased, "phased")) == 2 and context_rows(phased, "phased") == rows


def test_two_second_phases_at_once_make_exactly_one(phased):
    sample_study(phased, "phased", burn_in=BURN)
    rate_burn_in(phased, "phased")
    draws = draws_at_once(phased, "phased")
    assert sorted(draw.new for draw in draws) == [False, True]
    made = next(draw for draw in draws if draw.new)
    assert [entry.detail["phase"] for entry in study_log(phased, "phased")] == [BURN_IN, SECOND_PHASE]
    with unit_of_work(phased) as session:
        sid = session.scalar(select(Study.id).where(Study.name == "phased"))
        open_count = session.scalar(select(func.count()).select_from(Assignment).where(
            Assignment.study_id == sid, Assignment.status == AssignmentStatus.OPEN))
    assert open_count == made.assignments


def test_a_study_too_small_for_a_burn_in_is_drawn_in_one_go_and_says_why(sample_engine):
    add_responses(sample_engine, SYSTEMS + CONTROLS, 40)
    create_study(sample_engine, spec("small", 40))
    judge_study(sample_engine, "small")
    draw = sample_study(sample_engine, "small", burn_in=0.3)  # 20 expected: a 30% burn-in would hold 6
    assert draw.new and draw.phase == 0 and draw.expected == pytest.approx(20)
    assert "drawn in one go: a burn-in of 30% would hold 6.0 contexts, the residual model needs 30" in draw.basis
    assert "phase" not in study_log(sample_engine, "small")[0].detail
    assert not sample_study(sample_engine, "small").new


def test_the_command_draws_the_burn_in_then_phase_2_with_burn_in(sample_engine):
    add_responses(sample_engine, SYSTEMS + CONTROLS, COUNT)
    create_study(sample_engine, spec("cli", COUNT, share=0.75))  # 120 expected: a 30% burn-in holds 36
    judge_study(sample_engine, "cli")
    url = sample_engine.url.render_as_string(hide_password=False)
    first = CliRunner().invoke(cli, ["--database-url", url, "study", "sample", "cli", "--burn-in", "0.3"])
    assert first.exit_code == 0, first.output
    said = " ".join(first.output.split())
    assert "study cli: drew the burn-in," in said and "(36.0 expected; probabilities uniform: the burn-in" in said
    assert "run `empeval study sample cli` again" in said
    refused = CliRunner().invoke(cli, ["--database-url", url, "study", "sample", "cli"])
    assert refused.exit_code == 2 and "the burn-in's ratings are not complete" in " ".join(refused.output.split())
    rate_burn_in(sample_engine, "cli")
    second = CliRunner().invoke(cli, ["--database-url", url, "study", "sample", "cli"])
    assert second.exit_code == 0, second.output
    said = " ".join(second.output.split())
    assert "study cli: drew phase 2," in said and "(120.0 expected in both phases; probabilities from a residual " \
        "model fitted on the uniform burn-in's" in said
    third = CliRunner().invoke(cli, ["--database-url", url, "study", "sample", "cli"])
    assert third.exit_code == 0 and "drawn already, nothing changed" in third.output
