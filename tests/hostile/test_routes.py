"""Every route, every class of hostile input (tests/hostile/corpus.py): a 4xx, never a 5xx, and the database
exactly as it was, on SQLite and on PostgreSQL.

Each hostile request carries valid credentials and an otherwise valid body, so that the one hostile part is
what gets refused (a request refused for a missing token would prove nothing about its body). The route table
must list every route of the app: a new route fails `test_the_table_lists_every_route` until it is added here
with what it reads.
"""
from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

import pytest

from empeval.server.annotation.crowd_units import CrowdUnitToken, make_unit_token
from empeval.server.annotation.secrets import secret_key
from empeval.server.store.storable import MAX_ROW_ID
from empeval.server.web import create_app
from empeval.server.web.json_limits import LimitedJSONProvider
from tests.hostile import corpus
from tests.hostile.conftest import STUDY
from tests.store.helpers import snapshot


@dataclass(frozen=True)
class Route:
    rule: str  # as in app.url_map
    method: str
    path: str  # a concrete path; {assignment} is the rater's claimed assignment
    auth: str  # what the route checks: "none", "invite" (the rater's token), "unit" (a crowd unit's) or "admin"
    body: str | None = None  # the JSON body it reads: "submission", "respond", "batch" or "turn"
    query_token: bool = False  # also reads a token from ?token= (or a form field `token`)
    form_token: bool = False
    # A page that, to a caller it does not let in, shows its sign-in form (200) rather than a 4xx.
    sign_in_page: bool = False


ROUTES = [
    Route("/", "GET", "/", "none"),
    Route("/static/<path:filename>", "GET", "/static/app.css", "none"),
    Route("/healthz", "GET", "/healthz", "none"),
    Route("/favicon.ico", "GET", "/favicon.ico", "none"),
    Route("/openapi.json", "GET", "/openapi.json", "none"),
    Route("/annotate", "GET", "/annotate", "none"),
    Route("/annotate/<path:token>", "GET", "/annotate/some-old-link-token", "none"),
    Route("/task-ui/<path:filename>", "GET", "/task-ui/index.js", "none"),
    Route("/api/annotate/session", "POST", "/api/annotate/session", "invite"),
    Route("/api/annotate/next", "GET", "/api/annotate/next", "invite"),
    Route("/api/assignments/<int:assignment_id>/submit", "POST", "/api/assignments/{assignment}/submit", "invite",
          body="submission"),
    Route("/admin", "GET", "/admin", "admin", query_token=True, sign_in_page=True),
    Route("/admin/session", "POST", "/admin/session", "admin", form_token=True),
    Route("/admin/logout", "POST", "/admin/logout", "none"),
    Route("/api/studies/<name>/progress", "GET", f"/api/studies/{STUDY}/progress", "admin", query_token=True),
    Route("/api/studies/<name>/export", "GET", f"/api/studies/{STUDY}/export", "admin", query_token=True),
    Route("/api/studies/<name>/preview", "GET", f"/api/studies/{STUDY}/preview", "admin", query_token=True),
    Route("/admin/studies/<name>", "GET", f"/admin/studies/{STUDY}", "admin", query_token=True),
    Route("/admin/studies/<name>/preview", "GET", f"/admin/studies/{STUDY}/preview", "admin", query_token=True),
    Route("/api/systems", "GET", "/api/systems", "admin"),
    Route("/api/respond", "POST", "/api/respond", "admin", body="respond"),
    Route("/api/respond/batch", "POST", "/api/respond/batch", "admin", body="batch"),
    Route("/prolific/<path:token>", "GET", "/prolific/some-study-link-token", "none"),
    Route("/api/assignments/<int:assignment_id>/conversations/<int:position>/turns", "POST",
          "/api/assignments/{assignment}/conversations/0/turns", "invite", body="turn"),
    Route("/api/assignments/<int:assignment_id>/conversations/<int:position>/end", "POST",
          "/api/assignments/{assignment}/conversations/0/end", "invite"),
    Route("/api/assignments/<int:assignment_id>/live", "GET", "/api/assignments/{assignment}/live", "unit"),
    Route("/api/annotate/qualification", "GET", "/api/annotate/qualification", "invite"),
    Route("/api/annotate/qualification/answers", "POST", "/api/annotate/qualification/answers", "invite",
          body="qualification"),
    Route("/api/annotate/decline", "POST", "/api/annotate/decline", "invite"),
    Route("/admin/studies/<name>/items.csv", "GET", f"/admin/studies/{STUDY}/items.csv", "admin", query_token=True),
]


