"""Real servers and a real browser for end-to-end tests: the app in a thread on 127.0.0.1, and Debian's
Chromium driven by Playwright, allowed to reach 127.0.0.1 only."""
from __future__ import annotations

import atexit
import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from urllib.parse import urlparse

import pytest
from werkzeug.serving import make_server

CHROMIUM = os.environ.get("EMPEVAL_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
                 "--disable-sync", "--no-first-run"]


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


def _browser():
    """One headless Chromium for the whole test session (launching one costs about a second, two under load, and
    the suite opens over a hundred pages); every page still gets a fresh context, so no cookie, storage or route
    leaks from one test to the next. Relaunched if it died; closed when the session ends."""
    browser = _SHARED.get("browser")
    if browser is None or not browser.is_connected():
        from playwright.sync_api import sync_playwright

        if "playwright" not in _SHARED:
            _SHARED["playwright"] = sync_playwright().start()
            atexit.register(_close_shared)
        browser = _SHARED["browser"] = _SHARED["playwright"].chromium.launch(
            executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
    return browser


def _close_shared() -> None:
    browser, playwright = _SHARED.pop("browser", None), _SHARED.pop("playwright", None)
    try:
        if browser is not None and browser.is_connected():
            browser.close()
    finally:
        if playwright is not None:
            playwright.stop()


@contextmanager
def chromium_page(**context_options) -> Iterator:
    """A headless Chromium page, in a context of its own (`context_options` go to Browser.new_context), whose
    requests can reach 127.0.0.1 only."""
    if not os.path.exists(CHROMIUM):
        message = f"Chromium not found at {CHROMIUM} (make test installs Debian's chromium package)"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    context = _browser().new_context(**context_options)
    try:
        context.route("**/*", lambda route: route.continue_()
                      if urlparse(route.request.url).hostname == "127.0.0.1" else route.abort())
        yield context.new_page()
    finally:
        context.close()
