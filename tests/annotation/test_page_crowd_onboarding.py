"""A crowd worker who fails the qualification test, on Mephisto's real task page (mock provider, headless
Chromium): the page says the task is not available to her and what to do (return it), with Mephisto's own reason
underneath, instead of Mephisto's stock sentence alone. axe-core finds no serious or critical violation on the
qualification test or on that message."""
from __future__ import annotations

import pytest

from empeval.tasks.crowd import jobs
from tests.axe import axe_violations, describe
from tests.browser import chromium_page
from tests.crowd.conftest import (  # noqa: F401 (fixtures)
    crowd_dir,
    crowd_python,
    crowd_store,
    empeval,
    free_port,
    leftovers,
)
from tests.crowd.workers import ONBOARDING_WRONG, pass_or_fail_onboarding, wait_for_task_or_block

pytestmark = pytest.mark.slow


def test_a_worker_who_fails_onboarding_is_told_why_and_to_return_the_task(
    crowd_python, crowd_dir, crowd_store,  # noqa: F811 (the crowd suite's fixtures, imported above)
):
    port = free_port()
    result = empeval("crowd", "launch", "pilot", "--provider", "mock", "--units", "1", "--port", str(port),
                     "--timeout", "120")
    assert result.exit_code == 0, result.output
    job_dir = next(crowd_dir.glob("pilot/*/"))
    try:
        with chromium_page() as page:
            page.goto(f"http://127.0.0.1:{port}/?worker_id=careless&assignment_id=x1")
            assert wait_for_task_or_block(page) == "onboarding"
            onboarding_found = axe_violations(page)
            pass_or_fail_onboarding(page, ONBOARDING_WRONG)
            page.wait_for_selector("#blocked", timeout=30000)
            blocked_found = axe_violations(page)
            blocked = page.locator("#blocked")
            assert blocked.get_attribute("data-reason") == "null_agent_id"
            assert page.locator("#blocked h1").inner_text() == "This task is not available to you"
            assert "Please return the task" in blocked.inner_text()
            assert page.locator("#blocked .hint").inner_text().strip() != ""  # Mephisto's reason, kept
            assert onboarding_found == [], describe(onboarding_found)
            assert blocked_found == [], describe(blocked_found)
    finally:
        if jobs.read_status(job_dir).live:
            jobs.stop(job_dir, wait=30)
    assert leftovers() == []
