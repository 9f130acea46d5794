"""The item browser of a study's page (issue 30 #8): search, filters (system, rater, criterion, mean score range,
raters the report's quality rules flag), sorts (context, system, mean, number of raters, disagreement), paging that
keeps them, and the CSV of the current view. Each view is checked against an independent computation from the
export (and the texts read straight from the store); the CSV against the pages; hostile arguments get a 400 that
names the argument. On a SQLite file, and on PostgreSQL for the SQL filters."""
from __future__ import annotations

import csv
import html
import io
import random
import re
from collections import defaultdict
from fractions import Fraction
from urllib.parse import urlencode

import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session

from empeval.server.annotation.annotators import invite
from empeval.server.annotation.export import export_rows
from empeval.server.annotation.handout import assignment_payload, next_assignment
from empeval.server.annotation.kinds.rater_flags import flagged_pseudonyms
from empeval.server.annotation.secrets import admin_token, secret_key
from empeval.server.annotation.submission import submit_assignment
from empeval.server.store.item_comment_tables import ItemComment
from empeval.server.store.kinds.likert import Rating, StudyItem
from empeval.server.store.models import Assignment, Context, Response, Study, System, Turn
from tests.admin.conftest import app_on, build_store
from tests.annotation.conftest import make_study, new_submission_id
from tests.browser import chromium_page, live_server

STUDY = "deep"
CRITERIA = ("empathy", "relevance", "fluency")
COMMENTS = {"rita": "The KETTLE one was odd", "sam": "it's 100%_sure; DROP TABLE rating;--", "tom": None,
            "uma": "fine", "vic": None}


def rate_everything(engine) -> None:
    """Five raters take the deep study's work until none is left, scoring at random (seeded); vic answers in two
    seconds an item, which the report's speed rule flags; rita and sam leave comments."""
    rng = random.Random(30)
    raters = {name: invite(engine, name, STUDY)[0] for name in COMMENTS}
    busy = True
    while busy:
        busy = False
        for name, rater in raters.items():
            assignment_id = next_assignment(engine, STUDY, rater.id)
            if assignment_id is None:
                continue
            busy = True
            items = assignment_payload(engine, assignment_id)["items"]
            body: dict = {"submission_id": new_submission_id(), "ratings": [
                {"item_id": item["item_id"], "seconds": 2.0 if name == "vic" else 12.0,
                 "scores": {c: rng.randint(1, 5) for c in CRITERIA}} for item in items]}
            if COMMENTS[name]:
                body["comment"] = COMMENTS[name]
            submit_assignment(engine, assignment_id, rater.id, body)


def deep_store(url: str):
    engine = build_store(url)
    make_study(engine, name=STUDY, count=12, k=3, per_assignment=4, control_rate=0.0, systems=["sys-a", "sys-b"],
               controls=[])
    rate_everything(engine)
    return engine


@pytest.fixture(scope="module")
def shared(tmp_path_factory):
    """One rated study for the tests that only read it (built once: rating it takes a few seconds)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("EMPEVAL_SECRET_KEY", "admin-page-tests-" + "k" * 32)  # as tests/admin/conftest.py sets it
        engine = deep_store(f"sqlite:///{tmp_path_factory.mktemp('browser') / 'browser.db'}")
    yield engine
    engine.dispose()


@pytest.fixture
def deep(shared):
    return shared


@pytest.fixture
def own(tmp_path):
    """A rated study of the test's own, which it may change."""
    engine = deep_store(f"sqlite:///{tmp_path / 'browser.db'}")
    yield engine
    engine.dispose()


@pytest.fixture
def deep_any(store_url):
    engine = deep_store(store_url)
    yield engine
    engine.dispose()


def bearer_of(engine) -> dict[str, str]:
    return {"Authorization": f"Bearer {admin_token(secret_key(engine))}"}


