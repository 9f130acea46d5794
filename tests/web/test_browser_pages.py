"""tests/browser.py's `chromium_page`: the contexts it reuses from test to test hold nothing of the test before
(cookies, local storage, IndexedDB, the HTTP cache, routes, other pages), two pages open at once never share one,
and a page reaches 127.0.0.1 only."""
from __future__ import annotations

import itertools

import pytest

from tests.browser import chromium_page, live_server

pytestmark = pytest.mark.slow

_served = itertools.count()
hits: list[str] = []


def app(environ, start_response):
    """`/` a page; `/cached` a body that changes on every request but says it may be cached for a day."""
    hits.append(environ.get("HTTP_HOST", ""))
    if environ["PATH_INFO"] == "/cached":
        start_response("200 OK", [("Content-Type", "text/plain"), ("Cache-Control", "public, max-age=86400")])
        return [str(next(_served)).encode()]
    start_response("200 OK", [("Content-Type", "text/html")])
    return [b"<!doctype html><title>t</title><p>page</p>"]


def leave_traces(page, base: str) -> str:
    """Leave a cookie, local storage, an IndexedDB database and a cached response; what /cached said."""
    page.goto(base + "/")
    page.context.add_cookies([{"name": "left", "value": "1", "url": base}])
    page.evaluate("""() => new Promise(done => {
        localStorage.setItem("left", "1");
        const opened = indexedDB.open("left", 1);
        opened.onupgradeneeded = () => opened.result.createObjectStore("s");
        opened.onsuccess = () => { opened.result.close(); done(); };
    })""")
    return page.evaluate("() => fetch('/cached').then(r => r.text())")


def test_the_next_page_finds_no_cookie_storage_cache_entry_route_or_page_of_the_one_before():
    with live_server(app) as base:
        with chromium_page() as page:
            first_context = page.context
            first_body = leave_traces(page, base)
            page.context.new_page()  # a page the test left open
            page.route("**/never", lambda route: route.fulfill(body="routed"))
            page.context.route("**/routed-for-context", lambda route: route.fulfill(body="routed"))
        with chromium_page() as page:
            assert page.context is first_context  # reused: that is what the rest checks
            assert len(page.context.pages) == 2  # this page and the context's blank keeper page
            page.goto(base + "/")
            assert page.context.cookies() == []
            assert page.evaluate("() => localStorage.length") == 0
            assert page.evaluate("() => indexedDB.databases().then(found => found.length)") == 0
            # (the 127.0.0.1-only route keeps Chromium's HTTP cache off; the wipe clears it besides)
            assert page.evaluate("() => fetch('/cached').then(r => r.text())") != first_body
            assert page.evaluate("() => fetch('/routed-for-context').then(r => r.text())") != "routed"


def test_two_pages_open_at_once_are_in_two_contexts_and_keep_their_own_cookies():
    with live_server(app) as base, chromium_page() as one, chromium_page() as other:
        assert one.context is not other.context
        one.goto(base + "/")
        one.context.add_cookies([{"name": "who", "value": "one", "url": base}])
        other.goto(base + "/")
        assert other.context.cookies() == []


@pytest.mark.parametrize("options", [{}, {"viewport": {"width": 375, "height": 667}}], ids=["default", "phone"])
def test_a_page_reaches_127_0_0_1_only_and_gets_the_options_it_asked_for(options):
    with live_server(app) as base, chromium_page(**options) as page:
        page.goto(base + "/")
        assert page.evaluate("() => fetch('/').then(r => r.status)") == 200
        other_host = base.replace("127.0.0.1", "localhost")  # the same server under another name
        hits.clear()
        reached = page.evaluate("""url => fetch(url, {mode: "no-cors"}).then(() => "reached", () => "blocked")""",
                                other_host + "/")
        assert reached == "blocked" and not any(host.startswith("localhost") for host in hits)
        if options:
            assert page.viewport_size == options["viewport"]
