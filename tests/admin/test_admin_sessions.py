"""Signing out ends the admin session on the server (issue 29, ASVS 3.3.1): a copy of the cookie kept from before
the sign-out is refused afterwards, by the app that signed it out, by another app on the same store, and by the
other process of a real `empeval serve --workers 2`; a sign-out ends every admin session (one researcher, one
token), a script ends them with the admin token, and a request with neither session nor token ends nothing.

On SQLite and PostgreSQL (the generation lives in the store's `app_setting`)."""
from __future__ import annotations

import hashlib
import http.client
from pathlib import Path

from itsdangerous import URLSafeTimedSerializer
from sqlalchemy.orm import Session

from empeval.server.annotation.secrets import ADMIN_GENERATION_SETTING, admin_token, secret_key
from empeval.server.store import make_engine, upgrade
from empeval.server.store.models import AppSetting
from empeval.server.web.auth import ADMIN_COOKIE
from empeval.wiring import make_app
from tests.test_cli_serve_slow_clients import _children, served

CSRF = {"X-Requested-With": "empeval"}
SIGNED_IN, SIGNED_OUT = 'data-signed-in="yes"', 'data-signed-in="no"'


def app_on(engine):
    return make_app(engine.url.render_as_string(hide_password=False), TESTING=True)


def signed_in_cookie(app, token: str) -> str:
    """Sign in by the form, as a browser does; the admin cookie's value."""
    client = app.test_client()
    answer = client.post("/admin/session", data={"token": token})
    assert answer.status_code == 303
    cookie = client.get_cookie(ADMIN_COOKIE)
    assert cookie is not None
    return cookie.value


def with_cookie(app, value: str):
    """A fresh browser holding a copy of an admin cookie."""
    client = app.test_client()
    client.set_cookie(ADMIN_COOKIE, value)
    return client


def is_let_in(client) -> bool:
    """Whether `client`'s cookie opens the dashboard and the admin API (the two agree, or the test fails)."""
    page = client.get("/admin").get_data(as_text=True)
    api = client.get("/api/studies/no-such-study/progress").status_code  # 404 once let in, 401 before
    assert (SIGNED_IN in page) == (api == 404) and (SIGNED_OUT in page) == (api == 401), (page[:200], api)
    return api == 404


def test_after_sign_out_a_copy_of_the_cookie_is_refused_by_every_app_on_the_store(empty_store):
    app, other_process = app_on(empty_store), app_on(empty_store)  # two apps: as two server processes
    token = admin_token(secret_key(empty_store))
    browser = app.test_client()
    browser.post("/admin/session", data={"token": token})
    kept = browser.get_cookie(ADMIN_COOKIE).value  # what a thief, a shared machine or a proxy log kept
    assert is_let_in(browser) and is_let_in(with_cookie(other_process, kept))
    signed_out = browser.post("/admin/logout")
    assert signed_out.status_code == 303 and signed_out.headers["Location"] == "/admin"
    assert browser.get_cookie(ADMIN_COOKIE) is None  # the browser forgets it too
    assert not is_let_in(with_cookie(app, kept))
    assert not is_let_in(with_cookie(other_process, kept))
    refused = with_cookie(other_process, kept).get("/api/studies/no-such-study/progress")
    assert refused.status_code == 401 and "sign in at /admin" in refused.json["message"]
    # Signing in again works, in either app, and the new session is good in both.
    fresh = signed_in_cookie(other_process, token)
    assert is_let_in(with_cookie(app, fresh)) and not is_let_in(with_cookie(app, kept))


def test_a_sign_out_ends_every_admin_session_and_a_script_can_end_them_with_the_token(empty_store):
    app = app_on(empty_store)
    token = admin_token(secret_key(empty_store))
    laptop, desktop = signed_in_cookie(app, token), signed_in_cookie(app, token)
    with_cookie(app, laptop).post("/admin/logout")
    assert not is_let_in(with_cookie(app, desktop))  # one researcher's token: sign out anywhere, out everywhere
    session = signed_in_cookie(app, token)
    wrong = app.test_client().post("/admin/logout", headers={"Authorization": "Bearer wrong"})
    assert wrong.status_code == 403 and is_let_in(with_cookie(app, session))  # a wrong token ends nothing
    ended = app.test_client().post("/admin/logout", headers={"Authorization": f"Bearer {token}"})
    assert ended.status_code == 200 and ended.json == {"status": "every admin session ended"}
    assert not is_let_in(with_cookie(app, session))
    assert app.test_client().get("/api/studies/x/progress", headers={"Authorization": f"Bearer {token}"}
                                 ).status_code == 404  # the token itself still works: it is not a session


