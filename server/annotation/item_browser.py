"""The dashboard's item browser: a study's items a page at a time, each with its conversation, the response, the
system that wrote it (for the researcher's eyes only: raters never see it), and every rating it got; for an A/B
study its pairs with both responses and every judgment. Three or four statements per page, whatever the study's
size: the page of items, their turns, their ratings (or choices), their assignments' comments."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import Engine, and_, exists, func, select
from sqlalchemy.orm import Session, aliased

from empeval.server.errors import BadInput
from empeval.server.store.models import (
    Annotator,
    Assignment,
    AssignmentPair,
    Choice,
    Context,
    PairItem,
    Rating,
    Response,
    StudyItem,
    System,
    Turn,
)
from empeval.server.store.queries import study_by_name

PER_PAGE = 20


@dataclass
class BrowsedItem:
    """One item (Likert) or pair (A/B) as the browser shows it. `ratings` holds, per annotator and assignment, her
    score on each criterion (Likert) or the system she preferred, or "tie" (A/B), and the comment she left on that
    assignment (None when none)."""

    item_id: int
    context_id: int
    context: list[dict[str, str]]
    responses: list[tuple[str, str]]  # (system, text): one for a Likert item, (A, B) for a pair
    is_control: bool
    control_target: str | None
    ratings: list[dict[str, Any]] = field(default_factory=list)


@dataclass
class ItemPage:
    page: int
    pages: int
    total: int
    items: list[BrowsedItem]
    rated_only: bool = False


def _page_bounds(total: int, page: int, per_page: int) -> int:
    """The number of pages; BadInput, saying what exists, when `page` is not one of them."""
    pages = max(1, -(-total // per_page))
    if page < 1 or page > pages:
        raise BadInput(f"page {page} does not exist: the study has {pages} page(s) of {per_page} items "
                       f"(ask for page=1 to {pages})")
    return pages


def item_page(engine: Engine, study: str, *, page: int = 1, per_page: int = PER_PAGE,
              rated_only: bool = False) -> ItemPage:
    """Page `page` (1-based) of the study's items (with `rated_only`, of those rated or judged at least once),
    ordered by context then system, so the responses to one conversation sit together. NotFound for an unknown
    study, BadInput for a page that does not exist."""
    with Session(engine) as session:
        study_row = study_by_name(session, study)
        if study_row.config.is_pairwise:
            return _pair_page(session, study_row.id, page, per_page, rated_only)
        shown = [StudyItem.study_id == study_row.id]
        if rated_only:
            shown.append(exists().where(Rating.item_id == StudyItem.id))
        total = session.scalar(select(func.count()).select_from(StudyItem).where(*shown)) or 0
        pages = _page_bounds(total, page, per_page)
        rows = session.execute(
            select(StudyItem.id, Response.context_id, System.name, Response.text, StudyItem.is_control,
                   StudyItem.control_target)
            .join(Response, Response.id == StudyItem.response_id).join(System, System.id == Response.system_id)
            .where(*shown)
            .order_by(Response.context_id, System.name, StudyItem.id).limit(per_page).offset((page - 1) * per_page)
        ).all()
        turns = _turns(session, {row.context_id for row in rows})
        items = {row.id: BrowsedItem(row.id, row.context_id, turns.get(row.context_id, []),
                                     [(row.name, row.text)], bool(row.is_control), row.control_target)
                 for row in rows}
        scores: dict[tuple[int, int, str], dict[str, int]] = {}
        for item_id, assignment_id, pseudonym, criterion, score in session.execute(
                select(Rating.item_id, Rating.assignment_id, Annotator.pseudonym, Rating.criterion, Rating.score)
                .join(Annotator, Annotator.id == Rating.annotator_id).where(Rating.item_id.in_(items))
                .order_by(Rating.item_id, Annotator.pseudonym, Rating.criterion)):
            scores.setdefault((item_id, assignment_id, pseudonym), {})[criterion] = score
        for (item_id, assignment_id, pseudonym), by_criterion in scores.items():
            items[item_id].ratings.append({"annotator": pseudonym, "assignment_id": assignment_id,
                                           "scores": by_criterion})
        return _with_comments(session, ItemPage(page, pages, total, list(items.values()), rated_only))


_RESPONSE_A, _RESPONSE_B = aliased(Response, name="response_a"), aliased(Response, name="response_b")
_SYSTEM_A, _SYSTEM_B = aliased(System, name="system_a"), aliased(System, name="system_b")


def _pair_page(session: Session, study_id: int, page: int, per_page: int, rated_only: bool) -> ItemPage:
    """A page of an A/B study's pairs: both responses with their systems, and each judgment as the system preferred
    on each criterion (the side she chose, read through the placement's `shown_left`)."""
    shown = [PairItem.study_id == study_id]
    if rated_only:
        shown.append(exists().where(Choice.pair_item_id == PairItem.id))
    total = session.scalar(select(func.count()).select_from(PairItem).where(*shown)) or 0
    pages = _page_bounds(total, page, per_page)
    rows = session.execute(
        select(PairItem.id, PairItem.context_id, _SYSTEM_A.name, _RESPONSE_A.text, _SYSTEM_B.name, _RESPONSE_B.text,
               PairItem.is_control, PairItem.control_target)
        .join(_RESPONSE_A, _RESPONSE_A.id == PairItem.response_a_id)
        .join(_SYSTEM_A, _SYSTEM_A.id == _RESPONSE_A.system_id)
        .join(_RESPONSE_B, _RESPONSE_B.id == PairItem.response_b_id)
        .join(_SYSTEM_B, _SYSTEM_B.id == _RESPONSE_B.system_id)
        .where(*shown)
        .order_by(PairItem.context_id, PairItem.id).limit(per_page).offset((page - 1) * per_page)
    ).all()
    turns = _turns(session, {row[1] for row in rows})
    items = {row[0]: BrowsedItem(row[0], row[1], turns.get(row[1], []), [(row[2], row[3]), (row[4], row[5])],
                                 bool(row[6]), row[7]) for row in rows}
    choices: dict[tuple[int, int, str], dict[str, str]] = {}
    for pair_id, assignment_id, pseudonym, criterion, side, shown_left in session.execute(
            select(Choice.pair_item_id, Choice.assignment_id, Annotator.pseudonym, Choice.criterion, Choice.choice,
                   AssignmentPair.shown_left)
            .join(AssignmentPair, and_(AssignmentPair.assignment_id == Choice.assignment_id,
                                       AssignmentPair.pair_item_id == Choice.pair_item_id))
            .join(Annotator, Annotator.id == Choice.annotator_id).where(Choice.pair_item_id.in_(items))
            .order_by(Choice.pair_item_id, Annotator.pseudonym, Choice.criterion)):
        (system_a, _), (system_b, _) = items[pair_id].responses
        left, right = (system_a, system_b) if shown_left == "a" else (system_b, system_a)
        choices.setdefault((pair_id, assignment_id, pseudonym), {})[criterion] = \
            {"left": left, "right": right}.get(side, "tie")
    for (pair_id, assignment_id, pseudonym), by_criterion in choices.items():
        items[pair_id].ratings.append({"annotator": pseudonym, "assignment_id": assignment_id, "scores": by_criterion})
    return _with_comments(session, ItemPage(page, pages, total, list(items.values()), rated_only))


def _with_comments(session: Session, page: ItemPage) -> ItemPage:
    """Each rating on the page with the comment of its assignment: one statement."""
    assignment_ids = {rating["assignment_id"] for item in page.items for rating in item.ratings}
    comments = dict(session.execute(select(Assignment.id, Assignment.comment)
                                    .where(Assignment.id.in_(assignment_ids), Assignment.comment.is_not(None),
                                           Assignment.comment != "")).all()) if assignment_ids else {}
    for item in page.items:
        for rating in item.ratings:
            rating["comment"] = comments.get(rating["assignment_id"])
    return page


def _turns(session: Session, context_ids: set[int]) -> dict[int, list[dict[str, str]]]:
    """The turns of each context (the dialogue up to the response), in order: one statement."""
    turns: dict[int, list[dict[str, str]]] = {}
    for context_id, role, text in session.execute(
            select(Context.id, Turn.role, Turn.text)
            .join(Turn, and_(Turn.dialogue_id == Context.dialogue_id, Turn.idx <= Context.n_turns))
            .where(Context.id.in_(context_ids)).order_by(Context.id, Turn.idx)):
        turns.setdefault(context_id, []).append({"role": role, "text": text})
    return turns