@dataclass
class Target:
    """The app and what a valid request needs: tokens, the claimed assignment and its items."""

    app: Any
    store: Any
    assignment: int
    items: list[int]
    criteria: list[str]

    def token(self, auth: str) -> str | None:
        if auth == "unit":  # a crowd unit's token for the claimed assignment (server.annotation.crowd_units)
            return make_unit_token(secret_key(self.store.engine), CrowdUnitToken(
                assignment_id=self.assignment, study=STUDY, job_id="hostile", provider="mock", name_suffix="_sandbox",
                expires=time.time() + 3600))
        return {"invite": self.store.invite_token, "admin": self.store.admin_token}.get(auth)


# Valid bodies, with one field replaced by a hostile value where asked.

def submission(target: Target, *, comment: Any = "fine", extra: dict | None = None) -> dict:
    return {"submission_id": "hostile-0001", "comment": comment, **(extra or {}),
            "ratings": [{"item_id": item, "scores": dict.fromkeys(target.criteria, 3)} for item in target.items]}


def raw_context(*, text: Any = "I lost my keys today.", emotion: Any = "annoyed", situation: Any = "keys") -> dict:
    return {"turns": [{"role": "speaker", "text": text}], "emotion": emotion, "situation": situation}


def respond(_target: Target, *, system: Any = "gold", extra: dict | None = None, **context: Any) -> dict:
    if "context_id" in context:
        return {"system": system, "context_id": context["context_id"], **(extra or {})}
    return {"system": system, "context": raw_context(**context), **(extra or {})}


def batch(target: Target, *, system: Any = "gold", extra: dict | None = None, **context: Any) -> dict:
    item = respond(target, **context)
    item.pop("system")
    return {"system": system, "contexts": [item], **(extra or {})}


def chat_turn(_target: Target, *, text: Any = "I lost my keys today.", extra: dict | None = None) -> dict:
    """A chat study's turn (the hostile store's study is a Likert one: a valid turn is refused as such, 400)."""
    return {"index": 0, "text": text, **(extra or {})}


def qualification_answer(target: Target, *, answer: Any = None, extra: dict | None = None) -> dict:
    """An answer to a practice item (the hostile store's study has no qualification: a valid answer is refused as
    such, 400); `answer` replaces the scores given."""
    scores = dict.fromkeys(target.criteria, 3) if answer is None else answer
    return {"item": 0, "attempt": 1, "answer": scores, **(extra or {})}


BODIES: dict[str, Callable[..., dict]] = {"submission": submission, "respond": respond, "batch": batch,
                                          "turn": chat_turn, "qualification": qualification_answer}


@dataclass(frozen=True)
class Case:
    route: Route
    hostile: str  # what is hostile, for the test id
    request: Callable[[Target], dict[str, Any]]  # keyword arguments of the test client's open()
    status: tuple[int, ...] = ()  # the exact statuses expected, when one is; any 4xx otherwise
    says: str = ""  # a phrase the JSON message must contain

    @property
    def id(self) -> str:
        return f"{self.route.method} {self.route.rule} | {self.hostile}"


def _valid(route: Route, target: Target, *, path: str | None = None, token: Any = ..., body: Any = ...,
           query: dict | None = None) -> dict[str, Any]:
    """Keyword arguments for a request to `route` that would be valid but for what the caller replaces."""
    request: dict[str, Any] = {"method": route.method,
                               "path": (path or route.path).format(assignment=target.assignment)}
    token = target.token(route.auth) if token is ... else token
    if token is not None and route.auth == "unit":
        request["headers"] = {"X-Empeval-Unit": token, "X-Empeval-Worker": "worker-1"}
    elif token is not None:
        request["headers"] = {"Authorization": f"Bearer {token}"}
    if route.body is not None:
        data = BODIES[route.body](target) if body is ... else body
        request["data"] = data if isinstance(data, bytes) else json.dumps(data)
        request["content_type"] = "application/json"
    if query:
        request["query_string"] = query
    return request


