"""What server/annotation/secrets.py promises of the signing secret beyond where it lives (tests/annotation/
test_secrets.py): it shows in no repr() and no log line; its file is made also when the folder it goes in does not
exist yet (a fresh account whose store is PostgreSQL, so the secret goes under ~/.local/share); a write that fails
leaves no temporary file holding it; and of processes that race to create it, each loser reads the winner's.
Real SQLite files and a real PostgreSQL server, real processes (for the race, a failing write and `empeval
serve`), no mocks."""
from __future__ import annotations

import logging
import multiprocessing
import os
import stat
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
import requests
from click.testing import CliRunner

from empeval.cli import cli
from empeval.server.annotation.secrets import (
    SecretError,
    SigningSecret,
    admin_token,
    make_invite,
    rotate_secret,
    secret_file_for,
    secret_key,
)
from empeval.server.datasets.ed_csv import parse_ed_csv
from empeval.server.datasets.importer import import_dialogues
from empeval.server.store import make_engine, open_store
from empeval.server.web import create_app
from tests.annotation.conftest import add_responses, make_study
from tests.conftest import REPO, SAMPLE_ED, _free_port

SECRET_VARIABLES = ("EMPEVAL_SECRET_KEY", "EMPEVAL_SECRET_FILE", "EMPEVAL_ADMIN_TOKEN")


def mode(path: Path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


@pytest.fixture
def no_secret_from_the_environment(monkeypatch):
    for name in SECRET_VARIABLES:
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def lab(tmp_path, no_secret_from_the_environment):
    """A SQLite store with no secret yet; its engine."""
    engine = open_store(f"sqlite:///{tmp_path / 'lab.db'}")
    yield engine
    engine.dispose()


# Neither a repr() nor a log line


def _secret_free(text: str, *secrets: str) -> bool:
    return not any(secret in text for secret in secrets)


def test_the_secret_shows_in_no_repr_of_what_holds_it(lab, tmp_path):
    app = create_app({"DATABASE_URL": str(lab.url), "TESTING": True})
    held = app.extensions["empeval.secret"]
    first = held.value()
    assert first == secret_key(lab) and first in (tmp_path / "lab.db.secret").read_text()
    shown = [repr(held), str(held), repr(app.extensions), repr(app.config), repr(SigningSecret(lab))]
    rotate_secret(lab)
    second = held.value()  # read again after the rotation: the new one is held now
    assert second != first
    shown += [repr(held), str(held), repr(app.extensions)]
    for text in shown:
        assert _secret_free(text, first, second), text
    # A store that lost its file says so by the secret's fingerprint, never by the secret.
    (tmp_path / "lab.db.secret").unlink()
    with pytest.raises(SecretError) as refused:
        SigningSecret(lab).value()
    assert _secret_free(f"{refused.value!r} {refused.value}", first, second)


# the net must catch every statement a real migration logs, not a copy of the tests' head template
@pytest.mark.real_migrations
def test_the_secret_is_in_no_log_line_from_creating_it_to_rotating_it(tmp_path, no_secret_from_the_environment,
                                                                      caplog):
    # Every logger at DEBUG from before the store is opened: SQLAlchemy's statements, their parameters and rows too.
    caplog.set_level(logging.DEBUG)
    engine = open_store(f"sqlite:///{tmp_path / 'lab.db'}")
    try:
        app = create_app({"DATABASE_URL": str(engine.url), "TESTING": True})  # creates the secret
        first = app.extensions["empeval.secret"].value()
        client = app.test_client()
        token = make_invite(first, annotator_id=1, study="nowhere")
        assert client.get("/api/annotate/next", headers={"Authorization": f"Bearer {token}"}).status_code == 404
        assert client.get("/api/annotate/next", headers={"Authorization": f"Bearer {token}x"}).status_code == 403
        assert client.get("/api/studies/nowhere/progress", headers={"Authorization": "Bearer wrong"}
                          ).status_code in {401, 403}
        assert client.get("/api/studies/nowhere/progress", headers={"Authorization": f"Bearer {admin_token(first)}"}
                          ).status_code == 404
        rotate_secret(engine)
        second = app.extensions["empeval.secret"].value()
        assert client.get("/api/annotate/next", headers={"Authorization": f"Bearer {token}"}).status_code == 403
        (tmp_path / "lab.db.secret").unlink()
        with pytest.raises(SecretError):
            secret_key(engine)
    finally:
        engine.dispose()
    assert second != first and len(caplog.records) > 10  # the statements were logged: the net was cast
    formatter = logging.Formatter("%(name)s %(levelname)s %(message)s")
    for record in caplog.records:
        line = formatter.format(record)  # with its traceback, if any
        assert _secret_free(line, first, second), line


def _wait_until_up(process: subprocess.Popen, port: int) -> None:
    deadline = time.monotonic() + 90
    while True:
        if process.poll() is not None:
            raise AssertionError(f"serve exited with {process.returncode}")
        try:
            if requests.get(f"http://127.0.0.1:{port}/healthz", timeout=1).status_code == 200:
                return
        except requests.ConnectionError:
            pass
        if time.monotonic() > deadline:
            raise AssertionError("serve did not answer within 90 s")
        time.sleep(0.2)


def test_a_served_store_writes_the_secret_in_no_line_of_its_output(tmp_path, no_secret_from_the_environment):
    """`empeval serve` on a fresh store creates the secret; whatever it and the commands around it print or log
    (start-up, requests with good and bad tokens, rotation) holds neither the secret nor a fragment of it."""
    url = f"sqlite:///{tmp_path / 'lab.db'}"
    engine = open_store(url)
    import_dialogues(engine, parse_ed_csv(SAMPLE_ED / "test.csv", "test"), dataset="empatheticdialogues")
    add_responses(engine, ["sys-a", "sys-b"], 8)
    make_study(engine, count=4, k=1, per_assignment=4, systems=["sys-a", "sys-b"], controls=[])
    engine.dispose()
    assert not (tmp_path / "lab.db.secret").exists()
    port = _free_port()
    log = tmp_path / "serve.log"
    with log.open("w") as output:
        process = subprocess.Popen([sys.executable, "-m", "empeval.cli", "--database-url", url, "serve", "--port",
                                    str(port), "--workers", "1"], cwd=REPO, stdout=output, stderr=subprocess.STDOUT)
    try:
        _wait_until_up(process, port)
        runner = CliRunner()
        printed = runner.invoke(cli, ["--database-url", url, "annotators", "invite", "rita", "--study", "pilot"])
        assert printed.exit_code == 0, printed.output
        token = printed.stdout.strip().rsplit("#", 1)[1]
        base = f"http://127.0.0.1:{port}"
        assert requests.get(f"{base}/api/annotate/next", headers={"Authorization": f"Bearer {token}"},
                            timeout=30).status_code == 200
        assert requests.get(f"{base}/api/annotate/next", headers={"Authorization": f"Bearer {token}x"},
                            timeout=30).status_code == 403
        assert requests.get(f"{base}/annotate/{token}", timeout=30).status_code in {200, 302, 303, 404}
        first = (tmp_path / "lab.db.secret").read_text().strip()
        rotated = runner.invoke(cli, ["--database-url", url, "secret", "rotate", "--yes"])
        assert rotated.exit_code == 0, rotated.output
        assert requests.get(f"{base}/api/annotate/next", headers={"Authorization": f"Bearer {token}"},
                            timeout=30).status_code == 403  # the server reads the new secret: the old link is dead
        second = (tmp_path / "lab.db.secret").read_text().strip()
        outputs = [printed.output, rotated.output]
    finally:
        process.terminate()
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=30)
    served = log.read_text(errors="replace")
    assert "serving on http://127.0.0.1" in served
    # Not the secrets, nor any 16 characters of them (a secret cut short in a message is a secret half told).
    fragments = {secret[i:i + 16] for secret in (first, second) for i in range(len(secret) - 15)}
    for text in [served, *outputs]:
        assert not [fragment for fragment in fragments if fragment in text], text


