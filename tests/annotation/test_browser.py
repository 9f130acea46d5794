"""A rater in a real browser: invite link, consent, instructions, a whole assignment by keyboard, submit."""

from __future__ import annotations

import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session

from entry.wiring import make_app
from server.annotation.annotators import invite
from server.datasets.ed_csv import parse_ed_csv
from server.datasets.importer import import_dialogues
from server.store import make_engine, upgrade
from server.store.models import Assignment, AssignmentItem, Rating
from tests.annotation.conftest import add_responses, make_study
from tests.browser import chromium_page, live_server
from tests.conftest import SAMPLE_ED

SCRIPT = '<script>window.__pwned = "script"</script>I hear you.'
IMG = '<img src="x" onerror="window.__pwned = \'img\'">That must be hard.'


@pytest.fixture
def served_study(tmp_path):
    engine = make_engine(f"sqlite:///{tmp_path / 'browser.db'}")
    upgrade(engine)
    import_dialogues(engine, parse_ed_csv(SAMPLE_ED / "test.csv", "test"), dataset="empatheticdialogues")
    add_responses(engine, ["plain"], 8)
    add_responses(engine, ["hostile"], 8, text=lambda system, cid: f"{SCRIPT} {IMG}")
    make_study(engine, count=4, k=1, per_assignment=4, systems=["plain", "hostile"], controls=[])
    _, token = invite(engine, "rita", "pilot")
    app = make_app(str(engine.url))
    with live_server(app) as base:
        yield engine, f"{base}/annotate/{token}"
    engine.dispose()


def test_a_rater_completes_an_assignment_with_the_keyboard_and_ratings_land_in_sql(served_study):
    engine, link = served_study
    shown = []
    with chromium_page() as page:
        page.goto(link)
        page.click("#consent-accept")
        page.click("#start")
        n_items = int(page.locator("#progress-text").inner_text().split(" of ")[1].split()[0])
        for i in range(n_items):
            item = page.locator("#item")
            shown.append((int(item.get_attribute("data-item-id")), int(item.get_attribute("data-position"))))
            assert page.locator("#next").is_disabled()
            for key in (str(1 + i % 5), str(5 - i % 5), "3"):
                page.keyboard.press(key)
                page.keyboard.press("Enter")
        page.wait_for_selector("#review")
        assert page.locator("#progress-text").inner_text().startswith(f"{n_items} of {n_items}")
        page.fill("#comment", "clear task")
        page.click("#submit")
        page.wait_for_selector("#submitted")
    assert [p for _, p in shown] == list(range(n_items))
    with Session(engine) as s:
        assignment = s.scalar(select(Assignment).where(Assignment.status == "submitted"))
        assert assignment.comment == "clear task"
        positions = dict(
            s.execute(
                select(AssignmentItem.item_id, AssignmentItem.position).where(
                    AssignmentItem.assignment_id == assignment.id
                )
            ).all()
        )
        ratings = s.execute(
            select(Rating.item_id, Rating.criterion, Rating.score).where(Rating.assignment_id == assignment.id)
        ).all()
        seconds = s.scalars(
            select(AssignmentItem.seconds_on_item).where(AssignmentItem.assignment_id == assignment.id)
        ).all()
    assert dict(shown) == positions
    expected = {
        (item_id, c, score)
        for i, (item_id, _) in enumerate(shown)
        for c, score in zip(("empathy", "relevance", "fluency"), (1 + i % 5, 5 - i % 5, 3), strict=True)
    }
    assert set(ratings) == expected
    assert all(s is not None and s >= 0 for s in seconds)


def test_markup_in_a_response_is_shown_literally_and_runs_nothing(served_study):
    _, link = served_study
    with chromium_page() as page:
        page.goto(link)
        page.click("#consent-accept")
        page.click("#start")
        seen = set()
        n_items = int(page.locator("#progress-text").inner_text().split(" of ")[1].split()[0])
        for _ in range(n_items):
            text = page.locator(".response").inner_text()
            seen.update(payload for payload in (SCRIPT, IMG) if payload in text)
            for key in ("2", "Enter", "2", "Enter", "2", "Enter"):
                page.keyboard.press(key)
        assert seen == {SCRIPT, IMG}  # both payloads were on screen, verbatim
        assert page.evaluate("window.__pwned") is None
        assert page.locator("main img").count() == 0 and page.locator("main script").count() == 0
