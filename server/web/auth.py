"""Who is asking: an annotator (invite token) or the researcher (admin token), and how the browser keeps it.

Scripts send a token as `Authorization: Bearer <token>`. Browsers exchange a token once for an HttpOnly,
SameSite=Strict cookie (the task page and /admin do it on first load and clean the address bar), so the
token stays out of the address bar, the history and every access log:

- `empeval_invite`: the invite token itself (a session cookie, so closing the browser forgets it);
- `empeval_admin`: a signed admin session that lasts ADMIN_SESSION_HOURS and dies with a new secret, a new
  admin token, or a sign-out; it is not the admin token.

Over HTTPS both are `__Host-` cookies (`__Host-empeval_invite`, `__Host-empeval_admin`: Secure, Path=/, no Domain;
ASVS 3.4.4), which a browser accepts only from this very origin over HTTPS, so neither a neighbouring subdomain nor
a plain-HTTP page can plant or overwrite one; the server then reads only the prefixed names. Over plain HTTP (local
development) the names are plain: a browser refuses a `__Host-` cookie that is not Secure. A request is over HTTPS
when its scheme says so (from the server, or from the headers of the proxies declared with PROXIES: no other
forwarded header is believed) or when the app's public address (BASE_URL) is https.

Signing out ends the session on the server (ASVS 3.3.1), not only in the browser: the session names the
generation of admin sessions it was signed in under, kept in the store (server.annotation.secrets), and a
sign-out draws a new one, so a copy of the cookie is refused by every process from then on. There is one
researcher's token, so a sign-out ends every admin session (every browser signed in with it): sign out anywhere
to sign out everywhere; a script does it with `POST /admin/logout` and the admin token as a bearer.

A cookie is sent by the browser whatever page asked, so a state-changing request (anything but GET, HEAD,
OPTIONS) authenticated by a cookie must also carry the `X-Requested-With` header, which another site cannot
add without a CORS preflight that this app never grants (CSRF protection, beside SameSite=Strict).

Failed token checks are counted per client address by a small in-process limiter (FailureLimiter): after
AUTH_FAILURE_LIMIT failures within AUTH_FAILURE_WINDOW seconds (default 20 in 60 s) the address gets 429 until
the window has passed, before any token is looked at. Each process counts on its own (gunicorn workers
multiply the limit), and behind a reverse proxy every client has the proxy's address.
"""
from __future__ import annotations

import contextlib
import functools
import hashlib
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

from flask import current_app, g, request
from itsdangerous import BadSignature, URLSafeTimedSerializer
from werkzeug.exceptions import Forbidden, TooManyRequests, Unauthorized
from werkzeug.wrappers import Response

from empeval.server.annotation.secrets import (
    InvalidInvite,
    admin_session_generation,
    admin_token,
    end_admin_sessions,
    is_admin,
    read_invite,
)

INVITE_COOKIE = "empeval_invite"
ADMIN_COOKIE = "empeval_admin"
HOST_PREFIX = "__Host-"
CSRF_HEADER = "X-Requested-With"
ADMIN_SESSION_HOURS = 12
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})

F = TypeVar("F", bound=Callable[..., Any])


class FailureLimiter:
    """At most `limit` failed token checks per client address within `window` seconds (a sliding window),
    in this process's memory; thread-safe. Remembers at most `max_clients` addresses."""

    def __init__(self, limit: int = 20, window: float = 60.0, max_clients: int = 10_000):
        self.limit, self.window, self.max_clients = limit, window, max_clients
        self._failures: dict[str, deque[float]] = {}
        self._lock = threading.Lock()

    def retry_after(self, address: str, now: float | None = None) -> float:
        """Seconds until `address` may try again; 0 when it may now."""
        now = time.monotonic() if now is None else now
        with self._lock:
            failures = self._failures.get(address)
            if failures is None or len(failures) < self.limit:
                return 0.0
            return max(0.0, self.window - (now - failures[0]))

    def record_failure(self, address: str, now: float | None = None) -> None:
        now = time.monotonic() if now is None else now
        with self._lock:
            failures = self._failures.pop(address, None) or deque(maxlen=self.limit)
            failures.append(now)
            self._failures[address] = failures  # re-inserted: the dict stays ordered by last failure
            if len(self._failures) > self.max_clients:
                self._forget_old(now)

    def _forget_old(self, now: float) -> None:
        for address in [a for a, f in self._failures.items() if now - f[-1] > self.window]:
            del self._failures[address]
        while len(self._failures) > self.max_clients:  # still too many: drop those quiet the longest
            del self._failures[next(iter(self._failures))]


def cookie_name(name: str, *, https: bool) -> str:
    """The name the browser keeps cookie `name` under: `__Host-` prefixed over HTTPS, plain over HTTP.

    >>> cookie_name(ADMIN_COOKIE, https=True), cookie_name(ADMIN_COOKIE, https=False)
    ('__Host-empeval_admin', 'empeval_admin')
    """
    return HOST_PREFIX + name if https else name


def served_over_https() -> bool:
    """Whether the browser reaches us over HTTPS: this request's scheme says so (as the server saw it, or as the
    proxies declared with PROXIES forwarded it), or the public address the app was given (BASE_URL) is https."""
    return request.is_secure or str(current_app.config.get("BASE_URL") or "").lower().startswith("https://")


def _cookie(name: str) -> str:
    return cookie_name(name, https=served_over_https())


def _set_cookie(response: Response, name: str, value: str, max_age: int | None = None) -> None:
    """Set cookie `name` as every cookie of ours is: HttpOnly, SameSite=Strict, Path=/, no Domain; over HTTPS Secure
    and `__Host-` prefixed."""
    https = served_over_https()
    response.set_cookie(cookie_name(name, https=https), value, max_age=max_age, httponly=True, samesite="Strict",
                        secure=https, path="/")


