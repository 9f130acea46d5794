"""axe-core in the real browser finds no serious or critical violation on the researcher's pages: sign-in (and its
error), the studies overview, a Likert study's page and an A/B study's page, with ratings, judgments and comments
on them."""
from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from urllib.parse import urlparse

import pytest

from server.annotation.annotators import invite
from server.annotation.secrets import admin_token, secret_key
from tests.admin.conftest import app_on
from tests.admin.test_study_page import submit_after
from tests.axe import axe_violations, describe
from tests.browser import CHROMIUM, CHROMIUM_ARGS, live_server


@contextmanager
def page_open_to_axe() -> Iterator:
    """A headless Chromium page as tests.browser.chromium_page starts it (127.0.0.1 only), whose context lets a
    test inject axe-core: our Content-Security-Policy allows scripts from the app's origin only, and Playwright's
    add_script_tag injects an inline one. The pages' own scripts run under the policy as ever."""
    if not os.path.exists(CHROMIUM):
        pytest.skip(f"Chromium not found at {CHROMIUM} (make test installs Debian's chromium package)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        try:
            context = browser.new_context(bypass_csp=True)
            context.route("**/*", lambda route: route.continue_()
                          if urlparse(route.request.url).hostname == "127.0.0.1" else route.abort())
            yield context.new_page()
        finally:
            browser.close()


def test_the_admin_pages_have_no_serious_or_critical_accessibility_violation(store):
    rita, _ = invite(store, "rita", "pilot")
    submit_after(store, rita.id, 12, comment="A reply was cut off mid-sentence.")
    token = admin_token(secret_key(store))
    found: dict[str, list[dict]] = {}
    with live_server(app_on(store)) as base, page_open_to_axe() as page:
        page.goto(f"{base}/admin")
        found["sign-in"] = axe_violations(page)
        page.fill("#token", "wrong")
        page.click("button[type=submit]")
        page.wait_for_selector("#sign-in-error:has-text('wrong admin token')")
        found["sign-in refused"] = axe_violations(page)
        page.goto(f"{base}/admin#{token}")
        page.wait_for_selector("a.study-link")
        found["overview"] = axe_violations(page)
        for study in ("pilot", "ab"):
            page.goto(f"{base}/admin/studies/{study}")
            page.wait_for_selector("#items")
            found[study] = axe_violations(page)
    assert {name: v for name, v in found.items() if v} == {}, "\n".join(
        f"{name}:\n{describe(v)}" for name, v in found.items() if v)
