"""A Likert study and an A/B study on one store (a SQLite file, and PostgreSQL where a test asks for `store_url`),
served by the app as `empeval serve` builds it, and the researcher's admin token."""
from __future__ import annotations

import pytest

from empeval.server.annotation.secrets import admin_token, secret_key
from empeval.wiring import make_app
from tests.annotation.conftest import make_study
from tests.annotation.pairwise_fixtures import make_ab_study
from tests.conftest import sample_store_copy


@pytest.fixture(autouse=True)
def signing_secret(monkeypatch):
    """The secret from the environment: no secret file under HOME that other test runs could remove meanwhile."""
    monkeypatch.setenv("EMPEVAL_SECRET_KEY", "admin-page-tests-" + "k" * 32)


def build_store(url: str):
    engine = sample_store_copy(url)
    make_ab_study(engine, name="ab", count=6, k=2, per_assignment=4, control_rate=0.0)  # adds every system's replies
    make_study(engine, count=24, k=1, per_assignment=4, control_rate=0.25, minutes=30, systems=["sys-a", "sys-b"],
               controls=["control-generic"])
    return engine


@pytest.fixture
def store(tmp_path):
    engine = build_store(f"sqlite:///{tmp_path / 'admin.db'}")
    yield engine
    engine.dispose()


@pytest.fixture
def any_store(store_url):
    engine = build_store(store_url)
    yield engine
    engine.dispose()


def app_on(engine):
    return make_app(engine.url.render_as_string(hide_password=False), TESTING=True)


@pytest.fixture
def app(store):
    return app_on(store)


@pytest.fixture
def bearer(store):
    return {"Authorization": f"Bearer {admin_token(secret_key(store))}"}
