"""create_app: builds the Flask app around one store (engine) and registers the role blueprints."""
from __future__ import annotations

import logging
import re
from typing import Any

from flask import Flask, Response, jsonify, render_template, request
from werkzeug.exceptions import HTTPException
from werkzeug.middleware.proxy_fix import ProxyFix

from empeval.server.annotation.secrets import SigningSecret
from empeval.server.errors import EmpevalError
from empeval.server.store import ensure_schema, make_engine
from empeval.server.web import admin, annotate_api, openapi
from empeval.server.web.auth import FailureLimiter, served_over_https
from empeval.server.web.decisions_watch import DecisionWatch
from empeval.server.web.input_guards import install_input_guards

# Our pages load scripts, styles and data from this origin only, run no inline script or style, and may
# not be framed: markup that slipped into a model's reply could neither run nor phone home.
CONTENT_SECURITY_POLICY = "; ".join([
    "default-src 'none'", "script-src 'self'", "style-src 'self'", "img-src 'self' data:", "font-src 'self'",
    "connect-src 'self'", "form-action 'self'", "base-uri 'none'", "frame-ancestors 'none'",
])
SECURITY_HEADERS = {
    "Content-Security-Policy": CONTENT_SECURITY_POLICY,
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "no-referrer",
    "Cross-Origin-Opener-Policy": "same-origin",
    "Cross-Origin-Resource-Policy": "same-origin",
}
# Code and style, the same for everyone, may be cached; every other answer may hold a token, a rater's work
# or the researcher's data, and is never stored by a browser or proxy.
CACHEABLE_ENDPOINTS = frozenset({"static", "annotate.task_assets", "favicon"})


def create_app(config: dict[str, Any] | None = None) -> Flask:
    """Build the app. Config keys: DATABASE_URL (else EMPEVAL_DATABASE_URL / ./empeval.db), SECRET_FILE (the
    file of the signing secret; default: see server.annotation.secrets), TASK_UI_DIR (the folder of the task
    UI's local bundle; without it the task page answers 404), MAX_CONTENT_LENGTH (bytes of a request body),
    AUTH_FAILURE_LIMIT and AUTH_FAILURE_WINDOW (failed token checks allowed per client address and window in
    seconds; default 20 in 60), PROXIES (how many reverse proxies in front set X-Forwarded-For and
    X-Forwarded-Proto: then the limiter sees the client's address, and behind HTTPS the cookies are Secure and
    `__Host-` prefixed and HSTS is sent; 0, the default, trusts no such header from anyone, whatever its address,
    since any client could send it; X-Forwarded-Host is never read), BASE_URL (the public address: https there
    counts as HTTPS for the cookies and HSTS, for a TLS front not declared with PROXIES), plus whatever blueprints
    read."""
    app = Flask(__name__)
    app.config.update(MAX_CONTENT_LENGTH=1 << 20, JSON_SORT_KEYS=False, AUTH_FAILURE_LIMIT=20,
                      AUTH_FAILURE_WINDOW=60.0)
    app.config.update(config or {})
    engine = make_engine(app.config.get("DATABASE_URL"))
    ensure_schema(engine)
    app.extensions["empeval.engine"] = engine
    app.extensions["empeval.decisions_watch"] = DecisionWatch()
    secret = SigningSecret(engine, app.config.get("SECRET_FILE"))
    secret.value()  # read (or create) it now: a missing or mismatched secret stops the app with a reason
    app.extensions["empeval.secret"] = secret
    app.extensions["empeval.limiter"] = FailureLimiter(int(app.config["AUTH_FAILURE_LIMIT"]),
                                                       float(app.config["AUTH_FAILURE_WINDOW"]))
    _keep_tokens_out_of_the_request_log()
    if proxies := int(app.config.get("PROXIES") or 0):
        app.wsgi_app = ProxyFix(app.wsgi_app, x_for=proxies, x_proto=proxies)  # type: ignore[method-assign]

    @app.errorhandler(HTTPException)
    def http_error_as_json(error: HTTPException):
        # Every error is JSON with a message that says what was wrong, never an HTML page; headers the error
        # carries (Retry-After of a 429, Allow of a 405) are kept.
        response = jsonify(error=error.name, message=error.description)
        for name, value in error.get_headers():
            if name.lower() != "content-type":
                response.headers[name] = value
        return response, error.code

    @app.errorhandler(EmpevalError)
    def empeval_error_as_json(error: EmpevalError):
        return jsonify(error=type(error).__name__, message=error.message), error.http_status

    @app.after_request
    def security_headers(response: Response) -> Response:
        for name, value in SECURITY_HEADERS.items():
            response.headers.setdefault(name, value)
        if served_over_https():  # the request's scheme (from a declared proxy only) or an https BASE_URL
            response.headers.setdefault("Strict-Transport-Security", "max-age=31536000")
        if request.endpoint not in CACHEABLE_ENDPOINTS:
            response.headers["Cache-Control"] = "no-store"
            response.headers.pop("Expires", None)
            response.headers.pop("ETag", None)
            response.headers.pop("Last-Modified", None)
        return response

    install_input_guards(app)  # deep JSON, NUL in the URL, ids beyond the store's keys, storage failures

    @app.get("/healthz")
    def healthz():
        return {"status": "ok"}

    @app.get("/favicon.ico")
    def favicon():
        # Every browser asks for it, whatever the page says: the project's icon (static/favicon.svg; browsers take
        # SVG under this name), cached for a day, rather than a 404 in the log for each new visitor.
        response = app.send_static_file("favicon.svg")
        response.headers["Cache-Control"] = "public, max-age=86400"
        return response

    @app.get("/")
    def home():
        # Whoever types the server's bare address: the researcher is led to the dashboard; a rater is told to open
        # her link again (it carries her token, which nothing here could give her).
        return render_template("home.html")

    app.register_blueprint(openapi.blueprint)
    app.register_blueprint(annotate_api.blueprint)
    app.register_blueprint(admin.blueprint)
    for blueprint in _role_blueprints():
        app.register_blueprint(blueprint)
    return app


def _role_blueprints() -> list:
    """The blueprints of each role. Each module also adds its routes to the OpenAPI document."""
    from empeval.server.web.backend_api import blueprint as backend_blueprint
    from empeval.server.web.chat_api import blueprint as chat_blueprint
    from empeval.server.web.prolific import blueprint as prolific_blueprint
    from empeval.server.web.qualification_api import blueprint as qualification_blueprint

    return [backend_blueprint, prolific_blueprint, chat_blueprint, qualification_blueprint]


_TOKEN_IN_PATH = re.compile(r"(\s/annotate/)[^\s?#\"]+|([?&](?:token|PROLIFIC_PID)=)[^&\s\"]+")


class RedactTokens(logging.Filter):
    """Blanks invite tokens in paths (old `/annotate/<token>` links), `token=` query values and Prolific participant
    ids (`PROLIFIC_PID=`, personal data) in the request lines Werkzeug's server logs (`empeval serve` without
    workers; gunicorn's access log is off)."""

    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.args, tuple) and record.args and isinstance(record.args[0], str):
            line = _TOKEN_IN_PATH.sub(lambda m: (m.group(1) or m.group(2)) + "[redacted]", record.args[0])
            record.args = (line, *record.args[1:])
        return True


def _keep_tokens_out_of_the_request_log() -> None:
    log = logging.getLogger("werkzeug")
    if not any(isinstance(f, RedactTokens) for f in log.filters):
        log.addFilter(RedactTokens())