def signing_secret() -> str:
    return current_app.extensions["empeval.secret"].value()


def _limiter() -> FailureLimiter:
    return current_app.extensions["empeval.limiter"]


def _client() -> str:
    return request.remote_addr or "unknown"


def _refuse_if_limited() -> None:
    wait = _limiter().retry_after(_client())
    if wait > 0:
        raise TooManyRequests(f"too many failed token checks from your address: try again in {int(wait) + 1} s",
                              retry_after=int(wait) + 1)


def _failed(message: str) -> Forbidden:
    _limiter().record_failure(_client())
    return Forbidden(message)


@contextlib.contextmanager
def limited_token_check(*refusals: type[Exception]) -> Iterator[None]:
    """Run a check of something signed (a study link) behind the failure limiter: 429 while the caller's address
    is limited; any of `refusals` raised inside counts as a failed check, and goes on up."""
    _refuse_if_limited()
    try:
        yield
    except refusals:
        _limiter().record_failure(_client())
        raise


def bearer_token() -> str | None:
    header = request.headers.get("Authorization", "")
    if header.startswith("Bearer "):
        return header.removeprefix("Bearer ").strip() or None
    return None


def _require_csrf_header() -> None:
    if request.method not in SAFE_METHODS and not request.headers.get(CSRF_HEADER):
        raise Forbidden(f"a request authenticated by a cookie must carry the {CSRF_HEADER} header")


# Annotators


def check_invite(token: str) -> tuple[int, str]:
    """(annotator_id, study) of a valid invite token; 429 while the caller's address is limited, else 403."""
    _refuse_if_limited()
    try:
        return read_invite(signing_secret(), token)
    except InvalidInvite as error:
        raise _failed(str(error)) from None


def current_annotator() -> tuple[int, str]:
    """(annotator_id, study) from the invite token in `Authorization: Bearer …` or the invite cookie; 401/403."""
    token = bearer_token()
    if token is None and (token := request.cookies.get(_cookie(INVITE_COOKIE))):
        _require_csrf_header()
    if not token:
        raise Unauthorized("send the invite token as `Authorization: Bearer <token>`, or open your invite link again")
    return check_invite(token)


def set_invite_cookie(response: Response, token: str) -> None:
    _set_cookie(response, INVITE_COOKIE, token)


# The researcher


def _admin_sessions() -> URLSafeTimedSerializer:
    return URLSafeTimedSerializer(signing_secret(), salt="admin-session")


def _admin_token_tag() -> str:
    """Ties a session to the admin token in force: a new $EMPEVAL_ADMIN_TOKEN ends every session."""
    return hashlib.sha256(admin_token(signing_secret()).encode()).hexdigest()[:16]


def check_admin_token(token: str) -> None:
    """403 unless `token` is the admin token; 429 while the caller's address is limited."""
    _refuse_if_limited()
    if not is_admin(signing_secret(), token):
        raise _failed("wrong admin token (print the right one with `empeval admin-token`)")


def _engine() -> Any:
    return current_app.extensions["empeval.engine"]


def has_admin_session() -> bool:
    """Whether the request carries a live admin session cookie: signed with the secret in force within
    ADMIN_SESSION_HOURS, for the admin token in force, and of the generation in the store (no sign-out since).
    Answered once per request."""
    if "empeval_admin_session" not in g:
        g.empeval_admin_session = _live_admin_session()
    return bool(g.empeval_admin_session)


def _live_admin_session() -> bool:
    value = request.cookies.get(_cookie(ADMIN_COOKIE))
    if not value:
        return False
    try:
        payload = _admin_sessions().loads(value, max_age=ADMIN_SESSION_HOURS * 3600)
    except BadSignature:  # altered, expired, or signed with a secret since rotated
        return False
    if not isinstance(payload, dict) or payload.get("t") != _admin_token_tag():
        return False
    # Read from the store at every request, never kept in this process: a sign-out in another process counts here.
    return payload.get("g") == admin_session_generation(_engine())


def require_admin() -> None:
    """The admin token as `Authorization: Bearer …`, or an admin session cookie; else 401/403."""
    token = bearer_token()
    if token is not None:
        check_admin_token(token)
        return
    if has_admin_session():
        _require_csrf_header()
        return
    if request.args.get("token"):
        raise Unauthorized("the admin token no longer goes in the address (it would land in access logs): send "
                           "`Authorization: Bearer <token>`, or sign in at /admin")
    raise Unauthorized("admin token required (`Authorization: Bearer <token>`, or sign in at /admin); "
                       "print it with `empeval admin-token`")


def admin_required(view: F) -> F:
    """Guard a route: only the researcher (admin token or admin session) gets through."""

    @functools.wraps(view)
    def guarded(*args: Any, **kwargs: Any) -> Any:
        require_admin()
        return view(*args, **kwargs)

    return guarded  # type: ignore[return-value]


def set_admin_cookie(response: Response) -> None:
    """Sign the browser in: an admin session of the admin token and the session generation in force."""
    session = {"t": _admin_token_tag(), "g": admin_session_generation(_engine())}
    _set_cookie(response, ADMIN_COOKIE, _admin_sessions().dumps(session), max_age=ADMIN_SESSION_HOURS * 3600)


def end_admin_session() -> None:
    """End every admin session in the store (a new generation): its cookies are refused from the next request on,
    by every process."""
    end_admin_sessions(_engine())
    g.empeval_admin_session = False


def clear_admin_cookie(response: Response) -> None:
    https = served_over_https()
    response.delete_cookie(cookie_name(ADMIN_COOKIE, https=https), path="/", httponly=True, samesite="Strict",
                           secure=https)
