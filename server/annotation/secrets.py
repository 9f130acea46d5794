"""The installation's signing secret and the tokens derived from it (invite links, the admin token).

The secret never lives in the database: whoever can read the database must not be able to forge a token.
Where it comes from, first match wins:

1. $EMPEVAL_SECRET_KEY (the secret itself; for deployments that inject secrets through the environment);
2. a secret file named explicitly: `--secret-file` on the command line (bound to the command's engine with
   `use_secret_file`), the app's SECRET_FILE configuration, or the `secret_file=` argument;
3. the file named by $EMPEVAL_SECRET_FILE;
4. the default file of the database: next to a SQLite file (`empeval.db` -> `empeval.db.secret`), else in
   the instance directory ($EMPEVAL_HOME, else $XDG_DATA_HOME/empeval, else ~/.local/share/empeval) under
   `secrets/`, one file per database server and name.

A secret file is created on first use with 48 random bytes (base64url), mode 0600, atomically (two
processes starting at once agree on one secret). Databases from before this rule kept the secret in the
`app_setting` row `secret_key`: it is moved to the secret file on first use and the row deleted, so old
invite links keep working.

The store keeps a fingerprint of the secret (an HMAC of it, which cannot be turned back into the secret), so
a process that finds no secret file for a store that already has one (the server runs as another user or on
another host, the file was lost) stops with an explanation instead of silently signing with a new secret
that none of the links handed out would match.

The store also keeps the generation of the admin sessions (`admin_session_generation`): a session cookie names the
generation it was signed in under, and signing out draws a new one, so the cookie is refused from then on by every
process that serves the store (see server.web.auth).
"""
from __future__ import annotations

import functools
import hashlib
import hmac
import os
import re
import secrets as _random
import tempfile
import time
import weakref
from dataclasses import dataclass, field
from pathlib import Path

from itsdangerous import BadSignature, URLSafeSerializer
from sqlalchemy import Engine, delete, select, update
from sqlalchemy.engine import make_url
from sqlalchemy.exc import IntegrityError

from empeval.server.errors import Conflict, Forbidden
from empeval.server.store.engine import sqlite_file, unit_of_work
from empeval.server.store.models import AppSetting

SECRET_ENV = "EMPEVAL_SECRET_KEY"
SECRET_FILE_ENV = "EMPEVAL_SECRET_FILE"
HOME_ENV = "EMPEVAL_HOME"
ADMIN_TOKEN_ENV = "EMPEVAL_ADMIN_TOKEN"

LEGACY_SETTING = "secret_key"  # where databases before 0.2 kept the secret, in plain text
FINGERPRINT_SETTING = "secret_fingerprint"
ADMIN_GENERATION_SETTING = "admin_session_generation"

# Secret files named on the command line, by the engine of the command that named them (so every room's
# `secret_key(engine)` honours `--secret-file` without the option being threaded through each call).
_bound_files: weakref.WeakKeyDictionary[Engine, Path] = weakref.WeakKeyDictionary()


class SecretError(Conflict):
    """The secret cannot be read or would not match the one this store's tokens were signed with."""


def use_secret_file(engine: Engine, path: str | os.PathLike[str]) -> None:
    """Let every `secret_key(engine)` read the secret from `path` (what `--secret-file` does)."""
    _bound_files[engine] = Path(path).expanduser().resolve()


def instance_dir() -> Path:
    """Where installation files live when the database is not a local file: $EMPEVAL_HOME, else
    $XDG_DATA_HOME/empeval, else ~/.local/share/empeval."""
    if home := os.environ.get(HOME_ENV):
        return Path(home).expanduser()
    data_home = os.environ.get("XDG_DATA_HOME") or Path.home() / ".local" / "share"
    return Path(data_home) / "empeval"


def default_secret_file(url: str) -> Path:
    """The secret file of the database at `url` when none is named: `<file>.secret` next to a SQLite file,
    else `<instance dir>/secrets/<backend>-<host>-<port>-<database>.secret` (no user name, no password)."""
    if (path := sqlite_file(url)) is not None:
        return path.with_name(path.name + ".secret")
    parsed = make_url(url)
    parts = [parsed.get_backend_name(), parsed.host or "local", str(parsed.port or ""), parsed.database or "memory"]
    name = "-".join(re.sub(r"[^A-Za-z0-9._]+", "_", p) for p in parts if p)
    return instance_dir() / "secrets" / f"{name}.secret"


