"""Model-assisted decisions for an A/B study (issue 28): a study with design.human_share, judged by raters through
the kind's real submit path, its pairs compared on every context by a pairwise-http-judge (a local stub endpoint,
through `judge_study_pairs`); the status then holds a PPI++ interval beside each human-only one, narrower when the
judge predicts the choices, oriented to the comparison however the pair is stored; the look picks the latest judge
of differences by itself, `empeval study status` prints it, and a note says why an interval is missing (no
judge-only context, a judge that skipped judged contexts). On a real SQLite file and a real PostgreSQL database."""
from __future__ import annotations

import numpy as np
from sqlalchemy import delete, select

from empeval.server.annotation.decisions import decision_status
from empeval.server.annotation.handout import NoNewWork, next_assignment_payload
from empeval.server.backend.judges.pair_run import judge_study_pairs
from empeval.server.backend.judges.pair_scores import judge_pair_scores
from empeval.server.backend.judges.study_items import load_judged_study
from empeval.server.store import unit_of_work
from empeval.server.store.kinds.likert import StudyContext
from empeval.server.store.model_assisted_tables import JudgePairScore
from empeval.server.store.models import Response, System
from empeval.server.web.decisions_watch import look
from empeval.tasks.study_create import create_study
from empeval.tasks.study_file import parse_study
from tests.annotation.conftest import add_responses
from tests.annotation.researcher_helpers import cli_run
from tests.annotation.test_decisions_pairwise import _rater, _submit
from tests.backend.test_judge_pairwise_http import pairwise, server  # noqa: F401 - the stub endpoint fixture

COMPARISON = "sys-b vs sys-a on empathy"  # B's id is the larger: the stored pair is (sys-a, sys-b), reversed here


def _words(system: str, context_id: int) -> str:
    """sys-a's reply is longer than sys-b's on a third of the contexts, shorter on a third, as long on the rest."""
    n = 1 + context_id % 3 if system == "sys-a" else 2
    return f"{system} reply to {context_id}" + " so" * n


def _study(engine, *, share: float | None, count: int = 24, name: str = "ab-judged", responses: bool = True,
           text=_words) -> None:
    if responses:
        add_responses(engine, ["sys-a", "sys-b"], 60, text=text)
    design = {"judgments_per_pair": 2, "items_per_assignment": 4, "control_rate": 0.0}
    if share is not None:
        design["human_share"] = share
    create_study(engine, parse_study({
        "name": name, "kind": "pairwise", "seed": 3, "contexts": {"split": "test", "count": count},
        "systems": {"names": ["sys-a", "sys-b"]}, "design": design,
        "decisions": {"comparisons": [COMPARISON], "margin": 0.3}}, f"{name}.toml"))


def _warm_or_terse(system: str, context_id: int) -> str:
    """On half the contexts sys-a's reply is the warm, longer one, on the other half sys-b's."""
    warm = (system == "sys-a") == (context_id % 2 == 0)
    return (f"I am so sorry to hear about that ({context_id}); it must have been really hard for you." if warm
            else f"Ok ({context_id}).")


def _judge_everything(engine, name: str = "ab-judged") -> None:
    """Raters choose the longer reply on every pair they are handed (a tie when they are as long, as the stub judge
    does), until no work is left."""
    texts = {}
    with unit_of_work(engine) as session:
        for cid, system, text in session.execute(select(Response.context_id, System.name, Response.text)
                                                 .join(System, System.id == Response.system_id)):
            texts[cid, system] = text

    def longer(cid, left, right):
        a, b = len(texts[cid, left]), len(texts[cid, right])
        return None if a == b else left if a > b else right

    for n in range(10):
        rater, _ = _rater(engine, f"{name}-r{n}", name)
        while True:
            try:
                payload = next_assignment_payload(engine, name, rater.id)
            except NoNewWork:
                break
            if payload is None:
                break
            _submit(engine, rater.id, payload, longer)


def _compare_pairs(engine, server, name="ab-judged"):  # noqa: F811
    return judge_study_pairs(engine, pairwise(server, "/"), load_judged_study(engine, name, criteria=["empathy"]))


def test_a_judge_that_predicts_the_choices_narrows_the_interval_of_an_ab_decision(sample_engine,
                                                                                   server):  # noqa: F811
    engine = sample_engine
    _study(engine, share=0.5)
    _judge_everything(engine)
    human_only = decision_status(engine, "ab-judged")
    (alone,) = human_only.comparisons
    assert alone.ppi_state is None and alone.n == 12  # people judged half of the 24 contexts
    report = _compare_pairs(engine, server)
    assert report.scored == 24 and report.failed == 0  # every context's pair, judged by people or not

    status = look(engine, "ab-judged", close=False)  # the latest judge of differences, found by itself
    assert status.judge == "pairs" and status.notes == ()
    (state,) = status.comparisons
    assert (state.human_estimate, state.human_low, state.human_high) == (alone.human_estimate, alone.human_low,
                                                                           alone.human_high)
    assert state.ppi_state is not None
    # PPI++ with a perfect judge on half the contexts: var(f)/N against var(y)/n, an interval about 1/sqrt(2) as wide.
    assert state.ppi_high - state.ppi_low < 0.85 * (state.human_high - state.human_low), status.lines()
    # Oriented to "sys-b vs sys-a": sys-b's net preference over sys-a, the judge's verdicts turned round likewise.
    truth = sum(((2 > 1 + c % 3) - (2 < 1 + c % 3)) for c in _contexts(engine)) / 24
    assert state.ppi_low <= truth <= state.ppi_high
    assert abs(state.ppi_estimate - truth) <= abs(state.human_estimate - truth) + 1e-9
    printed = cli_run(engine, "study", "status", "ab-judged")
    assert printed.exit_code == 0 and "model-assisted (pairs)" in printed.output, printed.output
    # The study page shows the same model-assisted interval.
    from empeval.server.annotation.secrets import admin_token, secret_key
    from empeval.server.web import create_app
    client = create_app({"DATABASE_URL": engine.url.render_as_string(hide_password=False), "TESTING": True}
                        ).test_client()
    page = client.get("/admin/studies/ab-judged",
                      headers={"Authorization": f"Bearer {admin_token(secret_key(engine))}"}).get_data(as_text=True)
    table = page.split('id="decision-table"', 1)[1].split("</table>", 1)[0]
    assert f"{state.ppi_low:+.3f} to {state.ppi_high:+.3f}" in table


