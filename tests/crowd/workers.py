"""A crowd worker in headless Chromium on Mephisto's real task page (only 127.0.0.1 reachable)."""
from __future__ import annotations

ONBOARDING_RIGHT = {"q1": "B", "q2": "A"}
ONBOARDING_WRONG = {"q1": "A", "q2": "B"}


def pass_or_fail_onboarding(page, answers: dict[str, str]) -> None:
    for question, label in answers.items():
        page.check(f"fieldset[data-question={question}] input[value={label}]")
    page.click("#onboarding-submit")


def wait_for_task_or_block(page, timeout_ms: float = 30000) -> str:
    """'onboarding', 'task' or 'blocked (<what the page says>)': what the page settles on. Mephisto blocks for
    several reasons (not qualified, no unit available yet...), so the page's words come with 'blocked'."""
    try:
        page.wait_for_selector("#onboarding, #consent, #blocked", timeout=timeout_ms)
    except Exception as error:
        raise AssertionError(f"the task page did not settle; it shows: {page.inner_text('body')[:500]!r}") from error
    if page.locator("#blocked").count():
        return f"blocked ({page.inner_text('#blocked')!r})"
    return "onboarding" if page.locator("#onboarding").count() else "task"


def do_unit(page, scores=lambda i: ("2", "4", "5"), comment: str = "", done_selector: str = "#submitted") -> list[int]:
    """Consent, instructions, every item by keyboard, submit; returns the item ids in the order shown."""
    page.click("#consent-accept")
    page.click("#start")
    n_items = int(page.locator("#progress-text").inner_text().split(" of ")[1].split()[0])
    shown = []
    for i in range(n_items):
        shown.append(int(page.locator("#item").get_attribute("data-item-id")))
        for key in scores(i):
            page.keyboard.press(key)
            page.keyboard.press("Enter")
    page.wait_for_selector("#review")
    if comment:
        page.fill("#comment", comment)
    page.click("#submit")
    page.wait_for_selector(done_selector, timeout=30000)
    return shown


def answer_mturk_submit_locally(page) -> None:
    """On MTurk the page ends by posting a form to turkSubmitTo/mturk/externalSubmit; answer it here, so
    nothing leaves the machine, with a page the test can wait for."""
    page.route("https://workersandbox.mturk.com/**", lambda route: route.fulfill(
        status=200, content_type="text/html", body="<p id='mturk-submitted'>submitted to MTurk</p>"))
