"""A small study served by the app as `empeval serve` builds it (entry.wiring), on a SQLite file."""
from __future__ import annotations

import pytest

from empeval.server.annotation.annotators import invite
from empeval.server.annotation.secrets import admin_token, secret_key
from empeval.wiring import make_app
from tests.annotation.conftest import add_responses, make_study
from tests.conftest import sample_store_copy


@pytest.fixture
def study_store(tmp_path):
    engine = sample_store_copy(f"sqlite:///{tmp_path / 'web.db'}")
    add_responses(engine, ["sys-a", "sys-b"], 8)
    make_study(engine, count=4, k=1, per_assignment=4, systems=["sys-a", "sys-b"], controls=[])
    yield engine
    engine.dispose()


@pytest.fixture
def app(study_store):
    return make_app(study_store.url.render_as_string(hide_password=False), TESTING=True, AUTH_FAILURE_LIMIT=5)


@pytest.fixture
def invite_token(study_store):
    return invite(study_store, "rita", "pilot")[1]


@pytest.fixture
def admin(study_store):
    return admin_token(secret_key(study_store))