def cases() -> list[Case]:
    found: list[Case] = []
    for route in ROUTES:
        found += _token_cases(route) + _url_cases(route) + _body_cases(route)
    return found


def _token_cases(route: Route) -> list[Case]:
    if route.auth == "none":
        return []
    found = [Case(route, f"non-ASCII token in the header ({name})",
                  lambda t, route=route, token=token: _valid(route, t, token=token))
             for name, token in corpus.NON_ASCII_TOKENS.items()]
    for name, token in corpus.NON_ASCII_QUERY_TOKENS.items():
        if route.query_token:
            found.append(Case(route, f"non-ASCII ?token= ({name})",
                              lambda t, route=route, token=token: _valid(route, t, token=None,
                                                                         query={"token": token})))
        if route.form_token:
            found.append(Case(route, f"non-ASCII form token ({name})",
                              lambda t, route=route, token=token: {**_valid(route, t, token=None),
                                                                   "data": {"token": token}}))
    return found


def _url_cases(route: Route) -> list[Case]:
    found = [Case(route, f"NUL in a query parameter ({name})",
                  lambda t, route=route, value=value: _valid(route, t, query={"q": value, "format": value}),
                  status=(400,), says="NUL")
             for name, value in corpus.NULS.items()]
    found.append(Case(route, "NUL in a query parameter's name",
                      lambda t, route=route: _valid(route, t, query={"a\x00b": "1"}), status=(400,), says="NUL"))
    if "<path:" in route.rule or "<name>" in route.rule:
        found += [Case(route, f"NUL in the path ({name})",
                       lambda t, route=route, value=value: _valid(route, t, path=_path_with(route, quote(value))),
                       status=(400,), says="NUL")
                  for name, value in corpus.NULS.items()]
    if "<name>" in route.rule:
        found += [Case(route, f"a study name of {name}",
                       lambda t, route=route, value=value: _valid(route, t, path=_path_with(route, value)),
                       status=(404,))
                  for name, value in corpus.TOO_LONG.items()]
    if "<int:" in route.rule:
        found += [Case(route, f"id {name}",
                       lambda t, route=route, value=value: _valid(route, t, path=route.path.replace(
                           "{assignment}", str(value))),
                       status=(404,), says=f"at most {MAX_ROW_ID}")
                  for name, value in corpus.HUGE_IDS.items()]
    return found


def _path_with(route: Route, segment: str) -> str:
    """The route's path with its string parameter (the study name, or the last segment) replaced."""
    if "<name>" in route.rule:
        return route.path.replace(STUDY, segment)
    return route.path.rsplit("/", 1)[0] + "/" + segment


def _body_cases(route: Route) -> list[Case]:
    if route.body is None:
        return []
    build = BODIES[route.body]
    found = [Case(route, f"JSON nested 50,000 levels ({name})",
                  lambda t, route=route, body=body: _valid(route, t, body=body), status=(400,),
                  says="nested too deeply")
             for name, body in corpus.DEEP_JSON.items()]
    bad_text = {**{f"unpaired surrogate ({k})": v for k, v in corpus.LONE_SURROGATES.items()},
                **{f"NUL ({k})": v for k, v in corpus.NULS.items()}}
    fields = {"submission": ["comment"], "turn": ["text"], "qualification": []}.get(
        route.body, ["text", "emotion", "situation"])
    for field_name in fields:
        for name, value in bad_text.items():
            found.append(Case(route, f"{name} in {field_name}",
                              lambda t, route=route, build=build, field_name=field_name, value=value:
                              _valid(route, t, body=build(t, **{field_name: value})), status=(400,),
                              says="NUL" if "\x00" in value else "unpaired surrogate"))
    for name, value in bad_text.items():
        found.append(Case(route, f"{name} as a field name",
                          lambda t, route=route, build=build, value=value:
                          _valid(route, t, body=build(t, extra={value: 1})), status=(400,), says="unknown field"))
    if route.body == "qualification":  # its only text: the answers' keys and values
        found += [Case(route, f"{name} as an answer's criterion",
                       lambda t, route=route, build=build, value=value:
                       _valid(route, t, body=build(t, answer={value: 3})), status=(400,))
                  for name, value in bad_text.items()]
        found += [Case(route, f"{name} as an answer's value",
                       lambda t, route=route, build=build, value=value:
                       _valid(route, t, body=build(t, answer=dict.fromkeys(t.criteria, value))), status=(400,))
                  for name, value in bad_text.items()]
    if route.body in ("respond", "batch"):
        found += [Case(route, f"{name} as the system name",
                       lambda t, route=route, build=build, value=value: _valid(route, t, body=build(t, system=value)))
                  for name, value in bad_text.items()]
        found += [Case(route, f"context_id {name}",
                       lambda t, route=route, build=build, value=value:
                       _valid(route, t, body=build(t, context_id=value)), status=(400,), says=f"at most {MAX_ROW_ID}")
                  for name, value in corpus.HUGE_IDS.items() if value > MAX_ROW_ID]
    return found


