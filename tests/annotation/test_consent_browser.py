"""Consent before claim in a real browser (issue 30, item 1): the task page shows the consent before anything is
claimed; "I would rather not" leaves nothing held and the page says so; accepting claims and goes on to the
instructions (the consent is not asked twice); the consent opened again and declined puts her assignment back in
the pool, and the page says that. For an invite link and for the Prolific link, over a real SQLite file."""
from __future__ import annotations

import pytest
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from empeval.server.annotation.annotators import invite
from empeval.server.annotation.prolific import make_study_token
from empeval.server.annotation.secrets import secret_key
from empeval.server.store.models import Assignment, SeenContext
from empeval.server.store.statuses import AssignmentStatus
from empeval.tasks.study_create import create_study
from empeval.tasks.study_file import parse_study
from empeval.wiring import make_app
from tests.annotation.conftest import add_responses, make_study
from tests.browser import chromium_page, live_server
from tests.conftest import sample_store_copy
from tests.prolific.conftest import PID, PROLIFIC_STUDY_ID, SESSION, SYSTEMS, study_file


@pytest.fixture
def served(tmp_path):
    """The app over a local study ("pilot") and a Prolific one ("crowd"): (engine, base URL, invite token)."""
    engine = sample_store_copy(f"sqlite:///{tmp_path / 'consent.db'}")
    add_responses(engine, SYSTEMS, 12)
    make_study(engine, count=4, k=1, per_assignment=4, systems=SYSTEMS, controls=[])
    create_study(engine, parse_study(study_file("crowd")))
    _, token = invite(engine, "rita", "pilot")
    with live_server(make_app(str(engine.url))) as base:
        yield engine, base, token
    engine.dispose()


def held(engine) -> tuple[int, int]:
    """(assignments held, seen rows) in the store."""
    with Session(engine) as session:
        return (session.scalar(select(func.count()).select_from(Assignment)
                               .where(Assignment.status == AssignmentStatus.ASSIGNED)),
                session.scalar(select(func.count()).select_from(SeenContext)))


def declined_text(page) -> str:
    page.wait_for_selector("#declined[data-state='done']")
    return page.locator("#declined").inner_text()


def test_declining_the_consent_of_an_invite_claims_nothing_and_says_so(served):
    engine, base, token = served
    with chromium_page() as page:
        page.goto(f"{base}/annotate#{token}")
        page.wait_for_selector("#consent-decline")
        assert held(engine) == (0, 0)  # the consent is on screen, nothing claimed
        page.click("#consent-decline")
        assert "Nothing was recorded, and no work was set aside for you" in declined_text(page)
        assert held(engine) == (0, 0)
        page.reload()  # she changes her mind: the consent again, still nothing held
        page.wait_for_selector("#consent-accept")
        assert held(engine) == (0, 0)


def test_accepting_claims_and_shows_the_instructions_once_and_declining_later_gives_it_back(served):
    engine, base, token = served
    with chromium_page() as page:
        page.goto(f"{base}/annotate#{token}")
        page.click("#consent-accept")
        page.wait_for_selector("#start")  # the task page's instructions: its consent step went straight on
        assert page.locator("#consent").count() == 0
        assert held(engine)[0] == 1
        page.click("#start")
        page.click("#reopen-instructions")  # the consent opened again, and declined this time
        page.click("#consent-decline")
        assert "went back to the study" in declined_text(page)
        assert held(engine) == (0, 0)


def test_a_prolific_participant_who_declines_holds_nothing(served):
    engine, base, _ = served
    path = f"/prolific/{make_study_token(secret_key(engine), 'crowd')}"
    with chromium_page() as page:
        page.goto(f"{base}{path}?PROLIFIC_PID={PID}&STUDY_ID={PROLIFIC_STUDY_ID}&SESSION_ID={SESSION}")
        page.wait_for_selector("#consent-decline")
        assert page.url == f"{base}/annotate" and held(engine) == (0, 0)
        page.click("#consent-decline")
        assert "no work was set aside for you" in declined_text(page)
        assert held(engine) == (0, 0)
