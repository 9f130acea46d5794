"""A rater does a whole pairwise (A/B) assignment in a real browser, by keyboard: invite link, consent,
instructions, per pair A / B / T and Enter, review, submit. SQL then holds her choices as the screen sides she
picked, and each A she saw was the response its placement logs as shown left. No system name is ever on the page;
the two responses stand side by side on a wide screen and stacked on a narrow one; T does nothing where the study
allows no tie."""
from __future__ import annotations

import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session

from empeval.server.annotation.annotators import invite
from empeval.server.store.kinds.pairwise import AssignmentPair, Choice
from empeval.server.store.models import Assignment
from empeval.wiring import make_app
from tests.annotation.conftest import CONTROLS, SYSTEMS
from tests.annotation.pairwise_fixtures import AB_CRITERIA, make_ab_study, placements
from tests.browser import chromium_page, live_server
from tests.conftest import sample_store_copy

SIDE = {"A": "left", "B": "right", "T": "tie"}


def serve(tmp_path, *, per_assignment=4, **study):
    engine = sample_store_copy(f"sqlite:///{tmp_path / 'pairwise-browser.db'}")
    make_ab_study(engine, count=4, k=1, per_assignment=per_assignment, **study)
    _, token = invite(engine, "rita", "ab")
    return engine, token


@pytest.fixture
def served(tmp_path):
    engine, token = serve(tmp_path, per_assignment=3, control_rate=0.25)  # two pairs (an even number) and a control
    with live_server(make_app(str(engine.url))) as base:
        yield engine, f"{base}/annotate#{token}"
    engine.dispose()


def answers_for(i: int, ties: bool = True) -> list[str]:
    """The keys pressed for the pair at index i, one per criterion (lower case once, to check it counts)."""
    keys = ["A", "B", "T"] if ties else ["A", "B", "B"]
    shift = i % 3
    keys = keys[shift:] + keys[:shift]
    return [k.lower() if i == 1 and j == 0 else k for j, k in enumerate(keys)]


def test_a_rater_does_a_whole_pairwise_assignment_by_keyboard_and_sql_holds_her_choices_and_sides(served):
    engine, link = served
    shown = []
    with chromium_page() as page:
        page.goto(link)
        page.click("#consent-accept")
        assert "Tie" in page.locator("#instructions").inner_text()
        page.click("#start")
        n_items = int(page.locator("#progress-text").inner_text().split(" of ")[1].split()[0])
        for i in range(n_items):
            item = page.locator("#item")
            shown.append({"item": int(item.get_attribute("data-item-id")),
                          "position": int(item.get_attribute("data-position")),
                          "a": page.locator("#response-a .text").inner_text(),
                          "b": page.locator("#response-b .text").inner_text(),
                          "text": page.locator("main").inner_text()})
            assert page.locator("#next").is_disabled()
            for key in answers_for(i):
                page.keyboard.press(key)
                page.keyboard.press("Enter")
        page.wait_for_selector("#review")
        assert page.locator("#progress-text").inner_text().startswith(f"{n_items} of {n_items} pairs compared")
        page.fill("#comment", "two good ones")
        page.click("#submit")
        page.wait_for_selector("#submitted")
    assert [s["position"] for s in shown] == list(range(n_items))
    with Session(engine) as session:
        assignment = session.scalar(select(Assignment).where(Assignment.status == "submitted"))
        assert assignment.comment == "two good ones"
        choices = dict(((pair, criterion), choice) for pair, criterion, choice in session.execute(
            select(Choice.pair_item_id, Choice.criterion, Choice.choice).where(Choice.assignment_id == assignment.id)))
        seconds = session.scalars(select(AssignmentPair.seconds_on_item)
                                  .where(AssignmentPair.assignment_id == assignment.id)).all()
    placed = {p.pair_item_id: p for p in placements(engine, assignment.id)}
    assert [placed[s["item"]].position for s in shown] == [s["position"] for s in shown]
    for s in shown:  # A on screen was the response logged as shown left, B the other
        p = placed[s["item"]]
        assert (s["a"], s["b"]) == (p.left[1], p.right[1])
        assert not any(name in s["text"] for name in SYSTEMS + CONTROLS)
    assert {p.shown_left for p in placed.values()} == {"a", "b"}  # both ways round: a swap of A and B shows
    assert choices == {(s["item"], c): SIDE[key.upper()]
                       for i, s in enumerate(shown) for c, key in zip(AB_CRITERIA, answers_for(i), strict=True)}
    assert any(p.is_control for p in placed.values())  # a control pair was on screen, looking like any other
    assert all(t is not None and t >= 0 for t in seconds)


def test_the_responses_stand_side_by_side_and_stack_on_a_narrow_screen(served):
    _, link = served
    with chromium_page() as page:
        page.set_viewport_size({"width": 1100, "height": 900})
        page.goto(link)
        page.click("#consent-accept")
        page.click("#start")
        a, b = page.locator("#response-a").bounding_box(), page.locator("#response-b").bounding_box()
        assert b["x"] > a["x"] + a["width"] - 1 and abs(a["y"] - b["y"]) < 2  # B right of A, same row
        page.set_viewport_size({"width": 400, "height": 900})
        a, b = page.locator("#response-a").bounding_box(), page.locator("#response-b").bounding_box()
        assert b["y"] >= a["y"] + a["height"] - 1 and abs(a["x"] - b["x"]) < 2  # B under A


def test_without_ties_t_does_nothing_and_no_tie_is_offered(tmp_path):
    engine, token = serve(tmp_path, control_rate=0.0, ties=False)
    with live_server(make_app(str(engine.url))) as base, chromium_page() as page:
        page.goto(f"{base}/annotate#{token}")
        page.click("#consent-accept")
        assert "Tie" not in page.locator("#instructions").inner_text()
        page.click("#start")
        assert page.locator("fieldset.question input[value=T]").count() == 0
        page.keyboard.press("T")
        page.keyboard.press("Enter")
        first = page.locator("fieldset.question").first
        assert first.get_attribute("data-focused") == "true" and first.locator("label.chosen").count() == 0
        page.keyboard.press("B")
        page.keyboard.press("Enter")
        assert page.locator("fieldset.question").nth(1).get_attribute("data-focused") == "true"
    engine.dispose()
