"""A chat study recruited on Prolific: a participant comes through the study link, talks live through the cookie the
link set (turns need X-Requested-With like every cookie-authenticated call), a session with a conversation still
open is refused without a completion code, the whole session gets it."""
from __future__ import annotations

import uuid

from empeval.server.web import create_app
from empeval.server.web.chat_api import close_live_replies
from tests.annotation.test_chat_turns import SPEAKER, make_chat
from tests.prolific.conftest import COMPLETION_CODE, CSRF, PROLIFIC_STUDY_ID, ids, link_path


def test_a_chat_study_on_prolific_hands_out_the_code_after_the_whole_session(sample_engine):
    make_chat(sample_engine, extra={"recruitment": {
        "platform": "prolific", "prolific_study_id": PROLIFIC_STUDY_ID, "completion_code": COMPLETION_CODE}})
    app = create_app({"DATABASE_URL": sample_engine.url.render_as_string(hide_password=False), "TESTING": True})
    try:
        client = app.test_client()
        assert client.get(link_path(sample_engine, "talk"), query_string=ids()).status_code == 303
        page = client.get("/api/annotate/next", headers=CSRF).get_json()["assignment"]
        base = f"/api/assignments/{page['assignment_id']}/conversations"
        assert client.post(f"{base}/0/turns", json={"index": 0, "text": "hi"}).status_code in (401, 403)  # no CSRF
        for position in range(len(page["items"])):
            for i in range(2):
                sent = client.post(f"{base}/{position}/turns", headers=CSRF, json={"index": 2 * i, "text": SPEAKER[i]})
                assert sent.status_code == 200, sent.get_json()
            if position < len(page["items"]) - 1:
                assert client.post(f"{base}/{position}/end", headers=CSRF).status_code == 200
        page = client.get("/api/annotate/next", headers=CSRF).get_json()["assignment"]
        entries = [{"item_id": item["item_id"], "ratings": {c["key"]: 3 for c in page["criteria"]},
                    "turns": {str(t["index"]): ["none"] for t in item["turns"] if t["speaker"] == "system"}}
                   for item in page["items"]]
        url = f"/api/assignments/{page['assignment_id']}/submit"
        refused = client.post(url, headers=CSRF, json={"submission_id": uuid.uuid4().hex, "conversations": entries})
        assert refused.status_code == 400 and "still open" in refused.get_data(as_text=True)
        assert COMPLETION_CODE not in refused.get_data(as_text=True)
        assert client.post(f"{base}/{len(page['items']) - 1}/end", headers=CSRF).status_code == 200
        receipt = client.post(url, headers=CSRF, json={"submission_id": uuid.uuid4().hex, "conversations": entries})
        assert receipt.status_code == 200 and receipt.get_json()["completion"]["code"] == COMPLETION_CODE
    finally:
        close_live_replies(app)
