"""An ACUTE-Eval study recruited on Prolific, over a chat study recruited on Prolific too: a third party comes through
the ACUTE study's link, is handed pairs of the chat study's conversations (as text, no system named), a submit with a
justification too short is refused without a completion code and stores nothing, the whole assignment gets the
code, and the link then gives her the code again rather than more work. A participant who talked in the chat study
comes through the same link as the same annotator and is handed nothing: she talked about every prompt compared, and
ACUTE-Eval's raters are third parties."""
from __future__ import annotations

import uuid

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from empeval.server.annotation.annotators import invite
from empeval.server.annotation.secrets import read_invite, secret_key
from empeval.server.store.kinds.acute import AcuteChoice
from empeval.server.web import create_app
from empeval.server.web.auth import INVITE_COOKIE
from empeval.server.web.chat_api import close_live_replies
from empeval.tasks.study_create import create_study
from empeval.tasks.study_file import parse_study
from tests.annotation.acute_fixtures import ACUTE, CHAT, PARTNERS, chat_file, make_acute, placements
from tests.crowd.test_acute_mock_run import finished_conversations, simulated_speakers_talk
from tests.prolific.conftest import COMPLETION_CODE, CSRF, OTHER_PROLIFIC_STUDY_ID, PROLIFIC_STUDY_ID, ids, link_path

SPEAKER_PID = "0123456789abcdef01234567"  # a participant of the chat study
CHAT_CODE = "CHAT0001"
COMPLETION = {"code": COMPLETION_CODE, "url": f"https://app.prolific.com/submissions/complete?cc={COMPLETION_CODE}"}
WHY = "  Listener 2 asked how she felt about it.  "


def invited_annotator(client, engine, study: str) -> int:
    """The annotator whose invite cookie the study link set."""
    cookie = client.get_cookie(INVITE_COOKIE)
    assert cookie is not None, "the study link set no invite cookie"
    annotator_id, invited_to = read_invite(secret_key(engine), cookie.value)
    assert invited_to == study
    return annotator_id


def test_an_acute_study_on_prolific_hands_third_parties_their_pairs_and_the_code_after_a_valid_submit(sample_engine):
    create_study(sample_engine, parse_study({**chat_file(), "recruitment": {
        "platform": "prolific", "prolific_study_id": OTHER_PROLIFIC_STUDY_ID, "completion_code": CHAT_CODE}}))
    app = create_app({"DATABASE_URL": sample_engine.url.render_as_string(hide_password=False), "TESTING": True})
    try:
        # The chat study: one session by a Prolific participant, come through the chat study's link, two by local
        # raters; each talked by the demo's simulated speakers.
        speaker = app.test_client()
        chat_ids = ids(pid=SPEAKER_PID, study_id=OTHER_PROLIFIC_STUDY_ID)
        assert speaker.get(link_path(sample_engine, CHAT), query_string=chat_ids).status_code == 303
        talkers = [invited_annotator(speaker, sample_engine, CHAT),
                   *(invite(sample_engine, f"speaker-{i}", CHAT)[0].id for i in range(2))]
        assert [r["status"] for r in simulated_speakers_talk(sample_engine, talkers)] == ["stored"] * 3
        assert finished_conversations(sample_engine) == 9
        make_acute(sample_engine, recruitment={"platform": "prolific", "prolific_study_id": PROLIFIC_STUDY_ID,
                                               "completion_code": COMPLETION_CODE})

        # The chat study's participant, at the ACUTE study's link: the same annotator, and no work for her.
        again = app.test_client()
        acute_ids = ids(pid=SPEAKER_PID)
        assert again.get(link_path(sample_engine, ACUTE), query_string=acute_ids).status_code == 303
        assert invited_annotator(again, sample_engine, ACUTE) == talkers[0]
        assert again.get("/api/annotate/next", headers=CSRF).get_json()["assignment"] is None

        # A third party.
        client = app.test_client()
        answer = client.get(link_path(sample_engine, ACUTE), query_string=ids())
        assert answer.status_code == 303 and answer.headers["Location"] == "/annotate"
        reply = client.get("/api/annotate/next", headers=CSRF)
        assignment = reply.get_json()["assignment"]
        assert assignment["kind"] == "acute" and [c["key"] for c in assignment["criteria"]] == ["empathy", "talk_to"]
        placed = placements(sample_engine, assignment["assignment_id"])
        assert [item["item_id"] for item in assignment["items"]] == [pair_id for _, pair_id, _ in placed]
        assert all(item[side]["turns"] for item in assignment["items"] for side in ("left", "right"))
        assert not any(name in reply.get_data(as_text=True) for name in PARTNERS)

        entries = [{"item_id": item["item_id"], "choices": {"empathy": "right", "talk_to": "left"},
                    "justifications": {"empathy": WHY, "talk_to": "  The first listener stayed with her story. "},
                    "seconds": 40.0} for item in assignment["items"]]
        url = f"/api/assignments/{assignment['assignment_id']}/submit"
        short = [dict(entries[0], justifications={**entries[0]["justifications"], "talk_to": "  kinder  "}),
                 *entries[1:]]
        refused = client.post(url, headers=CSRF, json={"submission_id": uuid.uuid4().hex, "comparisons": short})
        assert refused.status_code == 400 and COMPLETION_CODE not in refused.get_data(as_text=True)
        assert refused.get_json()["message"].startswith(f"comparisons[0]: talk_to justification for item "
                                                        f"{entries[0]['item_id']} must be at least 10 characters")
        with Session(sample_engine) as session:
            assert session.scalar(select(func.count(AcuteChoice.id))) == 0

        receipt = client.post(url, headers=CSRF, json={"submission_id": uuid.uuid4().hex, "comparisons": entries})
        assert receipt.status_code == 200, receipt.get_json()
        assert receipt.get_json()["completion"] == COMPLETION
        assert receipt.get_json()["choices"] == 2 * len(entries)
        with Session(sample_engine) as session:
            stored = {(c.acute_pair_id, c.criterion): (c.choice, c.justification) for c in session.scalars(
                select(AcuteChoice).where(AcuteChoice.assignment_id == assignment["assignment_id"]))}
        assert stored == {(e["item_id"], q): (e["choices"][q], e["justifications"][q].strip())
                          for e in entries for q in ("empathy", "talk_to")}

        # Prolific pays one submission per participant: her link now gives the code, not more pairs.
        back = client.get(link_path(sample_engine, ACUTE), query_string=ids(session="1" * 24))
        assert back.status_code == 200 and back.get_json() == {"status": "completed", "completion": COMPLETION}
    finally:
        close_live_replies(app)
