"""A study's page for the researcher: the item browser (conversation, response, its system, its ratings; pages),
the per-rater table (assignments, median seconds per item, effective hourly pay from the measured times), the
raters' comments and the export links; and the progress JSON, counted in SQL, agreeing with the export."""
from __future__ import annotations

import dataclasses
import html
import re
from collections import Counter
from datetime import timedelta
from statistics import median

import pytest
from sqlalchemy import func, select, update
from sqlalchemy.orm import Session

from empeval.server.annotation.annotators import invite
from empeval.server.annotation.export import export_rows
from empeval.server.annotation.handout import assignment_payload, next_assignment
from empeval.server.annotation.study_log import study_log
from empeval.server.annotation.submission import submit_assignment
from empeval.server.store.kinds.likert import StudyItem
from empeval.server.store.models import Response, Study
from empeval.server.store.queries import now_utc
from tests.annotation.conftest import new_submission_id
from tests.annotation.researcher_helpers import work


def items_of(engine, study: str) -> int:
    with Session(engine) as session:
        return session.scalar(select(func.count()).select_from(StudyItem).join(Study).where(Study.name == study)) or 0


def page_text(answer) -> str:
    """The page's text without markup, blanks folded: what a reader sees."""
    return " ".join(html.unescape(re.sub(r"<[^>]+>", " ", answer.get_data(as_text=True))).split())


def submit_after(engine, annotator_id: int, minutes: float, *, study: str = "pilot", seconds: float = 10.0,
                 comment: str | None = None) -> int:
    """Claim the next assignment `minutes` ago and submit it now."""
    start = now_utc() - timedelta(minutes=minutes)
    assignment_id = next_assignment(engine, study, annotator_id, now=start)
    items = assignment_payload(engine, assignment_id)["items"]
    body: dict = {"submission_id": new_submission_id(), "ratings": [
        {"item_id": i["item_id"], "seconds": seconds, "scores": {"empathy": 4, "relevance": 3, "fluency": 5}}
        for i in items]}
    if comment is not None:
        body["comment"] = comment
    submit_assignment(engine, assignment_id, annotator_id, body, now=start + timedelta(minutes=minutes))
    return assignment_id


