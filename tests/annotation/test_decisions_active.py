"""The pre-registered decisions of an actively sampled Likert study (design.sampling = "active"), on SQLite and
PostgreSQL: the draw (`sample_study`) favours the contexts the judges disagree on, raters rate the drawn contexts
through the real submit path, and the look's intervals are the inverse-probability weighted sequences over every
context of the study (analysis.stats.sequential.ipw_ppi_confidence_sequence), recomputed here from the stored
ratings and the recorded probabilities; the plain mean of the rated contexts, which the look used before, differs."""
from __future__ import annotations

import numpy as np
import pandas as pd
from sqlalchemy import select

from empeval.analysis.stats.sequential import ipw_ppi_confidence_sequence
from empeval.sampling import sample_study
from empeval.server.annotation.decisions import decision_status
from empeval.server.annotation.handout import NoNewWork, next_assignment_payload
from empeval.server.annotation.submission import submit_assignment
from empeval.server.backend.judges.scores import judge_scores
from empeval.server.store import unit_of_work
from empeval.server.store.kinds.likert import Rating, StudyContext, StudyItem
from empeval.server.store.models import Response
from empeval.tasks.study_create import create_study
from empeval.tasks.study_file import parse_study
from tests.annotation.conftest import SYSTEMS, add_responses, new_submission_id
from tests.annotation.test_decisions import _rater
from tests.tasks.test_active_sampling import COUNT, SHARE, disagreeing, quality, store_scores


def _score(context_id: int, system: str) -> int:
    """A rating that varies with the context and the system, so per-context differences vary."""
    return 1 + (context_id * 7 + 3 * SYSTEMS.index(system)) % 5


def _rate_everything(engine) -> None:
    systems = {}
    with unit_of_work(engine) as session:
        for item_id, context_id, design in session.execute(
                select(StudyItem.id, Response.context_id, StudyItem.design)
                .join(Response, Response.id == StudyItem.response_id)):
            systems[item_id] = (context_id, design.get("system"))
    for n in range(12):
        rater = _rater(engine, f"r{n}")
        while True:
            try:
                payload = next_assignment_payload(engine, "decided", rater)
            except NoNewWork:
                break
            if payload is None:
                break
            ratings = [{"item_id": item["item_id"],
                        "scores": dict.fromkeys(("empathy", "relevance", "fluency"), _score(*systems[item["item_id"]]))}
                       for item in payload["items"]]
            receipt = submit_assignment(engine, payload["assignment_id"], rater,
                                        {"submission_id": new_submission_id(), "ratings": ratings})
            assert receipt["status"] == "stored"


def test_an_actively_sampled_studys_decisions_weigh_each_rated_context_by_its_draw(sample_engine):
    engine = sample_engine
    add_responses(engine, SYSTEMS, 40)
    create_study(engine, parse_study({
        "name": "decided", "seed": 3, "contexts": {"split": "test", "count": COUNT}, "systems": {"names": SYSTEMS},
        "design": {"ratings_per_response": 2, "items_per_assignment": 6, "control_rate": 0.0, "human_share": SHARE,
                   "sampling": "active"},
        "decisions": {"comparisons": ["sys-a vs sys-b on empathy"], "margin": 0.5}}, "decided.toml"))
    store_scores(engine, "steady", quality, study="decided")
    store_scores(engine, "unsure", disagreeing, study="decided")
    assert decision_status(engine, "decided").comparisons[0].n == 0  # nothing drawn, nothing rated yet
    sample_study(engine, "decided")
    _rate_everything(engine)

    scores = judge_scores(engine, "decided", "steady")
    (state,) = decision_status(engine, "decided", judge_scores=scores, judge="steady").comparisons
    with unit_of_work(engine) as session:
        drawn = dict(session.execute(select(StudyContext.context_id, StudyContext.inclusion_probability)).all())
        rows = session.execute(select(Response.context_id, StudyItem.design, Rating.score, Rating.submitted_at)
                               .join(StudyItem, StudyItem.id == Rating.item_id)
                               .join(Response, Response.id == StudyItem.response_id)
                               .where(Rating.criterion == "empathy")).all()
    table = pd.DataFrame([(c, d["system"], s, at) for c, d, s, at in rows],
                         columns=["context", "system", "score", "at"])
    table = table[table["system"].isin(["sys-a", "sys-b"])]
    labels = table.groupby(["context", "system"])["score"].mean().unstack().dropna()
    last = table.groupby("context")["at"].max().loc[labels.index]  # the look's order: last rating, then context id
    difference = (labels["sys-a"] - labels["sys-b"]).loc[last.sort_values(kind="stable").index]
    pi = np.array([drawn[c] for c in difference.index])
    contexts = sorted(drawn)
    budget = float(sum(drawn.values()))
    assert state.n == len(difference) and 0 < state.n < COUNT
    human = ipw_ppi_confidence_sequence(difference.to_numpy(), np.zeros(len(pi)), pi, np.zeros(len(contexts)),
                                        expected_rated=budget, planned_n=budget, prior_variance=16.0).iloc[-1]
    assert (state.human_estimate, state.human_low, state.human_high) == (
        float(human["estimate"]), float(human["low"]), float(human["high"]))
    # The plain mean of the rated contexts is not what the look reports: the draw was not uniform.
    assert len(set(pi)) > 1 and abs(difference.mean() - state.human_estimate) > 1e-6
    judged = scores[scores["criterion"] == "empathy"].pivot_table(index="context_id", columns="system",
                                                                  values="judge_score")
    judge_difference = judged["sys-a"] - judged["sys-b"]
    ppi = ipw_ppi_confidence_sequence(difference.to_numpy(), judge_difference.loc[difference.index].to_numpy(), pi,
                                      judge_difference.loc[contexts].to_numpy(), expected_rated=budget,
                                      planned_n=budget, prior_variance=16.0).iloc[-1]
    assert state.ppi_estimate is not None and np.isclose(state.ppi_estimate, float(ppi["estimate"]))
    assert np.isclose(state.ppi_low, float(ppi["low"])) and np.isclose(state.ppi_high, float(ppi["high"]))