# A folder that does not exist yet


@pytest.mark.postgres
def test_a_fresh_account_with_a_postgresql_store_gets_its_secret_file_and_the_folders_to_it(
        postgres_url, tmp_path, monkeypatch, no_secret_from_the_environment):
    # No EMPEVAL_HOME, no XDG_DATA_HOME, and a home folder with nothing in it: not even ~/.local.
    home = tmp_path / "fresh-account"
    home.mkdir()
    for name in ("EMPEVAL_HOME", "XDG_DATA_HOME"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(home))
    result = CliRunner().invoke(cli, ["--database-url", postgres_url, "admin-token"])
    assert result.exit_code == 0, result.output
    (secret_file,) = (home / ".local" / "share" / "empeval" / "secrets").iterdir()
    assert secret_file.name.startswith("postgresql-") and secret_file.suffix == ".secret"
    secret = secret_file.read_text().strip()
    assert len(secret) >= 64 and result.output.strip() == admin_token(secret)
    assert mode(secret_file) == 0o600 and mode(secret_file.parent) == 0o700
    engine = make_engine(postgres_url)
    try:
        assert secret_file_for(engine) == secret_file and secret_key(engine) == secret  # found again, not remade
    finally:
        engine.dispose()


def test_a_secret_file_named_in_folders_that_do_not_exist_yet_is_created_in_them(lab, tmp_path):
    named = tmp_path / "not" / "yet" / "there" / "key"
    secret = secret_key(lab, secret_file=named)
    assert named.read_text().strip() == secret and mode(named) == 0o600 and mode(named.parent) == 0o700
    assert secret_key(lab, secret_file=named) == secret