def test_the_study_page_needs_the_researcher_and_names_a_bad_page(store, app, bearer):
    client = app.test_client()
    assert client.get("/admin/studies/pilot").status_code == 401
    assert client.get("/admin/studies/nope", headers=bearer).status_code == 404
    pages = -(-items_of(store, "pilot") // 20)
    assert pages >= 2
    for page, message in {"0": f"page 0 does not exist: the study has {pages} page(s) of 20 items (ask for page=1 "
                               f"to {pages})",
                          str(pages + 1): f"page {pages + 1} does not exist: the study has {pages} page(s) of 20 "
                                          f"items (ask for page=1 to {pages})",
                          "two": "page must be a whole number from 1, got 'two'",
                          "-1": "page must be a whole number from 1, got '-1'",
                          "1" * 30: "page must be a whole number from 1"}.items():
        answer = client.get(f"/admin/studies/pilot?page={page}", headers=bearer)
        assert answer.status_code == 400, page
        assert answer.get_json()["message"].startswith(message), page


def test_the_item_browser_shows_conversation_response_system_and_every_rating_a_page_at_a_time(store, app, bearer):
    rita, _ = invite(store, "rita", "pilot")
    assignment_id = work(store, rita.id)
    rated = {i["item_id"]: i for i in assignment_payload(store, assignment_id)["items"]}
    client = app.test_client()
    seen = {}
    total = items_of(store, "pilot")
    pages = -(-total // 20)
    for page in range(1, pages + 1):
        answer = client.get(f"/admin/studies/pilot?page={page}", headers=bearer)
        assert answer.status_code == 200
        body = answer.get_data(as_text=True)
        assert f"Page {page} of {pages} ({total} in all)" in body
        ids = [int(i) for i in re.findall(r'<article class="item" id="item-(\d+)"', body)]
        assert len(ids) == min(20, total - 20 * (page - 1))
        for item_id in ids:
            seen[item_id] = body.split(f'id="item-{item_id}"', 1)[1].split("</article>", 1)[0]
    assert len(seen) == total  # every item once over the pages
    for item_id, item in rated.items():
        shown = " ".join(html.unescape(re.sub(r"<[^>]+>", " ", seen[item_id])).split())
        assert " ".join(item["response"].split()) in shown
        assert all(" ".join(turn["text"].split()) in shown for turn in item["context"])
        assert f"{rita.pseudonym} {assignment_id} 4 3 4" in shown  # empathy, relevance, fluency in study order
    system_of = {r["item_id"]: r["system"] for r in export_rows(store, "pilot")}
    assert all(system_of[i] in seen[i] for i in rated)  # the system's name, for the researcher only
    unrated = next(i for i in seen if i not in rated)
    assert "Not rated yet." in seen[unrated]
    first = client.get("/admin/studies/pilot", headers=bearer).get_data(as_text=True)
    assert 'rel="next" href="/admin/studies/pilot?page=2#items"' in first and 'rel="prev"' not in first


def test_model_output_and_comments_are_shown_as_text_never_as_markup(store, app, bearer):
    hostile = '<script>alert("x")</script><img src=x onerror=alert(1)>'
    with Session(store) as session, session.begin():
        session.execute(update(Response).values(text=hostile))
    rita, _ = invite(store, "rita", "pilot")
    submit_after(store, rita.id, 10, comment="</td><b>bold</b> & more")
    body = app.test_client().get("/admin/studies/pilot", headers=bearer).get_data(as_text=True)
    assert "<script>alert" not in body and "<img src=x" not in body and "<b>bold</b>" not in body
    assert "&lt;script&gt;alert(&#34;x&#34;)&lt;/script&gt;" in body
    assert "&lt;/td&gt;&lt;b&gt;bold&lt;/b&gt; &amp; more" in body


def test_the_rater_table_gives_median_seconds_and_effective_hourly_pay_from_the_measured_times(store, app, bearer):
    rita, _ = invite(store, "rita", "pilot")
    sam, _ = invite(store, "sam", "pilot")
    submit_after(store, rita.id, 30, seconds=12.0)  # 0.50 USD per assignment in 30 minutes: 1.00 USD per hour
    submit_after(store, rita.id, 10, seconds=4.0)  # two assignments (1.00 USD) in 40 minutes: 1.50 USD per hour
    submit_after(store, sam.id, 6, seconds=30.0)  # one in 6 minutes: 5.00 USD per hour
    next_assignment(store, "pilot", sam.id)  # in progress: not counted
    body = app.test_client().get("/admin/studies/pilot", headers=bearer).get_data(as_text=True)
    table = body.split('id="rater-table"', 1)[1].split("</table>", 1)[0]
    rows = {cells[0]: cells for cells in
            ([c.strip() for c in re.findall(r"<td>(.*?)</td>", row, re.S)] for row in table.split("<tr>")[2:])}
    # median of 4 x 12 s and 4 x 4 s; 40 minutes measured
    assert rows[rita.pseudonym] == [rita.pseudonym, "2", "8", "8.0", "0.67", "1.50 USD", "no"]
    assert rows[sam.pseudonym] == [sam.pseudonym, "1", "4", "30.0", "0.10", "5.00 USD", "no"]


def test_the_comments_and_the_export_links_are_on_the_study_page(store, app, bearer):
    rita, _ = invite(store, "rita", "pilot")
    first = submit_after(store, rita.id, 5, comment="Item 3 was in French.")
    submit_after(store, rita.id, 5)  # no comment: not listed
    client = app.test_client()
    answer = client.get("/admin/studies/pilot", headers=bearer)
    text = page_text(answer)
    assert f"{first} {rita.pseudonym}" in text and "Item 3 was in French." in text
    assert answer.get_data(as_text=True).count('class="text comment"') == 1
    body = answer.get_data(as_text=True)
    for link in ('id="export-csv" href="/api/studies/pilot/export?format=csv"',
                 'id="export-jsonl" href="/api/studies/pilot/export?format=jsonl"',
                 'id="preview-link" href="/admin/studies/pilot/preview"'):
        assert link in body
    assert client.get("/api/studies/pilot/export?format=csv", headers=bearer).status_code == 200
    logged = [entry for entry in study_log(store, "pilot") if entry.event == "export"]
    assert [entry.detail["where"] for entry in logged] == ["a csv download from the dashboard or the export API"]


def test_an_ab_study_page_shows_both_responses_and_each_judgment_as_the_system_preferred(store, app, bearer):
    rita, _ = invite(store, "rita", "ab")
    assignment_id = next_assignment(store, "ab", rita.id)
    pairs = assignment_payload(store, assignment_id)["items"]
    submit_assignment(store, assignment_id, rita.id, {"submission_id": new_submission_id(), "judgments": [
        {"item_id": p["item_id"], "choices": {"empathy": "A", "relevance": "B", "fluency": "T"}} for p in pairs]})
    preferred = {(r["context_id"], r["criterion"], r["pair"]): r["preferred"]
                 for r in export_rows(store, "ab")}
    body = app.test_client().get("/admin/studies/ab", headers=bearer).get_data(as_text=True)
    assert "Pairs" in body and "Not judged yet." in body
    judged = 0
    for (_context, _criterion, pair), system in preferred.items():
        assert system in pair.split("|") + ["tie"]
    for article in body.split('<article class="item"')[1:]:
        cells = re.findall(r"<td>(.*?)</td>", article)
        if rita.pseudonym in cells:
            judged += 1
            systems = re.findall(r'<span class="system">(.*?)</span>', article)
            assert len(systems) == 2
            empathy, relevance, fluency = cells[2:5]
            assert {empathy, relevance} == set(systems) and fluency == "tie"
    assert judged == len(pairs)


def test_progress_counted_in_sql_agrees_with_the_export(store, app, bearer):
    rita, _ = invite(store, "rita", "pilot")
    sam, _ = invite(store, "sam", "pilot")
    submit_after(store, rita.id, 5, seconds=6.0)
    submit_after(store, sam.id, 5, seconds=9.0)
    submit_after(store, rita.id, 5, seconds=20.0)
    rows = export_rows(store, "pilot")
    progress = app.test_client().get("/api/studies/pilot/progress", headers=bearer).get_json()
    assert progress["ratings"] == len(rows)
    assert progress["items_rated"] == len({r["item_id"] for r in rows})
    assert progress["ratings_per_annotator"] == dict(Counter(r["annotator"] for r in rows))
    assert progress["median_seconds_per_item"] == median(r["seconds_on_item"] for r in rows
                                                          if r["criterion"] == "empathy")
    assert set(progress["alpha_ordinal"]) == {"empathy", "relevance", "fluency"}


def test_the_progress_of_an_ab_study_carries_its_own_keys_only(store, app, bearer):
    progress = app.test_client().get("/api/studies/ab/progress", headers=bearer).get_json()
    assert progress["kind"] == "pairwise"
    assert {"ratings", "items_rated", "ratings_per_annotator", "ratings_per_response", "alpha_ordinal",
            "median_seconds_per_item"}.isdisjoint(progress)
    assert (progress["judgments"], progress["choices"], progress["pairs_judged"]) == (0, 0, 0)


@pytest.mark.parametrize("page", ["/admin", "/admin/studies/pilot", "/admin/studies/ab"])
def test_every_admin_page_links_back_or_onward(app, bearer, page):
    body = app.test_client().get(page, headers=bearer).get_data(as_text=True)
    assert ('href="/admin/studies/pilot"' in body) if page == "/admin" else ('href="/admin"' in body)


def test_each_rating_in_the_item_browser_carries_its_assignments_comment(store, app, bearer):
    rita, _ = invite(store, "rita", "pilot")
    sam, _ = invite(store, "sam", "pilot")
    commented = submit_after(store, rita.id, 5, comment="Some replies were in Spanish.")
    submit_after(store, sam.id, 5)
    items = {i["item_id"] for i in assignment_payload(store, commented)["items"]}
    body = "".join(app.test_client().get(f"/admin/studies/pilot?page={page}", headers=bearer).get_data(as_text=True)
                   for page in range(1, -(-items_of(store, "pilot") // 20) + 1))
    for article in body.split('<article class="item" id="item-')[1:]:
        item_id = int(article.split('"', 1)[0])
        comments = re.findall(r'<td class="text assignment-comment">(.*?)</td>', article)
        if item_id in items:
            assert comments == ["Some replies were in Spanish."]
        else:
            assert set(comments) <= {""}


def test_the_study_page_shows_the_log_of_withdrawals_without_the_name(store, app, bearer):
    from empeval.server.annotation.withdraw import forget

    rita, _ = invite(store, "rita", "pilot")
    submit_after(store, rita.id, 5)
    client = app.test_client()
    assert "Nothing logged" in page_text(client.get("/admin/studies/pilot", headers=bearer))
    forget(store, "rita", study="pilot")
    answer = client.get("/admin/studies/pilot", headers=bearer)
    log = answer.get_data(as_text=True).split('id="log-table"', 1)[1].split("</table>", 1)[0]
    text = " ".join(html.unescape(re.sub(r"<[^>]+>", " ", log)).split())
    assert "withdrawal ratings removed: 12; comments removed: 0; assignments reopened: 1" in text
    assert "name removed: True" in text and "rita" not in answer.get_data(as_text=True)


def test_progress_costs_the_same_statements_however_many_ratings(store, app, bearer):
    from tests.annotation.pairwise_fixtures import StatementCounter

    client = app.test_client()
    rita, _ = invite(store, "rita", "pilot")
    counts = []
    for _ in range(3):
        with StatementCounter(store) as counter:
            assert client.get("/api/studies/pilot/progress", headers=bearer).status_code == 200
        counts.append(len(counter.statements))
        submit_after(store, rita.id, 5)
    assert counts[0] == counts[1] == counts[2], counts
    assert not any("seconds_on_item, assignment.started_at" in s for s in counter.statements)  # not the export


def test_an_unpaid_study_says_so_instead_of_an_hourly_pay(store, app, bearer):
    from tests.annotation.conftest import make_study

    spec_study = make_study(store, name="volunteers", count=4, k=1, per_assignment=4, systems=["sys-a", "sys-b"],
                            controls=[])
    assert spec_study is not None
    with Session(store) as session, session.begin():
        study = session.scalar(select(Study).where(Study.name == "volunteers"))
        config = study.config
        study.config = dataclasses.replace(config, pay=dataclasses.replace(config.pay, per_assignment=None))
    rita, _ = invite(store, "rita", "volunteers")
    submit_after(store, rita.id, 5, study="volunteers")
    body = app.test_client().get("/admin/studies/volunteers", headers=bearer).get_data(as_text=True)
    table = body.split('id="rater-table"', 1)[1].split("</table>", 1)[0]
    assert "<td>unpaid</td>" in table and "USD" not in table
    assert "no pay set in the study file" in body


def test_the_browser_can_show_only_the_items_rated_so_far_and_keeps_to_them_across_pages(store, app, bearer):
    client = app.test_client()
    empty = client.get("/admin/studies/pilot?rated=only", headers=bearer)
    assert empty.status_code == 200 and "Page 1 of 1 (0 rated at least once)" in page_text(empty)
    assert '<article class="item"' not in empty.get_data(as_text=True)
    raters = [invite(store, name, "pilot")[0] for name in ("rita", "sam", "tom", "uma", "vic", "wes")]
    rated: set[int] = set()
    for rater in raters:
        assignment_id = submit_after(store, rater.id, 5)
        rated |= {i["item_id"] for i in assignment_payload(store, assignment_id)["items"]}
    assert len(rated) > 20  # more than a page
    shown: list[int] = []
    url = "/admin/studies/pilot?rated=only"
    while url:
        body = client.get(url, headers=bearer).get_data(as_text=True)
        shown += [int(i) for i in re.findall(r'<article class="item" id="item-(\d+)"', body)]
        following = re.search(r'rel="next" href="([^"]+)"', body)
        url = html.unescape(following.group(1)).split("#")[0] if following else ""
    assert sorted(shown) == sorted(rated)  # each rated item once, no unrated one
    assert 'id="show-all"' in body
    answer = client.get("/admin/studies/pilot?rated=some", headers=bearer)
    assert answer.status_code == 400
    assert answer.get_json()["message"] == "rated must be all or only (the items rated at least once), got 'some'"


def test_the_browser_of_an_ab_study_can_show_only_the_pairs_judged(store, app, bearer):
    rita, _ = invite(store, "rita", "ab")
    assignment_id = next_assignment(store, "ab", rita.id)
    pairs = {p["item_id"] for p in assignment_payload(store, assignment_id)["items"]}
    submit_assignment(store, assignment_id, rita.id, {"submission_id": new_submission_id(), "judgments": [
        {"item_id": p, "choices": {"empathy": "A", "relevance": "A", "fluency": "B"}} for p in pairs]})
    body = app.test_client().get("/admin/studies/ab?rated=only", headers=bearer).get_data(as_text=True)
    assert {int(i) for i in re.findall(r'<article class="item" id="item-(\d+)"', body)} == pairs
    assert "Show all pairs" in body
