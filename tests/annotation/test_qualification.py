"""A study's qualification through the app (server/annotation/qualification.py, its routes in server/web/
qualification_api.py), on both databases: a rater sees the practice items with no answer in them, each answer is
stored and answered with its feedback and the answers counted right, an answer sent again stores nothing twice and
another one is refused, the attempt is decided once every item is answered (passed with min_correct right, failed
on the last attempt, another attempt otherwise), the hand-out gives real work only to a rater who passed (also when
the page is bypassed and when two threads race), and the report's meta counts who qualified and who failed."""
from __future__ import annotations

import threading
import uuid

import pytest
from sqlalchemy import func, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from empeval.server.annotation import hot_sql
from empeval.server.annotation.export import report_inputs
from empeval.server.annotation.handout import QualificationRequired, next_assignment
from empeval.server.annotation.kinds import annotation_kind
from empeval.server.store.engine import unit_of_work, write_transaction
from empeval.server.store.models import Assignment
from empeval.server.store.qualification_tables import QualificationAnswer, QualificationItem, QualificationOutcome
from empeval.server.store.queries import now_utc, study_by_name
from empeval.server.store.statuses import AssignmentStatus, QualificationStatus
from empeval.server.web import create_app
from empeval.tasks.study_create import create_study
from empeval.tasks.study_file import parse_study
from tests.annotation.qualification_fixtures import (
    LIKERT_GOLD,
    LIKERT_RIGHT,
    LIKERT_WRONG,
    PAIRWISE_RIGHT,
    answer,
    go_through,
    make_likert,
    pairwise_file,
    rater,
)


@pytest.fixture
def qualified_app(sample_engine):
    summary = make_likert(sample_engine)
    assert "qualification of 3 gold items (2 right to pass, one attempt)" in summary.sentence
    app = create_app({"DATABASE_URL": sample_engine.url.render_as_string(hide_password=False), "TESTING": True})
    return app, sample_engine


def outcome(engine, annotator_id: int) -> tuple[str, int, int] | None:
    with Session(engine) as session:
        row = session.execute(select(QualificationOutcome.status, QualificationOutcome.attempt,
                                     QualificationOutcome.correct)
                              .where(QualificationOutcome.annotator_id == annotator_id)).first()
        return None if row is None else (str(row[0]), row[1], row[2])


def answers_stored(engine) -> int:
    with Session(engine) as session:
        return session.scalar(select(func.count()).select_from(QualificationAnswer))


def test_the_gold_items_are_written_as_the_page_shows_them_and_shown_without_their_answers(qualified_app):
    app, engine = qualified_app
    client, _ = rater(app, engine, "rita")
    state = client.get("/api/annotate/qualification").get_json()
    assert state["required"] is True and state["status"] == "pending" and state["attempt"] == 1
    assert (state["min_correct"], state["attempts"], state["intro"]) == (2, 1, "Three practice replies first.")
    assert [c["value"] for c in state["choices"]] == [1, 2, 3, 4, 5]
    assert state["choices"][0]["label"] == "1 - Not at all"
    second = state["items"][1]["panels"][0]
    assert [(t["role"], t["text"]) for t in second["turns"]] == [
        ("speaker", "My grandmother passed away last night."), ("listener", "Oh no, I am so sorry."),
        ("speaker", "We were very close."), ("listener", LIKERT_GOLD[1]["response"])]
    assert second["turns"][-1]["label"] == "Response to rate"
    shown = client.get("/api/annotate/qualification").get_data(as_text=True)
    assert "feedback" not in shown and "accepted" not in shown and LIKERT_GOLD[0]["feedback"] not in shown
    with Session(engine) as session:
        stored = session.scalars(select(QualificationItem).order_by(QualificationItem.position)).all()
    assert [item.accepted for item in stored] == [{"empathy": [1, 2], "relevance": [1, 2, 3], "fluency": [4, 5]},
                                                  {"empathy": [4, 5], "relevance": [4, 5], "fluency": [4, 5]},
                                                  {"empathy": [1, 2, 3], "relevance": [1, 2, 3, 4], "fluency": [1]}]


