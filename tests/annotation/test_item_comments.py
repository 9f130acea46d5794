"""Per-item comments (`[design] item_comments = true`): a rater's comment under one item of a Likert or A/B
assignment, sent as the entry's `comment`, stored once per (assignment, item) in `item_comment`, refused by a study
without them, capped as the assignment's comment is, exported as `item_comment` on every row of its item (and read
back by the analysis side), and deleted by `annotators forget`. On SQLite and PostgreSQL (store_url)."""
from __future__ import annotations

import pytest
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from empeval.analysis.kinds.likert.load import read_export
from empeval.analysis.kinds.likert.schema import EXPORT_COLUMNS
from empeval.analysis.kinds.pairwise.schema import EXPORT_COLUMNS as AB_EXPORT_COLUMNS
from empeval.analysis.kinds.pairwise.schema import read_judgments
from empeval.server.annotation.annotators import invite
from empeval.server.annotation.export import export_rows, rows_to_csv
from empeval.server.annotation.handout import assignment_payload
from empeval.server.annotation.item_comments import MAX_ITEM_COMMENT
from empeval.server.annotation.submission import submit_assignment
from empeval.server.annotation.withdraw import forget
from empeval.server.errors import BadInput
from empeval.server.store.item_comment_tables import ItemComment
from empeval.server.store.models import Assignment
from empeval.tasks.study_create import create_study
from empeval.tasks.study_file import parse_study
from tests.annotation.conftest import SYSTEMS, add_responses, new_submission_id
from tests.annotation.pairwise_fixtures import neutral_text
from tests.annotation.researcher_helpers import claim

FORMULA = "=HYPERLINK(\"http://x\")"


def likert_study(engine, *, item_comments: bool, name: str = "notes") -> None:
    add_responses(engine, SYSTEMS, 12)
    create_study(engine, parse_study({
        "name": name, "seed": 3, "contexts": {"split": "test", "count": 6},
        "systems": {"names": SYSTEMS},
        "design": {"ratings_per_response": 1, "items_per_assignment": 4, "control_rate": 0.0,
                   "item_comments": item_comments}}))


def ratings_body(engine, assignment_id: int, comments: dict[int, object]) -> dict:
    """A full submission of the assignment, with `comments` (position -> comment) on its items."""
    items = assignment_payload(engine, assignment_id)["items"]
    ratings = []
    for position, item in enumerate(items):
        entry = {"item_id": item["item_id"], "scores": {"empathy": 4, "relevance": 3, "fluency": 5}, "seconds": 5}
        if position in comments:
            entry["comment"] = comments[position]
        ratings.append(entry)
    return {"submission_id": new_submission_id(), "ratings": ratings}


def stored_comments(engine) -> list[tuple[int, int, str]]:
    with Session(engine) as session:
        return [tuple(row) for row in session.execute(
            select(ItemComment.assignment_id, ItemComment.item_id, ItemComment.comment)
            .order_by(ItemComment.assignment_id, ItemComment.item_id))]


@pytest.fixture
def commented(sample_engine):
    likert_study(sample_engine, item_comments=True)
    return sample_engine


def test_the_study_file_field_is_a_boolean_and_off_by_default():
    base = {"name": "x", "contexts": {"count": 3}, "systems": {"names": ["gold"]}}
    assert parse_study(base).design.item_comments is False
    assert parse_study({**base, "design": {"item_comments": True}}).design.item_comments is True
    with pytest.raises(BadInput, match=r"design\.item_comments: must be true or false, got 'yes'"):
        parse_study({**base, "design": {"item_comments": "yes"}})


def test_comments_are_stored_once_per_item_and_a_retry_stores_nothing_twice(commented):
    engine = commented
    rita, _ = invite(engine, "rita", "notes")
    assignment_id = claim(engine, rita.id, "notes")
    assert assignment_payload(engine, assignment_id)["item_comments"] is True
    body = ratings_body(engine, assignment_id, {0: "The response ignores her exam.", 1: "   ", 2: None})
    first = submit_assignment(engine, assignment_id, rita.id, body)
    again = submit_assignment(engine, assignment_id, rita.id, body)
    assert again == first
    item_ids = [entry["item_id"] for entry in body["ratings"]]
    assert stored_comments(engine) == [(assignment_id, item_ids[0], "The response ignores her exam.")]


def test_a_study_without_item_comments_refuses_them_and_stores_nothing(sample_engine):
    engine = sample_engine
    likert_study(engine, item_comments=False)
    rita, _ = invite(engine, "rita", "notes")
    assignment_id = claim(engine, rita.id, "notes")
    assert "item_comments" not in assignment_payload(engine, assignment_id)
    with pytest.raises(BadInput, match=r"takes no comments on single items \(design\.item_comments is off\)"):
        submit_assignment(engine, assignment_id, rita.id, ratings_body(engine, assignment_id, {0: "hm"}))
    with Session(engine) as session:
        assert session.get(Assignment, assignment_id).status == "assigned"
    assert stored_comments(engine) == []
    # Without comments the same study takes the submission.
    submit_assignment(engine, assignment_id, rita.id, ratings_body(engine, assignment_id, {}))


def test_through_the_api_a_refusal_is_a_400_naming_the_setting(sample_engine):
    from empeval.server.web import create_app

    engine = sample_engine
    likert_study(engine, item_comments=False)
    rita, token = invite(engine, "rita", "notes")
    app = create_app({"DATABASE_URL": engine.url.render_as_string(hide_password=False), "TESTING": True})
    assignment_id = claim(engine, rita.id, "notes")
    response = app.test_client().post(f"/api/assignments/{assignment_id}/submit",
                                      json=ratings_body(engine, assignment_id, {1: "unclear"}),
                                      headers={"Authorization": f"Bearer {token}"})
    assert response.status_code == 400, response.get_data(as_text=True)
    assert "design.item_comments" in response.get_json()["message"]