def test_a_sign_out_without_a_session_ends_nothing(empty_store):
    """Another site's form can post to /admin/logout, but the SameSite=Strict cookie stays behind: without a live
    session (or the token) the request only clears the cookie it does not have, and the researcher stays in."""
    app = app_on(empty_store)
    session = signed_in_cookie(app, admin_token(secret_key(empty_store)))
    for stranger in (app.test_client(), with_cookie(app, session[:-4] + "AAAA")):  # none, or an altered one
        assert stranger.post("/admin/logout").status_code == 303
    assert is_let_in(with_cookie(app, session))
    with Session(empty_store) as session:
        assert session.get(AppSetting, ADMIN_GENERATION_SETTING) is None  # no sign-out was ever recorded


def test_a_session_cookie_signed_before_generations_existed_is_refused(empty_store):
    """A cookie of the earlier format (no generation) could never be signed out: it no longer lets anyone in."""
    app = app_on(empty_store)
    secret = secret_key(empty_store)
    tag = hashlib.sha256(admin_token(secret).encode()).hexdigest()[:16]
    old = URLSafeTimedSerializer(secret, salt="admin-session").dumps({"t": tag})
    assert not is_let_in(with_cookie(app, old))
    assert is_let_in(with_cookie(app, signed_in_cookie(app, admin_token(secret))))


# A real `empeval serve` with two processes


def _server_process_of(connection: http.client.HTTPConnection, port: int, processes: list[int]) -> int:
    """The server process holding the other end of `connection` (open, to 127.0.0.1:`port`): found by the socket's
    inode in /proc/net/tcp and the processes' descriptors."""
    client_port = connection.sock.getsockname()[1]
    inode = None
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        fields = line.split()
        local, remote = fields[1], fields[2]
        if int(local.split(":")[1], 16) == port and int(remote.split(":")[1], 16) == client_port:
            inode = fields[9]
    assert inode is not None, "the server's end of the connection was not found"
    for pid in processes:
        for fd in Path(f"/proc/{pid}/fd").iterdir():
            try:
                if fd.readlink().name == f"socket:[{inode}]":
                    return pid
            except OSError:
                continue
    raise AssertionError(f"no server process holds socket {inode}")


def _ask(connection: http.client.HTTPConnection, method: str, path: str, cookie: str) -> tuple[int, str]:
    connection.request(method, path, headers={"Cookie": f"{ADMIN_COOKIE}={cookie}"})
    answer = connection.getresponse()
    return answer.status, answer.read().decode()


def test_a_sign_out_in_one_server_process_ends_the_session_in_the_other(tmp_path):
    """The sign-out reaches process A, the kept cookie is then tried on a connection held by process B: refused.
    Each keep-alive connection stays with the process that accepted it, which the test reads from /proc."""
    url = f"sqlite:///{tmp_path / 'served.db'}"
    engine = make_engine(url)
    upgrade(engine)
    token = admin_token(secret_key(engine))
    engine.dispose()
    with served(url, "--workers", "2") as server:
        processes = _children(server.process.pid)
        assert len(processes) == 2
        sign_in = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
        sign_in.request("POST", "/admin/session", headers={"Authorization": f"Bearer {token}", **CSRF})
        answer = sign_in.getresponse()
        answer.read()
        sign_in.close()
        (set_cookie,) = [v for k, v in answer.getheaders() if k.lower() == "set-cookie"]
        assert set_cookie.startswith(f"{ADMIN_COOKIE}=")
        kept = set_cookie.split(";", 1)[0].split("=", 1)[1]
        by_process: dict[int, http.client.HTTPConnection] = {}
        spare: list[http.client.HTTPConnection] = []
        for _ in range(300):  # new connections until each process holds one (the kernel picks who accepts)
            connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
            status, page = _ask(connection, "GET", "/admin", kept)
            assert status == 200 and SIGNED_IN in page  # the cookie works in whichever process
            pid = _server_process_of(connection, server.port, processes)
            if pid in by_process:
                spare.append(connection)
            else:
                by_process[pid] = connection
            if len(by_process) == 2:
                break
        assert len(by_process) == 2, "every connection went to one process"
        first, second = by_process.values()
        assert _ask(second, "GET", "/api/studies/no-such-study/progress", kept)[0] == 404  # B lets the cookie in
        assert _ask(first, "POST", "/admin/logout", kept)[0] == 303  # A signs it out
        status, page = _ask(second, "GET", "/admin", kept)  # B, on the connection it already held
        assert status == 200 and SIGNED_OUT in page
        assert _ask(second, "GET", "/api/studies/no-such-study/progress", kept)[0] == 401
        assert _ask(first, "GET", "/api/studies/no-such-study/progress", kept)[0] == 401
        assert [_server_process_of(c, server.port, processes) for c in (first, second)] == list(by_process)
        for connection in [*by_process.values(), *spare]:
            connection.close()