def test_each_answer_gets_its_feedback_and_the_right_answers_and_two_right_of_three_pass(qualified_app):
    app, engine = qualified_app
    client, rita = rater(app, engine, "rita")
    first = answer(client, 0, LIKERT_RIGHT[0]).get_json()
    assert first["correct"] is True and first["feedback"] == LIKERT_GOLD[0]["feedback"]
    assert first["right"] == {"empathy": [1, 2], "relevance": [1, 2, 3], "fluency": [4, 5]}
    assert first["state"]["status"] == "pending" and first["state"]["correct"] == 1
    # One criterion off its range makes the whole item wrong.
    second = answer(client, 1, {"empathy": 5, "relevance": 3, "fluency": 5}).get_json()
    assert second["correct"] is False and second["feedback"] == LIKERT_GOLD[1]["feedback"]
    assert next_is_refused(client, "pass its short qualification first")
    last = answer(client, 2, LIKERT_RIGHT[2]).get_json()
    assert last["correct"] is True and last["state"]["status"] == "passed" and last["state"]["correct"] == 2
    assert outcome(engine, rita) == ("passed", 1, 2)
    work = client.get("/api/annotate/next")
    assert work.status_code == 200 and work.get_json()["assignment"]["kind"] == "likert"


def next_is_refused(client, says: str) -> bool:
    refused = client.get("/api/annotate/next")
    return refused.status_code == 403 and says in refused.get_json()["message"]


def test_a_rater_below_the_pass_mark_on_her_last_attempt_fails_for_good_and_gets_no_work(qualified_app):
    app, engine = qualified_app
    client, ida = rater(app, engine, "ida")
    last = go_through(client, [LIKERT_RIGHT[0], *LIKERT_WRONG[1:]])
    assert last["state"]["status"] == "failed" and "completion" not in last["state"]  # a local rater: no code
    assert outcome(engine, ida) == ("failed", 1, 1)
    assert next_is_refused(client, "did not pass the qualification")
    again = answer(client, 0, LIKERT_RIGHT[0], attempt=2)
    assert again.status_code == 409 and "decided already (failed)" in again.get_json()["message"]
    with Session(engine) as session:
        assert session.scalar(select(func.count()).select_from(Assignment)
                              .where(Assignment.annotator_id == ida)) == 0


def test_an_answer_sent_again_stores_nothing_twice_and_another_answer_is_refused(qualified_app):
    app, engine = qualified_app
    client, _ = rater(app, engine, "rita")
    first = answer(client, 0, LIKERT_RIGHT[0])
    again = answer(client, 0, LIKERT_RIGHT[0])
    assert again.status_code == 200 and again.get_json() == first.get_json()
    assert answers_stored(engine) == 1
    changed = answer(client, 0, {"empathy": 2, "relevance": 2, "fluency": 5})
    assert changed.status_code == 409 and "answered already, with another answer" in changed.get_json()["message"]
    ahead = answer(client, 1, LIKERT_RIGHT[1], attempt=2)
    assert ahead.status_code == 409 and "you are on attempt 1 of 1" in ahead.get_json()["message"]
    assert answers_stored(engine) == 1
    go_through(client, LIKERT_RIGHT)  # the first again (same answer), then the other two: passed
    replayed = answer(client, 2, LIKERT_RIGHT[2])  # the deciding answer sent again after the decision
    assert replayed.status_code == 200 and replayed.get_json()["state"]["status"] == "passed"
    assert answers_stored(engine) == 3


