"""Simulated raters: the model produces what it promises, and a crowd of them works through the real API."""

from __future__ import annotations

import random
import statistics

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from empeval.server.annotation.annotators import invite
from empeval.server.annotation.export import export_rows
from empeval.server.store.kinds.likert import Rating
from empeval.server.web import create_app
from empeval.tasks.kinds.likert import likert_scores
from empeval.tasks.simulate import CRITERIA, CrowdModel, Rater, draw_crowd
from tests.annotation.conftest import add_responses, make_study
from tests.browser import live_server
from tests.tasks.crowds import run_study_crowd


def test_good_raters_reproduce_the_latent_ordering_and_controls_fail_their_criterion():
    model = CrowdModel()
    rng = random.Random(0)
    raters = draw_crowd(60, model, seed=1, bad=0)
    def mean(system, c):
        return statistics.fmean(likert_scores(r, system, CRITERIA, model, rng)[c] for r in raters for _ in range(20))

    assert mean("gold", "empathy") > mean("moel", "empathy") + 0.5
    assert mean("control-generic", "empathy") < 2.2 < mean("control-generic", "fluency")
    assert mean("control-mismatched", "relevance") < 2.2 < mean("control-mismatched", "fluency")
    assert mean("control-scrambled", "fluency") < 2.0 < mean("control-scrambled", "relevance")


def test_bad_rater_behaviours_behave_as_named():
    model = CrowdModel()
    rng = random.Random(3)
    straight = Rater("s", "straight", 0.0, 1.0)
    assert all(len(set(likert_scores(straight, "gold", CRITERIA, model, rng).values())) == 1 for _ in range(50))
    ignorer = Rater("i", "ignores-context", 0.0, 1.0)
    # judges only the language: the mismatched control (fluent) gets high relevance from them
    relevance = [likert_scores(ignorer, "control-mismatched", CRITERIA, model, rng)["relevance"] for _ in range(200)]
    assert statistics.fmean(relevance) > 3.5
    clicker = Rater("r", "random", 0.0, 1.0)
    values = [likert_scores(clicker, "gold", CRITERIA, model, rng)["empathy"] for _ in range(500)]
    assert set(values) == {1, 2, 3, 4, 5} and abs(statistics.fmean(values) - 3) < 0.25
    assert draw_crowd(9, model, seed=0, bad=3)[0].behaviour == "random"
    assert [r.behaviour for r in draw_crowd(9, model, seed=0, bad=3)].count("good") == 6


def test_a_simulated_crowd_rates_a_study_through_the_http_api(sample_engine):
    add_responses(sample_engine, ["gold", "moel", "control-generic", "control-mismatched", "control-scrambled"], 40)
    make_study(sample_engine, count=12, k=3, per_assignment=5, control_rate=0.2, systems=["gold", "moel"])
    raters = draw_crowd(14, CrowdModel(), seed=5, bad=2)
    invites = {r.name: invite(sample_engine, r.name, "pilot")[1] for r in raters}
    app = create_app({"DATABASE_URL": sample_engine.url.render_as_string(hide_password=False)})
    with live_server(app) as base:
        result = run_study_crowd(base, invites, raters, sample_engine, "pilot", seed=5, max_workers=6)
    assert result.errors == []
    with Session(sample_engine) as s:
        stored = s.scalar(select(func.count(Rating.id)))
    assert result.answers == stored > 0
    rows = export_rows(sample_engine, "pilot")
    assert len({r["annotator"] for r in rows}) >= 10
    # Each control on the criterion it targets, against gold on the same criterion (all kinds pooled, since
    # which rater gets which control depends on thread timing).
    on_target = [
        (r["score"], r["criterion"]) for r in rows if r["is_control"] and r["criterion"] == r["control_target"]
    ]
    gold = {
        c: statistics.fmean(r["score"] for r in rows if r["system"] == "gold" and r["criterion"] == c)
        for c in ("empathy", "relevance", "fluency")
    }
    assert len(on_target) >= 6
    assert statistics.fmean(gold[c] - score for score, c in on_target) > 1.2
    assert all(r["seconds_on_item"] > 0 for r in rows)
