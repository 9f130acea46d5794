"""Real servers and a real browser for end-to-end tests: the app in a thread on 127.0.0.1, and Debian's
Chromium driven by Playwright, allowed to reach 127.0.0.1 only."""
from __future__ import annotations

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


@contextmanager
def chromium_page() -> Iterator:
    """A fresh headless Chromium page whose requests can reach 127.0.0.1 only."""
    if not os.path.exists(CHROMIUM):
        message = f"Chromium not found at {CHROMIUM} (make test installs Debian's chromium package)"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        try:
            context = browser.new_context()
            context.route("**/*", lambda route: route.continue_()
                          if urlparse(route.request.url).hostname == "127.0.0.1" else route.abort())
            yield context.new_page()
        finally:
            browser.close()