def test_a_two_phase_studys_decisions_join_its_burn_in_and_phase_two_at_half_the_error_rate_each(sample_engine):
    """The burn-in is handed out before phase 2, so the looks are not drawn in proportion to the overall
    probabilities: the interval is the burn-in's sequence (a uniform sample) at alpha / 2 until phase 2 has labels,
    then intersected with phase 2's weighted sequence at alpha / 2 over the contexts the burn-in left
    (two_phase_interval), and a note says so."""
    from empeval.analysis.stats.sequential import paired_confidence_sequence, two_phase_interval
    from empeval.server.annotation.study_log import ACTIVE_DRAW, study_log
    from tests.tasks.test_active_two_phase import BURN, judge_study, rate_burn_in
    from tests.tasks.test_active_two_phase import COUNT as PHASED_COUNT

    engine = sample_engine
    add_responses(engine, SYSTEMS, PHASED_COUNT)
    create_study(engine, parse_study({
        "name": "phased", "seed": 5, "contexts": {"split": "test", "count": PHASED_COUNT},
        "systems": {"names": SYSTEMS},
        "design": {"ratings_per_response": 2, "items_per_assignment": 6, "control_rate": 0.0, "sampling": "active",
                   "human_share": 0.5},
        "decisions": {"comparisons": ["sys-a vs sys-b on empathy"], "margin": 0.5}}, "phased.toml"))
    judge_study(engine, "phased")
    sample_study(engine, "phased", burn_in=BURN)
    rate_burn_in(engine, "phased")
    entries = [e.detail for e in study_log(engine, "phased") if e.event == ACTIVE_DRAW]
    burn_in, p1 = {int(c) for c in entries[0]["drawn"]}, float(entries[0]["p1"])
    status = decision_status(engine, "phased")
    assert status.notes == (f"two-phase active design: the intervals intersect the sequence of the {len(burn_in)} "
                            "contexts of the uniform burn-in with phase 2's weighted one, each at half the error "
                            "rate (phase 2 is not drawn yet)",)
    alpha = status.decisions.alpha_each / 2

    def differences(contexts):
        """Per context a - b on empathy, in the order the contexts' last ratings came in."""
        with unit_of_work(engine) as session:
            rows = session.execute(select(Response.context_id, StudyItem.design, Rating.score, Rating.submitted_at)
                                   .join(StudyItem, StudyItem.id == Rating.item_id)
                                   .join(Response, Response.id == StudyItem.response_id)
                                   .where(Rating.criterion == "empathy")).all()
        table = pd.DataFrame([(c, d["system"], s, at) for c, d, s, at in rows if c in contexts],
                             columns=["context", "system", "score", "at"])
        labels = table.groupby(["context", "system"])["score"].mean().unstack()
        last = table.groupby("context")["at"].max().sort_values(kind="stable")
        return (labels["sys-a"] - labels["sys-b"]).dropna().reindex(last.index).dropna()

    first = differences(burn_in)
    burnt = paired_confidence_sequence(first.to_numpy() + 0.0, np.zeros(len(first)), planned_n=len(burn_in),
                                       alpha=alpha, prior_variance=16.0).iloc[-1]
    (state,) = status.comparisons
    assert state.n == len(first) == len(burn_in)
    assert np.isclose(state.human_estimate, first.mean())
    assert np.isclose(state.human_low, burnt["low"]) and np.isclose(state.human_high, burnt["high"])

    sample_study(engine, "phased")
    rate_burn_in(engine, "phased")  # phase 2's assignments, all of them
    entries = [e.detail for e in study_log(engine, "phased") if e.event == ACTIVE_DRAW]
    phase_two = {int(c) for c in entries[1]["drawn"]}
    with unit_of_work(engine) as session:
        overall = dict(session.execute(select(StudyContext.context_id, StudyContext.inclusion_probability)).all())
    rest = sorted(set(overall) - burn_in)
    q = {c: (overall[c] - p1) / (1 - p1) for c in rest}
    second = differences(phase_two)
    weighted = ipw_ppi_confidence_sequence(second.to_numpy(), np.zeros(len(second)), [q[c] for c in second.index],
                                           np.zeros(len(rest)), expected_rated=sum(q.values()),
                                           planned_n=max(sum(q.values()), 1.0), alpha=alpha,
                                           prior_variance=16.0).iloc[-1]
    expected = two_phase_interval((state.human_estimate, state.human_low, state.human_high),
                                  (float(weighted["estimate"]), float(weighted["low"]), float(weighted["high"])),
                                  known_sum=float(first.sum()), n_total=len(overall), n_rest=len(rest))
    status = decision_status(engine, "phased")
    (joined,) = status.comparisons
    assert status.notes == (f"two-phase active design: the intervals intersect the sequence of the {len(burn_in)} "
                            "contexts of the uniform burn-in with phase 2's weighted one, each at half the error "
                            "rate",)
    assert second.size and joined.n == len(first) + len(second)
    assert np.allclose((joined.human_estimate, joined.human_low, joined.human_high), expected)
    assert joined.human_high - joined.human_low <= state.human_high - state.human_low  # phase 2 only narrows it
