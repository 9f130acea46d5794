"""The task page as a rater sees it on a phone (375x667) and a laptop (1280x800): after Next the new item's
conversation and reply to rate are on screen; the reply to rate has its own colour; on a laptop the 5-point scale
is one line and Next needs no scrolling; tap targets are 44 px or more and option borders have 3:1 contrast; the
progress bar is named and its changes announced; the highlighted question is exposed to assistive technology."""

from __future__ import annotations

import re

import pytest

from tests.annotation.page_fixtures import (
    answer,
    current_item,
    item_count,
    likert_store,
    pairwise_store,
    serving,
    start,
)
from tests.browser import chromium_page

PHONE = {"width": 375, "height": 667}
LAPTOP = {"width": 1280, "height": 800}


@pytest.fixture
def link(tmp_path):
    engine, tokens = likert_store(tmp_path)
    with serving(engine) as base:
        yield f"{base}/annotate#{tokens['rita']}"


@pytest.fixture
def pairwise_link(tmp_path):
    engine, token = pairwise_store(tmp_path)
    with serving(engine) as base:
        yield f"{base}/annotate#{token}"


def box(page, selector):
    return page.locator(selector).bounding_box()  # relative to the viewport


def on_screen(page, selector, height):
    b = box(page, selector)
    return b["y"] >= 0 and b["y"] + b["height"] <= height


def test_after_next_on_a_phone_the_conversation_and_the_reply_to_rate_are_on_screen(link):
    with chromium_page() as page:
        page.set_viewport_size(PHONE)
        start(page, link)
        n = item_count(page)
        for i in range(n - 1):
            before = current_item(page)
            if i % 2:
                answer(page, ["2", "2", "2"])  # by keyboard: the focus walked down to the last question
            else:
                answer(page, ["2", "2"])
                page.locator("fieldset.question").nth(2).locator("input").first.click()
                page.click("#next")  # by touch: Next sits below the questions
            assert current_item(page) != before
            assert on_screen(page, "#item .conversation", PHONE["height"]), (i, box(page, "#item .conversation"))
            assert on_screen(page, "#item .turn.response", PHONE["height"]), (i, box(page, "#item .turn.response"))
            assert page.evaluate("document.activeElement.id") == "item-heading"


def test_after_next_on_a_phone_a_reply_too_long_to_show_with_its_conversation_still_ends_on_screen(tmp_path):
    long_reply = "I am so sorry to hear that, it sounds like a really hard time for you and your family. " * 12
    engine, tokens = likert_store(tmp_path, reply=lambda context_id: f"{context_id}: {long_reply}")
    with serving(engine) as base, chromium_page() as page:
        page.set_viewport_size(PHONE)
        start(page, f"{base}/annotate#{tokens['rita']}")
        for i in range(item_count(page) - 1):
            answer(page, ["2", "2", "2"])
            reply, heading = box(page, "#item .turn.response"), box(page, "#item-heading")
            item_to_reply = reply["y"] + reply["height"] - heading["y"]
            assert reply["height"] < PHONE["height"] < item_to_reply, (reply, heading)  # the case this test is about
            assert on_screen(page, "#item .turn.response", PHONE["height"]), (i, reply)
            assert abs(reply["y"] + reply["height"] - PHONE["height"]) < 2  # ends at the bottom: the most context


def test_after_next_on_a_phone_the_pairwise_responses_start_on_screen(pairwise_link):
    with chromium_page() as page:
        page.set_viewport_size(PHONE)
        start(page, pairwise_link)
        for _ in range(item_count(page) - 1):
            answer(page, ["A", "B", "T"])
            a = box(page, "#response-a")
            b = box(page, "#response-b")
            assert 0 <= a["y"] < PHONE["height"], a  # the first response starts on screen, and either the item
            conversation = box(page, "#item .conversation")  # shows from its start or B ends on screen
            assert conversation["y"] >= -1 or b["y"] + b["height"] <= PHONE["height"] + 1, (conversation, b)


def test_on_a_phone_the_instructions_and_the_review_open_at_their_top(link):
    with chromium_page() as page:
        page.set_viewport_size(PHONE)
        page.goto(link)
        page.click("#consent-accept")
        page.wait_for_selector("#instructions")
        assert page.evaluate("scrollY") == 0  # not scrolled down to the focused Start button
        page.click("#start")
        for _ in range(item_count(page)):
            answer(page, ["1", "2", "3"])
        page.wait_for_selector("#review")
        assert on_screen(page, "#review h2", PHONE["height"])


def test_the_reply_to_rate_has_its_own_colour_not_the_listeners_grey(link):
    with chromium_page() as page:
        start(page, link)
        colours = page.evaluate("""() => {
            const conversation = document.querySelector('#item .conversation');
            const probe = (cls) => { const d = document.createElement('div'); d.className = cls;
                conversation.appendChild(d); const c = getComputedStyle(d).backgroundColor; d.remove(); return c; };
            return { reply: getComputedStyle(document.querySelector('#item [data-reply]')).backgroundColor,
                     listener: probe('turn listener'), speaker: probe('turn speaker') };
        }""")
    assert colours["reply"] not in (colours["listener"], colours["speaker"]), colours
    assert colours["reply"] not in ("rgba(0, 0, 0, 0)", "rgb(255, 255, 255)"), colours


