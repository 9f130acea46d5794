"""design.sampling = "active" for an A/B study (issue 28, item 2), on SQLite and PostgreSQL: the study file's option;
a study created with it has every context's pairs for the judges of differences and no assignment; `empeval study
sample` refuses (naming what is missing) until every judge of differences compared every pair, and refuses the
two-phase design; the draw writes every context's probability and human_rated, the drawn contexts' assignments
(each pair k times, left/right counterbalanced, control pairs included) and a log entry in one transaction; it
follows the judges' disagreement; a second run, or a second draw at the same moment, changes nothing; the hand-out
serves drawn contexts only under concurrent claims; the decisions' look and the report weigh by the recorded
probabilities."""
from __future__ import annotations

import math
from collections import Counter

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner
from sqlalchemy import func, select
from sqlalchemy.orm import aliased

from empeval.analysis.kinds.pairwise.judged import model_assisted_net_preferences
from empeval.analysis.stats.ppi.active import ipw_ppi_mean_interval
from empeval.cli import cli
from empeval.sampling import sample_study
from empeval.server.annotation.study_log import study_log
from empeval.server.backend.judges.scores import human_sample
from empeval.server.errors import BadInput
from empeval.server.store import unit_of_work
from empeval.server.store.kinds.likert import StudyContext
from empeval.server.store.kinds.pairwise import AssignmentPair, PairItem
from empeval.server.store.model_assisted_tables import JudgePairScore
from empeval.server.store.models import Assignment, Context, Dialogue, Response, Study, System
from empeval.server.store.study_config import StudyConfig
from empeval.tasks.kind_parts import StudyFileError
from empeval.tasks.kinds.likert_active import ACTIVE_DRAW, draw_poisson
from empeval.tasks.study_create import create_study
from empeval.tasks.study_file import parse_study
from tests.annotation.conftest import CONTROLS, SYSTEMS, add_responses
from tests.tasks.test_active_sampling import at_once, claims_at_once

COUNT, SHARE, K = 24, 0.25, 2
CRITERIA = ("empathy", "relevance", "fluency")


def ab_active_spec(*, name="ab", sampling="active", share=SHARE, **more) -> StudyConfig:
    design = {"judgments_per_pair": K, "items_per_assignment": 5, "control_rate": 0.2, "sampling": sampling}
    if share is not None:
        design["human_share"] = share
    return parse_study({"name": name, "kind": "pairwise", "seed": 3, "contexts": {"split": "test", "count": COUNT},
                        "systems": {"names": SYSTEMS, "anchor": SYSTEMS[0], "controls": CONTROLS},
                        "design": design, **more})


@pytest.fixture
def ab_active(sample_engine):
    add_responses(sample_engine, SYSTEMS + CONTROLS, 40)
    create_study(sample_engine, ab_active_spec())
    return sample_engine


def study_id(engine, name="ab") -> int:
    with unit_of_work(engine) as session:
        return session.scalar(select(Study.id).where(Study.name == name))


def store_verdicts(engine, judge: str, verdict, *, skip: int = 0, fail: int = 0, study: str = "ab") -> None:
    """A judge of differences' stored verdicts on every real pair of `study` on every criterion (the last `skip`
    left out, the `fail` before them stored as failures): verdict(context index, sorted pair) -> A's advantage,
    the stored row naming the pair's sorted-first system's response as A."""
    sid = study_id(engine, study)
    system_a, system_b = aliased(System), aliased(System)
    response_a, response_b = aliased(Response), aliased(Response)
    with unit_of_work(engine) as session:
        rows = session.execute(
            select(PairItem.context_id, PairItem.response_a_id, system_a.name, PairItem.response_b_id, system_b.name)
            .join(response_a, response_a.id == PairItem.response_a_id)
            .join(system_a, system_a.id == response_a.system_id)
            .join(response_b, response_b.id == PairItem.response_b_id)
            .join(system_b, system_b.id == response_b.system_id)
            .where(PairItem.study_id == sid, PairItem.is_control.is_(False))
            .order_by(PairItem.context_id, PairItem.id)).all()
        contexts = sorted({cid for cid, *_ in rows})
        made = []
        for cid, ra, na, rb, nb in rows:
            pair = tuple(sorted((na, nb)))
            value = verdict(contexts.index(cid), pair)
            for criterion in CRITERIA:
                made.append(dict(response_a_id=ra, response_b_id=rb, criterion=criterion, judge=judge,
                                 judge_kind="test-verdicts", judge_version="1", prompt_hash="-",
                                 score=value if na == pair[0] else -value))
        kept = made[:len(made) - skip]
        for position, row in enumerate(kept):
            if position >= len(kept) - fail:
                row.update(score=None, error="the endpoint timed out")
        session.add_all(JudgePairScore(**row) for row in kept)


