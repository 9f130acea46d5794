"""Cookies and forwarded headers (issue 29): over HTTPS the cookies are `__Host-` cookies (Secure, Path=/, no
Domain; ASVS 3.4.4) and only those names are read; over plain HTTP their names are plain. HTTPS is the request's
scheme, as the server saw it or as a proxy declared with --proxies forwarded it, or an https BASE_URL; an
X-Forwarded-Proto from anyone else, 127.0.0.1 included, switches on neither Secure cookies nor HSTS, under the
default server, under --gunicorn and under --dev (real `empeval serve` processes on 127.0.0.1)."""
from __future__ import annotations

import pytest
import requests

from empeval.server.web.auth import ADMIN_COOKIE, HOST_PREFIX, INVITE_COOKIE
from empeval.wiring import make_app
from tests.test_cli_serve_slow_clients import served

CSRF = {"X-Requested-With": "empeval"}
HTTPS = "https://localhost"


def bearer(token):
    return {"Authorization": f"Bearer {token}"}


def set_cookies(answer) -> dict[str, str]:
    """The answer's Set-Cookie headers by cookie name."""
    raw = answer.raw.headers if isinstance(answer, requests.Response) else answer.headers
    headers = raw.getlist("Set-Cookie")
    return {header.split("=", 1)[0]: header for header in headers}


def assert_host_cookie(header: str) -> None:
    """A cookie a browser accepts under the `__Host-` prefix, and ours otherwise."""
    attributes = [part.strip().lower() for part in header.split(";")[1:]]
    assert header.startswith(HOST_PREFIX)
    assert "secure" in attributes and "path=/" in attributes and not [a for a in attributes if a.startswith("domain")]
    assert "httponly" in attributes and "samesite=strict" in attributes


def assert_plain_cookie(header: str) -> None:
    attributes = [part.strip().lower() for part in header.split(";")[1:]]
    assert not header.startswith(HOST_PREFIX) and "secure" not in attributes, header
    assert "httponly" in attributes and "samesite=strict" in attributes and "path=/" in attributes


# The app (Flask's test client)


def test_over_https_the_cookies_are_host_prefixed_and_only_those_names_are_read(app, invite_token, admin):
    client = app.test_client()
    rater = client.post("/api/annotate/session", headers={**bearer(invite_token), **CSRF}, base_url=HTTPS)
    researcher = client.post("/admin/session", data={"token": admin}, base_url=HTTPS)
    assert set(set_cookies(rater)) == {HOST_PREFIX + INVITE_COOKIE}
    assert set(set_cookies(researcher)) == {HOST_PREFIX + ADMIN_COOKIE}
    assert_host_cookie(set_cookies(rater)[HOST_PREFIX + INVITE_COOKIE])
    assert_host_cookie(set_cookies(researcher)[HOST_PREFIX + ADMIN_COOKIE])
    assert client.get("/api/annotate/next", base_url=HTTPS).status_code == 200
    assert client.get("/api/studies/pilot/progress", base_url=HTTPS).status_code == 200
    # A plain-named cookie over HTTPS (one a subdomain or a plain-HTTP page could have planted) is not read.
    invite, session = client.get_cookie(HOST_PREFIX + INVITE_COOKIE), client.get_cookie(HOST_PREFIX + ADMIN_COOKIE)
    planted = app.test_client()
    planted.set_cookie(INVITE_COOKIE, invite.value)
    planted.set_cookie(ADMIN_COOKIE, session.value)
    assert planted.get("/api/annotate/next", base_url=HTTPS).status_code == 401
    assert planted.get("/api/studies/pilot/progress", base_url=HTTPS).status_code == 401
    # Signing out over HTTPS clears the prefixed cookie, with the attributes it was set with.
    signed_out = client.post("/admin/logout", base_url=HTTPS)
    cleared = set_cookies(signed_out)[HOST_PREFIX + ADMIN_COOKIE]
    assert_host_cookie(cleared)
    assert "Max-Age=0" in cleared and client.get_cookie(HOST_PREFIX + ADMIN_COOKIE) is None


def test_over_plain_http_the_names_are_plain_and_not_secure(app, invite_token, admin):
    client = app.test_client()
    rater = client.post("/api/annotate/session", headers={**bearer(invite_token), **CSRF})
    researcher = client.post("/admin/session", data={"token": admin})
    assert_plain_cookie(set_cookies(rater)[INVITE_COOKIE])
    assert_plain_cookie(set_cookies(researcher)[ADMIN_COOKIE])
    assert "Strict-Transport-Security" not in researcher.headers
    assert client.get("/api/annotate/next").status_code == 200
    # and a prefixed cookie over plain HTTP is not read (no browser would have stored it)
    prefixed = app.test_client()
    prefixed.set_cookie(HOST_PREFIX + ADMIN_COOKIE, client.get_cookie(ADMIN_COOKIE).value)
    assert prefixed.get("/api/studies/pilot/progress").status_code == 401


def test_an_https_base_url_makes_the_cookies_host_cookies_behind_an_undeclared_tls_front(study_store, admin):
    url = study_store.url.render_as_string(hide_password=False)
    app = make_app(url, TESTING=True, BASE_URL="https://ratings.example.org")
    client = app.test_client()
    answer = client.post("/admin/session", data={"token": admin})  # reached over http, as a tunnel forwards it
    assert_host_cookie(set_cookies(answer)[HOST_PREFIX + ADMIN_COOKIE])
    assert answer.headers["Strict-Transport-Security"].startswith("max-age=")
    assert client.get("/api/studies/pilot/progress").status_code == 200
    plain = make_app(url, TESTING=True, BASE_URL="http://127.0.0.1:5000").test_client()
    assert_plain_cookie(set_cookies(plain.post("/admin/session", data={"token": admin}))[ADMIN_COOKIE])


