"""A rater in a real browser: invite link, consent, instructions, a whole assignment by keyboard, submit; the
token leaves the address bar for an HttpOnly cookie, and every page and route carries the security headers."""

from __future__ import annotations

import logging

import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session

from empeval.server.annotation.annotators import invite
from empeval.server.annotation.secrets import admin_token, secret_key
from empeval.server.store.kinds.likert import AssignmentItem, Rating
from empeval.server.store.models import Assignment
from empeval.wiring import make_app
from tests.annotation.conftest import add_responses, make_study
from tests.browser import chromium_page, live_server
from tests.conftest import sample_store_copy

SCRIPT = '<script>window.__pwned = "script"</script>I hear you.'
IMG = '<img src="x" onerror="window.__pwned = \'img\'">That must be hard.'


@pytest.fixture
def served(tmp_path):
    """The app on a study of 4 contexts, with hostile markup in half the replies: (engine, base URL, token)."""
    engine = sample_store_copy(f"sqlite:///{tmp_path / 'browser.db'}")
    add_responses(engine, ["plain"], 8)
    add_responses(engine, ["hostile"], 8, text=lambda system, cid: f"{SCRIPT} {IMG}")
    make_study(engine, count=4, k=1, per_assignment=4, systems=["plain", "hostile"], controls=[])
    _, token = invite(engine, "rita", "pilot")
    app = make_app(str(engine.url))
    with live_server(app) as base:
        yield engine, base, token
    engine.dispose()


@pytest.fixture
def served_study(served):
    engine, base, token = served
    return engine, f"{base}/annotate#{token}"


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
            # the last item's button says what it does: it leads to the comment and the submit, nothing to review
            assert page.locator("#next").inner_text() == ("Finish" if i == n_items - 1 else "Next")
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


def assert_security_headers(response, *, cached: bool = False):
    headers = response.headers  # Playwright gives them lower-cased
    csp = headers["content-security-policy"]
    assert "script-src 'self'" in csp and "unsafe-inline" not in csp and "frame-ancestors 'none'" in csp
    assert headers["x-content-type-options"] == "nosniff"
    assert headers["referrer-policy"] == "no-referrer"
    if not cached:
        assert headers["cache-control"] == "no-store"


@pytest.mark.parametrize("link_form", ["fragment", "old path"])
def test_the_invite_token_leaves_the_address_bar_for_an_httponly_strict_cookie(served, caplog, link_form):
    engine, base, token = served
    link = f"{base}/annotate#{token}" if link_form == "fragment" else f"{base}/annotate/{token}"
    caplog.set_level(logging.INFO, logger="werkzeug")
    responses, violations = [], []
    with chromium_page() as page:
        page.on("response", lambda response: responses.append(response))
        page.on("console", lambda message: violations.append(message.text)
                if "Content Security Policy" in message.text else None)
        page.goto(link)
        page.click("#consent-accept")  # the assignment loaded: the exchange worked
        page.wait_for_selector("#start")  # the claim answered and the instructions are on screen (the draft kept)
        assert page.url == f"{base}/annotate" and token not in page.url
        assert token not in page.evaluate("document.cookie")  # HttpOnly: out of reach of any script
        (cookie,) = [c for c in page.context.cookies() if c["name"] == "empeval_invite"]
        assert cookie["httpOnly"] and cookie["sameSite"] == "Strict" and cookie["value"] == token
        page.reload()  # a reload (token gone from the address) still finds the work through the cookie,
        page.click("#start")  # and the page's draft resumes after the consent she gave
        for _ in range(int(page.locator("#progress-text").inner_text().split(" of ")[1].split()[0])):
            for key in ("4", "Enter", "4", "Enter", "4", "Enter"):
                page.keyboard.press(key)
        page.click("#submit")
        page.wait_for_selector("#submitted")
    by_path = {r.url.removeprefix(base).split("?")[0]: r for r in responses}
    assert_security_headers(by_path["/annotate" if link_form == "fragment" else f"/annotate/{token}"])
    assert_security_headers(by_path["/api/annotate/next"])
    assert_security_headers(by_path["/task-ui/task.js"], cached=True)
    assert any(path.endswith("/submit") and r.status == 200 for path, r in by_path.items())
    assert violations == []  # the page runs under the policy: no inline script or style was needed
    logged = "\n".join(record.getMessage() for record in caplog.records)
    assert "/api/annotate/session" in logged and token not in logged  # the request log never holds the token
    with Session(engine) as s:
        assert s.scalar(select(Assignment.status).where(Assignment.status == "submitted")) == "submitted"


def test_the_researcher_signs_in_through_the_fragment_and_the_token_leaves_the_address_bar(served):
    engine, base, _ = served
    admin = admin_token(secret_key(engine))
    violations = []
    with chromium_page() as page:
        page.on("console", lambda message: violations.append(message.text)
                if "Content Security Policy" in message.text else None)
        login = page.goto(f"{base}/admin")
        assert_security_headers(login)
        assert page.locator("#token").get_attribute("type") == "password"
        page.goto(f"{base}/admin#{admin}")
        page.wait_for_selector("text=pilot")
        assert page.url == f"{base}/admin"
        (cookie,) = [c for c in page.context.cookies() if c["name"] == "empeval_admin"]
        assert cookie["httpOnly"] and cookie["sameSite"] == "Strict" and admin not in cookie["value"]
        dashboard = page.goto(f"{base}/admin")
        assert_security_headers(dashboard)
        assert page.locator("h2").first.inner_text() == "pilot"
        assert page.evaluate("getComputedStyle(document.body).marginTop") == "32px"  # admin.css applied
        page.click("text=Sign out")
        page.wait_for_selector("#token")
    assert violations == []


def test_a_wrong_admin_token_in_the_form_is_refused_with_a_message(served):
    _, base, _ = served
    with chromium_page() as page:
        page.goto(f"{base}/admin")
        page.fill("#token", "not-the-token")
        page.click("button[type=submit]")
        assert "wrong admin token" in page.locator("#sign-in-error").inner_text()
        assert not [c for c in page.context.cookies() if c["name"] == "empeval_admin"]
