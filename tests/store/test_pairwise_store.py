"""The pairwise schema (migration 0005) keeps the A/B study's promises whatever the code above it does: a pair
item compares two responses to its own context, stored once; a placement logs the side shown on the left; a
choice is left, right or tie, once per (assignment, pair item, criterion) and per (pair item, annotator,
criterion), and only about a placement of its own assignment. The migration adds this to a store written
under 0004 without touching its rows, and its downgrade takes it away again."""
from __future__ import annotations

import pytest
from sqlalchemy import insert, inspect
from sqlalchemy.exc import IntegrityError

from empeval.server.store import downgrade, make_engine, unit_of_work, upgrade
from empeval.server.store.kinds.pairwise import AssignmentPair, Choice, PairItem, PairwiseSetup
from empeval.server.store.migrate import current_revision
from empeval.server.store.models import Annotator, Assignment, Context, Dataset, Dialogue, Response, Study, System, Turn
from empeval.server.store.queries import now_utc
from empeval.server.store.statuses import StudyStatus
from empeval.server.store.study_config import StudyConfig
from tests.store.helpers import snapshot

PAIRWISE_TABLES = {"pair_item", "assignment_pair", "choice"}


@pytest.fixture
def judged_store(store_url):
    """Two contexts with responses of moel and gold; one pair item on the first, placed (gold on the left) in an
    assignment of rater a1, who chose 'left' on empathy."""
    engine = make_engine(store_url)
    upgrade(engine)
    with unit_of_work(engine) as s:
        dialogue = Dialogue(dataset=Dataset(name="d"), conv_id="c1", split="test", content_hash="h")
        contexts = []
        for n in (1, 3):
            s.add(Turn(dialogue=dialogue, idx=n, role="speaker", text=f"s{n}"))
            listener = Turn(dialogue=dialogue, idx=n + 1, role="listener", text=f"l{n}")
            contexts.append(Context(dialogue=dialogue, n_turns=n, reference_turn=listener))
        systems = [System(name=name, kind="test", version="1", parameters={}) for name in ("moel", "gold")]
        responses = {(c, m): Response(context=contexts[c], system=systems[m], text=f"{m}{c}", provenance={})
                     for c in range(2) for m in range(2)}
        study = Study(name="ab", config=StudyConfig(name="ab", setup=PairwiseSetup()), seed=1)
        annotator = Annotator(provider="local", pseudonym="a1")
        s.add_all([*responses.values(), study, annotator])
        s.flush()
        item = PairItem(study_id=study.id, context_id=contexts[0].id, response_a_id=responses[0, 0].id,
                        response_b_id=responses[0, 1].id)
        assignment = Assignment(study_id=study.id, annotator=annotator, status="assigned")
        s.add_all([item, assignment])
        s.flush()
        s.add(AssignmentPair(assignment_id=assignment.id, pair_item_id=item.id, position=0, shown_left="b"))
        s.flush()
        s.add(Choice(assignment_id=assignment.id, pair_item_id=item.id, annotator_id=annotator.id,
                     criterion="empathy", choice="left", submission_id="sub-1"))
        s.flush()
        ids = dict(study=study.id, item=item.id, assignment=assignment.id, annotator=annotator.id,
                   context0=contexts[0].id, context1=contexts[1].id,
                   **{f"r{c}{m}": r.id for (c, m), r in responses.items()})
    yield engine, ids
    engine.dispose()


def _refused(engine, *rows) -> None:
    with pytest.raises(IntegrityError):
        with unit_of_work(engine) as s:
            for row in rows:
                s.add(row)
                s.flush()


def _pair(ids, **overrides) -> PairItem:
    values = dict(study_id=ids["study"], context_id=ids["context1"], response_a_id=ids["r10"],
                  response_b_id=ids["r11"])
    return PairItem(**{**values, **overrides})


def test_a_valid_second_pair_item_is_stored(judged_store):
    engine, ids = judged_store
    with unit_of_work(engine) as s:
        s.add(_pair(ids))
    with unit_of_work(engine) as s:
        assert s.query(PairItem).count() == 2


def test_both_responses_of_a_pair_must_answer_its_context(judged_store):
    engine, ids = judged_store
    _refused(engine, _pair(ids, response_a_id=ids["r00"], response_b_id=ids["r11"]))
    _refused(engine, _pair(ids, context_id=ids["context0"]))


