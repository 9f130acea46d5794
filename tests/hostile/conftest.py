"""A store with something in it (the ED sample's test split, two systems' responses, a study with one claimed
assignment, an invited rater), on each backend, kept for a whole module: every hostile request or command is
checked against the snapshot taken once it is ready, so "unchanged" means unchanged by anything."""
from __future__ import annotations

import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from sqlalchemy import Engine, text

from empeval.server.annotation.annotators import invite
from empeval.server.annotation.secrets import admin_token, secret_key
from empeval.server.datasets.ed_csv import parse_ed_csv
from empeval.server.datasets.importer import import_dialogues
from empeval.server.store import make_engine, upgrade
from tests.annotation.conftest import add_responses, make_study
from tests.conftest import SAMPLE_ED
from tests.store.helpers import snapshot

STUDY = "pilot"


@dataclass
class HostileStore:
    url: str
    engine: Engine
    invite_token: str
    admin_token: str
    baseline: dict[str, list[Any]]

    @property
    def backend(self) -> str:
        return self.engine.dialect.name

    def changed_tables(self) -> list[str]:
        """The tables that differ from the baseline, which then becomes the database as it is now (so that the
        next case is judged on what it does, not on what this one did)."""
        now = snapshot(self.engine)
        changed = sorted(table for table in set(now) | set(self.baseline) if now.get(table) != self.baseline.get(table))
        self.baseline = now
        return changed


def _database_url(kind: str, tmp_path_factory, request) -> Iterator[str]:
    if kind == "sqlite":
        yield f"sqlite:///{tmp_path_factory.mktemp('hostile') / 'store.db'}"
        return
    admin_url = request.getfixturevalue("postgres_admin_url")
    name = f"h_{uuid.uuid4().hex[:12]}"
    admin = make_engine(admin_url, isolation_level="AUTOCOMMIT")
    with admin.connect() as connection:
        connection.execute(text(f'CREATE DATABASE "{name}"'))
    try:
        yield admin_url.rsplit("/", 1)[0] + f"/{name}"
    finally:
        with admin.connect() as connection:
            connection.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()


@pytest.fixture(scope="module", params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def hostile_store(request, tmp_path_factory) -> Iterator[HostileStore]:
    with pytest.MonkeyPatch.context() as env:
        # Secret files of PostgreSQL stores go to the instance folder: a temporary one, not the home folder.
        env.setenv("EMPEVAL_HOME", str(tmp_path_factory.mktemp("empeval-home")))
        for name in ("EMPEVAL_SECRET_KEY", "EMPEVAL_SECRET_FILE", "EMPEVAL_ADMIN_TOKEN", "EMPEVAL_DATABASE_URL"):
            env.delenv(name, raising=False)
        urls = _database_url(request.param, tmp_path_factory, request)
        url = next(urls)
        engine = make_engine(url)
        upgrade(engine)
        import_dialogues(engine, parse_ed_csv(SAMPLE_ED / "test.csv", "test"), dataset="empatheticdialogues")
        add_responses(engine, ["sys-a", "sys-b"], 20)
        make_study(engine, name=STUDY, count=10, k=2, per_assignment=4, systems=["sys-a", "sys-b"], controls=[])
        _, invite_token = invite(engine, "rater", STUDY)
        store = HostileStore(url=url, engine=engine, invite_token=invite_token,
                             admin_token=admin_token(secret_key(engine)), baseline={})
        yield store
        engine.dispose()
        next(urls, None)
