"""ACUTE-Eval's onboarding: an ACUTE study's qualification items are made as its control pairs are, a control
partner's finished conversation of the chat study beside a real partner's (the same prompt where there is one), drawn
with the study's seed when the study is created; the page is shown both conversations as text (the ACUTE page's
panels, never a partner's name), the real partner's side is right on every question, and a rater who picks it passes
and gets real pairs."""
from __future__ import annotations

import uuid

import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session

from empeval.server.annotation.annotators import invite
from empeval.server.store import make_engine
from empeval.server.store.qualification_tables import QualificationItem
from empeval.server.web import create_app
from tests.annotation.acute_fixtures import ACUTE, CONTROL, PARTNERS, SYSTEMS, finished_chat, make_acute, stored_pairs

GOLD = {"min_correct": 2, "items": [
    {"control": CONTROL, "feedback": "Listener on the scrambled side makes no sense: pick the other."},
    {"control": CONTROL, "feedback": "Again the scrambled one: pick the listener who answers her."}]}


@pytest.fixture
def acute_engine(tmp_path, sample_templates):
    url = f"sqlite:///{tmp_path / 'acute-qualification.db'}"
    sample_templates.fill(url)
    engine = make_engine(url)
    finished_chat(engine)
    yield engine
    engine.dispose()


def chat_turns(engine) -> dict[tuple[tuple[str, str], ...], str]:
    """Every finished conversation's turns (speaker, text) -> its partner, from the stored pairs' two sides."""
    found = {}
    for pair in stored_pairs(engine).values():
        for turns, system in zip(pair.turns, pair.systems, strict=True):
            found[turns] = system
    return found


def test_the_gold_pairs_set_a_control_conversation_beside_a_real_one_and_the_real_side_is_right(acute_engine):
    summary = make_acute(acute_engine, qualification=GOLD)
    assert "qualification of 2 gold items (2 right to pass, one attempt)" in summary.sentence
    partner_of = chat_turns(acute_engine)
    with Session(acute_engine) as session:
        golds = session.scalars(select(QualificationItem).order_by(QualificationItem.position)).all()
    assert len(golds) == 2
    for gold in golds:
        assert [panel["title"] for panel in gold.panels] == ["Conversation 1", "Conversation 2"]
        sides = []
        for number, panel in enumerate(gold.panels, 1):
            turns = tuple(("speaker" if t["role"] == "speaker" else "listener", t["text"]) for t in panel["turns"])
            assert {t["label"] for t in panel["turns"] if t["role"] == "listener"} == {f"Listener {number}"}
            assert panel["note"].startswith("Feeling ")
            sides.append(partner_of[turns])
        assert sorted(sides, key=lambda s: s == CONTROL)[1] == CONTROL and set(sides) - {CONTROL} <= set(SYSTEMS)
        real_side = "left" if sides[1] == CONTROL else "right"
        assert gold.accepted == {"empathy": [real_side], "talk_to": [real_side]}
        assert not any(name in str(gold.panels) for name in PARTNERS)


def test_a_rater_who_picks_the_real_listeners_passes_and_is_handed_real_pairs(acute_engine):
    make_acute(acute_engine, qualification=GOLD)
    app = create_app({"DATABASE_URL": str(acute_engine.url), "TESTING": True})
    client = app.test_client()
    client.environ_base["HTTP_AUTHORIZATION"] = f"Bearer {invite(acute_engine, 'rita', ACUTE)[1]}"
    assert client.get("/api/annotate/next").status_code == 403
    state = client.get("/api/annotate/qualification").get_json()
    assert [c["label"] for c in state["choices"]] == ["Conversation 1's listener", "Conversation 2's listener"]
    assert not any(name in str(state) for name in PARTNERS)
    with Session(acute_engine) as session:
        right = {g.position: g.accepted["empathy"][0] for g in session.scalars(select(QualificationItem))}
    for position in (0, 1):
        reply = client.post("/api/annotate/qualification/answers", json={
            "item": position, "attempt": 1, "answer": {"empathy": right[position], "talk_to": right[position]}})
        assert reply.status_code == 200 and reply.get_json()["correct"] is True
        assert reply.get_json()["feedback"] == GOLD["items"][position]["feedback"]
    assert reply.get_json()["state"]["status"] == "passed"
    work = client.get("/api/annotate/next").get_json()["assignment"]
    assert work["kind"] == "acute" and work["items"]


def test_the_acute_report_counts_who_passed_the_onboarding_and_who_failed_it(acute_engine, tmp_path):
    from empeval.reporting import write_study_report

    make_acute(acute_engine, qualification=GOLD)
    app = create_app({"DATABASE_URL": str(acute_engine.url), "TESTING": True})
    with Session(acute_engine) as session:
        right = {g.position: g.accepted["empathy"][0] for g in session.scalars(select(QualificationItem))}
    for name, passes in (("rita", True), ("ida", False)):
        client = app.test_client()
        client.environ_base["HTTP_AUTHORIZATION"] = f"Bearer {invite(acute_engine, name, ACUTE)[1]}"
        for position in (0, 1):
            side = right[position] if passes else ("right" if right[position] == "left" else "left")
            assert client.post("/api/annotate/qualification/answers", json={
                "item": position, "attempt": 1, "answer": {"empathy": side, "talk_to": side}}).status_code == 200
        while passes and (work := client.get("/api/annotate/next").get_json()["assignment"]) is not None:
            body = {"submission_id": uuid.uuid4().hex, "comparisons": [
                {"item_id": item["item_id"], "choices": {"empathy": "left", "talk_to": "right"},
                 "justifications": {"empathy": "The left one noticed her joy.", "talk_to": "The right one listened."}}
                for item in work["items"]]}
            assert client.post(f"/api/assignments/{work['assignment_id']}/submit", json=body).status_code == 200
    text = write_study_report(acute_engine, ACUTE, tmp_path / "report")["markdown"].read_text()
    assert "qualification of 2 gold items with feedback after each (2 right to pass, one attempt): 1 qualified and 1 " \
           "failed" in text
