"""A best-worst scaling study recruited on Prolific: a participant comes through the study link, gets a tuple
assignment, a refused submit carries no completion code, a valid one does."""
from __future__ import annotations

import uuid

from empeval.server.web import create_app
from tests.annotation.best_worst_fixtures import make_bws_study
from tests.prolific.conftest import COMPLETION_CODE, CSRF, PROLIFIC_STUDY_ID, ids, link_path

COMPLETION = {"code": COMPLETION_CODE, "url": f"https://app.prolific.com/submissions/complete?cc={COMPLETION_CODE}"}


def test_a_best_worst_study_on_prolific_hands_out_the_code_after_a_valid_submit(sample_engine):
    make_bws_study(sample_engine, control_rate=0, recruitment={
        "platform": "prolific", "prolific_study_id": PROLIFIC_STUDY_ID, "completion_code": COMPLETION_CODE})
    app = create_app({"DATABASE_URL": sample_engine.url.render_as_string(hide_password=False), "TESTING": True})
    client = app.test_client()
    assert client.get(link_path(sample_engine, "bws"), query_string=ids()).status_code == 303
    assignment = client.get("/api/annotate/next", headers=CSRF).get_json()["assignment"]
    assert assignment["kind"] == "best_worst" and all(len(item["responses"]) == 3 for item in assignment["items"])
    entries = [{"item_id": item["item_id"], "best": {c["key"]: "A" for c in assignment["criteria"]},
                "worst": {c["key"]: "B" for c in assignment["criteria"]}} for item in assignment["items"]]
    url = f"/api/assignments/{assignment['assignment_id']}/submit"
    same = [{**entry, "worst": entry["best"]} for entry in entries]
    refused = client.post(url, headers=CSRF, json={"submission_id": uuid.uuid4().hex, "best_worst": same})
    assert refused.status_code == 400 and COMPLETION_CODE not in refused.get_data(as_text=True)
    assert "as both the best and the worst" in refused.get_data(as_text=True)
    receipt = client.post(url, headers=CSRF, json={"submission_id": uuid.uuid4().hex, "best_worst": entries})
    assert receipt.status_code == 200 and receipt.get_json()["completion"] == COMPLETION
