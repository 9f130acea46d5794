"""Real servers and a real browser for end-to-end tests: the app in a thread on 127.0.0.1, and Debian's
Chromium driven by Playwright, allowed to reach 127.0.0.1 only."""
from __future__ import annotations

import atexit
import contextlib
import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from urllib.parse import urlparse

import pytest
from werkzeug.serving import make_server

CHROMIUM = os.environ.get("EMPEVAL_CHROMIUM", "/usr/bin/chromium")
# Requests reach 127.0.0.1 only: every other one is sent to a proxy on a closed port of 127.0.0.1 and fails
# (ERR_PROXY_CONNECTION_FAILED); "<-loopback>" takes away Chromium's own bypass of localhost and [::1], so only
# 127.0.0.1 goes direct. Chromium enforces it for every request, IP literals and other names included. A Playwright
# route on "**/*" did the same from Python, and cost about a tenth of the browser files' CPU, the browser's and
# ours: each request was paused, sent to the Python side and continued.
BLOCK_ALL_BUT_127_0_0_1 = ["--proxy-server=http://127.0.0.1:9", "--proxy-bypass-list=<-loopback>;127.0.0.1"]
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
                 "--disable-sync", "--no-first-run", *BLOCK_ALL_BUT_127_0_0_1]


@contextmanager
def live_server(app) -> Iterator[str]:
    """Serve `app` on 127.0.0.1 (a free port) in a thread; stopped on exit."""
    server = make_server("127.0.0.1", 0, app, threaded=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


_SHARED: dict = {}
#: Browser contexts not in use, by their options: a test's page is opened in one of them after it was wiped
_IDLE: dict[str, list] = {}
_BLANK_PAGE = b"<!doctype html><title>keeper</title>"


def _browser():
    """One headless Chromium for the whole test session (launching one costs about a second, two under load, and
    the suite opens over a hundred pages). Relaunched if it died (its contexts are then forgotten); closed when
    the session ends."""
    browser = _SHARED.get("browser")
    if browser is None or not browser.is_connected():
        from playwright.sync_api import sync_playwright

        if "playwright" not in _SHARED:
            _SHARED["playwright"] = sync_playwright().start()
            atexit.register(_close_shared)
        _IDLE.clear()
        browser = _SHARED["browser"] = _SHARED["playwright"].chromium.launch(
            executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
    return browser


def _blank(environ, start_response):
    start_response("200 OK", [("Content-Type", "text/html"), ("Cache-Control", "no-store")])
    return [_BLANK_PAGE]


def _keeper_url() -> str:
    """A blank page on 127.0.0.1 from a server that lives as long as the session, so no test's server can be
    given its port: each context keeps one page open there (see `chromium_page`)."""
    if "keeper" not in _SHARED:
        stack = contextlib.ExitStack()
        _SHARED["keeper_url"] = stack.enter_context(live_server(_blank)) + "/"
        _SHARED["keeper"] = stack
    return _SHARED["keeper_url"]


def _close_shared() -> None:
    browser, playwright = _SHARED.pop("browser", None), _SHARED.pop("playwright", None)
    keeper = _SHARED.pop("keeper", None)
    _SHARED.pop("keeper_url", None)
    _IDLE.clear()
    try:
        if browser is not None and browser.is_connected():
            browser.close()
    finally:
        if playwright is not None:
            playwright.stop()
        if keeper is not None:
            keeper.close()


def _new_context(options: dict):
    context = _browser().new_context(**options)
    keeper = context.new_page()
    keeper.goto(_keeper_url())
    return context, keeper


def _wipe(context, keeper, origins: set[str]) -> None:
    """Leave `context` as a new one would be: only its keeper page open, no cookie, no permission, no route, and
    nothing stored (local storage, IndexedDB, cache storage, service workers, the HTTP cache) for any origin the
    test reached."""
    for page in context.pages:
        if page is not keeper:
            page.close()
    context.clear_cookies()
    context.clear_permissions()
    context.unroute_all(behavior="wait")
    session = context.new_cdp_session(keeper)
    try:
        for origin in sorted(origins):
            session.send("Storage.clearDataForOrigin", {"origin": origin, "storageTypes": "all"})
        session.send("Network.clearBrowserCache")
    finally:
        session.detach()


@contextmanager
def chromium_page(**context_options) -> Iterator:
    """A headless Chromium page whose requests can reach 127.0.0.1 only, in a context with `context_options`
    (Browser.new_context's) that no other open page shares and that holds nothing from an earlier test: no
    cookie, storage, cache entry, permission, route or other page.

    The context itself is reused, wiped, from test to test (`_wipe`): a new context starts a new renderer process
    and loads and compiles each page's scripts afresh, which made Chromium the suite's largest single cost (about
    0.6 s of CPU per page on the 2-core machine, more than the tests' own processes in the browser files). Each
    context keeps one blank page open on 127.0.0.1 (`_keeper_url`) so its renderer process stays up between
    tests."""
    if not os.path.exists(CHROMIUM):
        message = f"Chromium not found at {CHROMIUM} (make test installs Debian's chromium package)"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    _browser()  # first: a relaunched browser forgets the idle contexts of the one that died
    idle = _IDLE.setdefault(repr(sorted(context_options.items())), [])
    context, keeper = idle.pop() if idle else _new_context(context_options)
    origins: set[str] = set()

    def reached(request) -> None:
        parts = urlparse(request.url)
        if parts.scheme in ("http", "https"):
            origins.add(f"{parts.scheme}://{parts.netloc}")

    context.on("request", reached)
    try:
        yield context.new_page()
    finally:
        context.remove_listener("request", reached)
        try:
            _wipe(context, keeper, origins)
        except Exception:  # noqa: BLE001 - a context that cannot be wiped is closed, never reused
            with contextlib.suppress(Exception):
                context.close()
        else:  # wiped, so its browser is alive: the one _browser() returns
            idle.append((context, keeper))
