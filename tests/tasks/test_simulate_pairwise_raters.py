"""Simulated A/B raters: their choices follow the latent qualities the Likert raters are drawn from, each kind of
careless rater behaves as named, and the placements they are given say truthfully what each side shows."""
from __future__ import annotations

import random

from sqlalchemy import select
from sqlalchemy.orm import Session

from empeval.server.store.kinds.likert import StudyItem
from empeval.server.store.kinds.pairwise import AssignmentPair, PairItem
from empeval.server.store.models import Response, Study, System
from empeval.tasks.kinds.pairwise import pair_placements, pairwise_choices
from empeval.tasks.simulate import CRITERIA, CrowdModel, Rater
from tests.annotation.conftest import CONTROLS, SYSTEMS, add_responses, make_study
from tests.annotation.pairwise_fixtures import make_ab_study, neutral_text


def _shares(rater: Rater, left: str, right: str, model: CrowdModel, *, ties: bool = True, n: int = 400,
            criterion: str = "empathy") -> dict[str, float]:
    rng = random.Random(1)
    picks = [pairwise_choices(rater, left, right, CRITERIA, model, rng, ties=ties)[criterion] for _ in range(n)]
    return {key: picks.count(key) / n for key in ("A", "B", "T")}


def test_good_raters_choose_the_better_system_on_either_side_and_tie_on_equals():
    model = CrowdModel()
    good = Rater("g", "good", 0.4, 1.0)
    assert _shares(good, "gold", "moel", model)["A"] > 0.6  # gold 4.1 against moel 3.3 on empathy
    assert _shares(good, "moel", "gold", model)["B"] > 0.6
    even = _shares(good, "moel", "moel", model)
    assert 0.15 < even["T"] < 0.45 and abs(even["A"] - even["B"]) < 0.1
    assert _shares(good, "moel", "moel", model, ties=False)["T"] == 0
    # Each control loses on the criterion it is built to fail, not on the others.
    assert _shares(good, "moel", "control-scrambled", model, criterion="fluency")["A"] > 0.8
    assert _shares(good, "moel", "control-generic", model, criterion="fluency")["B"] > 0.5


def test_position_bias_and_a_response_s_own_deviation_move_the_choice():
    good = Rater("g", "good", 0.0, 1.0)
    assert _shares(good, "moel", "moel", CrowdModel(position_bias=0.8))["A"] > 0.6
    rng = random.Random(2)
    better_reply = [pairwise_choices(good, "moel", "moel", CRITERIA, CrowdModel(), rng,
                                     left_deviation={"empathy": 1.0})["empathy"] for _ in range(300)]
    assert better_reply.count("A") > 2 * better_reply.count("B")


def test_careless_kinds_choose_as_named():
    model = CrowdModel()
    random_clicker = _shares(Rater("r", "random", 0.0, 1.0), "gold", "control-generic", model, n=900)
    assert all(abs(share - 1 / 3) < 0.07 for share in random_clicker.values())
    assert _shares(Rater("r", "random", 0.0, 1.0), "gold", "moel", model, ties=False)["T"] == 0
    assert _shares(Rater("s", "straight", 0.2, 1.0), "control-scrambled", "gold", model)["A"] == 1.0
    assert _shares(Rater("s", "straight", -0.2, 1.0), "gold", "control-scrambled", model)["B"] == 1.0
    # Ignoring the context, the mismatched control (fluent, off-topic) is not caught on relevance.
    ignorer = _shares(Rater("i", "ignores-context", 0.0, 1.0), "moel", "control-mismatched", model,
                      criterion="relevance")
    assert ignorer["B"] > ignorer["A"]


def test_placements_name_the_side_shown_and_key_shared_responses_by_their_likert_item(sample_engine):
    add_responses(sample_engine, SYSTEMS + CONTROLS, 30, text=neutral_text)
    make_study(sample_engine, count=6, k=1, per_assignment=5, control_rate=0.2, seed=5)
    make_ab_study(sample_engine, with_responses=False, count=6, k=2, per_assignment=5, seed=5, compare_with="pilot")
    placements = pair_placements(sample_engine, "ab")
    with Session(sample_engine) as session:
        rows = session.execute(
            select(AssignmentPair.assignment_id, AssignmentPair.pair_item_id, AssignmentPair.shown_left,
                   PairItem.response_a_id, PairItem.response_b_id)
            .join(PairItem, PairItem.id == AssignmentPair.pair_item_id)).all()
        system_of = dict(session.execute(select(Response.id, System.name).join(System)).all())
        likert_item = dict(session.execute(select(StudyItem.response_id, StudyItem.id).join(Study)
                                           .where(Study.name == "pilot")).all())
    assert len(placements) == len(rows) > 0
    shared = 0
    for assignment_id, pair_item_id, shown_left, response_a, response_b in rows:
        left, right = (response_a, response_b) if shown_left == "a" else (response_b, response_a)
        shown = placements[assignment_id, pair_item_id]
        assert (shown.left, shown.right) == (system_of[left], system_of[right])
        for response, key in ((left, shown.left_key), (right, shown.right_key)):
            assert key == likert_item.get(response, f"response-{response}")
            shared += response in likert_item
    assert shared > 0  # the same contexts and systems: real responses keep their Likert item's quality
