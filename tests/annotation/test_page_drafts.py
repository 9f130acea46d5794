"""The rater never loses work: every answer, the comment, the item on screen and the phase survive a reload (the
page keeps a draft in the browser), the ratings SQL stores after the reload are the ones chosen before it, and the
draft is gone once the submit succeeds. A draft that does not fit (hand-edited, another version's) is ignored or
trimmed to what the study offers, never shown or sent. Consent and instructions come once per rater and study, and
a link opens them again."""

from __future__ import annotations

import json

import pytest

from tests.annotation.page_fixtures import (
    CRITERIA,
    answer,
    current_item,
    drafts_in,
    item_count,
    likert_store,
    pairwise_store,
    seconds_on,
    serving,
    start,
    submitted_choices,
    submitted_scores,
)
from tests.annotation.pairwise_fixtures import AB_CRITERIA
from tests.browser import chromium_page

SIDE = {"A": "left", "B": "right", "T": "tie"}


@pytest.fixture
def likert(tmp_path):
    engine, tokens = likert_store(tmp_path, raters=("rita", "sam"))
    with serving(engine) as base:
        yield engine, base, tokens


def chosen(page) -> list[str | None]:
    """The value checked in each question of the item on screen (None where nothing is)."""
    return page.evaluate("""() => [...document.querySelectorAll('#item fieldset.question')].map(
        f => { const c = f.querySelector('input:checked'); return c ? c.value : null; })""")


def test_reload_mid_assignment_keeps_every_answer_and_sql_holds_what_was_chosen_before(likert):
    engine, base, tokens = likert
    chosen_before = {}
    with chromium_page() as page:
        start(page, f"{base}/annotate#{tokens['rita']}")
        n = item_count(page)
        assert n == 4
        for i in range(2):  # two items in full
            keys = (str(1 + i), str(5 - i), "3")
            chosen_before.update({(current_item(page), c): int(k) for c, k in zip(CRITERIA, keys, strict=True)})
            answer(page, keys)
        third = current_item(page)
        answer(page, ["4"])  # the third in part: one question of three
        chosen_before[(third, "empathy")] = 4

        page.reload()
        assert page.locator("#consent").count() == 0 and page.locator("#instructions").count() == 0
        page.wait_for_selector("#item")
        assert current_item(page) == third
        assert page.locator("#progress-text").inner_text() == "2 of 4 responses rated"
        assert chosen(page) == ["4", None, None]
        assert page.locator("fieldset.question").nth(1).get_attribute("data-focused") == "true"
        page.click("text=Back")  # the earlier items kept theirs too
        assert chosen(page) == ["2", "4", "3"]
        page.click("#next")
        assert page.locator("fieldset.question").nth(1).get_attribute("data-focused") == "true"  # first open one
        answer(page, ["5", "1"])
        chosen_before.update({(third, "relevance"): 5, (third, "fluency"): 1})
        fourth = current_item(page)
        answer(page, ["2", "2", "2"])
        chosen_before.update({(fourth, c): 2 for c in CRITERIA})
        page.wait_for_selector("#review")
        page.fill("#comment", "typed before a reload")
        page.reload()  # the review step and the comment come back as well
        page.wait_for_selector("#review")
        assert page.locator("#comment").input_value() == "typed before a reload"
        assert page.locator("#progress-text").inner_text() == "4 of 4 responses rated"
        assert any(key.startswith("empeval-draft:pilot:") for key in drafts_in(page))
        page.click("#submit")
        page.wait_for_selector("#submitted")
        assert not any(key.startswith(("empeval-draft:", "empeval-submission-")) for key in drafts_in(page))
    assert submitted_scores(engine) == chosen_before


def test_reload_keeps_every_pairwise_choice_and_sql_holds_them(tmp_path):
    engine, token = pairwise_store(tmp_path)
    picked = {}
    with serving(engine) as base, chromium_page() as page:
        start(page, f"{base}/annotate#{token}")
        for i in range(item_count(page)):
            keys = (["A", "B", "T"] * 2)[i % 3:i % 3 + 3]
            picked.update({(current_item(page), c): SIDE[k] for c, k in zip(AB_CRITERIA, keys, strict=True)})
            answer(page, keys)
            if i == 1:
                page.reload()
                page.wait_for_selector("#item")
                assert page.locator("#progress-text").inner_text() == "2 of 4 pairs compared"
        page.wait_for_selector("#review")
        page.reload()
        page.click("#submit")
        page.wait_for_selector("#submitted")
    assert submitted_choices(engine) == picked


def replace_draft_and_reload(page, text: str) -> None:
    """Put `text` in place of the page's draft and reload, with the page's own save-on-leave held back."""
    (key,) = [k for k in drafts_in(page) if k.startswith("empeval-draft:")]
    page.evaluate("""([key, text]) => {
        localStorage.setItem(key, text);
        Storage.prototype.setItem = () => {};  // the leaving page saves nothing over it
        location.reload();
    }""", [key, text])


@pytest.mark.parametrize("tamper", [
    "not json {",
    json.dumps({"phase": "rating", "index": 99, "answers": [{}, {}, {}, {}]}),
    json.dumps({"phase": "submitted", "index": 0, "answers": [{}, {}, {}, {}]}),
    json.dumps({"phase": "rating", "index": 0, "answers": [{}]}),
    json.dumps(["rating", 0]),
])
def test_a_draft_that_does_not_fit_is_ignored_and_the_page_starts_at_the_first_item(likert, tamper):
    _, base, tokens = likert
    with chromium_page() as page:
        start(page, f"{base}/annotate#{tokens['rita']}")
        first = current_item(page)
        answer(page, ["5", "5", "5"])
        replace_draft_and_reload(page, tamper)
        page.wait_for_selector("#item")
        assert current_item(page) == first
        assert chosen(page) == [None, None, None]
        assert page.locator("#progress-text").inner_text() == "0 of 4 responses rated"


