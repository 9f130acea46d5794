"""ACUTE-Eval's onboarding in a real browser against the real server: an invited rater of an ACUTE study with a
qualification is shown its practice pairs before any real one (consent, what the practice round is and its pass mark,
each pair with the study's questions), reads after each answer whether it was right and why, passes, continues to the
study and does the real work, which SQL then holds; a rater who picks the known-bad listeners is thanked and told what
the study needs, and gets no work. Each view at 1280x800 and 375x667 has no serious or critical accessibility
violation and no horizontal scroll, and nothing the page received names a system."""
from __future__ import annotations

import pytest
from playwright.sync_api import Error as PlaywrightError
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from empeval.server.annotation.annotators import invite
from empeval.server.store import make_engine
from empeval.server.store.kinds.acute import AcuteChoice
from empeval.server.store.models import Assignment, Study
from empeval.server.store.qualification_tables import QualificationAnswer, QualificationItem, QualificationOutcome
from empeval.wiring import make_app
from tests.annotation.acute_fixtures import ACUTE, PARTNERS, finished_chat, make_acute
from tests.axe import axe_violations, describe
from tests.browser import chromium_page, live_server

LAPTOP = {"width": 1280, "height": 800}
PHONE = {"width": 375, "height": 667}
QUESTIONS = ("empathy", "talk_to")
GOLD = {"min_correct": 2, "intro": "In each practice pair one listener is known to answer badly.", "items": [
    {"control": "control-scrambled", "feedback": "One listener's replies are scrambled words: pick the other one."},
    {"control": "control-scrambled", "feedback": "Again one listener makes no sense: the other one answers her."}]}


@pytest.fixture
def onboarding(tmp_path, sample_templates):
    url = f"sqlite:///{tmp_path / 'onboarding.db'}"
    sample_templates.fill(url)
    engine = make_engine(url)
    finished_chat(engine)
    make_acute(engine, qualification=GOLD)
    app = make_app(str(engine.url))
    try:
        with live_server(app) as base:
            yield engine, base
    finally:
        engine.dispose()


def right_sides(engine) -> dict[int, str]:
    with Session(engine) as session:
        return {gold.position: gold.accepted["empathy"][0] for gold in session.scalars(select(QualificationItem))}


def checked(page, where: str) -> None:
    found = axe_violations(page)
    assert found == [], f"{where}:\n{describe(found)}"
    assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth + 1"), f"{where}: scrolls sideways"


def responses_of(page) -> list:
    seen: list = []
    page.on("response", lambda response: seen.append(response))
    return seen


def bodies(responses) -> list[tuple[str, str]]:
    found = []
    for response in responses:
        try:
            found.append((response.url, response.text()))
        except PlaywrightError:  # a redirect or an aborted request: no body
            continue
    return found


def answer_practice_pair(page, side: str) -> None:
    for question in QUESTIONS:
        page.check(f"input[name='gold-{question}'][value='{side}']")
    page.click("#qualification-check")
    page.wait_for_selector("#qualification-feedback")


