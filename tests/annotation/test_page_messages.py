"""What the task page says when it cannot go on, and at the end: a bad or expired link says so and what to do; an
unreachable or rate-limited server says what to do; a submit receipt carrying a completion code shows the code and
returns the rater to Prolific (only to a web address); a preview assignment (and the researcher's preview page at
/admin/studies/<name>/preview) says nothing is recorded and Submit sends nothing; axe-core finds nothing serious
on the completion and preview pages. The completion and preview fields are added to the real server's answers in
the browser (page.route) where the test is about the page alone: their server side is tested with its modules."""

from __future__ import annotations

import json
import time

import pytest
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from empeval.server.annotation.secrets import admin_token, secret_key
from empeval.server.store.kinds.likert import Rating
from empeval.server.store.models import Assignment
from tests.annotation.page_fixtures import answer, drafts_in, item_count, likert_store, serving, start
from tests.axe import axe_violations, describe
from tests.browser import chromium_page

PROLIFIC = "https://app.prolific.com/submissions/complete?cc=ABC123"


@pytest.fixture
def served(tmp_path):
    engine, tokens = likert_store(tmp_path)
    with serving(engine) as base:
        yield engine, base, tokens["rita"]


def rate_all(page) -> None:
    for _ in range(item_count(page)):
        answer(page, ["4", "4", "4"])
    page.wait_for_selector("#review")


def with_completion(completion):
    """A route handler: the real submit, its answer with `completion` added."""
    def handle(route):
        response = route.fetch()
        body = response.json()
        body["completion"] = completion
        route.fulfill(response=response, body=json.dumps(body))
    return handle


@pytest.mark.parametrize("link", ["/annotate#not-a-token", "/annotate/not.a.token", "/annotate"])
def test_a_bad_or_missing_link_says_it_is_not_valid_and_to_ask_for_a_new_one(served, link):
    _, base, _ = served
    with chromium_page() as page:
        page.goto(base + link)
        page.wait_for_selector("#load-error")
        assert page.locator("h1").inner_text() == "This link is not valid or has expired"
        assert page.locator("#load-error").inner_text().count("Ask the researcher who sent it for a new one.") == 1
        assert page.url == f"{base}/annotate"  # the bad token left the address bar too
        assert page.locator("#consent").count() == 0


def test_an_unreachable_server_and_a_rate_limit_each_say_what_to_do(served):
    _, base, token = served
    with chromium_page() as page:
        page.route("**/api/annotate/next*", lambda route: route.abort())
        page.goto(f"{base}/annotate#{token}")
        page.wait_for_selector("#load-error")
        assert page.locator("h1").inner_text() == "The server could not be reached"
        assert "Check your connection, then reload the page." in page.locator("#load-error").inner_text()
        page.unroute("**/api/annotate/next*")
        page.route("**/api/annotate/next*", lambda route: route.fulfill(
            status=429, content_type="application/json", body=json.dumps({"message": "too many failed checks"})))
        page.reload()
        page.wait_for_selector("#load-error")
        assert page.locator("h1").inner_text() == "Too many attempts from this network"
        assert "too many failed checks" in page.locator("#load-error").inner_text()
        page.unroute("**/api/annotate/next*")
        page.reload()  # the cookie was set before the failures: the work is there once the server answers
        page.wait_for_selector("#consent")


def test_a_completion_code_is_shown_and_the_page_returns_to_prolific_after_a_few_seconds(served):
    _, base, token = served
    with chromium_page() as page:
        page.route("**/api/assignments/*/submit", with_completion({"code": "ABC123", "url": PROLIFIC}))
        page.route("https://app.prolific.com/**", lambda route: route.fulfill(
            content_type="text/html", body="<title>Prolific</title><h1>Prolific</h1>"))
        start(page, f"{base}/annotate#{token}")
        rate_all(page)
        page.click("#submit")
        page.wait_for_selector("#completion-code")
        shown = time.monotonic()
        assert page.locator("#completion-code").inner_text() == "ABC123"
        assert page.locator("#completion-link").get_attribute("href") == PROLIFIC
        assert page.locator("#completion-link").inner_text() == "Return to Prolific"
        assert page.locator("#more").count() == 0  # one assignment per participant: no "Rate more"
        page.wait_for_url(PROLIFIC, timeout=10000)
        assert 2.0 <= time.monotonic() - shown <= 8.0