class Model:
    """The study as the export and the store's texts give it, computed without the browser's SQL."""

    def __init__(self, engine):
        rows = export_rows(engine, STUDY)
        with Session(engine) as session:
            study_id = session.scalar(select(Study.id).where(Study.name == STUDY))
            items = session.execute(select(StudyItem.id, Response.context_id, Response.text)
                                    .join(Response, Response.id == StudyItem.response_id)
                                    .where(StudyItem.study_id == study_id)).all()
            turns: dict[int, list[str]] = defaultdict(list)
            for context_id, text in session.execute(
                    select(Context.id, Turn.text).join(Turn, Turn.dialogue_id == Context.dialogue_id)
                    .where(Turn.idx <= Context.n_turns)):
                turns[context_id].append(text)
            comments = dict(session.execute(select(Assignment.id, Assignment.comment)
                                            .where(Assignment.study_id == study_id)).all())
        self.ids = sorted(row.id for row in items)
        self.context = {row.id: int(row.context_id) for row in items}
        self.response = {row.id: row.text for row in items}
        self.turns = {row.id: turns[int(row.context_id)] for row in items}
        self.system: dict[int, str] = {}
        self.ratings: dict[int, list[dict]] = defaultdict(list)
        for row in rows:
            item = int(row["item_id"])
            self.system[item] = row["system"]
            self.ratings[item].append(row)
        self.comments = {item: [comments[int(r["assignment_id"])] or "" for r in rs]
                         for item, rs in self.ratings.items()}
        with Session(engine) as session:  # systems of the items nobody rated
            for item_id, name in session.execute(
                    select(StudyItem.id, System.name).join(Response, Response.id == StudyItem.response_id)
                    .join(System, System.id == Response.system_id).where(StudyItem.study_id == study_id)):
                self.system.setdefault(item_id, name)

    def scores(self, item: int, criterion: str | None) -> list[int]:
        return [int(r["score"]) for r in self.ratings[item] if criterion in (None, r["criterion"])]

    def mean(self, item: int, criterion: str | None = None) -> Fraction | None:
        scores = self.scores(item, criterion)
        return Fraction(sum(scores), len(scores)) if scores else None

    def variance(self, item: int, criterion: str | None = None) -> Fraction | None:
        scores = self.scores(item, criterion)
        if len(scores) < 2:
            return None
        mean = Fraction(sum(scores), len(scores))
        return sum((x - mean) ** 2 for x in scores) / (len(scores) - 1)

    def raters(self, item: int, criterion: str | None = None) -> int:
        return len({r["assignment_id"] for r in self.ratings[item] if criterion in (None, r["criterion"])})

    def found(self, item: int, text: str) -> bool:
        needle = text.lower()
        return any(needle in t.lower() for t in [self.response[item], *self.turns[item], *self.comments.get(item, [])])


def view(client, headers, **args) -> list[int]:
    """The item ids of every page of the view, following the pager's own links (which must keep the filters)."""
    url = f"/admin/studies/{STUDY}?{urlencode(args)}"
    shown: list[int] = []
    while url:
        answer = client.get(url, headers=headers)
        assert answer.status_code == 200, answer.get_data(as_text=True)[:300]
        body = answer.get_data(as_text=True)
        shown += [int(i) for i in re.findall(r'<article class="item" id="item-(\d+)"', body)]
        following = re.search(r'rel="next" href="([^"]+)"', body)
        url = html.unescape(following.group(1)).split("#")[0] if following else ""
    return shown


def csv_view(client, headers, **args) -> tuple[str, list[dict[str, str]]]:
    answer = client.get(f"/admin/studies/{STUDY}/items.csv?{urlencode(args)}", headers=headers)
    assert answer.status_code == 200, answer.get_data(as_text=True)[:300]
    first, rest = answer.get_data(as_text=True).split("\n", 1)
    return first, list(csv.DictReader(io.StringIO(rest)))


def in_order(rows: list[dict[str, str]]) -> list[int]:
    seen: list[int] = []
    for row in rows:
        if not seen or seen[-1] != int(row["item_id"]):
            seen.append(int(row["item_id"]))
    return seen


