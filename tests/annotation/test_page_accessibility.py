"""axe-core in the real browser finds no serious or critical violation on the rater's pages: the Likert page
(consent, an item, review, end), the pairwise page, and a bad link's error state."""

from __future__ import annotations

import pytest

from tests.annotation.page_fixtures import answer, item_count, likert_store, pairwise_store, serving, start
from tests.axe import axe_violations, describe
from tests.browser import chromium_page


def test_axe_helper_reports_a_button_without_a_name_and_an_image_without_alt():
    with chromium_page() as page:
        page.set_content('<html lang="en"><title>t</title><main><button></button><img src="data:,"></main></html>')
        found = {v["id"]: v for v in axe_violations(page)}
    assert {"button-name", "image-alt"} <= set(found), describe(list(found.values()))
    assert found["button-name"]["targets"] == ["button"]
    assert all(v["impact"] in ("serious", "critical") for v in found.values())


def test_axe_helper_leaves_out_moderate_findings_unless_asked_for_every_impact():
    with chromium_page() as page:
        page.set_content('<html lang="en"><title>t</title><body><h1>Hi</h1><button>Go</button></body></html>')
        serious = axe_violations(page)
        everything = axe_violations(page, impacts=())
    assert serious == []
    assert "region" in {v["id"] for v in everything}, describe(everything)


@pytest.fixture
def likert_link(tmp_path):
    engine, tokens = likert_store(tmp_path)
    with serving(engine) as base:
        yield f"{base}/annotate#{tokens['rita']}"


def assert_clean(page, where: str) -> None:
    found = axe_violations(page)
    assert found == [], f"{where}:\n{describe(found)}"


@pytest.mark.parametrize("viewport", [{"width": 1280, "height": 800}, {"width": 375, "height": 667}])
def test_every_step_of_the_likert_page_has_no_serious_or_critical_violation(likert_link, viewport):
    with chromium_page() as page:
        page.set_viewport_size(viewport)
        page.goto(likert_link)
        page.wait_for_selector("#consent")
        assert_clean(page, "consent")
        page.click("#consent-accept")
        assert_clean(page, "instructions")
        page.click("#start")
        answer(page, ["2"])
        assert_clean(page, "an item, half answered")
        for _ in range(item_count(page)):
            answer(page, ["3", "3", "3"])
        page.wait_for_selector("#review")
        assert_clean(page, "review")
        page.click("#submit")
        page.wait_for_selector("#submitted")
        assert_clean(page, "end")


def test_the_pairwise_page_has_no_serious_or_critical_violation(tmp_path):
    engine, token = pairwise_store(tmp_path)
    with serving(engine) as base, chromium_page() as page:
        start(page, f"{base}/annotate#{token}")
        assert_clean(page, "a pair")
        answer(page, ["A", "B", "T"])
        assert_clean(page, "the next pair")


def test_a_bad_link_and_a_declined_consent_have_no_serious_or_critical_violation(likert_link):
    base = likert_link.split("/annotate")[0]
    with chromium_page() as page:
        page.goto(f"{base}/annotate#not-a-token")
        page.wait_for_selector("#load-error")
        assert_clean(page, "bad link")
        page.goto(likert_link)
        page.reload()
        page.click("#consent-decline")
        assert_clean(page, "declined")
