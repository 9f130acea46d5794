"""A third-party rater does a whole ACUTE-Eval assignment in a real browser against the real server: invite link,
consent, instructions, per pair the two conversations of the chat study side by side (stacked on a phone), per
question the listener picked (by keyboard on a laptop, by touch on a phone) and a few words why, Next only once
every answer is whole; a reload keeps the picks and the words typed; then Submit. SQL then holds her sides and her
justifications (trimmed), the conversations shown are the chat study's as the placement puts them, nothing the page
received names a system, and each view has no serious or critical accessibility violation and no horizontal scroll."""
from __future__ import annotations

import pytest
from playwright.sync_api import Error as PlaywrightError
from sqlalchemy import select
from sqlalchemy.orm import Session

from empeval.server.store.kinds.acute import AcuteChoice
from empeval.server.store.models import Assignment, Study
from empeval.wiring import make_app
from tests.annotation.acute_fixtures import ACUTE, PARTNERS, acute_store, placements, stored_pairs
from tests.axe import axe_violations, describe
from tests.browser import chromium_page, live_server

LAPTOP = {"width": 1280, "height": 800}
PHONE = {"width": 375, "height": 667}
QUESTIONS = ("empathy", "talk_to")


@pytest.fixture
def acute(tmp_path, sample_templates):
    engine, tokens = acute_store(tmp_path, sample_templates)
    app = make_app(str(engine.url))
    try:
        with live_server(app) as base:
            yield engine, f"{base}/annotate#{tokens['rita']}"
    finally:
        engine.dispose()


def assert_clean(page, where: str) -> None:
    found = axe_violations(page)
    assert found == [], f"{where}:\n{describe(found)}"


def assert_fits(page, where: str) -> None:
    assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth + 1"), where


def shown_side(page, side: str) -> tuple[tuple[str, str], ...]:
    """(speaker, text) of the turns of the conversation on `side`."""
    return tuple((role, text) for role, text in page.locator(f"#item .acute-side[data-side='{side}'] .turn")
                 .evaluate_all("ts => ts.map(t => [t.dataset.role, t.childNodes[1].textContent])"))


def the_assignment(engine) -> int:
    with Session(engine) as session:
        return session.scalar(select(Assignment.id).join(Study, Study.id == Assignment.study_id)
                              .where(Study.name == ACUTE, Assignment.annotator_id.is_not(None)))


@pytest.mark.slow
@pytest.mark.parametrize("viewport", [LAPTOP, PHONE], ids=["laptop", "phone"])
def test_a_rater_compares_every_pair_and_sql_holds_her_picks_and_reasons(acute, viewport):
    engine, link = acute
    laptop = viewport is LAPTOP
    picked: dict[tuple[int, str], tuple[str, str]] = {}
    with chromium_page() as page:
        page.set_viewport_size(viewport)
        responses = []
        page.on("response", lambda response: responses.append(response))
        page.goto(link)
        page.click("#consent-accept")
        page.wait_for_selector("#instructions")
        assert "Conversation 1" in page.locator("#instructions").inner_text()
        assert_clean(page, "instructions")
        assert_fits(page, "instructions")
        page.click("#start")
        page.wait_for_selector("#item")
        assignment = the_assignment(engine)
        placed = placements(engine, assignment)
        pairs = stored_pairs(engine)
        n = len(placed)
        for p, (_, pair_id, shown_left) in enumerate(placed):
            assert page.locator("#item-heading").inner_text() == f"Pair {p + 1} of {n}"
            assert int(page.locator("#item").get_attribute("data-item-id")) == pair_id
            a, b = pairs[pair_id].turns
            assert (shown_side(page, "left"), shown_side(page, "right")) == ((a, b) if shown_left == "a" else (b, a))
            assert not any(name in page.content() for name in PARTNERS)
            assert page.locator("#next").is_disabled()
            for q, question in enumerate(QUESTIONS):
                side = "left" if (p + q) % 2 == 0 else "right"
                why = f"  Listener {1 if side == 'left' else 2} noticed how the speaker felt ({question}).  "
                if laptop:
                    if q:  # Enter on the answered question goes on to the next one
                        page.focus(f"input[name='{QUESTIONS[q - 1]}']:checked")
                        page.keyboard.press("Enter")
                    page.keyboard.press("1" if side == "left" else "2")
                else:
                    page.check(f"input[name='{question}'][value='{side}']")
                assert page.locator(f"input[name='{question}'][value='{side}']").is_checked()
                page.fill(f"#why-{question}", "Too short")
                assert page.locator(f"#why-count-{question}").inner_text() == "9 of at least 10 characters"
                assert page.locator("#next").is_disabled()
                page.fill(f"#why-{question}", why)
                picked[pair_id, question] = (side, why.strip())
            if p == 0:
                assert_clean(page, f"a pair, answered ({viewport})")
                assert_fits(page, "a pair")
                if laptop:  # a reload keeps the picks and the words typed (the draft)
                    page.reload()
                    page.wait_for_selector("#item")
                    for question in QUESTIONS:
                        side, why = picked[pair_id, question]
                        assert page.locator(f"input[name='{question}'][value='{side}']").is_checked()
                        assert page.locator(f"#why-{question}").input_value().strip() == why
            assert page.locator("#next").is_enabled()
            if laptop and p == n - 1:
                page.focus(f"input[name='{QUESTIONS[-1]}']:checked")
                page.keyboard.press("Enter")
            else:
                page.click("#next")
        page.wait_for_selector("#review")
        assert_clean(page, "review")
        page.click("#submit")
        page.wait_for_selector("#submitted")
        assert "saved" in page.locator("#submitted").inner_text()
        bodies = []
        for response in responses:
            try:
                bodies.append((response.url, response.text()))
            except PlaywrightError:  # a redirect or an aborted request: no body
                continue
    assert any("/api/annotate/next" in url for url, _ in bodies)
    for url, body in bodies:
        assert not any(name in body for name in PARTNERS), url
    with Session(engine) as session:
        assert session.get(Assignment, assignment).status == "submitted"
        stored = {(c.acute_pair_id, c.criterion): (c.choice, c.justification)
                  for c in session.scalars(select(AcuteChoice).where(AcuteChoice.assignment_id == assignment))}
    assert stored == picked