# A failed write


def _only(folder: Path) -> list[str]:
    return sorted(path.name for path in folder.iterdir())


def test_a_rotation_whose_rename_fails_leaves_no_temporary_file(lab, tmp_path):
    folder = tmp_path / "keys"
    in_the_way = folder / "key"
    (in_the_way / "inside").mkdir(parents=True)  # a folder where the secret file should go: the rename fails
    with pytest.raises(SecretError, match="cannot write the secret file .*key"):  # a message naming it, no traceback
        rotate_secret(lab, secret_file=in_the_way)
    assert _only(folder) == ["key"] and _only(in_the_way) == ["inside"]


FAILING_WRITE = textwrap.dedent("""
    import json, os, resource, signal, sys
    from empeval.server.annotation.secrets import secret_key
    from empeval.server.store import make_engine

    engine = make_engine(sys.argv[1])
    with engine.connect():  # the store's files are open (and sized) before the limit
        pass
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # past the limit a write fails with EFBIG instead of a kill
    resource.setrlimit(resource.RLIMIT_FSIZE, (40, resource.RLIM_INFINITY))  # 40 bytes of a file, no more
    try:
        secret_key(engine, secret_file=sys.argv[2])
    except Exception as error:
        print(json.dumps({"failed": type(error).__name__, "message": str(error)}))
    else:
        print(json.dumps({"failed": None}))
""")


def test_a_write_that_fails_half_way_leaves_no_temporary_file_holding_the_secret(lab, tmp_path):
    # A real process whose writes stop at 40 bytes (as on a full disk or over quota): the secret's first 40
    # characters reach the temporary file, the rest fails. Nothing of it may stay behind.
    import json

    folder = tmp_path / "keys"
    folder.mkdir()
    done = subprocess.run([sys.executable, "-c", FAILING_WRITE, str(lab.url), str(folder / "key")],
                          capture_output=True, text=True, timeout=120, cwd=REPO)
    assert done.returncode == 0, done.stderr
    outcome = json.loads(done.stdout.strip().splitlines()[-1])
    assert outcome["failed"] == "SecretError", outcome  # said as what it is, naming the file
    assert str(folder / "key") in outcome["message"] and "File too large" in outcome["message"]
    assert _only(folder) == [], outcome


# The race to create it


def _race(urls: list[str], barrier, found) -> None:
    """One process of the race: for each store in turn, wait for the others, then read (or create) its secret;
    put (round, pid, secret) on `found`."""
    engines = [make_engine(url) for url in urls]
    for engine in engines:
        with engine.connect():  # connected and warm before the start: the race is for the secret, not the connect
            pass
    for round_, engine in enumerate(engines):
        barrier.wait(timeout=120)
        try:
            found.put((round_, os.getpid(), secret_key(engine)))
        except Exception as error:  # noqa: BLE001 - told to the test, which fails on it
            found.put((round_, os.getpid(), f"failed: {error!r}"))


RACERS, ROUNDS = 6, 5


def test_processes_racing_to_create_the_secret_all_end_with_the_winners(tmp_path, no_secret_from_the_environment):
    # Six processes, connected and waiting at a barrier, ask a store without a secret for its secret at the same
    # moment; five rounds, a fresh store each. Those that find no file all write one, and only one link succeeds:
    # each of the others must read the winner's and use it, not its own.
    urls = []
    for round_ in range(ROUNDS):
        url = f"sqlite:///{tmp_path / f'race{round_}.db'}"
        open_store(url).dispose()
        urls.append(url)
    context = multiprocessing.get_context("fork")  # real processes, started from this one: no imports to wait for
    barrier, found = context.Barrier(RACERS), context.Queue()
    racers = [context.Process(target=_race, args=(urls, barrier, found)) for _ in range(RACERS)]
    for racer in racers:
        racer.start()
    try:
        results = [found.get(timeout=300) for _ in range(RACERS * ROUNDS)]
    finally:
        for racer in racers:
            racer.join(timeout=60)
            if racer.is_alive():
                racer.kill()
    assert all(racer.exitcode == 0 for racer in racers)
    for round_, url in enumerate(urls):
        on_file = (tmp_path / f"race{round_}.db.secret").read_text().strip()
        held = {pid: secret for r, pid, secret in results if r == round_}
        assert len(held) == RACERS and set(held.values()) == {on_file}, (round_, held, on_file)
        assert [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")] == []
        engine = make_engine(url)
        try:
            assert secret_key(engine) == on_file  # and the store's fingerprint is the winner's
        finally:
            engine.dispose()

