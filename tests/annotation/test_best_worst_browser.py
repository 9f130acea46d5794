"""A rater does a whole best-worst assignment in a real browser, by keyboard: invite link, consent, instructions,
per tuple a best and a worst letter per criterion and Enter, review, submit. SQL then holds the systems she picked
under each letter she saw, in the order the placement logged; no system name is ever on the page; a letter picked
as the best cannot be picked as the worst on the same question; a reload keeps her answers; the page has no serious
or critical accessibility violation on a desktop screen and on a phone, where the responses stack."""
from __future__ import annotations

import pytest

from empeval.server.annotation.annotators import invite
from tests.annotation.best_worst_fixtures import (
    BWS_CRITERIA,
    BWS_SYSTEMS,
    make_bws_study,
    stored_picks,
    tuple_placements,
)
from tests.annotation.conftest import CONTROLS
from tests.annotation.page_fixtures import answer, drafts_in, item_count, serving, start
from tests.annotation.pairwise_fixtures import assignment_ids
from tests.axe import axe_violations, describe
from tests.browser import chromium_page
from tests.conftest import sample_store_copy

# Per tuple index, the (best, worst) letters pressed for each criterion: every combination of places is used.
PICKS = [("A", "C"), ("B", "A"), ("C", "B")]


def picks_for(i: int) -> list[tuple[str, str]]:
    return [PICKS[(i + j) % len(PICKS)] for j in range(len(BWS_CRITERIA))]


@pytest.fixture
def store(tmp_path):
    engine = sample_store_copy(f"sqlite:///{tmp_path / 'bws-browser.db'}")
    make_bws_study(engine, count=6, k=1, size=3, per_assignment=4, control_rate=0.25)
    _, token = invite(engine, "rita", "bws")
    return engine, token


def test_a_rater_does_a_whole_best_worst_assignment_by_keyboard_and_sql_holds_the_systems_she_picked(store):
    engine, token = store
    shown = []
    with serving(engine) as base, chromium_page() as page:
        page.goto(f"{base}/annotate#{token}")
        page.click("#consent-accept")
        assert "best" in page.locator("#instructions").inner_text()
        page.click("#start")
        n_items = item_count(page)
        for i in range(n_items):
            item = page.locator("#item")
            shown.append({"item": int(item.get_attribute("data-item-id")),
                          "texts": [page.locator(f"#response-{letter} .text").inner_text() for letter in "ABC"],
                          "text": page.locator("main").inner_text()})
            assert page.locator("#next").is_disabled()
            for best, worst in picks_for(i):
                answer(page, [best.lower() if i == 1 else best, worst])
        page.wait_for_selector("#review")
        assert page.locator("#progress-text").inner_text().startswith(f"{n_items} of {n_items} sets of replies")
        page.click("#submit")
        page.wait_for_selector("#submitted")
    placed, picks = {}, {}
    for a in assignment_ids(engine, "bws"):
        placed.update({p.tuple_item_id: p for p in tuple_placements(engine, a)})
        picks.update(stored_picks(engine, a))
    assert picks, "nothing was stored"
    for i, s in enumerate(shown):
        p = placed[s["item"]]
        assert s["texts"] == list(p.texts)  # the letters follow the order the placement logged
        assert not any(name in s["text"] for name in BWS_SYSTEMS + CONTROLS)
        for criterion, (best, worst) in zip(BWS_CRITERIA, picks_for(i), strict=True):
            assert picks[p.tuple_item_id, criterion] == (p.systems["ABC".index(best)], p.systems["ABC".index(worst)])
    assert any(placed[s["item"]].is_control for s in shown)  # a control tuple looked like any other


def test_the_letter_picked_best_cannot_be_picked_worst_and_a_reload_keeps_the_answers(store):
    engine, token = store
    with serving(engine) as base, chromium_page() as page:
        start(page, f"{base}/annotate#{token}")
        answer(page, ["B"])  # empathy best: B; the focus moves to empathy worst
        worst = page.locator("fieldset.question").nth(1)
        assert worst.get_attribute("data-pick") == "worst" and worst.get_attribute("data-focused") == "true"
        assert worst.locator("input[value=B]").is_disabled()
        page.keyboard.press("B")  # refused: the focus stays, nothing is chosen
        page.keyboard.press("Enter")
        assert worst.get_attribute("data-focused") == "true" and worst.locator("label.chosen").count() == 0
        page.keyboard.press("C")
        assert worst.locator("label.chosen").inner_text() == "Worst: C"
        assert any("empathy.best" in draft for draft in drafts_in(page).values())
        page.reload()
        page.wait_for_selector("#item")
        assert page.locator("fieldset.question").nth(0).locator("label.chosen").inner_text() == "Best: B"
        assert page.locator("fieldset.question").nth(1).locator("label.chosen").inner_text() == "Worst: C"


@pytest.mark.parametrize("viewport", [{"width": 1280, "height": 800}, {"width": 375, "height": 667}])
def test_the_page_has_no_serious_or_critical_violation_and_stacks_on_a_phone(store, viewport):
    engine, token = store
    with serving(engine) as base, chromium_page() as page:
        page.set_viewport_size(viewport)
        page.goto(f"{base}/annotate#{token}")
        page.wait_for_selector("#consent")
        for where, step in (("consent", "#consent-accept"), ("instructions", "#start")):
            found = axe_violations(page)
            assert found == [], f"{where}:\n{describe(found)}"
            page.click(step)
        answer(page, ["A"])
        found = axe_violations(page)
        assert found == [], f"a tuple, half answered:\n{describe(found)}"
        a, b = page.locator("#response-A").bounding_box(), page.locator("#response-B").bounding_box()
        if viewport["width"] < 640:
            assert b["y"] >= a["y"] + a["height"] - 1 and abs(a["x"] - b["x"]) < 2  # B under A
        else:
            assert b["x"] > a["x"] + a["width"] - 1 and abs(a["y"] - b["y"]) < 2  # B beside A
        assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth + 1")