def check_filters(engine) -> None:
    """Every filter against the model, on the pages and in the CSV."""
    model = Model(engine)
    client, headers = app_on(engine).test_client(), bearer_of(engine)
    flagged = flagged_pseudonyms(engine, STUDY)
    assert flagged == {next(r["annotator"] for r in export_rows(engine, STUDY) if r["seconds_on_item"] == 2.0)}
    rita = next(r["annotator"] for r in export_rows(engine, STUDY) if r["seconds_on_item"] == 12.0)
    cases = {
        (("system", "sys-b"),): [i for i in model.ids if model.system[i] == "sys-b"],
        (("rater", rita),): [i for i in model.ids if any(r["annotator"] == rita for r in model.ratings[i])],
        (("flagged", "only"),): [i for i in model.ids if any(r["annotator"] in flagged for r in model.ratings[i])],
        (("min", "2.5"), ("max", "4")): [i for i in model.ids if model.mean(i) is not None
                                         and Fraction(5, 2) <= model.mean(i) <= 4],
        (("criterion", "fluency"), ("min", "4")): [i for i in model.ids if model.mean(i, "fluency") is not None
                                                   and model.mean(i, "fluency") >= 4],
        (("q", "kettle"),): [i for i in model.ids if model.found(i, "kettle")],
        (("q", "100%_sure; drop"),): [i for i in model.ids if model.found(i, "100%_sure; drop")],
        (("q", "%"),): [i for i in model.ids if model.found(i, "%")],
        (("q", "_"),): [i for i in model.ids if model.found(i, "_")],
        (("q", "' OR 1=1 --"),): [],
        (("q", model.turns[model.ids[0]][0][5:25].upper()),):
            [i for i in model.ids if model.found(i, model.turns[model.ids[0]][0][5:25])],
        (("system", "sys-a"), ("q", "kettle"), ("per_page", "3")):
            [i for i in model.ids if model.system[i] == "sys-a" and model.found(i, "kettle")],
    }
    for args, expected in cases.items():
        assert expected or dict(args).get("q", "").startswith("'"), args  # each case selects something
        shown = view(client, headers, **dict(args))
        assert sorted(shown) == sorted(expected), args
        _, rows = csv_view(client, headers, **dict(args))
        assert in_order(rows) == shown, args  # the CSV is the view, in its order, every page
    assert 0 < len(cases[(("q", "kettle"),)]) < len(model.ids)


def test_each_filter_selects_what_the_export_says_and_the_csv_is_the_view(deep):
    check_filters(deep)


@pytest.mark.parametrize("store_url", ["postgres"], indirect=True)
def test_the_filters_in_sql_agree_on_postgresql(deep_any):
    check_filters(deep_any)


@pytest.mark.parametrize("order", ["asc", "desc"])
def test_each_sort_orders_as_the_export_says(deep, order):
    model = Model(deep)
    client, headers = app_on(deep).test_client(), bearer_of(deep)
    by_context = sorted(model.ids, key=lambda i: (model.context[i], model.system[i], i))
    by_system = sorted(model.ids, key=lambda i: (model.system[i], model.context[i], i))
    if order == "desc":
        by_context = sorted(model.ids, key=lambda i: (-model.context[i], _reverse(model.system[i]), i))
        by_system = sorted(model.ids, key=lambda i: (_reverse(model.system[i]), -model.context[i], i))
    assert view(client, headers, sort="context", order=order) == by_context
    assert view(client, headers, sort="system", order=order) == by_system
    sign = -1 if order == "desc" else 1
    for sort, value in (("mean", model.mean), ("ratings", model.raters), ("sd", model.variance)):
        for criterion in (None, "empathy"):
            args = {"sort": sort, "order": order, "per_page": "7", **({"criterion": criterion} if criterion else {})}
            shown = view(client, headers, **args)
            assert sorted(shown) == model.ids, args
            values = [value(i, criterion) for i in shown]
            known = [v for v in values if v is not None]
            assert values == known + [None] * (len(values) - len(known)), args  # no value: last, either way
            assert known == sorted(known, key=lambda v: sign * v), args
            _, rows = csv_view(client, headers, **args)
            assert in_order(rows) == shown, args
    assert len({model.variance(i) for i in model.ids}) > 3  # the raters disagree, by different amounts


def _reverse(text: str) -> tuple[int, ...]:
    return tuple(-ord(c) for c in text) + (1,)