def secret_file_for(engine: Engine, secret_file: str | os.PathLike[str] | None = None) -> Path:
    """The secret file this engine's tokens are signed with (when $EMPEVAL_SECRET_KEY is not set)."""
    if secret_file:
        return Path(secret_file).expanduser().resolve()
    if engine in _bound_files:
        return _bound_files[engine]
    if named := os.environ.get(SECRET_FILE_ENV):
        return Path(named).expanduser().resolve()
    return default_secret_file(engine.url.render_as_string(hide_password=False))


def describe_secret_source(engine: Engine, secret_file: str | os.PathLike[str] | None = None) -> str:
    """Where the secret comes from, in words (for `empeval secret path`)."""
    if os.environ.get(SECRET_ENV):
        return f"${SECRET_ENV}"
    return str(secret_file_for(engine, secret_file))


def fingerprint(secret: str) -> str:
    """A short HMAC of the secret: equal secrets give equal fingerprints, and the secret cannot be recovered."""
    return hmac.new(secret.encode(), b"empeval-secret-fingerprint", hashlib.sha256).hexdigest()[:16]


def secret_key(engine: Engine, *, secret_file: str | os.PathLike[str] | None = None) -> str:
    """The signing secret of this store's tokens (see the module docstring for where it comes from).

    Creates the secret file on first use; moves a secret stored by an older version out of the database."""
    path = secret_file_for(engine, secret_file)
    legacy = _setting(engine, LEGACY_SETTING)
    if legacy is not None:  # out of the database even when the environment's secret is the one in use
        _move_legacy_secret(engine, legacy, path)
    if env := os.environ.get(SECRET_ENV):
        _remember_fingerprint(engine, env)
        return env
    secret = _read_secret_file(path)
    if secret is None:
        known = _setting(engine, FINGERPRINT_SETTING)
        # Re-read: a process that records the fingerprint has created the file first.
        if known is not None and (secret := _read_secret_file(path)) is None:
            raise SecretError(
                f"no secret file at {path}, but this store's tokens were signed with a secret (fingerprint "
                f"{known}): point --secret-file or ${SECRET_FILE_ENV} at that file, or set ${SECRET_ENV}; "
                "or run `empeval secret rotate` to make a new secret (every invite link and the admin token change)")
        if secret is None:
            secret = _create_secret_file(path, _random.token_urlsafe(48))
    _remember_fingerprint(engine, secret)
    return secret


def rotate_secret(engine: Engine, *, secret_file: str | os.PathLike[str] | None = None) -> Path:
    """Replace the secret with a new random one: every invite link, invite cookie, admin token (unless
    $EMPEVAL_ADMIN_TOKEN pins it) and admin session signed with the old one stops working at once.
    Returns the secret file written."""
    if os.environ.get(SECRET_ENV):
        raise SecretError(f"the secret comes from ${SECRET_ENV}: set a new value there and restart the server")
    path = secret_file_for(engine, secret_file)
    secret = _random.token_urlsafe(48)
    _write_private(path, secret, replace=True)
    with unit_of_work(engine) as session:
        session.execute(delete(AppSetting).where(AppSetting.key == LEGACY_SETTING))
        _store_fingerprint(session, secret)
    return path


@dataclass
class SigningSecret:
    """The secret as a running app sees it: read once, read again when the secret file changes (after
    `empeval secret rotate`), so a rotation takes effect without restarting the server. Checking costs one
    stat() of the file per call (the file's place is worked out once)."""

    engine: Engine
    secret_file: str | os.PathLike[str] | None = None
    _path: Path | None = field(default=None, repr=False)
    _seen: tuple[object, str] | None = field(default=None, repr=False)

    def value(self) -> str:
        if self._seen is None or self._seen[0] != self._stamp():
            secret = secret_key(self.engine, secret_file=self.secret_file)
            self._seen = (self._stamp(), secret)
        return self._seen[1]

    def _stamp(self) -> object:
        """What changes when the secret may have: the environment's value, or the secret file's identity."""
        if env := os.environ.get(SECRET_ENV):
            return ("env", fingerprint(env))
        if self._path is None:
            self._path = secret_file_for(self.engine, self.secret_file)
        try:
            status = os.stat(self._path)
        except FileNotFoundError:
            return None
        return (status.st_ino, status.st_mtime_ns, status.st_size)


