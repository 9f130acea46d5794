"""An ACUTE-Eval study over a chat study, made the normal way: the chat study from its study file, its sessions talked
through the app's real turn routes with the backend's cheap live systems (minimal versions of test_chat_turns.py's
helpers), ended and submitted; then the ACUTE study from its own study file (`kind = "acute"`), and what SQL holds of
its pairs to check the hand-out and the export against."""
from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session, aliased

from empeval.server.annotation.annotators import invite
from empeval.server.store import make_engine
from empeval.server.store.kinds.acute import AcutePair, AssignmentAcutePair
from empeval.server.store.kinds.chat import AssignmentConversation, ChatConversation, ChatTurn
from empeval.server.web import create_app
from empeval.tasks.study_create import create_study
from empeval.tasks.study_file import parse_study

CHAT = "talk"
ACUTE = "judge"
# The chat study's partners: real systems of server/backend/systems.toml that cost nothing to run, two compared and
# a third as the control partner (as in test_chat_turns.py).
SYSTEMS = ("control-generic", "control-mismatched")
CONTROL = "control-scrambled"
PARTNERS = (*SYSTEMS, CONTROL)
SPEAKER = ["I finally got the job I wanted after months of trying!", "It was a long road, I almost gave up.",
           "Thanks, I am going to celebrate with my family tonight."]


def chat_file(name: str = CHAT, **chat: Any) -> dict:
    """Three sessions, each a conversation with every partner on its own prompt, over three prompts."""
    return {"name": name, "kind": "chat", "seed": 3, "contexts": {"split": "test", "count": 3},
            "systems": {"names": list(SYSTEMS), "controls": [CONTROL]},
            "chat": {"conversations_per_system": 3, "min_utterances": 4, "max_utterances": 6, "max_chars": 200,
                     "min_reply_seconds": 0, "turn_timeout_seconds": 10, **chat}}


def acute_file(name: str = ACUTE, *, acute: dict | None = None, design: dict | None = None, **top: Any) -> dict:
    """An ACUTE study over the chat study: its two systems compared, its control for control pairs."""
    return {"name": name, "kind": "acute", "seed": 5,
            "systems": {"names": list(SYSTEMS), "controls": [CONTROL]},
            "acute": {"chat_study": CHAT, **(acute or {})},
            "design": {"judgments_per_pair": 2, "items_per_assignment": 3, "control_rate": 0.34, **(design or {})},
            **top}


def make_chat(engine, name: str = CHAT, **chat: Any):
    return create_study(engine, parse_study(chat_file(name, **chat)))


def make_acute(engine, **changes: Any):
    return create_study(engine, parse_study(acute_file(**changes)))


@contextmanager
def chat_app(engine) -> Iterator[Any]:
    """The app on `engine`; its live reply service is closed afterwards."""
    app = create_app({"DATABASE_URL": engine.url.render_as_string(hide_password=False), "TESTING": True})
    try:
        yield app
    finally:
        live = app.extensions.get("empeval.live")
        if live is not None:
            live.close()


def rater(app, engine, name: str, study: str = CHAT):
    """A test client holding `name`'s invite to `study`."""
    client = app.test_client()
    client.environ_base["HTTP_AUTHORIZATION"] = f"Bearer {invite(engine, name, study)[1]}"
    return client


def talk(client, page: dict, position: int, n: int = 2) -> None:
    """n speaker turns in the conversation at `position`, each answered live; then end it."""
    for i in range(n):
        reply = client.post(f"/api/assignments/{page['assignment_id']}/conversations/{position}/turns",
                            json={"index": 2 * i, "text": SPEAKER[i]})
        assert reply.status_code == 200, reply.get_json()
        assert "failed" not in reply.get_json(), reply.get_json()
    ended = client.post(f"/api/assignments/{page['assignment_id']}/conversations/{position}/end", json={})
    assert ended.status_code == 200, ended.get_json()


def chat_body(page: dict, submission_id: str) -> dict:
    return {"submission_id": submission_id, "conversations": [
        {"item_id": item["item_id"], "ratings": {c["key"]: 4 for c in page["criteria"]},
         "turns": {str(t["index"]): ["made_sense"] for t in item["turns"] if t["speaker"] == "system"},
         "seconds": 30.0} for item in page["items"]]}


