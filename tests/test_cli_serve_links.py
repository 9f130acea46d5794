"""`empeval serve --port P` makes the invite links printed afterwards point at P (unless a --base-url says
otherwise), and the server's bare address `/` is a page that leads researchers to the dashboard and tells raters
to open their link, with the same security headers as every other page. A real `empeval serve` process on a real
SQLite file, on 127.0.0.1, stopped by every test that starts it."""
from __future__ import annotations

import re
import socket
import subprocess
import sys
import time
from collections.abc import Iterator

import pytest
import requests
from click.testing import CliRunner

from empeval.cli import cli
from empeval.wiring import make_app
from tests.annotation.conftest import add_responses, make_study
from tests.conftest import REPO, sample_store_copy

LINK = re.compile(r"^(\S+)\t(\S+)/annotate#(\S+)$")


@pytest.fixture
def lab(tmp_path, monkeypatch) -> Iterator[str]:
    """A SQLite store with an open study `pilot`; its URL."""
    for name in ("EMPEVAL_SECRET_KEY", "EMPEVAL_SECRET_FILE", "EMPEVAL_ADMIN_TOKEN", "EMPEVAL_DATABASE_URL"):
        monkeypatch.delenv(name, raising=False)
    url = f"sqlite:///{tmp_path / 'lab.db'}"
    engine = sample_store_copy(url)
    add_responses(engine, ["sys-a", "sys-b"], 8)
    make_study(engine, count=4, k=1, per_assignment=4, systems=["sys-a", "sys-b"], controls=[])
    engine.dispose()
    yield url


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def invite_links(url: str, *names: str, extra: tuple[str, ...] = ()) -> dict[str, tuple[str, str]]:
    """name -> (base URL, token) of the links `empeval annotators invite` prints."""
    result = CliRunner().invoke(cli, ["--database-url", url, "annotators", "invite", *names, "--study", "pilot",
                                      *extra])
    assert result.exit_code == 0, result.output
    links = {}
    for line in result.stdout.strip().splitlines():
        match = LINK.match(line)
        assert match, f"not an invite line: {line!r}"
        links[match.group(1)] = (match.group(2), match.group(3))
    assert sorted(links) == sorted(names)
    return links


@pytest.fixture
def served(lab) -> Iterator[tuple[str, int, subprocess.Popen]]:
    """`empeval serve --port P` running on the lab store: (store URL, P, the process); stopped afterwards."""
    port = free_port()
    process = subprocess.Popen([sys.executable, "-m", "empeval.cli", "--database-url", lab, "serve", "--port",
                                str(port)],
                               cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        while True:
            if process.poll() is not None:
                raise AssertionError(f"serve exited with {process.returncode}: {process.stderr.read()[-2000:]}")
            try:
                if requests.get(f"http://127.0.0.1:{port}/healthz", timeout=1).status_code == 200:
                    break
            except requests.ConnectionError:
                pass
            assert time.monotonic() < deadline, "serve did not answer /healthz within 60 s"
            time.sleep(0.2)
        yield lab, port, process
    finally:
        process.terminate()
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=20)
        if process.stderr:
            process.stderr.close()


def test_invite_links_printed_while_serving_on_a_port_point_at_that_port_and_work(served):
    url, port, _ = served
    links = invite_links(url, "ann", "ben")
    for base, token in links.values():
        assert base == f"http://127.0.0.1:{port}"
        work = requests.get(f"{base}/api/annotate/next", headers={"Authorization": f"Bearer {token}"}, timeout=10)
        assert work.status_code == 200, work.text  # the link's server is this store's server
    page = requests.get(f"http://127.0.0.1:{port}/", timeout=10)
    assert page.status_code == 200 and page.headers["Content-Type"].startswith("text/html")


def run_serve_without_serving(url: str, monkeypatch, *args: str) -> tuple[str, dict]:
    """`empeval serve --dev ARGS` with the app's run replaced by a recorder: (what serve printed, the app's config).
    (--dev: the development server is the app's own `run`, which the recorder stands in for.)"""
    started: dict = {}

    class Recorder:
        def __init__(self, config):
            started["config"] = config

        def run(self, **options):
            started["options"] = options

    monkeypatch.setattr("empeval.server.web.create_app", Recorder)
    result = CliRunner().invoke(cli, ["--database-url", url, "serve", "--dev", *args])
    assert result.exit_code == 0, result.output
    return result.output, started