def _setting(engine: Engine, key: str) -> str | None:
    with unit_of_work(engine) as session:
        return session.scalar(select(AppSetting.value).where(AppSetting.key == key))


def _store_fingerprint(session, secret: str) -> None:
    row = session.get(AppSetting, FINGERPRINT_SETTING)
    if row is None:
        session.add(AppSetting(key=FINGERPRINT_SETTING, value=fingerprint(secret)))
    else:
        row.value = fingerprint(secret)


def _remember_fingerprint(engine: Engine, secret: str) -> None:
    """Record the fingerprint of the secret in use, once: a later process without the secret is then told so."""
    if _setting(engine, FINGERPRINT_SETTING) is not None:
        return
    try:
        with unit_of_work(engine) as session:
            session.add(AppSetting(key=FINGERPRINT_SETTING, value=fingerprint(secret)))
    except IntegrityError:  # another process recorded it first
        pass


def _move_legacy_secret(engine: Engine, legacy: str, path: Path) -> None:
    """Write the secret an older version kept in the database to the secret file, then delete the row."""
    existing = _read_secret_file(path)
    if existing is None:
        existing = _create_secret_file(path, legacy)
    if existing != legacy:
        raise SecretError(
            f"this store still holds its old secret in the database, and the secret file {path} holds another: "
            "remove the file to keep the links already handed out (the database's secret is moved there), or run "
            "`empeval secret rotate` to keep neither")
    with unit_of_work(engine) as session:
        session.execute(delete(AppSetting).where(AppSetting.key == LEGACY_SETTING))
        _store_fingerprint(session, legacy)


def _read_secret_file(path: Path) -> str | None:
    try:
        status = path.stat()
    except FileNotFoundError:
        return None
    if status.st_mode & 0o077 and status.st_uid == os.getuid():
        path.chmod(status.st_mode & 0o700)  # readable by others (copied, restored from a backup): narrow it
    try:
        secret = path.read_text(encoding="utf-8").strip()
    except OSError as error:
        raise SecretError(f"cannot read the secret file {path}: {error.strerror}") from None
    if len(secret) < 32:
        raise SecretError(f"the secret file {path} holds {len(secret)} characters; a secret needs at least 32 "
                          "(run `empeval secret rotate` to write a new one)")
    return secret


def _create_secret_file(path: Path, secret: str) -> str:
    """Write `secret` to `path` unless the file exists; returns what the file holds (another process may
    have created it first)."""
    if not _write_private(path, secret, replace=False):
        read = _read_secret_file(path)
        assert read is not None
        return read
    return secret


def _write_private(path: Path, text: str, *, replace: bool) -> bool:
    """Write `text` to `path` with mode 0600, whole or not at all: through a temporary file in the same folder,
    renamed over `path` (replace) or hard-linked to it (so the file appears complete, and only if it did
    not exist). False when not replacing and the file already exists."""
    folder = path.parent
    try:
        folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    except OSError as error:
        raise SecretError(f"cannot create the folder {folder} for the secret file: {error.strerror}") from None
    fd, temporary = tempfile.mkstemp(dir=folder, prefix=f".{path.name}.", suffix=".tmp")  # mkstemp makes it 0600
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text + "\n")
            handle.flush()
            os.fsync(handle.fileno())
        if replace:
            os.replace(temporary, path)
            return True
        try:
            os.link(temporary, path)
        except FileExistsError:
            return False
        return True
    except OSError as error:  # disk full, a file size limit, a folder where the file should be, ...
        raise SecretError(f"cannot write the secret file {path}: {error.strerror or error} (nothing was written; "
                          "free the space or name another file with --secret-file)") from None
    finally:
        if os.path.exists(temporary):
            os.unlink(temporary)