@pytest.mark.parametrize(("body", "says"), [
    ({"item": 0, "attempt": 1, "answer": {"empathy": 6, "relevance": 2, "fluency": 5}}, "6 is not an answer to"),
    ({"item": 0, "attempt": 1, "answer": {"empathy": 1, "relevance": 2}}, "no answer to 'fluency'"),
    ({"item": 0, "attempt": 1, "answer": {"empathy": 1, "relevance": 2, "fluency": 5, "humour": 3}},
     "'humour' is not a question of the study"),
    ({"item": 3, "attempt": 1, "answer": LIKERT_RIGHT[0]}, "has 3 practice items (0 to 2)"),
    ({"item": 0, "attempt": 0, "answer": LIKERT_RIGHT[0]}, "attempt must be an integer from 1"),
    ({"item": "0", "attempt": 1, "answer": LIKERT_RIGHT[0]}, "item must be the practice item's position"),
    ({"item": 0, "attempt": 1, "answer": {"empathy": "1", "relevance": 2, "fluency": 5}}, "'1' is not an answer"),
    ({"item": 0, "attempt": 1, "answer": {"empathy": True, "relevance": 2, "fluency": 5}}, "must be one of"),
    ({"item": 0, "attempt": 1}, "answer is required"),
    ({"item": 0, "attempt": 1, "answer": LIKERT_RIGHT[0], "seconds": 3}, "unknown field 'seconds'"),
])
def test_an_answer_that_does_not_fit_the_study_is_refused_naming_what_and_stores_nothing(qualified_app, body, says):
    app, engine = qualified_app
    client, _ = rater(app, engine, "rita")
    refused = client.post("/api/annotate/qualification/answers", json=body)
    assert refused.status_code == 400 and says in refused.get_json()["message"], refused.get_json()
    assert answers_stored(engine) == 0


def test_with_two_attempts_a_failed_first_one_starts_the_second_on_the_same_items(sample_engine):
    make_likert(sample_engine, qualification={"min_correct": 3, "attempts": 2, "items": LIKERT_GOLD})
    app = create_app({"DATABASE_URL": sample_engine.url.render_as_string(hide_password=False), "TESTING": True})
    client, rita = rater(app, sample_engine, "rita")
    after_first = go_through(client, [LIKERT_WRONG[0], *LIKERT_RIGHT[1:]])
    state = after_first["state"]
    assert (state["status"], state["attempt"], state["answered"]) == ("pending", 2, [])
    assert outcome(sample_engine, rita) is None
    late = answer(client, 0, LIKERT_RIGHT[0], attempt=1)  # a stale page still on attempt 1: answered already
    assert late.status_code == 409
    passed = go_through(client, LIKERT_RIGHT, attempt=2)["state"]
    assert (passed["status"], passed["attempt"], passed["correct"]) == ("passed", 2, 3)
    assert outcome(sample_engine, rita) == ("passed", 2, 3)


def test_a_study_without_a_qualification_says_so_and_hands_out_at_once(study_engine):
    app = create_app({"DATABASE_URL": study_engine.url.render_as_string(hide_password=False), "TESTING": True})
    client, _ = rater(app, study_engine, "rita", study="pilot")
    assert client.get("/api/annotate/qualification").get_json() == {"required": False}
    refused = answer(client, 0, LIKERT_RIGHT[0])
    assert refused.status_code == 400 and "has no qualification" in refused.get_json()["message"]
    assert client.get("/api/annotate/next").get_json()["assignment"] is not None


def claim_directly(engine, study: str, annotator_id: int) -> int | None:
    """The hand-out's claim statement, run as `next` runs it but without the Python check before it (the page and
    `next` bypassed): the id claimed, or None."""
    with Session(engine) as session:
        study_id = study_by_name(session, study).id
    now = now_utc()
    with engine.connect() as connection, write_transaction(connection):
        row = hot_sql.run(connection, hot_sql.kind_statements(annotation_kind("likert")).claim, {
            "study": study_id, "annotator": annotator_id, "now": hot_sql.moment(connection, now),
            "expires_at": hot_sql.moment(connection, now), "from_index": 0, "from_id": 0}).first()
        return None if row is None else row.id