@pytest.mark.parametrize("swap", ["reversed", "itself"])
def test_a_pair_is_stored_once_in_one_order_and_never_of_a_response_with_itself(judged_store, swap):
    engine, ids = judged_store
    a, b = (ids["r11"], ids["r10"]) if swap == "reversed" else (ids["r10"], ids["r10"])
    _refused(engine, _pair(ids, response_a_id=a, response_b_id=b))


def test_the_same_pair_cannot_be_stored_twice_in_a_study(judged_store):
    engine, ids = judged_store
    _refused(engine, _pair(ids, context_id=ids["context0"], response_a_id=ids["r00"], response_b_id=ids["r01"]))


@pytest.mark.parametrize(("is_control", "target", "side"), [
    (True, None, "a"), (True, "empathy", None), (False, "empathy", None), (False, None, "a"), (True, "empathy", "c"),
])
def test_a_control_pair_names_its_target_and_side_and_only_a_control_does(judged_store, is_control, target, side):
    engine, ids = judged_store
    _refused(engine, _pair(ids, is_control=is_control, control_target=target, control_side=side))


def test_the_side_shown_left_is_a_or_b_and_a_position_holds_one_pair(judged_store):
    engine, ids = judged_store
    _refused(engine, AssignmentPair(assignment_id=ids["assignment"], pair_item_id=ids["item"], position=1,
                                    shown_left="x"))
    with unit_of_work(engine) as s:
        other = _pair(ids)
        s.add(other)
        s.flush()
        other_id = other.id
    _refused(engine, AssignmentPair(assignment_id=ids["assignment"], pair_item_id=other_id, position=0,
                                    shown_left="a"))
    _refused(engine, AssignmentPair(assignment_id=ids["assignment"], pair_item_id=ids["item"], position=1,
                                    shown_left="a"))


def _choice(ids, **overrides) -> Choice:
    values = dict(assignment_id=ids["assignment"], pair_item_id=ids["item"], annotator_id=ids["annotator"],
                  criterion="relevance", choice="tie", submission_id="sub-1")
    return Choice(**{**values, **overrides})


def test_a_choice_is_left_right_or_tie(judged_store):
    engine, ids = judged_store
    with unit_of_work(engine) as s:
        s.add(_choice(ids))
    _refused(engine, _choice(ids, criterion="fluency", choice="both"))


def test_the_same_pair_and_criterion_cannot_be_chosen_twice_in_one_assignment(judged_store):
    engine, ids = judged_store
    _refused(engine, _choice(ids, criterion="empathy", choice="right"))


def test_an_annotator_cannot_judge_the_same_pair_twice_through_another_assignment(judged_store):
    engine, ids = judged_store
    with unit_of_work(engine) as s:
        other = Assignment(study_id=ids["study"], annotator_id=ids["annotator"], status="submitted")
        s.add(other)
        s.flush()
        s.add(AssignmentPair(assignment_id=other.id, pair_item_id=ids["item"], position=0, shown_left="a"))
        other_id = other.id
    _refused(engine, _choice(ids, assignment_id=other_id, criterion="empathy", submission_id="sub-2"))


def test_a_choice_must_be_about_a_pair_placed_in_its_own_assignment(judged_store):
    engine, ids = judged_store
    with unit_of_work(engine) as s:
        other = _pair(ids)
        s.add(other)
        s.flush()
        other_id = other.id
    _refused(engine, _choice(ids, pair_item_id=other_id))


def test_migration_0005_adds_the_pairwise_tables_to_a_0004_store_and_its_downgrade_removes_them(store_url):
    engine = make_engine(store_url)
    upgrade(engine, "0004")
    # Written with the columns a 0004 study row has (the model has gained columns since, migration 0014).
    with engine.begin() as connection:
        connection.execute(insert(Study.__table__).values(
            name="likert", config=StudyConfig(name="likert", systems=("gold",)).to_json(), seed=3,
            status=StudyStatus.DRAFT, created_at=now_utc()))
    before = snapshot(engine)
    upgrade(engine, "0005")
    assert current_revision(engine) == "0005"
    assert PAIRWISE_TABLES <= set(inspect(engine).get_table_names())
    after = snapshot(engine)
    assert {t: rows for t, rows in after.items() if t != "alembic_version" and rows} == \
        {t: rows for t, rows in before.items() if t != "alembic_version" and rows}
    downgrade(engine, "0004")
    assert not PAIRWISE_TABLES & set(inspect(engine).get_table_names())
    assert "uq_response_id_context_id" not in {i["name"] for i in inspect(engine).get_indexes("response")}
    assert snapshot(engine) == before
    engine.dispose()