def chat_sessions(app, engine, names: tuple[str, ...], *, submit: bool = True) -> dict[str, int]:
    """Each of `names` claims a chat session, talks every conversation of it through the turn routes and ends it,
    then (with `submit`) submits it: name -> her chat assignment id."""
    held = {}
    for name in names:
        client = rater(app, engine, name)
        page = client.get("/api/annotate/next").get_json()["assignment"]
        for position in range(len(page["items"])):
            talk(client, page, position)
        if submit:
            page = client.get("/api/annotate/next").get_json()["assignment"]  # resumed: the turns as stored
            done = client.post(f"/api/assignments/{page['assignment_id']}/submit",
                               json=chat_body(page, f"chat-{name}-submit"))
            assert done.status_code == 200, done.get_json()
        held[name] = page["assignment_id"]
    return held


def finished_chat(engine, raters: tuple[str, ...] = ("cara", "cleo", "cole")) -> dict[str, int]:
    """The chat study with a session talked, ended and submitted by each of `raters` (three: every session)."""
    make_chat(engine)
    with chat_app(engine) as app:
        return chat_sessions(app, engine, raters)


@dataclass(frozen=True)
class StoredPair:
    """One pair of conversations as SQL holds it: its conversations (chat placement ids), their partners, prompts
    and turns (speaker, text), and whether it is a control."""

    pair_id: int
    conversations: tuple[int, int]
    systems: tuple[str, str]
    prompts: tuple[int, int]
    turns: tuple[tuple[tuple[str, str], ...], tuple[tuple[str, str], ...]]
    is_control: bool
    control_side: str | None


def stored_pairs(engine, study: str = ACUTE) -> dict[int, StoredPair]:
    """Every pair of conversations of the ACUTE study, by id."""
    talk_a, talk_b = aliased(AssignmentConversation), aliased(AssignmentConversation)
    chat_a, chat_b = aliased(ChatConversation), aliased(ChatConversation)
    from empeval.server.store.queries import study_by_name

    with Session(engine) as session:
        study_id = study_by_name(session, study).id
        rows = session.execute(
            select(AcutePair.id, talk_a.id, talk_b.id, chat_a.system, chat_b.system, chat_a.context_id,
                   chat_b.context_id, talk_a.assignment_id, talk_a.conversation_id, talk_b.assignment_id,
                   talk_b.conversation_id, AcutePair.is_control, AcutePair.control_side, AcutePair.context_a_id,
                   AcutePair.context_b_id)
            .join(talk_a, talk_a.id == AcutePair.conversation_a_id).join(chat_a, chat_a.id == talk_a.conversation_id)
            .join(talk_b, talk_b.id == AcutePair.conversation_b_id).join(chat_b, chat_b.id == talk_b.conversation_id)
            .where(AcutePair.study_id == study_id)).all()
        turns: dict[tuple[int, int], list[tuple[str, str]]] = {}
        for a, c, speaker, text in session.execute(select(ChatTurn.assignment_id, ChatTurn.conversation_id,
                                                          ChatTurn.speaker, ChatTurn.text).order_by(ChatTurn.idx)):
            turns.setdefault((a, c), []).append(("speaker" if speaker == "rater" else "listener", text))
    pairs = {}
    for (pair_id, key_a, key_b, system_a, system_b, prompt_a, prompt_b, session_a, chat_id_a, session_b, chat_id_b,
         is_control, side, context_a, context_b) in rows:
        assert (context_a, context_b) == (prompt_a, prompt_b)  # the pair's prompts are its conversations'
        pairs[pair_id] = StoredPair(pair_id, (key_a, key_b), (system_a, system_b), (prompt_a, prompt_b),
                                    (tuple(turns[session_a, chat_id_a]), tuple(turns[session_b, chat_id_b])),
                                    bool(is_control), side)
    return pairs


def placements(engine, assignment_id: int) -> list[tuple[int, int, str]]:
    """(position, pair id, shown_left) of an ACUTE assignment, in position order."""
    with Session(engine) as session:
        return [tuple(row) for row in session.execute(
            select(AssignmentAcutePair.position, AssignmentAcutePair.acute_pair_id, AssignmentAcutePair.shown_left)
            .where(AssignmentAcutePair.assignment_id == assignment_id).order_by(AssignmentAcutePair.position))]


def acute_store(tmp_path: Path, sample_templates, raters=("rita",)):
    """A SQLite copy of the sample store holding the finished chat study and an ACUTE study over it: (engine,
    {rater: invite token to the ACUTE study})."""
    url = f"sqlite:///{tmp_path / 'acute-page.db'}"
    sample_templates.fill(url)
    engine = make_engine(url)
    finished_chat(engine)
    make_acute(engine)
    return engine, {name: invite(engine, name, ACUTE)[1] for name in raters}