def admin_session_generation(engine: Engine) -> str:
    """The generation of admin sessions in force: "" until the first sign-out, then whatever the last sign-out drew.
    One read of one row by its key, on every request an admin cookie authenticates (no write transaction)."""
    with engine.connect() as connection:
        value = connection.scalar(select(AppSetting.value).where(AppSetting.key == ADMIN_GENERATION_SETTING))
    return value or ""


def end_admin_sessions(engine: Engine) -> str:
    """End every admin session at once, in every process serving this store: a new generation, drawn at random (so
    it never equals an earlier one and needs no read of the last), replaces the one sessions were signed in under.
    Returns the new generation."""
    generation = _random.token_hex(8)
    for _ in range(2):
        with unit_of_work(engine) as session:
            changed = session.connection().execute(
                update(AppSetting).where(AppSetting.key == ADMIN_GENERATION_SETTING).values(value=generation)).rowcount
        if changed:
            return generation
        try:
            with unit_of_work(engine) as session:
                session.add(AppSetting(key=ADMIN_GENERATION_SETTING, value=generation))
            return generation
        except IntegrityError:  # another process's first sign-out added the row meanwhile: update it
            continue
    raise SecretError("could not record the end of the admin sessions in the store: try signing out again")


def admin_token(secret: str) -> str:
    """$EMPEVAL_ADMIN_TOKEN, else an HMAC of the secret key: stable, printable by `empeval admin-token`."""
    derived = hmac.new(secret.encode(), b"empeval-admin", hashlib.sha256).hexdigest()[:32]
    return os.environ.get(ADMIN_TOKEN_ENV) or derived


def is_admin(secret: str, presented: str | None) -> bool:
    return presented is not None and hmac.compare_digest(presented.encode(), admin_token(secret).encode())


class InvalidInvite(Forbidden):
    """An invite token that is altered, foreign or expired; the message says which."""


def make_invite(secret: str, *, annotator_id: int, study: str, days: float = 30.0) -> str:
    """A signed, expiring token that lets one annotator work on one study."""
    return URLSafeSerializer(secret, salt="invite").dumps(
        {"a": annotator_id, "s": study, "exp": int(time.time() + days * 86400)})


# Verified invite tokens remembered per process (see _verified_invite): every process sees every rater at work, so
# one per rater of a large study (5,000 raters with think time missed the cache at 4,096; a few hundred bytes each).
VERIFIED_INVITES_KEPT = 32_768


@functools.lru_cache(maxsize=VERIFIED_INVITES_KEPT)
def _verified_invite(secret: str, token: str) -> tuple[int, str, float]:
    """(annotator_id, study, expiry) a token signed with `secret` carries; InvalidInvite if the signature fails or
    the payload is not an invite's. A rater's every request carries her token, and checking it (base64, HMAC,
    JSON) cost about a tenth of a `next`: the answer depends on the secret and the token only, so it is kept
    (refusals are not: an exception is never cached). Expiry is checked by the caller at every call, and
    revocation lives in the store, so neither is frozen here; a new secret is a new key."""
    try:
        payload = URLSafeSerializer(secret, salt="invite").loads(token)
    except BadSignature:
        raise InvalidInvite("invite token is not valid (altered, truncated, or from another installation)") from None
    if not isinstance(payload, dict) or not {"a", "s", "exp"} <= set(payload):
        raise InvalidInvite("invite token is not valid")
    return int(payload["a"]), str(payload["s"]), payload["exp"]


def read_invite(secret: str, token: str, *, now: float | None = None) -> tuple[int, str]:
    """(annotator_id, study) of a valid token; InvalidInvite says why a token is refused."""
    annotator_id, study, expiry = _verified_invite(secret, token)
    if (now if now is not None else time.time()) > expiry:
        raise InvalidInvite("invite link has expired: ask the researcher for a new one")
    return annotator_id, study


def invite_expiry(secret: str, token: str) -> int:
    """The expiry (Unix seconds) of a token read_invite accepts."""
    return int(URLSafeSerializer(secret, salt="invite").loads(token)["exp"])
