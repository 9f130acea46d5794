"""Every answer of the app carries the security headers; only code and style may be cached."""
from __future__ import annotations

import logging

import pytest

from empeval.server.web.app import RedactTokens


def bearer(token):
    return {"Authorization": f"Bearer {token}"}


@pytest.mark.parametrize("path", ["/healthz", "/openapi.json", "/annotate", "/annotate/some-old-token", "/admin",
                                  "/api/annotate/next", "/api/systems", "/api/studies/pilot/progress", "/nowhere"])
def test_every_page_and_route_carries_the_headers_and_is_never_stored(app, path):
    answer = app.test_client().get(path)
    csp = answer.headers["Content-Security-Policy"]
    assert "script-src 'self'" in csp and "'unsafe-inline'" not in csp and "'unsafe-eval'" not in csp
    assert "frame-ancestors 'none'" in csp and "default-src 'none'" in csp
    assert answer.headers["X-Content-Type-Options"] == "nosniff"
    assert answer.headers["X-Frame-Options"] == "DENY"
    assert answer.headers["Referrer-Policy"] == "no-referrer"
    assert answer.headers["Cache-Control"] == "no-store"
    assert "Strict-Transport-Security" not in answer.headers  # plain HTTP: HSTS would mean nothing


def test_the_authenticated_answers_are_never_stored_either(app, invite_token, admin):
    client = app.test_client()
    for path, token in [("/api/annotate/next", invite_token), ("/admin", admin), ("/api/studies/pilot/export", admin)]:
        answer = client.get(path, headers=bearer(token))
        assert answer.status_code == 200 and answer.headers["Cache-Control"] == "no-store", path


def test_code_and_style_may_be_cached_with_the_same_headers(app):
    client = app.test_client()
    for path in ["/task-ui/task.js", "/static/admin.css", "/static/admin.js"]:
        answer = client.get(path)
        assert answer.status_code == 200, path
        assert "no-store" not in answer.headers.get("Cache-Control", "") and answer.headers["X-Content-Type-Options"]
        answer.close()


def test_over_https_the_browser_is_told_to_stay_on_https(app):
    answer = app.test_client().get("/healthz", base_url="https://localhost")
    assert answer.headers["Strict-Transport-Security"].startswith("max-age=")


def test_the_dashboard_has_no_inline_style_or_script(app, admin):
    page = app.test_client().get("/admin", headers=bearer(admin)).get_data(as_text=True)
    login = app.test_client().get("/admin").get_data(as_text=True)
    for html in (page, login):
        assert "<style" not in html and "style=" not in html and "<script>" not in html and "onclick" not in html
        assert '<script src="/static/admin.js">' in html and 'href="/static/admin.css"' in html


@pytest.mark.parametrize("line, logged", [
    ("GET /annotate/eyJhIjoxfQ.abc HTTP/1.1", "GET /annotate/[redacted] HTTP/1.1"),
    ("GET /admin?token=0123abcd HTTP/1.1", "GET /admin?token=[redacted] HTTP/1.1"),
    ("GET /api/studies/p/export?format=csv&token=zz HTTP/1.1",
     "GET /api/studies/p/export?format=csv&token=[redacted] HTTP/1.1"),
    ("GET /api/annotate/next HTTP/1.1", "GET /api/annotate/next HTTP/1.1"),
    ("GET /annotate HTTP/1.1", "GET /annotate HTTP/1.1"),
])
def test_the_request_log_never_shows_a_token(line, logged):
    record = logging.LogRecord("werkzeug", logging.INFO, __file__, 1, '"%s" %s %s', (line, "200", "-"), None)
    assert RedactTokens().filter(record) and record.getMessage() == f'"{logged}" 200 -'


def test_the_favicon_is_the_projects_icon_cached_for_a_day_not_a_404(app):
    answer = app.test_client().get("/favicon.ico")
    assert answer.status_code == 200 and answer.mimetype == "image/svg+xml"
    assert answer.data.startswith(b"<svg") and "max-age=86400" in answer.headers["Cache-Control"]
    assert "no-store" not in answer.headers["Cache-Control"] and answer.headers["X-Content-Type-Options"] == "nosniff"
    answer.close()
