"""The installation's signing key and the tokens derived from it (invite links, the admin token)."""
from __future__ import annotations

import hashlib
import hmac
import os
import secrets as _random
import time

from itsdangerous import BadSignature, URLSafeSerializer
from sqlalchemy import Engine, select
from sqlalchemy.exc import IntegrityError

from server.errors import Forbidden
from server.store.engine import unit_of_work
from server.store.models import AppSetting

SECRET_ENV = "EMPEVAL_SECRET_KEY"
ADMIN_TOKEN_ENV = "EMPEVAL_ADMIN_TOKEN"


def secret_key(engine: Engine) -> str:
    """$EMPEVAL_SECRET_KEY, else a random key created once and kept in the store (so the CLI that makes
    invite links and the server that checks them agree without configuration)."""
    if env := os.environ.get(SECRET_ENV):
        return env
    with unit_of_work(engine) as session:
        stored = session.scalar(select(AppSetting.value).where(AppSetting.key == "secret_key"))
    if stored:
        return stored
    try:
        with unit_of_work(engine) as session:
            session.add(AppSetting(key="secret_key", value=_random.token_urlsafe(48)))
    except IntegrityError:  # another process created it first
        pass
    with unit_of_work(engine) as session:
        return session.scalars(select(AppSetting.value).where(AppSetting.key == "secret_key")).one()


def admin_token(secret: str) -> str:
    """$EMPEVAL_ADMIN_TOKEN, else an HMAC of the secret key: stable, printable by `empeval admin token`."""
    derived = hmac.new(secret.encode(), b"empeval-admin", hashlib.sha256).hexdigest()[:32]
    return os.environ.get(ADMIN_TOKEN_ENV) or derived


def is_admin(secret: str, presented: str | None) -> bool:
    return presented is not None and hmac.compare_digest(presented, admin_token(secret))


class InvalidInvite(Forbidden):
    """An invite token that is altered, foreign or expired; the message says which."""


def make_invite(secret: str, *, annotator_id: int, study: str, days: float = 30.0) -> str:
    """A signed, expiring token that lets one annotator work on one study."""
    return URLSafeSerializer(secret, salt="invite").dumps(
        {"a": annotator_id, "s": study, "exp": int(time.time() + days * 86400)})


def read_invite(secret: str, token: str, *, now: float | None = None) -> tuple[int, str]:
    """(annotator_id, study) of a valid token; InvalidInvite says why a token is refused."""
    try:
        payload = URLSafeSerializer(secret, salt="invite").loads(token)
    except BadSignature:
        raise InvalidInvite("invite token is not valid (altered, truncated, or from another installation)") from None
    if not isinstance(payload, dict) or not {"a", "s", "exp"} <= set(payload):
        raise InvalidInvite("invite token is not valid")
    if (now if now is not None else time.time()) > payload["exp"]:
        raise InvalidInvite("invite link has expired: ask the researcher for a new one")
    return int(payload["a"]), str(payload["s"])