def test_the_claim_itself_refuses_a_rater_who_has_not_passed_whatever_python_read(qualified_app):
    """No assignment is claimed for a rater without a passed outcome (none, or failed); with one, the same statement
    claims."""
    app, engine = qualified_app
    _, ida = rater(app, engine, "ida")
    with Session(engine) as session:
        study_id = study_by_name(session, "qual").id
    assert claim_directly(engine, "qual", ida) is None
    with unit_of_work(engine) as session:
        session.add(QualificationOutcome(study_id=study_id, annotator_id=ida, status=QualificationStatus.FAILED,
                                         attempt=1, correct=0, items=3))
    assert claim_directly(engine, "qual", ida) is None
    with unit_of_work(engine) as session:
        session.execute(update(QualificationOutcome).values(status=QualificationStatus.PASSED, correct=3))
    assert claim_directly(engine, "qual", ida) is not None


@pytest.mark.parametrize(("name", "answers", "passes"), [("ida", [LIKERT_RIGHT[0], *LIKERT_WRONG[1:]], False),
                                                         ("rita", LIKERT_RIGHT, True)], ids=["fails", "passes"])
def test_a_claim_racing_her_answers_gets_work_only_once_she_has_passed(qualified_app, name, answers, passes):
    """Two threads at once: one runs the claim statement over and over (the page and `next`'s check bypassed), the
    other answers the practice items through the app. Whatever order the database takes them in, a rater who fails
    is never claimed anything, and one who passes only once her passed outcome is stored."""
    app, engine = qualified_app
    client, annotator_id = rater(app, engine, name)
    claims: list[tuple[int, str | None]] = []  # (assignment claimed, her outcome read right after)
    refused: list[int] = []
    errors: list[BaseException] = []
    done, tried = threading.Event(), threading.Event()

    def claim_until_done() -> None:
        while not done.is_set():
            try:
                claimed = claim_directly(engine, "qual", annotator_id)
            except BaseException as error:  # noqa: BLE001 - reported below
                errors.append(error)
                return
            finally:
                tried.set()
            if claimed is None:
                refused.append(1)
                continue
            claims.append((claimed, (outcome(engine, annotator_id) or (None,))[0]))
            return  # she holds one now: a second would break the one-active-assignment key

    claiming = threading.Thread(target=claim_until_done)
    claiming.start()
    try:
        assert tried.wait(timeout=60)  # the claims are under way before her first answer
        go_through(client, answers)
    finally:
        done.set()
        claiming.join(timeout=60)
    assert not claiming.is_alive() and errors == []
    if passes:
        assert outcome(engine, annotator_id)[0] == "passed"
        assert all(after == "passed" for _, after in claims)
        if not claims:  # the answers won every race: she is claimed now
            assert claim_directly(engine, "qual", annotator_id) is not None
    else:
        assert claims == [] and refused and outcome(engine, annotator_id)[0] == "failed"
        with Session(engine) as session:
            assert session.scalars(select(Assignment.id).where(Assignment.annotator_id == annotator_id)).all() == []
        with pytest.raises(QualificationRequired, match="did not pass"):
            next_assignment(engine, "qual", annotator_id)


def test_the_database_keeps_one_outcome_per_rater_and_one_answer_per_item_and_attempt(qualified_app):
    app, engine = qualified_app
    client, rita = rater(app, engine, "rita")
    go_through(client, LIKERT_RIGHT)
    with Session(engine) as session:
        study_id = study_by_name(session, "qual").id
        item_id = session.scalar(select(QualificationItem.id).where(QualificationItem.position == 0))
    for row in (QualificationOutcome(study_id=study_id, annotator_id=rita, status=QualificationStatus.FAILED,
                                     attempt=1, correct=0, items=3),
                QualificationAnswer(study_id=study_id, item_id=item_id, annotator_id=rita, attempt=1,
                                    answer=LIKERT_RIGHT[0], correct=True)):
        with pytest.raises(IntegrityError), unit_of_work(engine) as session:
            session.add(row)