def test_answers_a_draft_holds_that_the_scale_does_not_offer_are_dropped_and_never_sent(likert):
    engine, base, tokens = likert
    with chromium_page() as page:
        start(page, f"{base}/annotate#{tokens['rita']}")
        hostile = {"phase": "rating", "index": 0, "focus": 7, "comment": 42, "seconds": [-1, "x", 0, 0],
                   "answers": [{"empathy": 9, "relevance": "<img src=x onerror=alert(1)>", "fluency": 3,
                                "surprise": 2}, None, {}, {}]}
        replace_draft_and_reload(page, json.dumps(hostile))
        page.wait_for_selector("#item fieldset.question")
        assert chosen(page) == [None, None, "3"]
        assert page.locator("fieldset.question").first.get_attribute("data-focused") == "true"
        answer(page, ["1", "1", "3"])
        for _ in range(3):
            answer(page, ["2", "2", "2"])
        page.click("#submit")
        page.wait_for_selector("#submitted")
    scores = submitted_scores(engine)
    assert len(scores) == 12 and set(scores.values()) <= {1, 2, 3}


def test_rate_more_skips_consent_and_the_link_opens_it_again_without_losing_answers(likert):
    _, base, tokens = likert
    with chromium_page() as page:
        start(page, f"{base}/annotate#{tokens['rita']}")
        first_ids = set()
        for _ in range(4):
            first_ids.add(current_item(page))
            answer(page, ["3", "3", "3"])
        page.click("#submit")
        page.click("#more")
        page.wait_for_selector("#item")  # the second assignment opens at its first item
        assert page.locator("#consent").count() == 0 and page.locator("#instructions").count() == 0
        assert current_item(page) not in first_ids
        answer(page, ["4"])

        page.click("#reopen-instructions")
        assert page.locator("#consent").is_visible()
        page.click("#consent-accept")
        assert page.locator("#instructions").is_visible()
        page.click("#start")
        assert chosen(page) == ["4", None, None]  # back where she was

        page.reload()  # a reload of the second assignment does not ask again either
        page.wait_for_selector("#item")
        assert page.locator("#consent").count() == 0

        # Another rater in the same browser has not consented to anything yet.
        page.goto(f"{base}/annotate#{tokens['sam']}")
        page.reload()  # (a new fragment alone does not load the page again)
        page.wait_for_selector("#consent")


def test_time_on_an_item_before_a_reload_still_counts(likert):
    engine, base, tokens = likert
    with chromium_page() as page:
        start(page, f"{base}/annotate#{tokens['rita']}")
        first = current_item(page)
        page.wait_for_timeout(1500)  # reading the first item...
        page.reload()  # ...then a reload: the time on screen so far goes with the draft
        page.wait_for_selector("#item")
        for _ in range(item_count(page)):
            answer(page, ["3", "3", "3"])
        page.click("#submit")
        page.wait_for_selector("#submitted")
    assert seconds_on(engine)[first] >= 1.5


def test_without_browser_storage_the_page_still_works_and_submits(likert):
    engine, base, tokens = likert
    with chromium_page() as page:
        page.add_init_script("""for (const name of ["getItem", "setItem", "removeItem", "key"]) {
            Storage.prototype[name] = () => { throw new DOMException("storage is disabled", "SecurityError"); };
        }""")
        start(page, f"{base}/annotate#{tokens['rita']}")
        for _ in range(item_count(page)):
            answer(page, ["5", "4", "3"])
        page.click("#submit")
        page.wait_for_selector("#submitted")
    assert set(submitted_scores(engine).values()) == {3, 4, 5}


def test_compare_more_skips_consent_on_the_pairwise_page_too(tmp_path):
    engine, token = pairwise_store(tmp_path)
    with serving(engine) as base, chromium_page() as page:
        start(page, f"{base}/annotate#{token}")
        for _ in range(item_count(page)):
            answer(page, ["A", "A", "A"])
        page.click("#submit")
        page.click("#more")
        page.wait_for_selector("#item")
        assert page.locator("#consent").count() == 0 and page.locator("#instructions").count() == 0
        assert page.locator("#progress-text").inner_text() == "0 of 4 pairs compared"
        page.click("#reopen-instructions")
        page.click("#consent-accept")
        assert "Tie" in page.locator("#instructions").inner_text()  # the pairwise instructions


def test_declining_consent_leaves_no_draft_behind(likert):
    _, base, tokens = likert
    with chromium_page() as page:
        page.goto(f"{base}/annotate#{tokens['rita']}")
        page.click("#consent-decline")
        assert "Nothing was recorded" in page.locator("#declined").inner_text()
        assert not any(k.startswith(("empeval-draft:", "empeval-consent:")) for k in drafts_in(page))
        page.reload()
        page.wait_for_selector("#consent")


def test_declining_when_the_consent_is_opened_again_forgets_the_draft_and_the_consent(likert):
    _, base, tokens = likert
    with chromium_page() as page:
        start(page, f"{base}/annotate#{tokens['rita']}")
        answer(page, ["2"])
        assert any(k.startswith("empeval-draft:") for k in drafts_in(page))
        page.click("#reopen-instructions")
        page.click("#consent-decline")
        page.wait_for_selector("#declined")
        assert not any(k.startswith(("empeval-draft:", "empeval-consent:")) for k in drafts_in(page))
        page.reload()
        page.wait_for_selector("#consent")