def _contexts(engine) -> list[int]:
    with unit_of_work(engine) as session:
        return list(session.scalars(select(StudyContext.context_id)))


def test_without_a_judge_only_context_or_with_judged_contexts_skipped_a_note_says_why(sample_engine,
                                                                                       server):  # noqa: F811
    engine = sample_engine
    _study(engine, share=None, count=8, name="ab-all")
    _judge_everything(engine, "ab-all")
    _compare_pairs(engine, server, "ab-all")
    status = look(engine, "ab-all", close=False)
    (state,) = status.comparisons
    assert state.ppi_state is None and status.notes == (
        f"{COMPARISON}: no model-assisted interval (no context only the judge compared (design.human_share gives "
        "some))",)

    _study(engine, share=0.5, count=24, name="ab-judged", responses=False)
    _judge_everything(engine)
    _compare_pairs(engine, server)
    judged = set(judge_pair_scores(engine, "ab-judged", "pairs")["context_id"])
    with unit_of_work(engine) as session:
        rated = [c for c, human in session.execute(select(StudyContext.context_id, StudyContext.human_rated))
                 if human and c in judged]
        dropped = session.scalars(select(Response.id).where(Response.context_id == rated[0])).all()
        session.execute(delete(JudgePairScore).where(JudgePairScore.response_a_id.in_(dropped)))
    status = look(engine, "ab-judged", close=False)
    assert status.comparisons[0].ppi_state is None
    assert status.notes == (f"{COMPARISON}: no model-assisted interval (the judge compared 11 of the 12 contexts "
                            "people judged)",)


def test_the_learned_difference_judge_learns_an_ab_studys_choices_and_gives_its_decisions_an_interval(
        sample_engine, embedding_cache_dir):
    """No endpoint needed: the learned difference judge fits the judged contexts' net preferences (out of fold on
    them) from the two replies' embeddings and scores every context's pair; the look then has its PPI++ interval."""
    from empeval.analysis.stats.ppi.crossfit import cross_fit_difference_judge
    from empeval.server.backend.judges.learned_difference_judge import LearnedDifferenceJudge
    from empeval.server.backend.resources import BackendResources

    engine = sample_engine
    _study(engine, share=0.5, text=_warm_or_terse)
    _judge_everything(engine)
    study = load_judged_study(engine, "ab-judged", criteria=["empathy"],
                              cross_fit_differences=cross_fit_difference_judge)
    assert study.pair_labels is not None
    empathy = study.pair_labels[study.pair_labels["criterion"] == "empathy"]
    assert len(empathy) == 12  # the judged contexts' net preferences (every criterion's are read, as ratings are)
    judge = LearnedDifferenceJudge("learned", {"n_folds": 3, "seed": 1},
                                   BackendResources(engine=engine, cache_dir=embedding_cache_dir, show_progress=False))
    report = judge_study_pairs(engine, judge, study)
    assert (report.scored, report.failed) == (24, 0)
    verdicts = judge_pair_scores(engine, "ab-judged", "learned")
    labels = empathy.set_index("context_id")["label_diff"]
    out_of_fold = verdicts.set_index("context_id").loc[labels.index, "judge_diff"]
    assert np.corrcoef(out_of_fold, labels)[0, 1] > 0.8  # it learned that the warm reply wins, out of fold
    status = look(engine, "ab-judged", close=False)
    assert status.judge == "learned" and status.comparisons[0].ppi_state is not None, status.lines()


def test_raters_claiming_at_once_get_only_the_sampled_contexts_pairs(sample_engine):
    """The hand-out follows the A/B human share under concurrent claims (each rater with her own engine): every
    claimed pair sits on a context people judge by design, no assignment goes twice, and the judge-only pairs are in
    no assignment."""
    from empeval.server.store.kinds.pairwise import AssignmentPair, PairItem
    from tests.tasks.test_active_sampling import claims_at_once

    _study(sample_engine, share=0.5)
    raters = [_rater(sample_engine, f"claimer-{i}", "ab-judged")[0].id for i in range(6)]
    claimed = claims_at_once(sample_engine, "ab-judged", raters)
    assert None not in claimed and len(set(claimed)) == len(raters)
    with unit_of_work(sample_engine) as session:
        sampled = set(session.scalars(select(StudyContext.context_id).where(StudyContext.human_rated.is_(True))))
        handed = set(session.scalars(select(PairItem.context_id)
                                     .join(AssignmentPair, AssignmentPair.pair_item_id == PairItem.id)
                                     .where(AssignmentPair.assignment_id.in_(claimed))))
        in_any = set(session.scalars(select(PairItem.context_id)
                                     .join(AssignmentPair, AssignmentPair.pair_item_id == PairItem.id)))
        every = set(session.scalars(select(PairItem.context_id)))
    assert handed and handed <= sampled and in_any == sampled and len(every) == 2 * len(sampled)
