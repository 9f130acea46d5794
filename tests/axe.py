"""Accessibility checks in the real browser: axe-core (the npm package pinned in tasks/webapp's lockfile) is
loaded into a Playwright page and run against what the page shows at that moment."""
from __future__ import annotations

from pathlib import Path

import pytest

AXE_SCRIPT = Path(__file__).resolve().parents[1] / "tasks" / "webapp" / "node_modules" / "axe-core" / "axe.min.js"


def axe_violations(page, impacts=("serious", "critical")) -> list[dict]:
    """The axe-core violations on `page` whose impact is one of `impacts` (all impacts if `impacts` is empty),
    each as {"id", "impact", "help", "targets"}: the rule, its impact, what it asks for, and the CSS selectors
    of the offending elements. Runs axe's default WCAG 2.x A/AA rule set on the document as it is now."""
    if not AXE_SCRIPT.exists():
        pytest.fail(f"axe-core not found at {AXE_SCRIPT}: run `cd tasks/webapp && npm ci` (or `make ui`)")
    if not page.evaluate("() => typeof window.axe !== 'undefined'"):
        # Evaluated through the DevTools protocol rather than added as a <script>: the pages under test forbid
        # inline scripts (Content-Security-Policy: script-src 'self'), and the check must not loosen that policy.
        page.evaluate(AXE_SCRIPT.read_text(encoding="utf-8") + "\n;undefined")
        if not page.evaluate("() => typeof window.axe !== 'undefined'"):
            pytest.fail(f"{AXE_SCRIPT} did not define window.axe in the page")
    found = page.evaluate(
        """async () => {
            const result = await window.axe.run(document, { resultTypes: ["violations"] });
            return result.violations.map(v => ({
                id: v.id, impact: v.impact, help: v.help,
                targets: v.nodes.map(n => n.target.join(" ")),
            }));
        }"""
    )
    return [v for v in found if not impacts or v["impact"] in impacts]


def describe(violations: list[dict]) -> str:
    """One line per violation (rule, impact, what it asks for, the first offending elements), for assertion
    messages."""
    return "\n".join(
        f"{v['id']} ({v['impact']}): {v['help']} at {', '.join(v['targets'][:3])}" for v in violations
    )
