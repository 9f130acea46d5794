"""The signing secret lives outside the database, in a file only its owner can read; so does a SQLite store."""
from __future__ import annotations

import os
import stat
import threading

import pytest
from sqlalchemy import select, text
from sqlalchemy.orm import Session

from empeval.server.annotation.secrets import (
    FINGERPRINT_SETTING,
    SecretError,
    admin_token,
    default_secret_file,
    make_invite,
    read_invite,
    rotate_secret,
    secret_file_for,
    secret_key,
    use_secret_file,
)
from empeval.server.store import make_engine, open_store, unit_of_work
from empeval.server.store.models import AppSetting
from empeval.server.web import create_app


def mode(path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


@pytest.fixture
def store(tmp_path, monkeypatch):
    monkeypatch.delenv("EMPEVAL_SECRET_KEY", raising=False)
    monkeypatch.delenv("EMPEVAL_SECRET_FILE", raising=False)
    engine = open_store(f"sqlite:///{tmp_path / 'lab.db'}")
    yield engine
    engine.dispose()


# the files a real migration leaves (its writer lock among them), not a copy of the tests' head template
@pytest.mark.real_migrations
def test_a_new_sqlite_store_and_its_wal_and_shm_files_are_readable_by_their_owner_only(tmp_path):
    previous = os.umask(0o022)  # the usual umask, which gave 0644 before
    path = tmp_path / "fresh.db"
    try:
        engine = open_store(f"sqlite:///{path}")
    finally:
        os.umask(previous)
    with engine.connect() as connection:  # WAL mode: -wal and -shm exist while a connection is open
        connection.execute(text("CREATE TABLE t (x)"))
        connection.commit()
        assert {p.name: mode(p) for p in tmp_path.glob("fresh.db*") if not p.name.endswith(".secret")} == {
            "fresh.db": 0o600, "fresh.db-wal": 0o600, "fresh.db-shm": 0o600,
            "fresh.db-writer.lock": 0o600}  # the lock the migration held (one process migrates at a time)
    engine.dispose()


def test_an_existing_store_that_others_can_read_is_narrowed_when_opened(tmp_path):
    path = tmp_path / "old.db"
    open_store(f"sqlite:///{path}").dispose()
    for name in ("old.db", "old.db-wal"):
        (tmp_path / name).touch()
        os.chmod(tmp_path / name, 0o644)
    make_engine(f"sqlite:///{path}").dispose()
    assert mode(path) == 0o600 and mode(tmp_path / "old.db-wal") == 0o600
    os.chmod(path, 0o444)  # read-only on purpose: it stays read-only, for its owner alone
    make_engine(f"sqlite:///{path}").dispose()
    assert mode(path) == 0o400


def test_the_secret_is_a_0600_file_next_to_the_store_and_nothing_of_it_is_in_the_database(store, tmp_path):
    secret = secret_key(store)
    path = tmp_path / "lab.db.secret"
    assert secret_file_for(store) == path and path.read_text().strip() == secret and len(secret) >= 64
    assert mode(path) == 0o600
    assert secret_key(store) == secret  # stable
    with Session(store) as session:
        settings = dict(session.execute(select(AppSetting.key, AppSetting.value)).all())
    assert set(settings) == {FINGERPRINT_SETTING} and secret not in settings[FINGERPRINT_SETTING]
    store.dispose()
    for name in ("lab.db", "lab.db-wal"):
        if (tmp_path / name).exists():
            data = (tmp_path / name).read_bytes()
            assert secret.encode() not in data and admin_token(secret).encode() not in data


def test_an_old_secret_in_the_database_moves_to_the_file_and_old_links_keep_working(store, tmp_path):
    legacy = "an-old-secret-that-was-kept-in-app-setting-in-plain-text-0123456789"
    with unit_of_work(store) as session:
        session.add(AppSetting(key="secret_key", value=legacy))
    old_link = make_invite(legacy, annotator_id=3, study="pilot")
    assert secret_key(store) == legacy
    assert read_invite(secret_key(store), old_link) == (3, "pilot")
    assert (tmp_path / "lab.db.secret").read_text().strip() == legacy and mode(tmp_path / "lab.db.secret") == 0o600
    with Session(store) as session:
        assert session.get(AppSetting, "secret_key") is None  # gone from the database, for good
    app = create_app({"DATABASE_URL": str(store.url)})
    answer = app.test_client().get("/api/annotate/next", headers={"Authorization": f"Bearer {old_link}"})
    assert answer.status_code != 403  # the token is accepted (the annotator id is made up: no study work for it)


def test_a_store_whose_secret_file_is_gone_refuses_to_sign_with_a_new_one(store, tmp_path):
    secret_key(store)
    (tmp_path / "lab.db.secret").unlink()
    with pytest.raises(SecretError, match=r"no secret file at .*lab\.db\.secret.*fingerprint"):
        secret_key(store)
    with pytest.raises(SecretError):
        create_app({"DATABASE_URL": str(store.url)})
    rotate_secret(store)  # the way out the message names: a new secret
    assert len(secret_key(store)) >= 64


def test_a_secret_file_named_explicitly_or_bound_to_the_engine_wins_over_the_default(store, tmp_path):
    named = tmp_path / "elsewhere" / "key"
    secret = secret_key(store, secret_file=named)
    assert mode(named) == 0o600 and mode(named.parent) == 0o700
    assert not (tmp_path / "lab.db.secret").exists()
    use_secret_file(store, named)
    assert secret_key(store) == secret
    app = create_app({"DATABASE_URL": str(store.url), "SECRET_FILE": str(named)})
    assert app.extensions["empeval.secret"].value() == secret


def test_the_environment_overrides_every_file(store, monkeypatch, tmp_path):
    monkeypatch.setenv("EMPEVAL_SECRET_KEY", "from-the-environment-" + "x" * 40)
    assert secret_key(store) == "from-the-environment-" + "x" * 40
    assert not (tmp_path / "lab.db.secret").exists()
    with pytest.raises(SecretError, match="EMPEVAL_SECRET_KEY"):
        rotate_secret(store)


def test_a_secret_file_others_can_read_is_narrowed_and_a_short_one_refused(store, tmp_path):
    path = tmp_path / "lab.db.secret"
    secret_key(store)
    os.chmod(path, 0o644)
    secret_key(store)
    assert mode(path) == 0o600
    path.write_text("short\n")
    with pytest.raises(SecretError, match="at least 32"):
        secret_key(store)


def test_processes_starting_at_once_agree_on_one_secret(store):
    found: list[str] = []
    threads = [threading.Thread(target=lambda: found.append(secret_key(store))) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(found) == 8 and len(set(found)) == 1


def test_a_database_server_gets_a_secret_file_in_the_instance_directory(monkeypatch, tmp_path):
    monkeypatch.setenv("EMPEVAL_HOME", str(tmp_path / "home"))
    path = default_secret_file("postgresql+psycopg://alice:hunter2@db.example.org:5433/ratings")
    assert path == tmp_path / "home" / "secrets" / "postgresql-db.example.org-5433-ratings.secret"
    monkeypatch.delenv("EMPEVAL_HOME")
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    assert default_secret_file("postgresql://alice@/ratings") == (
        tmp_path / "xdg" / "empeval" / "secrets" / "postgresql-local-ratings.secret")


@pytest.mark.postgres
def test_on_postgresql_the_secret_lives_in_the_instance_directory(postgres_url, monkeypatch, tmp_path):
    monkeypatch.setenv("EMPEVAL_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("EMPEVAL_SECRET_KEY", raising=False)
    engine = open_store(postgres_url)
    secret = secret_key(engine)
    (path,) = (tmp_path / "home" / "secrets").iterdir()
    assert path.read_text().strip() == secret and mode(path) == 0o600
    with Session(engine) as session:
        assert session.get(AppSetting, "secret_key") is None
    engine.dispose()


def test_an_old_secret_leaves_the_database_even_when_the_environment_gives_the_secret(store, monkeypatch, tmp_path):
    legacy = "an-old-secret-that-was-kept-in-app-setting-in-plain-text-0123456789"
    with unit_of_work(store) as session:
        session.add(AppSetting(key="secret_key", value=legacy))
    monkeypatch.setenv("EMPEVAL_SECRET_KEY", "from-the-environment-" + "x" * 40)
    assert secret_key(store).startswith("from-the-environment-")
    with Session(store) as session:
        assert session.get(AppSetting, "secret_key") is None
    assert (tmp_path / "lab.db.secret").read_text().strip() == legacy
