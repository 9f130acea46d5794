"""A Prolific participant in a real browser: she follows the study link from Prolific's site (a cross-site
navigation, as in a real study), lands on the task page with the invite cookie, rates her assignment by
keyboard, is handed the completion code only once her submit was accepted, and the page takes her back to
Prolific's completion URL; a malformed PROLIFIC_PID gets a page saying what to do (free of serious accessibility
violations, by axe-core)."""
from __future__ import annotations

import pytest

from empeval.server.annotation.prolific import make_study_token
from empeval.server.annotation.secrets import secret_key
from empeval.server.web.auth import INVITE_COOKIE
from empeval.tasks.study_create import create_study
from empeval.tasks.study_file import parse_study
from empeval.wiring import make_app
from tests.annotation.conftest import add_responses
from tests.axe import axe_violations, describe
from tests.browser import chromium_page, live_server
from tests.conftest import sample_store_copy
from tests.prolific.conftest import COMPLETION_CODE, PID, PROLIFIC_STUDY_ID, SESSION, SYSTEMS, study_file

PROLIFIC_PAGE = "https://app.prolific.com/studies/take-part"
COMPLETION_URL = f"https://app.prolific.com/submissions/complete?cc={COMPLETION_CODE}"


@pytest.fixture
def served(tmp_path):
    """The app over a Prolific study of 3-item assignments: (base URL, the study link's path)."""
    engine = sample_store_copy(f"sqlite:///{tmp_path / 'prolific.db'}")
    add_responses(engine, SYSTEMS, 12)
    create_study(engine, parse_study(study_file()))
    with live_server(make_app(str(engine.url))) as base:
        yield base, f"/prolific/{make_study_token(secret_key(engine), 'pilot')}"
    engine.dispose()


def from_prolific(page, link: str) -> None:
    """Open `link` the way a participant does: by clicking it on a page of Prolific's site (served here by the
    browser itself, so nothing leaves the machine), which makes the visit a cross-site navigation."""
    body = f'<!doctype html><title>Prolific</title><a id="go" href="{link}">Open study</a>'
    page.route(PROLIFIC_PAGE, lambda route: route.fulfill(content_type="text/html", body=body))
    page.goto(PROLIFIC_PAGE)
    page.click("#go")


def rate_every_item(page) -> None:
    page.click("#consent-accept")
    page.click("#start")
    n_items = int(page.locator("#progress-text").inner_text().split(" of ")[1].split()[0])
    for _ in range(n_items):
        for key in ("4", "3", "5"):
            page.keyboard.press(key)
            page.keyboard.press("Enter")
    page.wait_for_selector("#review")


def test_a_participant_goes_from_the_study_link_to_a_stored_submit_with_the_completion_code(served):
    base, path = served
    link = f"{base}{path}?PROLIFIC_PID={PID}&STUDY_ID={PROLIFIC_STUDY_ID}&SESSION_ID={SESSION}"
    answers = []
    with chromium_page() as page:
        page.on("response", lambda response: answers.append(response))
        from_prolific(page, link)
        page.wait_for_selector("#consent-accept")
        assert page.url == f"{base}/annotate"  # the ids left the address bar with the redirect
        [cookie] = [c for c in page.context.cookies() if c["name"] == INVITE_COOKIE]
        assert cookie["httpOnly"] and cookie["sameSite"] == "Strict"
        rate_every_item(page)
        assert page.locator("#completion-code").count() == 0
        before_submit = [a for a in answers if "/api/" in a.url]
        assert before_submit and all(COMPLETION_CODE not in a.text() for a in before_submit)
        with page.expect_response(lambda a: a.url.endswith("/submit")) as submitted:
            page.click("#submit")
        receipt = submitted.value.json()
        assert submitted.value.status == 200 and receipt["completion"] == {"code": COMPLETION_CODE,
                                                                           "url": COMPLETION_URL}
        # The page shows the code, links back to Prolific, and goes there by itself.
        page.route(f"{COMPLETION_URL}*", lambda route: route.fulfill(
            content_type="text/html", body="<!doctype html><title>Prolific</title><p id=done>Submission complete"))
        assert page.locator("#completion-code").inner_text() == COMPLETION_CODE
        assert page.locator("#completion-link").get_attribute("href") == COMPLETION_URL
        page.wait_for_url(COMPLETION_URL, timeout=15_000)
        page.wait_for_selector("#done")
        # Opening the study from Prolific again shows her code, not another assignment.
        from_prolific(page, link)
        page.wait_for_selector("h1:has-text('You have completed this study')")
        assert page.locator("#completion-code").inner_text() == COMPLETION_CODE
        assert page.locator("#completion-link").get_attribute("href") == COMPLETION_URL


def test_a_malformed_prolific_pid_is_refused_with_a_page_saying_what_to_do(served):
    base, path = served
    with chromium_page() as page:
        from_prolific(page, f"{base}{path}?PROLIFIC_PID=not-an-id&STUDY_ID={PROLIFIC_STUDY_ID}&SESSION_ID={SESSION}")
        page.wait_for_selector("#refusal")
        assert "PROLIFIC_PID must be a Prolific id" in page.locator("#refusal").inner_text()
        assert "open the study from Prolific" in page.locator("#refusal").inner_text()
        assert not [c for c in page.context.cookies() if c["name"] == INVITE_COOKIE]
        # axe is injected as a script, which the app's CSP (script-src 'self') rightly blocks: check the page's
        # markup as served, in a blank page without the CSP.
        served_markup = page.content()
        page.goto("about:blank")
        page.set_content(served_markup)
        violations = axe_violations(page)
        assert not violations, describe(violations)
