"""create_app: builds the Flask app around one store (engine) and registers the role blueprints."""
from __future__ import annotations

from typing import Any

from flask import Flask, jsonify
from werkzeug.exceptions import HTTPException

from server.errors import EmpevalError
from server.store import ensure_schema, make_engine
from server.web import admin, annotate_api, openapi


def create_app(config: dict[str, Any] | None = None) -> Flask:
    """Build the app. Config keys: DATABASE_URL (else EMPEVAL_DATABASE_URL / ./empeval.db), TASK_UI_DIR (the
    folder of the task UI's local bundle; without it the task page answers 404), MAX_CONTENT_LENGTH (bytes of
    a request body), plus whatever blueprints read."""
    app = Flask(__name__)
    app.config.update(MAX_CONTENT_LENGTH=1 << 20, JSON_SORT_KEYS=False)
    app.config.update(config or {})
    engine = make_engine(app.config.get("DATABASE_URL"))
    ensure_schema(engine)
    app.extensions["empeval.engine"] = engine

    @app.errorhandler(HTTPException)
    def http_error_as_json(error: HTTPException):
        # Every error is JSON with a message that says what was wrong, never an HTML page.
        return jsonify(error=error.name, message=error.description), error.code

    @app.errorhandler(EmpevalError)
    def empeval_error_as_json(error: EmpevalError):
        return jsonify(error=type(error).__name__, message=error.message), error.http_status

    @app.get("/healthz")
    def healthz():
        return {"status": "ok"}

    app.register_blueprint(openapi.blueprint)
    app.register_blueprint(annotate_api.blueprint)
    app.register_blueprint(admin.blueprint)
    for blueprint in _role_blueprints():
        app.register_blueprint(blueprint)
    return app


def _role_blueprints() -> list:
    """The blueprints of each role. Each module also adds its routes to the OpenAPI document."""
    from server.web.backend_api import blueprint as backend_blueprint

    return [backend_blueprint]