def test_the_report_meta_counts_who_qualified_failed_and_has_not_finished(qualified_app):
    app, engine = qualified_app
    go_through(rater(app, engine, "rita")[0], LIKERT_RIGHT)
    go_through(rater(app, engine, "bo")[0], LIKERT_RIGHT[:2] + LIKERT_WRONG[2:])  # two right: passes too
    go_through(rater(app, engine, "ida")[0], LIKERT_WRONG)
    answer(rater(app, engine, "cy")[0], 0, LIKERT_RIGHT[0])  # started, not finished
    meta = report_inputs(engine, "qual").meta["qualification"]
    assert meta == {"items": 3, "min_correct": 2, "attempts": 1, "passed": 2, "failed": 1, "undecided": 1}


def test_an_ab_study_scores_choices_and_offers_a_tie_only_when_the_study_allows_one(sample_engine):
    from tests.annotation.conftest import add_responses

    add_responses(sample_engine, ["sys-a", "sys-b"], 12)
    create_study(sample_engine, parse_study(pairwise_file()))
    app = create_app({"DATABASE_URL": sample_engine.url.render_as_string(hide_password=False), "TESTING": True})
    client, bo = rater(app, sample_engine, "bo", study="qual-ab")
    state = client.get("/api/annotate/qualification").get_json()
    assert [c["label"] for c in state["choices"]] == ["A", "B", "Tie"]
    assert [p["title"] for p in state["items"][0]["panels"]] == ["Conversation", "Response A", "Response B"]
    tie_is_right = answer(client, 0, PAIRWISE_RIGHT[0]).get_json()  # fluency accepts A, B or T
    assert tie_is_right["correct"] is True
    wrong = answer(client, 1, {"empathy": "A", "relevance": "A", "fluency": "T"}).get_json()
    assert wrong["correct"] is False and wrong["right"]["fluency"] == ["A"]
    assert wrong["state"]["status"] == "failed"  # min_correct 2 of 2, one attempt
    assert next_is_refused(client, "did not pass")
    no_ties = pairwise_file(name="qual-ab-no-ties", design={"judgments_per_pair": 2, "items_per_assignment": 2,
                                                             "ties": False},
                            qualification={"items": [{**PAIRWISE_GOLD_NO_TIE}]})
    create_study(sample_engine, parse_study(no_ties))
    client, _ = rater(app, sample_engine, "cy", study="qual-ab-no-ties")
    assert [c["value"] for c in client.get("/api/annotate/qualification").get_json()["choices"]] == ["A", "B"]
    refused = answer(client, 0, {"empathy": "T", "relevance": "B", "fluency": "B"})
    assert refused.status_code == 400 and "'T' is not an answer to 'empathy'" in refused.get_json()["message"]


PAIRWISE_GOLD_NO_TIE = {"context": ["I lost my wallet on the bus."], "response_a": "That is so stressful, I am sorry.",
                        "response_b": "Buses run every ten minutes.",
                        "answer": {"empathy": "A", "relevance": "A", "fluency": ["A", "B"]},
                        "feedback": "A answers her worry."}


def test_a_closed_study_takes_no_answer(qualified_app):
    from empeval.server.annotation.handout import close_study

    app, engine = qualified_app
    client, _ = rater(app, engine, "rita")
    close_study(engine, "qual")
    refused = answer(client, 0, LIKERT_RIGHT[0])
    assert refused.status_code == 403 and "closed" in refused.get_json()["message"]
    assert answers_stored(engine) == 0


def test_resuming_work_claimed_before_needs_no_qualification_check_again(qualified_app):
    """A rater who passed and holds an assignment resumes it (the one read of `next`, no claim)."""
    app, engine = qualified_app
    client, rita = rater(app, engine, "rita")
    go_through(client, LIKERT_RIGHT)
    first = client.get("/api/annotate/next").get_json()["assignment"]["assignment_id"]
    assert client.get("/api/annotate/next").get_json()["assignment"]["assignment_id"] == first
    with Session(engine) as session:
        assert session.get(Assignment, first).status == AssignmentStatus.ASSIGNED