def test_the_csv_names_its_filters_and_holds_each_rating_of_the_view_as_the_export_has_it(deep):
    model = Model(deep)
    client, headers = app_on(deep).test_client(), bearer_of(deep)
    first, rows = csv_view(client, headers, system="sys-a", criterion="empathy", sort="sd", order="desc")
    assert first.startswith(f"# item browser of study {STUDY}: system=sys-a; criterion=empathy; sort=sd; order=desc")
    shown = [i for i in model.ids if model.system[i] == "sys-a"]
    assert sorted(in_order(rows)) == shown
    for row in rows:
        item = int(row["item_id"])
        assert row["system"] == "sys-a" and row["response"] == model.response[item]
        mine = [r for r in model.ratings[item] if r["annotator"] == row["annotator"]]
        assert {c: int(row[c]) for c in CRITERIA} == {r["criterion"]: int(r["score"]) for r in mine}
        assert abs(float(row["mean"]) - float(model.mean(item, "empathy"))) < 1e-3
        assert int(row["raters"]) == model.raters(item, "empathy")
    assert len(rows) == sum(model.raters(i) for i in shown)
    sam = [r for r in rows if r["comment"].startswith("it's")]  # a cell beginning with ' is kept as written
    assert sam and all(r["comment"] == COMMENTS["sam"] for r in sam)


def test_a_formula_in_a_response_is_quoted_in_the_csv(own):
    deep = own
    with Session(deep) as session, session.begin():
        item = session.scalars(select(StudyItem).join(Study).where(Study.name == STUDY).order_by(StudyItem.id)).first()
        session.get(Response, item.response_id).text = "=HYPERLINK(\"http://x\")"
    answer = app_on(deep).test_client().get(f"/admin/studies/{STUDY}/items.csv", headers=bearer_of(deep))
    assert "'=HYPERLINK" in answer.get_data(as_text=True)
    assert ",=HYPERLINK" not in answer.get_data(as_text=True)


def test_the_search_finds_a_comment_on_one_item_and_the_csv_carries_it(own):
    with Session(own) as session, session.begin():
        study_id = session.scalar(select(Study.id).where(Study.name == STUDY))
        item_id, assignment_id = session.execute(
            select(Rating.item_id, Rating.assignment_id).join(Assignment, Assignment.id == Rating.assignment_id)
            .where(Assignment.study_id == study_id).order_by(Rating.id)).first()
        session.add(ItemComment(assignment_id=assignment_id, item_id=item_id, comment="A TEAPOT, not a kettle"))
    client, headers = app_on(own).test_client(), bearer_of(own)
    assert view(client, headers, q="teapot") == [item_id]
    _, rows = csv_view(client, headers, q="Teapot")
    assert {r["item_comment"] for r in rows if r["assignment_id"] == str(assignment_id)} == {"A TEAPOT, not a kettle"}
    assert {r["item_comment"] for r in rows if r["assignment_id"] != str(assignment_id)} == {""}


def test_the_filter_form_works_without_script_and_the_pager_keeps_the_filters(deep):
    client, headers = app_on(deep).test_client(), bearer_of(deep)
    body = client.get(f"/admin/studies/{STUDY}?system=sys-a&sort=mean&order=desc&per_page=5",
                      headers=headers).get_data(as_text=True)
    form = body.split('<form id="item-filters"', 1)[1].split("</form>", 1)[0]
    assert 'method="get"' in form
    assert all(f'name="{n}"' in form for n in ("q", "system", "rater", "criterion", "min", "max", "flagged", "sort",
                                                  "order"))
    assert "<option selected>sys-a</option>" in form and '<option value="desc" selected>' in form
    following = html.unescape(re.search(r'rel="next" href="([^"]+)"', body).group(1))
    assert "system=sys-a" in following and "sort=mean" in following and "order=desc" in following
    assert "per_page=5" in following and "page=2" in following
    link = html.unescape(re.search(r'id="items-csv" href="([^"]+)"', body).group(1))
    assert link.startswith(f"/admin/studies/{STUDY}/items.csv?") and "system=sys-a" in link
    assert not re.search(r"[?&]page=", link)
    assert "matching system=sys-a; sort=mean; order=desc" in " ".join(html.unescape(body).split())
    empty = client.get(f"/admin/studies/{STUDY}?q=no+such+words+anywhere", headers=headers).get_data(as_text=True)
    assert 'id="no-items"' in empty and "Page 1 of 1 (0 in all" in empty


