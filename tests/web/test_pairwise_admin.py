"""The admin export and progress of a pairwise (A/B) study: the export is its judgment table (one row per choice and
criterion, the contract's columns), not an empty ratings table, and progress counts its judgments."""
from __future__ import annotations

import csv
import io
import json

import pytest

from empeval.analysis.kinds.pairwise.schema import EXPORT_COLUMNS
from empeval.server.annotation.annotators import invite
from empeval.server.annotation.handout import next_assignment_payload
from empeval.server.annotation.submission import submit_assignment
from empeval.tasks.study_create import create_study
from empeval.tasks.study_file import parse_study

CRITERIA = ("empathy", "relevance", "fluency")


@pytest.fixture
def judged(study_store):
    """Study `ab` beside the Likert `pilot`; rita and bo each submit one assignment, every pair A on every
    criterion. Returns the number of pairs they judged."""
    create_study(study_store, parse_study({
        "name": "ab", "kind": "pairwise", "seed": 2, "contexts": {"split": "test", "count": 4},
        "systems": {"names": ["sys-a", "sys-b"]},
        "design": {"judgments_per_pair": 2, "items_per_assignment": 2, "control_rate": 0.0, "assignment_minutes": 30}}))
    pairs = 0
    for n, name in enumerate(("rita", "bo")):
        annotator, _ = invite(study_store, name, "ab")
        payload = next_assignment_payload(study_store, "ab", annotator.id)
        judgments = [{"item_id": item["item_id"], "choices": dict.fromkeys(CRITERIA, "A")}
                     for item in payload["items"]]
        submit_assignment(study_store, payload["assignment_id"], annotator.id,
                          {"submission_id": f"ab-submission-{n}", "judgments": judgments})
        pairs += len(judgments)
    return pairs


def test_the_export_of_a_pairwise_study_is_its_judgment_table(app, admin, judged):
    client = app.test_client()
    headers = {"Authorization": f"Bearer {admin}"}
    answer = client.get("/api/studies/ab/export?format=csv", headers=headers)
    assert answer.status_code == 200, answer.text
    rows = list(csv.DictReader(io.StringIO(answer.text)))
    assert list(rows[0]) == list(EXPORT_COLUMNS)
    assert len(rows) == judged * len(CRITERIA)
    assert {row["choice"] for row in rows} == {"left"} and {row["study"] for row in rows} == {"ab"}
    assert all(row["preferred"] == row["system_left"] for row in rows)
    lines = client.get("/api/studies/ab/export?format=jsonl", headers=headers).text.splitlines()
    assert [json.loads(line)["criterion"] for line in lines] == [row["criterion"] for row in rows]


def test_the_progress_of_a_pairwise_study_counts_its_judgments(app, admin, judged):
    client = app.test_client()
    progress = client.get("/api/studies/ab/progress", headers={"Authorization": f"Bearer {admin}"}).get_json()
    assert progress["kind"] == "pairwise"
    assert (progress["judgments"], progress["choices"]) == (judged, judged * len(CRITERIA))
    assert sum(progress["judgments_per_annotator"].values()) == judged
    assert len(progress["judgments_per_annotator"]) == 2 and progress["judgments_per_pair"] == 2
    assert progress["assignments"]["submitted"] == 2
    # The dashboard page shows both studies.
    client.post("/admin/session", data={"token": admin})
    page = client.get("/admin", headers={"Authorization": f"Bearer {admin}"})
    assert page.status_code == 200 and "ab" in page.text


def test_the_dashboard_speaks_of_judgments_for_a_pairwise_study_and_of_ratings_for_a_likert_one(app, admin, judged):
    page = app.test_client().get("/admin", headers={"Authorization": f"Bearer {admin}"}).get_data(as_text=True)
    sections = {part.split("<", 1)[0].strip(): part for part in page.split("<h2>")[1:]}
    ab, pilot = sections["ab"], sections["pilot"]
    assert f"{judged} judgments of {judged * len(CRITERIA)} choices (k = 2 per pair)" in " ".join(ab.split())
    assert "<th>judgments</th>" in ab and "ratings" not in ab and "alpha" not in ab
    assert "items rated" in pilot and "<th>ratings</th>" in pilot and "alpha (ordinal)" in pilot