@pytest.mark.parametrize("comment, message", [
    ("x" * (MAX_ITEM_COMMENT + 1), rf"ratings\[0\]\.comment must be a string of at most {MAX_ITEM_COMMENT}"),
    (7, r"ratings\[0\]\.comment must be a string"),
    ("a\x00b", r"ratings\[0\]\.comment "),
])
def test_a_comment_too_long_or_not_text_is_refused(commented, comment, message):
    engine = commented
    rita, _ = invite(engine, "rita", "notes")
    assignment_id = claim(engine, rita.id, "notes")
    with pytest.raises(BadInput, match=message):
        submit_assignment(engine, assignment_id, rita.id, ratings_body(engine, assignment_id, {0: comment}))
    assert stored_comments(engine) == []
    body = ratings_body(engine, assignment_id, {0: "x" * MAX_ITEM_COMMENT})  # at the cap: taken
    submit_assignment(engine, assignment_id, rita.id, body)
    assert len(stored_comments(engine)[0][2]) == MAX_ITEM_COMMENT


def test_the_likert_export_carries_each_comment_on_every_rating_of_its_item(commented, tmp_path):
    engine = commented
    rita, _ = invite(engine, "rita", "notes")
    assignment_id = claim(engine, rita.id, "notes")
    body = ratings_body(engine, assignment_id, {1: FORMULA})
    submit_assignment(engine, assignment_id, rita.id, body)
    commented_item = body["ratings"][1]["item_id"]
    rows = export_rows(engine, "notes")
    assert list(rows[0]) == list(EXPORT_COLUMNS) and "item_comment" in EXPORT_COLUMNS
    assert {(r["item_id"], r["item_comment"]) for r in rows} == {
        (entry["item_id"], FORMULA if entry["item_id"] == commented_item else None) for entry in body["ratings"]}
    assert sum(r["item_comment"] is not None for r in rows) == 3  # one per criterion
    written = rows_to_csv(rows, EXPORT_COLUMNS)
    assert "'=HYPERLINK" in written  # quoted like every other text cell
    path = tmp_path / "notes.csv"
    path.write_text(written, encoding="utf-8")
    tidy = read_export(path)
    assert sorted(tidy.loc[tidy["item"] == str(commented_item), "item_comment"].unique()) == [FORMULA]
    assert tidy.loc[tidy["item"] != str(commented_item), "item_comment"].isna().all()


def test_the_ab_export_carries_each_comment_on_every_judgment_of_its_pair(sample_engine, tmp_path):
    engine = sample_engine
    add_responses(engine, SYSTEMS, 30, text=neutral_text)
    create_study(engine, parse_study({
        "name": "ab", "kind": "pairwise", "seed": 5, "contexts": {"split": "test", "count": 8},
        "systems": {"names": SYSTEMS, "anchor": SYSTEMS[0]},
        "design": {"judgments_per_pair": 2, "items_per_assignment": 4, "control_rate": 0.0, "ties": True,
                   "item_comments": True}}))
    rita, _ = invite(engine, "rita", "ab")
    assignment_id = claim(engine, rita.id, "ab")
    pairs = assignment_payload(engine, assignment_id)["items"]
    judgments = [{"item_id": pair["item_id"], "choices": {"empathy": "A", "relevance": "B", "fluency": "T"},
                  **({"comment": "B repeats itself"} if position == 0 else {})}
                 for position, pair in enumerate(pairs)]
    body = {"submission_id": new_submission_id(), "judgments": judgments}
    submit_assignment(engine, assignment_id, rita.id, body)
    submit_assignment(engine, assignment_id, rita.id, body)  # a retry
    assert len(stored_comments(engine)) == 1
    rows = export_rows(engine, "ab")
    assert list(rows[0]) == list(AB_EXPORT_COLUMNS) and AB_EXPORT_COLUMNS[-2:] == ("item_comment", "seconds_on_item")
    with_comment = [r for r in rows if r["item_comment"] is not None]
    assert len(with_comment) == 3 and {r["item_comment"] for r in with_comment} == {"B repeats itself"}
    assert {r["position"] for r in with_comment} == {0}
    path = tmp_path / "ab.csv"
    path.write_text(rows_to_csv(rows, AB_EXPORT_COLUMNS), encoding="utf-8")
    table = read_judgments(path)
    assert table.loc[table["position"] == 0, "item_comment"].tolist() == ["B repeats itself"] * 3
    assert table.loc[table["position"] != 0, "item_comment"].isna().all()


def test_forget_deletes_her_item_comments_and_counts_them(commented):
    engine = commented
    rita, _ = invite(engine, "rita", "notes")
    bob, _ = invite(engine, "bob", "notes")
    hers = claim(engine, rita.id, "notes")
    submit_assignment(engine, hers, rita.id, {**ratings_body(engine, hers, {0: "mine", 2: "also mine"}),
                                              "comment": "overall fine"})
    his = claim(engine, bob.id, "notes")
    submit_assignment(engine, his, bob.id, ratings_body(engine, his, {1: "his"}))
    done = forget(engine, "rita", study="notes")
    assert done.comments_removed == 3  # the assignment's comment and her two on items
    assert [comment for _, _, comment in stored_comments(engine)] == ["his"]
    assert {r["item_comment"] for r in export_rows(engine, "notes")} == {None, "his"}
    with Session(engine) as session:
        assert session.scalar(select(func.count()).select_from(ItemComment)
                              .where(ItemComment.assignment_id == hers)) == 0
