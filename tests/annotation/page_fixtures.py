"""Stores, servers and a rater's moves for the task page's browser tests: a Likert study whose rater can do two
assignments in a row, a pairwise study, and the key presses that answer an item."""
from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from sqlalchemy import select
from sqlalchemy.orm import Session

from empeval.server.annotation.annotators import invite
from empeval.server.store.kinds.likert import AssignmentItem, Rating
from empeval.server.store.kinds.pairwise import Choice
from empeval.server.store.models import Assignment
from empeval.wiring import make_app
from tests.annotation.conftest import add_responses, make_study
from tests.annotation.pairwise_fixtures import make_ab_study
from tests.browser import live_server
from tests.conftest import sample_store_copy

CRITERIA = ("empathy", "relevance", "fluency")


def _store(tmp_path, name):
    return sample_store_copy(f"sqlite:///{tmp_path / name}")


def likert_store(tmp_path, raters=("rita",), reply=None):
    """A Likert study of 8 contexts, one system, 4 items per assignment, each rated twice (so a rater can do two
    assignments and another still finds work), its replies `reply(context id)` where given:
    (engine, {rater: invite token})."""
    engine = _store(tmp_path, "page.db")
    if reply is None:
        add_responses(engine, ["plain"], 8)
    else:
        add_responses(engine, ["plain"], 8, text=lambda system, context_id: reply(context_id))
    make_study(engine, count=8, k=2, per_assignment=4, systems=["plain"], controls=[])
    return engine, {rater: invite(engine, rater, "pilot")[1] for rater in raters}


def pairwise_store(tmp_path):
    """A pairwise study with ties and no control pairs, 8 contexts, 4 pairs per assignment (so a rater can do two
    assignments): (engine, rita's invite token)."""
    engine = _store(tmp_path, "pairwise-page.db")
    make_ab_study(engine, count=8, k=1, per_assignment=4, control_rate=0.0)
    return engine, invite(engine, "rita", "ab")[1]


@contextmanager
def serving(engine) -> Iterator[str]:
    """The app on `engine` at a 127.0.0.1 address; the engine is disposed of afterwards."""
    try:
        with live_server(make_app(str(engine.url))) as base:
            yield base
    finally:
        engine.dispose()


def start(page, link: str) -> None:
    """Open the invite link, accept the consent and start."""
    page.goto(link)
    page.click("#consent-accept")
    page.click("#start")


def answer(page, keys) -> None:
    """Press each key (an answer to the highlighted question) followed by Enter."""
    for key in keys:
        page.keyboard.press(key)
        page.keyboard.press("Enter")


def item_count(page) -> int:
    return int(page.locator("#progress-text").inner_text().split(" of ")[1].split()[0])


def current_item(page) -> int:
    return int(page.locator("#item").get_attribute("data-item-id"))


def submitted_scores(engine) -> dict[tuple[int, str], int]:
    """{(item id, criterion): score} of the one submitted Likert assignment."""
    with Session(engine) as s:
        assignment = s.scalar(select(Assignment.id).where(Assignment.status == "submitted"))
        rows = s.execute(select(Rating.item_id, Rating.criterion, Rating.score)
                         .where(Rating.assignment_id == assignment)).all()
    return {(item, criterion): score for item, criterion, score in rows}


def submitted_choices(engine) -> dict[tuple[int, str], str]:
    """{(pair item id, criterion): 'left' | 'right' | 'tie'} of the one submitted pairwise assignment."""
    with Session(engine) as s:
        assignment = s.scalar(select(Assignment.id).where(Assignment.status == "submitted"))
        rows = s.execute(select(Choice.pair_item_id, Choice.criterion, Choice.choice)
                         .where(Choice.assignment_id == assignment)).all()
    return {(item, criterion): choice for item, criterion, choice in rows}


def seconds_on(engine) -> dict[int, float]:
    """{item id: seconds on screen (0 where none was stored)} of the one submitted Likert assignment."""
    with Session(engine) as s:
        assignment = s.scalar(select(Assignment.id).where(Assignment.status == "submitted"))
        rows = s.execute(select(AssignmentItem.item_id, AssignmentItem.seconds_on_item)
                         .where(AssignmentItem.assignment_id == assignment)).all()
    return {item: seconds or 0.0 for item, seconds in rows}


def drafts_in(page) -> dict[str, str]:
    """What the page keeps in localStorage under empeval's keys."""
    return page.evaluate("""() => Object.fromEntries(Object.keys(localStorage)
        .filter(k => k.startsWith("empeval")).map(k => [k, localStorage.getItem(k)]))""")