def steady(i: int, pair: tuple[str, str]) -> float:
    return math.sin(i + SYSTEMS.index(pair[1]))


def disagreeing(i: int, pair: tuple[str, str]) -> float:
    """Agrees with `steady` on the first half of the contexts, disagrees strongly on the second."""
    sign = 1 if (i + SYSTEMS.index(pair[1])) % 2 else -1
    return steady(i, pair) + (0.05 if i < COUNT // 2 else 1.5) * sign


def judge_both(engine) -> None:
    store_verdicts(engine, "first", steady)
    store_verdicts(engine, "second", disagreeing)


def assignment_count(engine, name="ab") -> int:
    sid = study_id(engine, name)
    with unit_of_work(engine) as session:
        return session.scalar(select(func.count()).select_from(Assignment).where(Assignment.study_id == sid))


def placed(engine) -> list[tuple[int, int, bool, str, str]]:
    """(assignment, context, is_control, pair label, side shown left) of every placement of the study."""
    sid = study_id(engine)
    with unit_of_work(engine) as session:
        return [tuple(r) for r in session.execute(
            select(AssignmentPair.assignment_id, PairItem.context_id, PairItem.is_control, PairItem.design["pair"]
                   .as_string(), AssignmentPair.shown_left)
            .join(PairItem, PairItem.id == AssignmentPair.pair_item_id)
            .where(PairItem.study_id == sid)).all()]


def test_the_option_is_checked_and_survives_the_stored_json():
    config = ab_active_spec()
    assert config.setup.sampling == "active" and config.setup.human_share == SHARE
    assert StudyConfig.from_json(config.to_json(), study="ab") == config
    assert config.to_json()["pairwise"]["sampling"] == "active"
    assert "sampling" not in ab_active_spec(sampling="uniform").to_json()["pairwise"]  # stored as it always was
    with pytest.raises(StudyFileError, match=r"design\.sampling: must be one of 'uniform', 'active', got 'greedy'"):
        ab_active_spec(sampling="greedy")
    with pytest.raises(StudyFileError, match=r"design\.sampling: \"active\" draws design\.human_share's contexts"):
        ab_active_spec(share=None)


def test_creation_writes_every_contexts_pairs_for_the_judges_and_no_assignment(sample_engine):
    add_responses(sample_engine, SYSTEMS + CONTROLS, 40)
    summary = create_study(sample_engine, ab_active_spec())
    assert (summary.contexts, summary.items, summary.assignments) == (COUNT, COUNT * 2, 0)
    assert "people will judge the pairs of an active sample of about 6 of the 24 contexts" in summary.sentence
    assert "`empeval study sample ab`" in summary.sentence
    sid = study_id(sample_engine)
    with unit_of_work(sample_engine) as session:
        contexts = session.execute(select(StudyContext.human_rated, StudyContext.inclusion_probability)
                                   .where(StudyContext.study_id == sid)).all()
        controls = session.scalar(select(func.count()).select_from(PairItem)
                                  .where(PairItem.study_id == sid, PairItem.is_control.is_(True)))
    assert len(contexts) == COUNT and all(rated is False and p is None for rated, p in contexts)
    assert controls == 0 and assignment_count(sample_engine) == 0
    sample = human_sample(sample_engine, "ab")
    assert list(sample.columns) == ["context_id", "sampled", "inclusion_probability"]
    assert sample["inclusion_probability"].isna().all() and sample.attrs["sampling"] == "active"


def test_the_draw_is_refused_until_every_judge_compared_every_pair(ab_active):
    with pytest.raises(BadInput, match=r"no judge of differences has compared the pairs of study 'ab': run "
                                       r"`empeval judge ab --judges NAME,\.\.\.`"):
        sample_study(ab_active, "ab")
    store_verdicts(ab_active, "first", steady)
    store_verdicts(ab_active, "second", disagreeing, skip=4)
    with pytest.raises(BadInput, match=r"judge 'second' has not compared every pair of study 'ab': 4 of 144 "
                                       r"pair-criterion verdicts are missing \(first: .*the judge never compared "
                                       r"it\).*`empeval judge ab --judges second`"):
        sample_study(ab_active, "ab")
    store_verdicts(ab_active, "third", disagreeing, fail=1)
    with pytest.raises(BadInput, match=r"judge 'third' has not compared every pair .*1 of 144 .*the judge failed "
                                       r"on it"):
        sample_study(ab_active, "ab", judges=["first", "third"])
    with pytest.raises(BadInput, match=r"judge 'fourth' has compared no pair of study 'ab'"):
        sample_study(ab_active, "ab", judges=["first", "fourth"])
    with pytest.raises(BadInput, match=r"the two-phase design \(--burn-in\) is a Likert study's"):
        sample_study(ab_active, "ab", judges=["first"], burn_in=0.3)
    assert assignment_count(ab_active) == 0 and study_log(ab_active, "ab") == []


def test_the_draw_writes_probabilities_pairs_controls_and_the_log_in_one_go_and_only_once(ab_active):
    judge_both(ab_active)
    draw = sample_study(ab_active, "ab")
    assert draw.new and draw.n_contexts == COUNT and draw.expected == pytest.approx(COUNT * SHARE)
    assert draw.judges == ("first", "second") and "disagreement of judges first, second" in draw.basis
    sid = study_id(ab_active)
    with unit_of_work(ab_active) as session:
        rows = session.execute(select(StudyContext.context_id, StudyContext.human_rated,
                                      StudyContext.inclusion_probability, Dialogue.conv_id, Context.n_turns)
                               .join(Context, Context.id == StudyContext.context_id)
                               .join(Dialogue, Dialogue.id == Context.dialogue_id)
                               .where(StudyContext.study_id == sid).order_by(StudyContext.context_id)).all()
    probabilities = [p for _, _, p, _, _ in rows]
    assert sum(probabilities) == pytest.approx(COUNT * SHARE) and all(0 < p <= 1 for p in probabilities)
    # the contexts the judges of differences disagree on (the second half) are likelier to be drawn
    assert min(probabilities[COUNT // 2:]) > max(probabilities[:COUNT // 2])
    drawn = {cid for cid, rated, *_ in rows if rated}
    assert len(drawn) == draw.n_drawn >= 2
    assert draw_poisson([f"{conv}#{n}" for *_, conv, n in rows], probabilities, draw.seed) == [
        rated for _, rated, *_ in rows]
    # only drawn contexts have work: each of their two pairs k times, each order as often as the other
    placements = placed(ab_active)
    real = Counter((cid, label) for _, cid, control, label, _ in placements if not control)
    pairs = {"|".join(sorted((SYSTEMS[0], other))) for other in SYSTEMS[1:]}
    assert set(real) == {(cid, label) for cid in drawn for label in pairs} and set(real.values()) == {K}
    sides = Counter((label, left) for _, _, control, label, left in placements if not control)
    assert all(abs(sides[label, "a"] - sides[label, "b"]) <= 1 for label in pairs)
    controls = [(a, cid) for a, cid, control, *_ in placements if control]
    assert controls and {cid for _, cid in controls} <= drawn
    per_assignment = Counter(a for a, *_ in placements)
    assert set(per_assignment.values()) <= {5} and len(per_assignment) == draw.assignments
    log = study_log(ab_active, "ab")
    assert [entry.event for entry in log] == [ACTIVE_DRAW]
    assert log[0].detail["n_drawn"] == len(drawn) and log[0].detail["assignments"] == draw.assignments
    assert draw.assignments == assignment_count(ab_active) > 0
    sample = human_sample(ab_active, "ab")
    assert sample["inclusion_probability"].tolist() == pytest.approx(probabilities)
    assert set(sample.loc[sample["sampled"], "context_id"]) == drawn

    again = sample_study(ab_active, "ab", seed=99)
    assert not again.new and again.n_drawn == draw.n_drawn and again.assignments == draw.assignments
    assert assignment_count(ab_active) == draw.assignments and len(study_log(ab_active, "ab")) == 1
    assert placed(ab_active) == placements


def test_two_draws_at_once_make_exactly_one(ab_active):
    judge_both(ab_active)
    draws = at_once(ab_active, [lambda own: sample_study(own, "ab")] * 2, 120)
    assert sorted(draw.new for draw in draws) == [False, True]
    made = next(draw for draw in draws if draw.new)
    assert assignment_count(ab_active) == made.assignments and len(study_log(ab_active, "ab")) == 1
    real = Counter((cid, label) for _, cid, control, label, _ in placed(ab_active) if not control)
    assert set(real.values()) == {K}


def test_one_judge_alone_draws_uniformly_and_the_command_says_so(ab_active):
    judge_both(ab_active)
    url = ab_active.url.render_as_string(hide_password=False)
    result = CliRunner().invoke(cli, ["--database-url", url, "study", "sample", "ab", "--judges", "first"])
    assert result.exit_code == 0, result.output
    said = " ".join(result.output.split())
    assert "study ab: drew" in said and "of 24 contexts for people (6.0 expected" in said
    assert "probabilities uniform: judge first alone gives no per-context uncertainty" in said
    assert human_sample(ab_active, "ab")["inclusion_probability"].tolist() == pytest.approx([SHARE] * COUNT)
    again = CliRunner().invoke(cli, ["--database-url", url, "study", "sample", "ab"])
    assert again.exit_code == 0 and "drawn already, nothing changed" in again.output


def test_the_hand_out_follows_the_draw_under_concurrent_claims(ab_active):
    """Before the draw nobody gets work; after it, raters claiming at once (each with its own engine) get only
    drawn contexts' pairs, and no assignment twice."""
    from empeval.server.annotation.annotators import invite
    from empeval.server.annotation.handout import next_assignment

    raters = [invite(ab_active, f"rater-{i}", "ab")[0].id for i in range(5)]
    assert next_assignment(ab_active, "ab", raters[0]) is None
    judge_both(ab_active)
    draw = sample_study(ab_active, "ab")
    claimed = [c for c in claims_at_once(ab_active, "ab", raters) if c is not None]
    assert claimed and len(set(claimed)) == len(claimed) <= draw.assignments
    sid = study_id(ab_active)
    with unit_of_work(ab_active) as session:
        drawn = set(session.scalars(select(StudyContext.context_id).where(StudyContext.study_id == sid,
                                                                          StudyContext.human_rated.is_(True))))
    handed = {cid for a, cid, *_ in placed(ab_active) if a in claimed}
    assert handed and handed <= drawn


# --- the estimates: inverse-probability weighted -------------------------------------------------------------------

def _active_ab(rng, n: int, budget: float, *, skew: float):
    """One simulated actively sampled A/B study on one pair and criterion: each context's true net preference
    (larger where the judges disagree more), two raters' judgments on the drawn contexts, a judge's verdict on
    every context, the design's record. Returns (judgments, verdicts, design_sample, true mean)."""
    from empeval.analysis.stats.ppi.active_draw import sampling_probabilities

    hard = rng.random(n) < 0.3
    truth = np.clip(0.1 + skew * hard + rng.normal(0, 0.3, n), -1, 1)  # the net preference P(A) - P(B)
    verdict = truth + rng.normal(0, np.where(hard, 0.8, 0.1))
    pi = sampling_probabilities(np.where(hard, 1.0, 0.05), budget)
    drawn = rng.random(n) < pi
    rows = []
    for cid in np.flatnonzero(drawn):
        p_a, p_b = (1 + truth[cid]) / 2, (1 - truth[cid]) / 2
        for choice in rng.choice(["sys-a", "sys-b", "tie"], size=2, p=[p_a * 0.9, p_b * 0.9, 0.1]):
            rows.append({"context_id": int(cid), "criterion": "empathy", "pair": "sys-a|sys-b",
                         "preferred": choice, "is_control": False})
    judgments = pd.DataFrame(rows)
    verdicts = pd.DataFrame({"criterion": "empathy", "context_id": np.arange(n), "system_a": "sys-a",
                             "system_b": "sys-b", "judge_diff": verdict})
    design = pd.DataFrame({"context_id": np.arange(n), "sampled": drawn, "inclusion_probability": pi})
    return judgments, verdicts, design, float(0.9 * truth.mean())


def test_the_report_weighs_an_active_draw_and_covers_the_studys_net_preference():
    """On seeded studies where the draw favours contexts with a larger preference for A, the weighted PPI++ mean
    covers the study's net preference at about the nominal rate, while the unweighted mean of the drawn contexts is
    biased upwards; each row is ipw_ppi_mean_interval's numbers."""
    rng = np.random.default_rng(28)
    covered, weighted, naive, truths = 0, [], [], []
    runs = 150
    for _ in range(runs):
        judgments, verdicts, design, truth = _active_ab(rng, 200, 40.0, skew=0.6)
        row = model_assisted_net_preferences(judgments, verdicts, design).iloc[0]
        assert row["note"] == "" and row["n_human"] == design["sampled"].sum()
        covered += row["ppi_ci_low"] <= truth <= row["ppi_ci_high"]
        weighted.append(row["ppi_diff"])
        naive.append(judgments.assign(v=np.where(judgments["preferred"] == "sys-a", 1.0, np.where(
            judgments["preferred"] == "tie", 0.0, -1.0))).groupby("context_id")["v"].mean().mean())
        truths.append(truth)
    bias_weighted = np.mean(weighted) - np.mean(truths)
    bias_naive = np.mean(naive) - np.mean(truths)
    assert covered / runs >= 0.90, covered / runs  # 2.3 binomial SEs below 0.95 at 150 runs
    assert abs(bias_weighted) < 0.02 < bias_naive - 0.05, (bias_weighted, bias_naive)

    judgments, verdicts, design, _ = _active_ab(np.random.default_rng(5), 200, 40.0, skew=0.6)
    row = model_assisted_net_preferences(judgments, verdicts, design, focus="sys-b").iloc[0]
    labels = -(judgments.assign(v=np.where(judgments["preferred"] == "sys-a", 1.0, np.where(
        judgments["preferred"] == "tie", 0.0, -1.0))).groupby("context_id")["v"].mean())
    direct = ipw_ppi_mean_interval(labels.reindex(range(200)).to_numpy(), -verdicts["judge_diff"].to_numpy(),
                                   design["inclusion_probability"].to_numpy())
    assert (row["system_a"], row["system_b"]) == ("sys-b", "sys-a")
    assert row["ppi_diff"] == pytest.approx(direct["ppi_mean"]) and row["human_diff"] == pytest.approx(
        direct["human_mean"])
    assert row["ppi_ci_high"] - row["ppi_ci_low"] == pytest.approx(direct["ppi_ci_high"] - direct["ppi_ci_low"])
    missing = model_assisted_net_preferences(judgments, verdicts.iloc[1:], design).iloc[0]
    assert "no verdict on 1 of the study's 200 contexts" in missing["note"] and np.isnan(missing["ppi_diff"])
    assert np.isfinite(missing["human_diff"])  # the weighted human-only mean needs no judge


def test_the_decisions_look_weighs_the_judgments_by_the_recorded_probabilities(sample_engine):
    """After the draw, raters who always prefer sys-a: each comparison's human-only interval is the inverse-
    probability weighted sequence over the study's contexts with the probabilities the draw recorded (not the
    plain mean of the judged contexts, which is exactly 1), and with a judge of differences' verdicts on every
    context the model-assisted one is there too."""
    from empeval.analysis.stats.sequential import ipw_ppi_confidence_sequence
    from empeval.server.annotation.annotators import invite
    from empeval.server.annotation.decisions import decision_status
    from empeval.server.annotation.handout import next_assignment_payload
    from empeval.server.annotation.kinds.pairwise_decisions import net_preferences
    from empeval.server.backend.judges.pair_scores import judge_pair_scores
    from tests.annotation.test_decisions_pairwise import _prefers, _submit

    add_responses(sample_engine, SYSTEMS + CONTROLS, 40)
    create_study(sample_engine, ab_active_spec(decisions={"margin": 0.2}))
    assert all(c.n == 0 for c in decision_status(sample_engine, "ab").comparisons)  # before the draw
    judge_both(sample_engine)
    sample_study(sample_engine, "ab")
    for i in range(3):
        rater, _ = invite(sample_engine, f"rater-{i}", "ab")
        payload = next_assignment_payload(sample_engine, "ab", rater.id)
        assert payload is not None, i
        _submit(sample_engine, rater.id, payload, _prefers(SYSTEMS[0]))
    status = decision_status(sample_engine, "ab", judge_scores=judge_pair_scores(sample_engine, "ab", "first"),
                             judge="first")
    sample = human_sample(sample_engine, "ab").set_index("context_id")["inclusion_probability"]
    with unit_of_work(sample_engine) as session:
        study = session.scalar(select(Study).where(Study.name == "ab"))
        labels, _ = net_preferences(session, study.id, study.config.decisions.comparisons)
    checked = 0
    for state in status.comparisons:
        looked = labels[state.comparison]
        if not looked.labels:
            continue
        assert set(looked.labels) == {1.0 if state.comparison.system_a == SYSTEMS[0] else -1.0}
        expected = ipw_ppi_confidence_sequence(list(looked.labels), [0.0] * len(looked.labels),
                                               sample.loc[list(looked.contexts)].to_numpy(), [0.0] * len(sample),
                                               expected_rated=float(sample.sum()), planned_n=float(sample.sum()),
                                               alpha=status.decisions.alpha_each, prior_variance=1.0).iloc[-1]
        assert state.n == len(looked.labels)
        assert state.human_estimate == pytest.approx(float(expected["estimate"]))
        assert (state.human_low, state.human_high) == pytest.approx((float(expected["low"]),
                                                                     float(expected["high"])))
        assert abs(state.human_estimate) != pytest.approx(1.0)
        assert state.ppi_estimate is not None and state.ppi_low <= state.ppi_estimate <= state.ppi_high
        checked += 1
    assert checked


def test_a_draw_whose_contexts_no_control_answers_is_refused_and_writes_nothing(sample_engine):
    """Controls answer only two contexts (enough to create the study); a draw that misses both cannot show the
    design's control pairs: refused, naming the control and what to do, and the transaction leaves no probability,
    no assignment and no log entry behind."""
    from empeval.tasks.kinds.likert_active import active_design, draw_active_sample

    add_responses(sample_engine, SYSTEMS, 40)
    add_responses(sample_engine, CONTROLS, 2)
    create_study(sample_engine, ab_active_spec())
    design = active_design(sample_engine, "ab")
    with unit_of_work(sample_engine) as session:
        answered = set(session.scalars(select(Response.context_id).join(System).where(System.name.in_(CONTROLS))))
    assert answered & set(design.contexts)
    probabilities = {cid: 1e-9 if cid in answered else 0.5 for cid in design.contexts}
    with pytest.raises(BadInput, match=r"study 'ab': control '[a-z-]+' has no response on any of the \d+ drawn "
                                       r"contexts.*`empeval study sample ab --seed N`; nothing was written"):
        draw_active_sample(sample_engine, "ab", probabilities, basis="test", judges=("first",), tau=0.5)
    assert human_sample(sample_engine, "ab")["inclusion_probability"].isna().all()
    assert assignment_count(sample_engine) == 0 and study_log(sample_engine, "ab") == []