CASES = cases()


@pytest.fixture(scope="module")
def target(hostile_store, tmp_path_factory) -> Target:
    ui = tmp_path_factory.mktemp("task-ui")  # a stand-in bundle, so that the page routes serve files
    (ui / "index.html").write_text("<!doctype html><title>task</title>", encoding="utf-8")
    (ui / "index.js").write_text("// task", encoding="utf-8")
    app = create_app({"DATABASE_URL": hostile_store.url, "TASK_UI_DIR": str(ui), "AUTH_FAILURE_LIMIT": 10**6})
    client = app.test_client()
    claimed = client.get("/api/annotate/next", headers={"Authorization": f"Bearer {hostile_store.invite_token}"})
    assert claimed.status_code == 200, claimed.get_data(as_text=True)
    assignment = claimed.get_json()["assignment"]
    hostile_store.baseline = snapshot(hostile_store.engine)
    return Target(app=app, store=hostile_store, assignment=assignment["assignment_id"],
                  items=[item["item_id"] for item in assignment["items"]],
                  criteria=[criterion["key"] for criterion in assignment["criteria"]])


def test_the_table_lists_every_route(target):
    served = {(rule.rule, method) for rule in target.app.url_map.iter_rules()
              for method in rule.methods - {"HEAD", "OPTIONS"}}
    assert served == {(route.rule, route.method) for route in ROUTES}


def test_valid_requests_of_the_table_succeed(target):
    """The table's requests are valid but for the hostile part: without it, the guarded routes answer 2xx."""
    client = target.app.test_client()
    # Those that read without writing (GET /api/systems would load every system's model: not here).
    for rule in ("/annotate", "/annotate/<path:token>", "/task-ui/<path:filename>", "/admin", "/admin/session",
                 "/api/studies/<name>/progress", "/api/studies/<name>/export"):
        route = next(r for r in ROUTES if r.rule == rule)
        answer = client.open(**_valid(route, target))
        assert answer.status_code < 300, (route.rule, answer.get_data(as_text=True)[:300])
    # The bodies are valid too: the validators get past every field the cases make hostile.
    for body in ("respond", "batch"):
        route = next(r for r in ROUTES if r.body == body)
        answer = client.open(**_valid(route, target, body=BODIES[body](target, system="no-such-system")))
        assert answer.status_code == 404 and "unknown system" in answer.get_json()["message"]
    # The export's one write: the study log records whose answers left in it (a withdrawal later names it).
    assert target.store.changed_tables() == ["study_log"]


@pytest.mark.parametrize("case", CASES, ids=[case.id for case in CASES])
def test_hostile_input_is_a_4xx_and_changes_nothing(target, case):
    answer = target.app.test_client().open(**case.request(target))
    changed = target.store.changed_tables()
    shown = answer.get_data(as_text=True)[:400]
    if case.route.sign_in_page and answer.status_code == 200 and not case.status:
        assert 'data-signed-in="no"' in answer.get_data(as_text=True), "let in with a hostile token"
    else:
        assert 400 <= answer.status_code < 500, f"{answer.status_code}: {shown}"
    if case.status:
        assert answer.status_code in case.status, shown
    if case.says:
        assert case.says in answer.get_json()["message"], shown
    assert not changed, f"the database changed: tables {changed}"


def test_the_app_factory_installs_the_guards(hostile_store):
    """create_app installs the guards itself (one call, `install_input_guards(app)`), so `empeval serve` and
    gunicorn get what this corpus pins, not only these tests."""
    app = create_app({"DATABASE_URL": hostile_store.url})
    assert app.extensions.get("empeval.input_guards") is True
    assert isinstance(app.json, LimitedJSONProvider)