@pytest.mark.slow
@pytest.mark.parametrize("viewport", [LAPTOP, PHONE], ids=["laptop", "phone"])
def test_a_rater_passes_the_practice_pairs_with_feedback_and_then_does_the_real_work(onboarding, viewport):
    engine, base = onboarding
    right = right_sides(engine)
    link = f"{base}/annotate#{invite(engine, 'rita', ACUTE)[1]}"
    with chromium_page() as page:
        page.set_viewport_size(viewport)
        received = responses_of(page)
        page.goto(link)
        page.wait_for_selector("#consent")
        assert page.locator("main").get_attribute("data-kind") == "qualification"
        checked(page, "consent")
        page.click("#consent-accept")
        intro = page.wait_for_selector("#qualification-intro")
        assert "You need 2 of 2 right" in intro.inner_text() and GOLD["intro"] in intro.inner_text()
        checked(page, "intro")
        page.click("#qualification-start")
        for position in (0, 1):
            page.wait_for_selector(f"#qualification-item[data-position='{position}']")
            assert page.locator("#qualification-heading").inner_text().startswith(f"Practice item {position + 1} of 2")
            assert page.locator(".gold-panel").count() == 2 and page.locator("#qualification-check").is_disabled()
            if position == 0:
                checked(page, "a practice pair")
            answer_practice_pair(page, right[position])
            feedback = page.locator("#qualification-feedback").inner_text()
            assert feedback.startswith("Right") and GOLD["items"][position]["feedback"] in feedback
            side = "Conversation 1's listener" if right[position] == "left" else "Conversation 2's listener"
            assert f"Empathy: {side}" in feedback
            assert page.locator(f"input[name='gold-empathy'][value='{right[position]}']").is_disabled()
            if position == 0:
                checked(page, "feedback")
            page.click("#qualification-next")
        page.wait_for_selector("#qualification-passed")
        checked(page, "passed")
        with Session(engine) as session:
            assert session.scalar(select(func.count()).select_from(QualificationAnswer)) == 2
            assert str(session.scalar(select(QualificationOutcome.status))) == "passed"
        page.click("#qualification-continue")
        # The real work: the ACUTE page, its consent and instructions, then every pair of the assignment.
        page.wait_for_selector("main[data-kind='acute'] #consent")
        page.click("#consent-accept")
        page.click("#start")
        page.wait_for_selector("#item")
        n = int(page.locator("#progress-text").inner_text().split(" of ")[1].split()[0])
        for p in range(n):
            page.wait_for_selector(f"#item-heading:has-text('Pair {p + 1} of {n}')")
            for question in QUESTIONS:
                page.check(f"input[name='{question}'][value='left']")
                page.fill(f"#why-{question}", f"Listener 1 followed what the speaker said ({question}).")
            page.click("#next")
        page.wait_for_selector("#review")
        page.click("#submit")
        page.wait_for_selector("#submitted")
        checked(page, "submitted")
        shown = bodies(received)
    assert any("/api/annotate/qualification" in url for url, _ in shown)
    for url, body in shown:
        assert not any(name in body for name in PARTNERS), url
    with Session(engine) as session:
        submitted = session.scalar(select(Assignment.id).join(Study, Study.id == Assignment.study_id)
                                   .where(Study.name == ACUTE, Assignment.submission_id.is_not(None)))
        assert submitted is not None
        assert session.scalar(select(func.count()).select_from(AcuteChoice)
                              .where(AcuteChoice.assignment_id == submitted)) == n * len(QUESTIONS)


@pytest.mark.slow
def test_a_rater_who_picks_the_bad_listeners_is_thanked_told_what_the_study_needs_and_given_no_work(onboarding):
    engine, base = onboarding
    right = right_sides(engine)
    link = f"{base}/annotate#{invite(engine, 'ida', ACUTE)[1]}"
    with chromium_page() as page:
        page.set_viewport_size(PHONE)
        page.goto(link)
        page.click("#consent-accept")
        page.click("#qualification-start")
        for position in (0, 1):
            page.wait_for_selector(f"#qualification-item[data-position='{position}']")
            answer_practice_pair(page, "right" if right[position] == "left" else "left")
            feedback = page.locator("#qualification-feedback").inner_text()
            assert feedback.startswith("Not quite") and "(you answered" in feedback
            page.click("#qualification-next")
        failed = page.wait_for_selector("#qualification-failed")
        assert "at least 2 of the 2 practice items right" in failed.inner_text() and "you got 0" in failed.inner_text()
        checked(page, "failed (phone)")
        page.reload()  # she is told the same again, and nothing offers her work
        page.wait_for_selector("#qualification-failed")
        assert page.locator("#qualification-continue").count() == 0
    with Session(engine) as session:
        assert session.scalar(select(func.count()).select_from(Assignment).join(Study, Study.id == Assignment.study_id)
                              .where(Study.name == ACUTE, Assignment.annotator_id.is_not(None))) == 0