def test_serve_port_is_remembered_for_later_invites_and_a_later_serve_replaces_it(lab, monkeypatch):
    said, started = run_serve_without_serving(lab, monkeypatch, "--port", "8123")
    assert started["options"]["port"] == 8123
    assert "http://127.0.0.1:8123/admin" in said and "http://127.0.0.1:5000" not in said
    assert invite_links(lab, "ann")["ann"][0] == "http://127.0.0.1:8123"
    run_serve_without_serving(lab, monkeypatch, "--port", "8200", "--host", "0.0.0.0")
    assert invite_links(lab, "ann")["ann"][0] == "http://127.0.0.1:8200"


def test_a_base_url_given_to_serve_wins_over_its_port_and_one_given_to_invite_wins_over_both(lab, monkeypatch):
    said, started = run_serve_without_serving(lab, monkeypatch, "--port", "8123", "--base-url",
                                              "https://eval.example.org/")
    assert "https://eval.example.org/admin" in said
    assert started["config"]["BASE_URL"] == "https://eval.example.org"  # what the admin pages are told
    assert invite_links(lab, "ann")["ann"][0] == "https://eval.example.org"
    explicit = invite_links(lab, "ann", extra=("--base-url", "http://10.0.0.5:9000"))
    assert explicit["ann"][0] == "http://10.0.0.5:9000"


def test_before_any_serve_invite_links_point_at_the_default_port(lab):
    assert invite_links(lab, "ann")["ann"][0] == "http://127.0.0.1:5000"


def test_serving_on_every_interface_says_raters_need_a_base_url(lab, monkeypatch):
    said, _ = run_serve_without_serving(lab, monkeypatch, "--host", "0.0.0.0", "--port", "8300")
    assert "--base-url" in said and "127.0.0.1:8300" in said


@pytest.mark.parametrize("command", [["annotators", "invite", "ann", "--study", "pilot"], ["serve"]])
@pytest.mark.parametrize("bad", ["eval.example.org", "ftp://eval.example.org", "http://", "http://x.org/?a=1"])
def test_a_base_url_that_is_not_an_http_address_exits_2_naming_the_option(lab, monkeypatch, command, bad):
    monkeypatch.setattr("empeval.server.web.create_app",
                        lambda config: pytest.fail("serve started with a bad --base-url"))
    result = CliRunner().invoke(cli, ["--database-url", lab, *command, "--base-url", bad])
    assert result.exit_code == 2
    assert "--base-url" in result.output and "http(s) address" in result.output
    assert "/annotate#" not in result.output


def test_a_port_outside_the_tcp_range_exits_2(lab):
    result = CliRunner().invoke(cli, ["--database-url", lab, "serve", "--port", "70000"])
    assert result.exit_code == 2 and "--port" in result.output


def test_the_bare_address_leads_researchers_to_the_dashboard_and_tells_raters_to_open_their_link(lab):
    client = make_app(lab, TESTING=True).test_client()
    page = client.get("/")
    assert page.status_code == 200 and page.mimetype == "text/html"
    html = page.get_data(as_text=True)
    assert "Open the link you were sent" in html
    dashboard = re.search(r'<a id="dashboard-link" href="([^"]+)"', html)
    assert dashboard, html
    sign_in = client.get(dashboard.group(1))
    assert sign_in.status_code == 200 and "empeval admin-token" in sign_in.get_data(as_text=True)
    assert "<style" not in html and "style=" not in html and "<script" not in html and 'lang="en"' in html


def test_the_bare_address_carries_the_security_headers_and_is_never_stored(lab):
    page = make_app(lab, TESTING=True).test_client().get("/")
    csp = page.headers["Content-Security-Policy"]
    assert "default-src 'none'" in csp and "'unsafe-inline'" not in csp and "frame-ancestors 'none'" in csp
    assert page.headers["X-Frame-Options"] == "DENY" and page.headers["Cache-Control"] == "no-store"


def test_the_bare_address_takes_no_post(lab):
    answer = make_app(lab, TESTING=True).test_client().post("/")
    assert answer.status_code == 405 and answer.is_json
