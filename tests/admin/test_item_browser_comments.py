"""Per-item comments on the study page's item browser (issue 30 #4): a rater's comment on one Likert item or one A/B
pair shows under that item, beside her answers, in its own column (only where the item has one), counted above the
table and escaped; her comment on the assignment keeps its own column."""
from __future__ import annotations

import html
import re

from sqlalchemy import select, update
from sqlalchemy.orm import Session

from empeval.server.annotation.annotators import invite
from empeval.server.store.item_comment_tables import ItemComment
from empeval.server.store.kinds.likert import Rating
from empeval.server.store.kinds.pairwise import Choice
from empeval.server.store.models import Assignment, Study
from empeval.server.store.queries import now_utc
from tests.admin.conftest import app_on
from tests.admin.test_item_browser import STUDY, bearer_of, own  # noqa: F401 - the rated Likert study fixture
from tests.annotation.pairwise_fixtures import AB_CRITERIA, assignment_ids, give, placements

HOSTILE = "<b>Too cold</b> & curt"


def _articles(body: str) -> dict[int, str]:
    return {int(part.split('"', 1)[0]): part.split("</article>", 1)[0]
            for part in body.split('<article class="item" id="item-')[1:]}


def _cells(article: str, kind: str) -> list[str]:
    return [html.unescape(cell) for cell in re.findall(rf'<td class="text {kind}">(.*?)</td>', article)]


def test_a_comment_on_a_likert_item_shows_under_it_beside_the_raters_scores(own):  # noqa: F811
    with Session(own) as session, session.begin():
        study_id = session.scalar(select(Study.id).where(Study.name == STUDY))
        item_id, assignment_id = session.execute(
            select(Rating.item_id, Rating.assignment_id).join(Assignment, Assignment.id == Rating.assignment_id)
            .where(Assignment.study_id == study_id).order_by(Rating.id)).first()
        session.add(ItemComment(assignment_id=assignment_id, item_id=item_id, comment=HOSTILE))
    client, headers = app_on(own).test_client(), bearer_of(own)
    body = client.get(f"/admin/studies/{STUDY}?q=too+cold", headers=headers).get_data(as_text=True)
    articles = _articles(body)
    assert list(articles) == [item_id]
    article = articles[item_id]
    assert "<b>Too cold</b>" not in article and "&lt;b&gt;Too cold&lt;/b&gt;" in article
    assert "1 comment on this item." in article and ">comment on this item</th>" in article
    rows = re.findall(r"<tr><td>(.*?)</td><td>(\d+)</td>", article)
    commented = [c for (_, assignment), c in zip(rows, _cells(article, "item-comment"), strict=True)
                 if int(assignment) == assignment_id]
    assert commented == [HOSTILE] and sorted(_cells(article, "item-comment")).count("") == len(rows) - 1
    # An item nobody commented on has no such column; every rating keeps the assignment's comment column.
    plain = _articles(client.get(f"/admin/studies/{STUDY}", headers=headers).get_data(as_text=True))
    other = next(text for key, text in plain.items() if key != item_id and "<table" in text)
    assert 'class="text item-comment"' not in other and 'class="text assignment-comment"' in other


def test_a_comment_on_an_ab_pair_shows_under_the_pair(own):  # noqa: F811
    rater, _ = invite(own, "rita", "ab")
    assignment_id = assignment_ids(own, "ab")[0]
    give(own, assignment_id, rater.id)
    placed = placements(own, assignment_id)
    with Session(own) as session, session.begin():
        session.execute(update(Assignment).where(Assignment.id == assignment_id).values(
            status="submitted", submission_id="sub-1", submitted_at=now_utc()))
        session.add_all(Choice(assignment_id=assignment_id, pair_item_id=p.pair_item_id, annotator_id=rater.id,
                               criterion=criterion, choice="left", submission_id="sub-1")
                        for p in placed for criterion in AB_CRITERIA)
        session.add(ItemComment(assignment_id=assignment_id, item_id=placed[1].pair_item_id,
                                comment="Both replies ignore the question"))
    client, headers = app_on(own).test_client(), bearer_of(own)
    found: dict[int, str] = {}
    for page in range(1, 10):
        answer = client.get(f"/admin/studies/ab?page={page}&rated=only", headers=headers)
        if answer.status_code != 200:
            break
        found |= _articles(answer.get_data(as_text=True))
    assert set(found) == {p.pair_item_id for p in placed}
    assert _cells(found[placed[1].pair_item_id], "item-comment") == ["Both replies ignore the question"]
    assert "1 comment on this pair." in found[placed[1].pair_item_id]
    assert all('class="text item-comment"' not in found[p.pair_item_id] for p in placed if p != placed[1])
