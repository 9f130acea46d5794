"""Tokens traded for cookies, CSRF protection on what a cookie authenticates, the admin's sign-in, and the
limit on failed token checks per client address."""
from __future__ import annotations

import pytest

from empeval.server.annotation.secrets import make_invite, rotate_secret, secret_key
from empeval.server.web.auth import ADMIN_COOKIE, INVITE_COOKIE, FailureLimiter
from tests.annotation.conftest import new_submission_id

CSRF = {"X-Requested-With": "empeval"}


def bearer(token):
    return {"Authorization": f"Bearer {token}"}


def set_cookie_header(answer, name):
    (header,) = [h for h in answer.headers.getlist("Set-Cookie") if h.startswith(f"{name}=")]
    return header


def full_ratings(assignment):
    return [{"item_id": i["item_id"], "scores": {c["key"]: 3 for c in assignment["criteria"]}}
            for i in assignment["items"]]


# The rater's cookie


def test_the_invite_token_is_traded_for_an_httponly_strict_cookie_that_then_authenticates(app, invite_token):
    client = app.test_client()
    answer = client.post("/api/annotate/session", headers={**bearer(invite_token), **CSRF})
    assert answer.status_code == 200 and answer.json == {"study": "pilot"}
    cookie = set_cookie_header(answer, INVITE_COOKIE)
    assert "HttpOnly" in cookie and "SameSite=Strict" in cookie and "Path=/" in cookie
    assert "Expires" not in cookie and "Max-Age" not in cookie  # a session cookie: closing the browser forgets it
    assert "Secure" not in cookie  # plain HTTP; over HTTPS it is Secure (below)
    assignment = client.get("/api/annotate/next").json["assignment"]  # no header: the cookie is enough to read
    assert assignment["items"]
    submitted = client.post(f"/api/assignments/{assignment['assignment_id']}/submit", headers=CSRF,
                            json={"submission_id": new_submission_id(), "ratings": full_ratings(assignment)})
    assert submitted.status_code == 200, submitted.json


def test_over_https_the_cookies_are_secure(app, invite_token, admin):
    client = app.test_client()
    answer = client.post("/api/annotate/session", headers={**bearer(invite_token), **CSRF},
                         base_url="https://localhost")
    assert "; Secure" in set_cookie_header(answer, "__Host-" + INVITE_COOKIE)
    signed_in = client.post("/admin/session", headers=bearer(admin), base_url="https://localhost")
    assert "; Secure" in set_cookie_header(signed_in, "__Host-" + ADMIN_COOKIE)


def test_a_post_the_cookie_authenticates_needs_the_csrf_header(app, invite_token):
    client = app.test_client()
    client.post("/api/annotate/session", headers=bearer(invite_token))
    assignment = client.get("/api/annotate/next").json["assignment"]
    body = {"submission_id": new_submission_id(), "ratings": full_ratings(assignment)}
    forged = client.post(f"/api/assignments/{assignment['assignment_id']}/submit", json=body)
    assert forged.status_code == 403 and "X-Requested-With" in forged.json["message"]
    assert client.post(f"/api/assignments/{assignment['assignment_id']}/submit", json=body,
                       headers=CSRF).status_code == 200


def test_a_bearer_token_needs_no_csrf_header(app, invite_token):
    """Scripts (simulated raters, the crowd path) send the token themselves: no cookie, nothing to forge."""
    client = app.test_client()
    assignment = client.get("/api/annotate/next", headers=bearer(invite_token)).json["assignment"]
    answer = client.post(f"/api/assignments/{assignment['assignment_id']}/submit", headers=bearer(invite_token),
                         json={"submission_id": new_submission_id(), "ratings": full_ratings(assignment)})
    assert answer.status_code == 200


def test_the_exchange_takes_the_token_from_the_header_only(app, invite_token):
    """A form on another site cannot set a header, so it cannot plant its own invite in a rater's browser."""
    client = app.test_client()
    assert client.post("/api/annotate/session", data={"token": invite_token}).status_code == 401
    assert client.post("/api/annotate/session", json={"token": invite_token}).status_code == 401
    refused = client.post("/api/annotate/session", headers=bearer(invite_token + "x"))
    assert refused.status_code == 403 and not refused.headers.getlist("Set-Cookie")


def test_without_token_or_cookie_the_page_is_told_to_open_the_link_again(app):
    answer = app.test_client().get("/api/annotate/next")
    assert answer.status_code == 401 and "invite link" in answer.json["message"]


# The researcher's session


def test_the_admin_signs_in_by_form_and_gets_a_session_cookie_that_is_not_the_token(app, admin):
    client = app.test_client()
    login = client.get("/admin")
    assert login.status_code == 200 and b'name="token"' in login.data and b"pilot" not in login.data
    wrong = client.post("/admin/session", data={"token": "nope"})
    assert wrong.status_code == 403 and b"wrong admin token" in wrong.data
    answer = client.post("/admin/session", data={"token": admin})
    assert answer.status_code == 303 and answer.headers["Location"] == "/admin"
    cookie = set_cookie_header(answer, ADMIN_COOKIE)
    assert "HttpOnly" in cookie and "SameSite=Strict" in cookie and admin not in cookie
    dashboard = client.get("/admin")
    assert dashboard.status_code == 200 and b"<h2>pilot</h2>" in dashboard.data
    assert client.get("/api/studies/pilot/progress").status_code == 200  # the cookie reaches the admin API
    assert client.get("/api/studies/pilot/export?format=csv").status_code == 200
    assert client.get("/api/systems").status_code == 200  # and the backend API (GET: no CSRF header needed)
    assert client.post("/api/respond", json={"system": "control-generic", "context": {
        "turns": [{"role": "speaker", "text": "hi"}]}}).status_code == 403  # a POST without the CSRF header
    client.post("/admin/logout")
    assert b'name="token"' in client.get("/admin").data


