"""Who is asking: an annotator (invite token) or the researcher (admin token)."""
from __future__ import annotations

from flask import current_app, request
from werkzeug.exceptions import Forbidden, Unauthorized

from server.annotation.secrets import InvalidInvite, is_admin, read_invite, secret_key


def _secret() -> str:
    app = current_app
    if "empeval.secret" not in app.extensions:
        app.extensions["empeval.secret"] = secret_key(app.extensions["empeval.engine"])
    return app.extensions["empeval.secret"]


def bearer_token() -> str | None:
    header = request.headers.get("Authorization", "")
    if header.startswith("Bearer "):
        return header.removeprefix("Bearer ").strip() or None
    return None


def current_annotator() -> tuple[int, str]:
    """(annotator_id, study) from the invite token in `Authorization: Bearer …`, or a 401/403."""
    token = bearer_token()
    if not token:
        raise Unauthorized("send the invite token as `Authorization: Bearer <token>`")
    try:
        return read_invite(_secret(), token)
    except InvalidInvite as error:
        raise Forbidden(str(error)) from None


def require_admin() -> None:
    token = bearer_token() or request.args.get("token")
    if not token:
        raise Unauthorized("admin token required (`Authorization: Bearer <token>` or ?token=); "
                           "print it with `empeval admin-token`")
    if not is_admin(_secret(), token):
        raise Forbidden("wrong admin token")