HOSTILE = {
    "page=-1": "page must be a whole number from 1, got '-1'",
    "page=99999999999999999999": "page must be a whole number from 1, got '99999999999999999999'",
    "page=1e3": "page must be a whole number from 1, got '1e3'",
    "per_page=0": "per_page must be a whole number from 1 to 200, got '0'",
    "per_page=100000": "per_page must be a whole number from 1 to 200, got '100000'",
    "sort=score;DROP TABLE rating": "sort must be one of context, system, mean, ratings, sd",
    "sort=mean&order=sideways": "order must be asc or desc, got 'sideways'",
    "min=0": "min must be a number on the study's scale, 1 to 5, got '0'",
    "max=1e308": "max must be a number on the study's scale, 1 to 5, got '1e308'",
    "min=nan": "min must be a number on the study's scale, 1 to 5, got 'nan'",
    "max=inf": "max must be a number on the study's scale, 1 to 5, got 'inf'",
    "min=4&max=2": "min (4) must not be above max (2)",
    "system=sys-z' OR '1'='1": "system must be one of the study's systems: sys-a, sys-b; got \"sys-z' OR '1'='1\"",
    "criterion=charm": "criterion must be one of the study's criteria: empathy, relevance, fluency; got 'charm'",
    "flagged=yes": "flagged must be all or only",
    "rated=some": "rated must be all or only",
    "q=" + "x" * 10_000: "q (the search) may be at most 200 characters, got 10000",
    "rater=" + "r" * 500: "rater must be a rater's pseudonym (at most 64 characters)",
    "colour=red": "unknown argument 'colour' for the item browser",
}


@pytest.mark.parametrize("query", list(HOSTILE), ids=lambda q: q[:30])
def test_a_hostile_argument_is_a_400_naming_it(deep, query):
    client, headers = app_on(deep).test_client(), bearer_of(deep)
    for path in (f"/admin/studies/{STUDY}", f"/admin/studies/{STUDY}/items.csv"):
        answer = client.get(f"{path}?{query}", headers=headers)
        assert answer.status_code == 400, (path, query)
        assert answer.get_json()["message"].startswith(HOSTILE[query]), answer.get_json()["message"]


def test_the_csv_needs_the_researcher_and_another_kind_is_told_what_it_takes(deep):
    client = app_on(deep).test_client()
    assert client.get(f"/admin/studies/{STUDY}/items.csv").status_code == 401
    assert client.get(f"/admin/studies/{STUDY}/items.csv",
                      headers={"Authorization": "Bearer wrong"}).status_code == 403
    headers = bearer_of(deep)
    assert client.get("/admin/studies/nothing/items.csv", headers=headers).status_code == 404
    answer = client.get("/admin/studies/ab/items.csv", headers=headers)
    assert answer.status_code == 400 and "for Likert studies" in answer.get_json()["message"]
    answer = client.get("/admin/studies/ab?sort=mean", headers=headers)
    assert answer.status_code == 400 and answer.get_json()["message"].startswith("sort: the item browser's filters")
    assert client.get("/admin/studies/ab?rated=only&page=1", headers=headers).status_code == 200


def test_on_a_phone_without_script_the_filter_form_fits_and_filters_through_its_own_get(deep):
    """375x667, JavaScript off: sign in with the form, choose a system, a sort and an order, press Show; the page
    that answers is the filtered view and nothing is wider than the phone."""
    model = Model(deep)
    with live_server(app_on(deep)) as base, chromium_page(viewport={"width": 375, "height": 667},
                                                          java_script_enabled=False) as page:
        page.goto(f"{base}/admin")
        page.fill("#token", admin_token(secret_key(deep)))
        page.click("form.sign-in button")
        page.goto(f"{base}/admin/studies/{STUDY}")
        page.select_option("select[name=system]", "sys-b")
        page.select_option("select[name=sort]", "mean")
        page.select_option("select[name=order]", "desc")
        page.click("#item-filters button[type=submit]")
        page.wait_for_load_state("load")
        assert "system=sys-b" in page.url and "sort=mean" in page.url and "order=desc" in page.url
        shown = [int(i.split("-")[1]) for i in page.eval_on_selector_all("article.item", "a => a.map(e => e.id)")]
        assert shown and all(model.system[i] == "sys-b" for i in shown)
        means = [model.mean(i) for i in shown]
        assert means == sorted(means, key=lambda m: -m)  # type: ignore[operator]
        assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")
        boxes = page.eval_on_selector_all("#item-filters label, #item-filters button",
                                          "els => els.map(e => e.getBoundingClientRect().right)")
        assert boxes and max(boxes) <= 375