@pytest.mark.parametrize("url", ["javascript:window.__pwned=1", "data:text/html,<b>x</b>", "not a url", None])
def test_a_completion_url_that_is_no_web_address_is_neither_linked_nor_followed(served, url):
    _, base, token = served
    with chromium_page() as page:
        page.route("**/api/assignments/*/submit",
                   with_completion({"code": "<b>C0DE</b>", "url": url}))
        start(page, f"{base}/annotate#{token}")
        rate_all(page)
        page.click("#submit")
        page.wait_for_selector("#completion-code")
        assert page.locator("#completion-code").inner_text() == "<b>C0DE</b>"  # shown as text
        assert page.locator("#completion-link").count() == 0
        found = axe_violations(page)
        assert found == [], describe(found)
        page.wait_for_timeout(3500)
        assert page.url == f"{base}/annotate" and page.evaluate("window.__pwned") is None


def test_without_a_completion_the_end_page_is_unchanged(served):
    _, base, token = served
    with chromium_page() as page:
        start(page, f"{base}/annotate#{token}")
        rate_all(page)
        page.click("#submit")
        page.wait_for_selector("#submitted")
        assert page.locator("#completion").count() == 0 and page.locator("#more").is_visible()


def test_a_preview_says_nothing_is_recorded_and_its_submit_sends_nothing(served):
    engine, base, token = served
    posts = []

    def as_preview(route):
        response = route.fetch()
        body = response.json()
        body["assignment"]["preview"] = True
        route.fulfill(response=response, body=json.dumps(body))

    with chromium_page() as page:
        page.on("request", lambda request: posts.append(request.url) if request.method == "POST" else None)
        page.route("**/api/annotate/next", as_preview)
        start(page, f"{base}/annotate#{token}")
        assert page.locator("#preview-banner").inner_text() == "Preview: nothing you do here is recorded"
        rate_all(page)
        page.click("#submit")
        assert page.locator("#preview-not-submitted").inner_text() == "Preview: not submitted"
        found = axe_violations(page)
        assert found == [], describe(found)
        assert page.locator("#submitted").count() == 0
        assert not any(k.startswith(("empeval-draft:", "empeval-consent:", "empeval-submission-"))
                       for k in drafts_in(page))
        page.reload()  # nothing kept: the preview starts over
        page.wait_for_selector("#consent")
    assert [url for url in posts if "/submit" in url] == []
    with Session(engine) as s:
        assert "submitted" not in s.scalars(select(Assignment.status)).all()
        assert s.scalar(select(func.count()).select_from(Rating)) == 0


def test_the_researchers_preview_page_shows_the_study_with_the_banner_and_records_nothing(served):
    engine, base, _ = served
    posts = []
    with chromium_page() as page:
        page.on("request", lambda request: posts.append(request.url) if request.method == "POST" else None)
        page.goto(f"{base}/admin#{admin_token(secret_key(engine))}")
        page.wait_for_selector("text=pilot")
        page.goto(f"{base}/admin/studies/pilot/preview")
        page.click("#consent-accept")
        page.click("#start")
        assert page.locator("#preview-banner").is_visible()
        rate_all(page)
        page.click("#submit")
        assert page.locator("#preview-not-submitted").is_visible()
        found = axe_violations(page)
        assert found == [], describe(found)
    assert [url for url in posts if "/api/" in url and "/submit" in url] == []
    with Session(engine) as s:
        assert s.scalar(select(func.count()).select_from(Rating)) == 0
        assert set(s.scalars(select(Assignment.status)).all()) == {"open"}  # nothing claimed either


def test_a_preview_whose_admin_session_is_gone_says_to_sign_in_again(served):
    engine, base, _ = served
    with chromium_page() as page:
        def without_cookies(route):  # the session ends between the page and its payload
            page.context.clear_cookies()
            route.continue_()

        page.goto(f"{base}/admin#{admin_token(secret_key(engine))}")
        page.wait_for_selector("text=pilot")
        page.route("**/api/studies/pilot/preview", without_cookies)
        page.goto(f"{base}/admin/studies/pilot/preview")
        page.wait_for_selector("#load-error")
        assert page.locator("h1").inner_text() == "Sign in to preview this study"
        assert "Open /admin, sign in" in page.locator("#load-error").inner_text()