def test_the_script_signs_in_with_the_token_from_the_fragment(app, admin):
    client = app.test_client()
    answer = client.post("/admin/session", headers={**bearer(admin), **CSRF})
    assert answer.status_code == 200 and answer.json == {"status": "signed in"}
    assert client.get("/api/studies/pilot/progress").status_code == 200


def test_an_old_admin_link_with_the_token_in_the_query_signs_in_and_leaves_the_address(app, admin):
    client = app.test_client()
    answer = client.get(f"/admin?token={admin}")
    assert answer.status_code == 303 and answer.headers["Location"] == "/admin"
    assert client.get("/admin").status_code == 200
    refused = app.test_client().get(f"/api/studies/pilot/progress?token={admin}")
    assert refused.status_code == 401 and "Authorization: Bearer" in refused.json["message"]


def test_a_rotated_secret_ends_every_session_and_token_at_the_next_request(app, study_store, invite_token, admin):
    researcher, rater = app.test_client(), app.test_client()
    researcher.post("/admin/session", data={"token": admin})
    rater.post("/api/annotate/session", headers=bearer(invite_token))
    assert researcher.get("/api/studies/pilot/progress").status_code == 200
    assert rater.get("/api/annotate/next").status_code == 200
    rotate_secret(study_store)  # another process (the CLI) writes the new secret; this app keeps running
    assert researcher.get("/api/studies/pilot/progress").status_code == 401
    assert rater.get("/api/annotate/next").status_code == 403
    assert app.test_client().get("/admin", headers=bearer(admin)).status_code == 403
    fresh = make_invite(secret_key(study_store), annotator_id=1, study="pilot")
    assert app.test_client().get("/api/annotate/next", headers=bearer(fresh)).status_code == 200


# Limits on guessing


def test_failed_token_checks_are_limited_per_client_address(app, invite_token, admin):
    client = app.test_client()
    for guess in range(5):  # AUTH_FAILURE_LIMIT=5 in this app
        assert client.get("/api/annotate/next", headers=bearer(f"guess-{guess}")).status_code == 403
    limited = client.get("/api/annotate/next", headers=bearer(invite_token))
    assert limited.status_code == 429 and int(limited.headers["Retry-After"]) > 0  # even a good token: no oracle
    assert limited.is_json and "too many failed" in limited.json["message"]
    assert client.get("/api/studies/pilot/progress", headers=bearer(admin)).status_code == 429
    assert client.post("/admin/session", data={"token": admin}).status_code == 429
    elsewhere = app.test_client()
    elsewhere.environ_base["REMOTE_ADDR"] = "10.0.0.7"
    assert elsewhere.get("/api/annotate/next", headers=bearer(invite_token)).status_code == 200


def test_missing_tokens_and_good_tokens_do_not_count_as_failures(app, invite_token):
    client = app.test_client()
    for _ in range(20):
        assert client.get("/api/annotate/next").status_code == 401
        assert client.get("/api/annotate/next", headers=bearer(invite_token)).status_code == 200


def test_the_limiter_forgets_after_its_window_and_bounds_its_memory():
    limiter = FailureLimiter(limit=3, window=60.0, max_clients=100)
    for t in (0.0, 1.0, 2.0):
        limiter.record_failure("a", now=t)
    assert limiter.retry_after("a", now=3.0) == pytest.approx(57.0)
    assert limiter.retry_after("a", now=60.5) == 0.0  # the oldest failure left the window
    for n in range(500):
        limiter.record_failure(f"client-{n}", now=100.0 + n)
    assert len(limiter._failures) <= 100


def test_behind_a_declared_proxy_the_limit_counts_the_forwarded_client_address(study_store, invite_token):
    from empeval.wiring import make_app

    url = study_store.url.render_as_string(hide_password=False)
    app = make_app(url, TESTING=True, AUTH_FAILURE_LIMIT=2, PROXIES=1)
    client = app.test_client()
    for _ in range(2):
        client.get("/api/annotate/next", headers={**bearer("guess"), "X-Forwarded-For": "203.0.113.9"})
    assert client.get("/api/annotate/next", headers={**bearer(invite_token),
                                                     "X-Forwarded-For": "203.0.113.9"}).status_code == 429
    assert client.get("/api/annotate/next", headers={**bearer(invite_token),
                                                     "X-Forwarded-For": "198.51.100.4"}).status_code == 200
    answer = client.post("/api/annotate/session", headers={**bearer(invite_token), "X-Forwarded-Proto": "https",
                                                           "X-Forwarded-For": "198.51.100.4"})
    assert "; Secure" in set_cookie_header(answer, "__Host-" + INVITE_COOKIE)
    direct = make_app(url, TESTING=True, AUTH_FAILURE_LIMIT=2).test_client()  # no proxy declared: headers ignored
    for _ in range(2):
        direct.get("/api/annotate/next", headers={**bearer("guess"), "X-Forwarded-For": "203.0.113.9"})
    assert direct.get("/api/annotate/next", headers={**bearer(invite_token),
                                                     "X-Forwarded-For": "198.51.100.4"}).status_code == 429