def test_withdrawing_a_rater_removes_her_qualification_answers_and_outcome_from_the_counts(qualified_app):
    from empeval.server.annotation.withdraw import forget

    app, engine = qualified_app
    go_through(rater(app, engine, "rita")[0], LIKERT_RIGHT)
    go_through(rater(app, engine, "ida")[0], LIKERT_WRONG)
    forget(engine, "ida", study="qual")
    assert report_inputs(engine, "qual").meta["qualification"] == {
        "items": 3, "min_correct": 2, "attempts": 1, "passed": 1, "failed": 0, "undecided": 0}
    assert answers_stored(engine) == 3  # rita's


def test_the_likert_report_says_how_many_raters_qualified_and_failed(qualified_app, tmp_path):
    from empeval.reporting import write_study_report

    app, engine = qualified_app
    for name in ("rita", "bo"):
        client, _ = rater(app, engine, name)
        go_through(client, LIKERT_RIGHT)
        while (work := client.get("/api/annotate/next").get_json()["assignment"]) is not None:
            body = {"submission_id": uuid.uuid4().hex, "ratings": [
                {"item_id": item["item_id"], "scores": {c["key"]: 3 + i % 2 for c in work["criteria"]},
                 "seconds": 5.0} for i, item in enumerate(work["items"])]}
            assert client.post(f"/api/assignments/{work['assignment_id']}/submit", json=body).status_code == 200
    go_through(rater(app, engine, "ida")[0], LIKERT_WRONG)
    paths = write_study_report(engine, "qual", tmp_path / "report")
    assert ("qualification of 3 gold items with feedback after each (2 right to pass, one attempt): 2 qualified and "
            "1 failed; only raters who qualified were given work.") in paths["markdown"].read_text()


def test_the_ab_report_methods_say_how_many_raters_qualified_and_failed():
    from empeval.analysis.kinds.pairwise.methods import methods_paragraph
    from empeval.analysis.kinds.pairwise.schema import validate_judgments
    from empeval.analysis.kinds.pairwise.tables import pairwise_tables
    from empeval.analysis.simulate.pairwise import simulate_pairwise_study

    table = validate_judgments(simulate_pairwise_study(n_contexts=6, anchor="moel", k=2, seed=3).judgments)
    tables = pairwise_tables(table, focus="moel", n_boot=10)
    systems = sorted(set(table["system_left"]) | set(table["system_right"]))
    criteria = sorted(set(table["criterion"]))

    def paragraph(meta):
        return methods_paragraph(table, tables, meta, systems=systems, criteria=criteria, n_boot=10, include_late=True)

    meta = {"k": 3, "qualification": {"items": 2, "min_correct": 2, "attempts": 2, "passed": 9, "failed": 4,
                                      "undecided": 0}}
    assert paragraph(meta).endswith(
        "Before their first assignment raters went through a qualification of 2 gold items with feedback after each "
        "(2 right to pass, up to 2 attempts): 9 qualified and 4 failed; only raters who qualified were given work.")
    assert "qualification" not in paragraph({"k": 3})


def test_the_kinds_with_a_qualification_supply_it_in_both_rooms_and_the_others_in_neither():
    """A kind whose tasks part reads gold items also says, in the annotation room, what a question offers; the kinds
    without one keep the default hooks, so a study file of theirs is refused rather than failing later."""
    from empeval.server.annotation.kinds import AnnotationKind
    from empeval.tasks.kinds import has_qualification, task_kinds

    having = {kind.name for kind in task_kinds() if has_qualification(kind)}
    assert having == {"likert", "pairwise", "acute"}
    for kind in task_kinds():
        offers = type(annotation_kind(kind.name)).qualification_choices is not AnnotationKind.qualification_choices
        assert offers == (kind.name in having), kind.name