@pytest.mark.parametrize("address", ["127.0.0.1", "::1", "203.0.113.9"])
def test_without_a_declared_proxy_a_forwarded_scheme_is_ignored_from_any_address(study_store, admin, address):
    url = study_store.url.render_as_string(hide_password=False)
    client = make_app(url, TESTING=True).test_client()
    client.environ_base["REMOTE_ADDR"] = address
    forged = {"X-Forwarded-Proto": "https", "X-Forwarded-Host": "evil.example", "X-Forwarded-For": "198.51.100.1"}
    answer = client.post("/admin/session", data={"token": admin}, headers=forged)
    assert_plain_cookie(set_cookies(answer)[ADMIN_COOKIE])
    assert "Strict-Transport-Security" not in answer.headers


def test_with_a_declared_proxy_its_forwarded_scheme_counts(study_store, admin):
    url = study_store.url.render_as_string(hide_password=False)
    client = make_app(url, TESTING=True, PROXIES=1).test_client()
    answer = client.post("/admin/session", data={"token": admin}, headers={"X-Forwarded-Proto": "https"})
    assert_host_cookie(set_cookies(answer)[HOST_PREFIX + ADMIN_COOKIE])
    assert answer.headers["Strict-Transport-Security"].startswith("max-age=")
    assert client.get("/api/studies/pilot/progress", headers={"X-Forwarded-Proto": "https"}).status_code == 200
    plain = client.post("/admin/session", data={"token": admin}, headers={"X-Forwarded-Proto": "http"})
    assert_plain_cookie(set_cookies(plain)[ADMIN_COOKIE])


# Real servers: the default (waitress), --gunicorn and --dev


@pytest.mark.parametrize("server_options", [["--workers", "1"], ["--gunicorn", "--workers", "1"], ["--dev"]],
                         ids=["default", "gunicorn", "dev"])
def test_a_forwarded_scheme_from_127_0_0_1_counts_only_with_proxies(study_store, admin, server_options):
    url = study_store.url.render_as_string(hide_password=False)
    study_store.dispose()
    forged = {"X-Forwarded-Proto": "https", "X-Forwarded-Ssl": "on", "X-Forwarded-Protocol": "ssl"}
    with served(url, *server_options) as server:  # no --proxies: the headers come from anyone on the machine
        answer = requests.post(f"{server.base}/admin/session", headers={**bearer(admin), **CSRF, **forged},
                               timeout=10)
        assert answer.status_code == 200
        assert_plain_cookie(set_cookies(answer)[ADMIN_COOKIE])
        assert "Strict-Transport-Security" not in answer.headers
    with served(url, *server_options, "--proxies", "1") as server:
        answer = requests.post(f"{server.base}/admin/session",
                               headers={**bearer(admin), **CSRF, "X-Forwarded-Proto": "https"}, timeout=10)
        assert_host_cookie(set_cookies(answer)[HOST_PREFIX + ADMIN_COOKIE])
        assert answer.headers["Strict-Transport-Security"].startswith("max-age=")
        cookie = answer.cookies[HOST_PREFIX + ADMIN_COOKIE]
        progress = requests.get(f"{server.base}/api/studies/pilot/progress", timeout=10,
                                headers={"Cookie": f"{HOST_PREFIX + ADMIN_COOKIE}={cookie}",
                                         "X-Forwarded-Proto": "https"})
        assert progress.status_code == 200


# A real browser


def test_chromium_keeps_the_host_cookie_and_a_copy_is_refused_after_sign_out(study_store, admin):
    """Chromium accepts the `__Host-` cookie as set (it refuses one whose attributes break the prefix's rules; 127.0.0.1
    counts as a secure origin, so no TLS is needed here), the dashboard opens with it, and after "Sign out" a copy
    of it put back into a fresh browser opens nothing."""
    from tests.browser import chromium_page, live_server

    app = make_app(study_store.url.render_as_string(hide_password=False), BASE_URL="https://ratings.example.org")

    def opened_with_a_copy(base: str, cookie: dict) -> bool:
        with chromium_page() as page:
            page.context.add_cookies([{k: cookie[k] for k in ("name", "value", "domain", "path", "secure",
                                                               "httpOnly", "sameSite", "expires")}])
            page.goto(f"{base}/admin")
            signed_in = page.locator("body").get_attribute("data-signed-in") == "yes"
            api = page.request.get(f"{base}/api/studies/pilot/progress").status
            assert signed_in == (api == 200), api
            return signed_in

    with live_server(app) as base:
        with chromium_page() as page:
            page.goto(f"{base}/admin#{admin}")
            page.wait_for_selector("text=pilot")
            (cookie,) = page.context.cookies()
            assert cookie["name"] == HOST_PREFIX + ADMIN_COOKIE and cookie["secure"] and cookie["httpOnly"]
            assert cookie["path"] == "/" and cookie["sameSite"] == "Strict"
            assert opened_with_a_copy(base, cookie)
            page.click("text=Sign out")
            page.wait_for_selector("#token")
            assert page.context.cookies() == []
        assert not opened_with_a_copy(base, cookie)
