"""axe-core in the real browser finds no serious or critical violation on the researcher's pages: sign-in (and its
error), the studies overview, a Likert study's page and an A/B study's page, with ratings, judgments and comments
on them."""
from __future__ import annotations

from empeval.server.annotation.annotators import invite
from empeval.server.annotation.secrets import admin_token, secret_key
from tests.admin.conftest import app_on
from tests.admin.test_study_page import submit_after
from tests.axe import axe_violations, describe
from tests.browser import chromium_page, live_server


def page_open_to_axe():
    """A page as tests.browser.chromium_page opens it (127.0.0.1 only), whose context lets a test inject axe-core:
    our Content-Security-Policy allows scripts from the app's origin only. The pages' own scripts run under the
    policy as ever."""
    return chromium_page(bypass_csp=True)


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
