"""The comment box under each item (a study with `[design] item_comments = true`), in Chromium: typed under an
item (digits typed there answer no question), kept over a reload by the page's draft, sent with the submission and
found in the export on the rows of its item; on a 375 px phone the box fits the screen, and axe finds nothing
serious. A study without item
comments shows no box. The A/B page has the same box."""
from __future__ import annotations

from empeval.server.annotation.annotators import invite
from empeval.server.annotation.export import export_rows
from empeval.server.datasets.ed_csv import parse_ed_csv
from empeval.server.datasets.importer import import_dialogues
from empeval.server.store import make_engine, upgrade
from empeval.tasks.study_create import create_study
from empeval.tasks.study_file import parse_study
from tests.annotation.conftest import SYSTEMS, add_responses
from tests.annotation.page_fixtures import answer, current_item, serving, start
from tests.annotation.pairwise_fixtures import neutral_text
from tests.axe import axe_violations
from tests.browser import chromium_page
from tests.conftest import SAMPLE_ED

TYPED = "=She asked about 2 exams; the reply 13 ignores it"


def store(tmp_path, spec: dict, systems: list[str], text=None):
    engine = make_engine(f"sqlite:///{tmp_path / 'comments.db'}")
    upgrade(engine)
    import_dialogues(engine, parse_ed_csv(SAMPLE_ED / "test.csv", "test"), dataset="empatheticdialogues")
    if text is None:
        add_responses(engine, systems, 8)
    else:
        add_responses(engine, systems, 8, text=text)
    create_study(engine, parse_study(spec))
    return engine, invite(engine, "rita", spec["name"])[1]


def likert_spec(item_comments: bool) -> dict:
    return {"name": "notes", "seed": 3, "contexts": {"split": "test", "count": 8}, "systems": {"names": ["plain"]},
            "design": {"ratings_per_response": 1, "items_per_assignment": 4, "control_rate": 0.0,
                       "item_comments": item_comments}}


def fits_the_screen(page) -> bool:
    """No horizontal scrolling, and the box within the screen's width."""
    return page.evaluate("""() => {
        const box = document.querySelector('#item-comment').getBoundingClientRect();
        return document.documentElement.scrollWidth <= window.innerWidth && box.left >= 0
            && box.right <= window.innerWidth; }""")


def test_a_comment_typed_under_an_item_survives_a_reload_and_reaches_the_export(tmp_path):
    engine, token = store(tmp_path, likert_spec(True), ["plain"])
    with serving(engine) as base, chromium_page(viewport={"width": 375, "height": 667}) as page:
        start(page, f"{base}/annotate#{token}")
        answer(page, ["4", "3"])
        page.keyboard.press("5")  # the third question answered, the item still on screen
        first = current_item(page)
        assert page.locator("label[for=item-comment]").inner_text() == "Comment on this response (optional)"
        page.fill("#item-comment", TYPED)
        assert page.locator("#item input:checked").evaluate_all("els => els.map(e => e.value)") == ["4", "3", "5"]
        assert fits_the_screen(page)
        assert axe_violations(page) == []

        page.reload()
        page.wait_for_selector("#item")
        assert current_item(page) == first
        assert page.input_value("#item-comment") == TYPED
        page.click("#next")
        assert page.input_value("#item-comment") == ""  # the next item's box is its own
        for _ in range(3):
            answer(page, ["2", "2", "2"])
        page.wait_for_selector("#review")
        page.click("#submit")
        page.wait_for_selector("#submitted")

    rows = export_rows(engine, "notes")
    assert {(row["item_id"], row["criterion"]): row["item_comment"] for row in rows if row["item_comment"]} == {
        (first, criterion): TYPED for criterion in ("empathy", "relevance", "fluency")}
    assert sum(row["item_comment"] is None for row in rows) == 9  # the three other items' ratings


def test_a_study_without_item_comments_shows_no_box(tmp_path):
    engine, token = store(tmp_path, likert_spec(False), ["plain"])
    with serving(engine) as base, chromium_page() as page:
        start(page, f"{base}/annotate#{token}")
        page.wait_for_selector("#item")
        assert page.locator("#item-comment").count() == 0


def test_the_ab_page_sends_the_comment_under_a_pair(tmp_path):
    spec = {"name": "ab", "kind": "pairwise", "seed": 5, "contexts": {"split": "test", "count": 8},
            "systems": {"names": SYSTEMS, "anchor": SYSTEMS[0]},
            "design": {"judgments_per_pair": 1, "items_per_assignment": 4, "control_rate": 0.0, "ties": True,
                       "item_comments": True}}
    engine, token = store(tmp_path, spec, SYSTEMS, text=neutral_text)
    with serving(engine) as base, chromium_page(viewport={"width": 375, "height": 667}) as page:
        start(page, f"{base}/annotate#{token}")
        answer(page, ["A", "B", "T"])
        second = int(page.locator("#item").get_attribute("data-position"))
        page.fill("#item-comment", "Both replies are generic")
        assert fits_the_screen(page)
        page.reload()
        page.wait_for_selector("#item")
        assert page.input_value("#item-comment") == "Both replies are generic"
        for _ in range(3):
            answer(page, ["A", "A", "A"])
        page.wait_for_selector("#review")
        page.click("#submit")
        page.wait_for_selector("#submitted")

    rows = export_rows(engine, "ab")
    commented = [row for row in rows if row["item_comment"]]
    assert len(commented) == 3 and {row["item_comment"] for row in commented} == {"Both replies are generic"}
    assert {row["position"] for row in commented} == {second}  # the second pair's rows only