def test_on_a_laptop_the_scale_is_one_line_and_next_needs_no_scrolling(link):
    with chromium_page() as page:
        page.set_viewport_size(LAPTOP)
        start(page, link)
        for _ in range(item_count(page)):
            rows = page.evaluate("""() => [...document.querySelectorAll('#item fieldset.question')].map(f =>
                new Set([...f.querySelectorAll('.scale label')].map(l => Math.round(l.getBoundingClientRect().top)))
                .size)""")
            assert rows == [1, 1, 1]
            assert page.evaluate("scrollY") == 0
            assert on_screen(page, "#next", LAPTOP["height"]), box(page, "#next")
            answer(page, ["4", "4", "4"])


def small_targets(page):
    """Visible buttons, links, answer options and text boxes smaller than 44x44 px: [(what, width, height)]."""
    return page.evaluate("""() => [...document.querySelectorAll('button, a, .scale label, textarea')]
        .filter(e => e.getClientRects().length)
        .map(e => { const r = e.getBoundingClientRect(), what = e.id || e.className || e.textContent.slice(0, 20);
                    return [what, Math.round(r.width), Math.round(r.height)]; })
        .filter(([, w, h]) => w < 44 || h < 44)""")


def test_tap_targets_are_at_least_44_px_on_a_phone(link):
    with chromium_page() as page:
        page.set_viewport_size(PHONE)
        page.goto(link)
        page.wait_for_selector("#consent")
        assert small_targets(page) == []
        page.click("#consent-accept")
        assert small_targets(page) == []
        page.click("#start")
        assert small_targets(page) == []
        for _ in range(item_count(page)):
            answer(page, ["1", "1", "1"])
        page.wait_for_selector("#review")
        assert small_targets(page) == []


def luminance(rgb: str) -> float:
    r, g, b = (int(v) / 255 for v in re.findall(r"\d+", rgb)[:3])
    lin = [c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4 for c in (r, g, b)]
    return 0.2126 * lin[0] + 0.7152 * lin[1] + 0.0722 * lin[2]


def contrast(a: str, b: str) -> float:
    hi, lo = sorted((luminance(a), luminance(b)), reverse=True)
    return (hi + 0.05) / (lo + 0.05)


def test_answer_option_borders_have_at_least_3_to_1_contrast(link):
    with chromium_page() as page:
        start(page, link)
        page.keyboard.press("3")  # one chosen option, in the highlighted question
        options = page.evaluate("""() => [...document.querySelectorAll('#item .scale label')].map(l => {
            const s = getComputedStyle(l), behind = getComputedStyle(l.closest('fieldset')).backgroundColor;
            const white = 'rgb(255, 255, 255)';
            return [s.borderTopColor, s.backgroundColor, behind === 'rgba(0, 0, 0, 0)' ? white : behind]; })""")
        question = page.evaluate("""() => { const f = document.querySelector('fieldset[data-focused=true]');
            return [getComputedStyle(f).borderTopColor, getComputedStyle(f).backgroundColor]; }""")
    assert len(options) == 15
    for border, inside, behind in options:
        assert contrast(border, inside) >= 3 and contrast(border, behind) >= 3, (border, inside, behind)
    assert contrast(*question) >= 3, question


def test_the_progress_bar_is_named_and_its_changes_are_announced_politely(link):
    with chromium_page() as page:
        start(page, link)
        assert page.locator("#progress-text").get_attribute("aria-live") == "polite"
        bar = page.get_by_role("progressbar", name="0 of 4 responses rated")
        assert bar.get_attribute("aria-valuenow") == "0"
        answer(page, ["5", "5", "5"])
        bar = page.get_by_role("progressbar", name="1 of 4 responses rated")
        assert bar.get_attribute("aria-valuenow") == "25"
        assert bar.get_attribute("aria-valuetext") == "1 of 4 responses rated"


def test_the_highlighted_question_is_marked_current_and_holds_the_keyboard_focus(link):
    with chromium_page() as page:
        start(page, link)

        def current():
            return page.evaluate("""() => [...document.querySelectorAll('#item fieldset.question')]
                .map(f => f.getAttribute('aria-current'))""")

        def focused_question():
            return page.evaluate("""() => { const f = document.activeElement.closest('fieldset');
                return f ? f.dataset.criterion : document.activeElement.id; }""")

        assert current() == ["true", None, None]
        assert focused_question() == "item-heading"  # a new item: the screen reader starts at its heading
        answer(page, ["2"])
        assert current() == [None, "true", None]
        assert focused_question() == "relevance"
        page.locator("fieldset.question").nth(2).locator("label").nth(3).click()
        assert current() == [None, None, "true"] and focused_question() == "fluency"
        described = page.locator("fieldset.question").nth(1).locator("[role=radiogroup]")
        assert "on-topic" in page.locator(f"#{described.get_attribute('aria-describedby')}").inner_text()
