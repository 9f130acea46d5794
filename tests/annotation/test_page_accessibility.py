"""axe-core in the real browser finds no serious or critical violation on the rater's pages: the Likert page
(consent, an item, review, end), the pairwise page, and a bad link's error state."""

from __future__ import annotations

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
