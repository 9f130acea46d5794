"""`empeval secret ...`, the global --secret-file, and what `serve` and `annotators invite` print."""
from __future__ import annotations

import os
import stat

import pytest
from click.testing import CliRunner

from empeval.cli import cli
from empeval.server.annotation.annotators import invite
from empeval.server.annotation.secrets import admin_token, read_invite, secret_key
from empeval.server.web.auth import INVITE_COOKIE
from tests.annotation.conftest import add_responses, make_study
from tests.conftest import REPO, sample_store_copy


@pytest.fixture
def lab(tmp_path, monkeypatch):
    """A SQLite store with an open study `pilot`: (engine, url)."""
    for name in ("EMPEVAL_SECRET_KEY", "EMPEVAL_SECRET_FILE", "EMPEVAL_ADMIN_TOKEN", "EMPEVAL_DATABASE_URL"):
        monkeypatch.delenv(name, raising=False)
    url = f"sqlite:///{tmp_path / 'lab.db'}"
    engine = sample_store_copy(url)
    add_responses(engine, ["sys-a", "sys-b"], 8)
    make_study(engine, count=4, k=1, per_assignment=4, systems=["sys-a", "sys-b"], controls=[])
    yield engine, url
    engine.dispose()


def empeval(*args: str):
    return CliRunner().invoke(cli, list(args))


def test_a_secret_file_named_on_the_command_line_signs_the_links_and_gives_the_admin_token(lab, tmp_path):
    engine, url = lab
    named = tmp_path / "private" / "empeval.secret"
    invited = empeval("--database-url", url, "--secret-file", str(named), "annotators", "invite", "ann",
                      "--study", "pilot")
    assert invited.exit_code == 0, invited.output
    link = invited.output.strip().split("\t")[1]
    assert link.startswith("http://127.0.0.1:5000/annotate#")
    assert stat.S_IMODE(os.stat(named).st_mode) == 0o600 and not (tmp_path / "lab.db.secret").exists()
    secret = named.read_text().strip()
    assert read_invite(secret, link.split("#")[1])[1] == "pilot"
    token = empeval("--database-url", url, "--secret-file", str(named), "admin-token").output.strip()
    assert token == admin_token(secret)
    where = empeval("--database-url", url, "--secret-file", str(named), "secret", "path")
    assert where.output.strip() == str(named)


def test_rotating_asks_for_yes_while_a_study_is_open_and_then_refuses_every_old_token(lab, tmp_path):
    engine, url = lab
    old_invite = invite(engine, "ann", "pilot")[1]
    old_admin = admin_token(secret_key(engine))
    from empeval.wiring import make_app

    app = make_app(url)  # a server already running
    assert app.test_client().get("/api/annotate/next", headers={"Authorization": f"Bearer {old_invite}"}).status_code \
        == 200
    refused = empeval("--database-url", url, "secret", "rotate")
    assert refused.exit_code == 3 and "open studies: pilot" in refused.output and "--yes" in refused.output
    assert admin_token(secret_key(engine)) == old_admin  # nothing changed
    rotated = empeval("--database-url", url, "secret", "rotate", "--yes")
    assert rotated.exit_code == 0, rotated.output
    assert "lab.db.secret" in rotated.output and "empeval admin-token" in rotated.output
    client = app.test_client()
    assert client.get("/api/annotate/next", headers={"Authorization": f"Bearer {old_invite}"}).status_code == 403
    assert client.get("/admin", headers={"Authorization": f"Bearer {old_admin}"}).status_code == 403
    new_admin = empeval("--database-url", url, "admin-token").output.strip()
    assert new_admin != old_admin
    assert client.get("/api/studies/pilot/progress", headers={"Authorization": f"Bearer {new_admin}"}).status_code \
        == 200


def test_serve_prints_where_the_dashboard_is_but_never_the_token(lab, tmp_path, monkeypatch):
    engine, url = lab
    started = {}

    class Recorder:
        def __init__(self, config):
            started["config"] = config

        def run(self, **options):
            started["options"] = options

    monkeypatch.setattr("empeval.server.web.create_app", Recorder)
    named = tmp_path / "served.secret"
    result = CliRunner().invoke(cli, ["--database-url", url, "--secret-file", str(named), "serve", "--dev"])
    assert result.exit_code == 0, result.output
    token = admin_token(secret_key(engine, secret_file=named))
    assert token not in result.output and "empeval admin-token" in result.output
    assert "http://127.0.0.1:5000/admin" in result.output
    assert started["config"]["SECRET_FILE"] == str(named)  # handed to the app as configuration


def test_the_invite_cookie_is_named_as_the_readme_says():
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    assert INVITE_COOKIE in readme and "empeval_admin" in readme
