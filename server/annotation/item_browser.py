"""The dashboard's item browser: a study's units (items, pairs, tuples, as its kind hands them out) a page at a
time, each with its conversation, the responses and the systems that wrote them (for the researcher's eyes only:
raters never see them), and every answer it got. The study's kind reads its page (AnnotationKind.item_page), with
the helpers below: three or four statements per page, whatever the study's size (the page of units, their turns,
their answers, their assignments' comments)."""
from __future__ import annotations

from typing import Any

from sqlalchemy import Engine, and_, select
from sqlalchemy.orm import Session

from empeval.server.annotation.kinds import ItemPage, annotation_kind
from empeval.server.errors import BadInput
from empeval.server.store.models import Assignment, Context, Turn
from empeval.server.store.queries import study_by_name

PER_PAGE = 20


def item_page(engine: Engine, study: str, *, page: int = 1, per_page: int = PER_PAGE,
              rated_only: bool = False) -> ItemPage:
    """Page `page` (1-based) of the study's units (with `rated_only`, of those answered at least once), ordered by
    context, so the responses to one conversation sit together. NotFound for an unknown study, BadInput for a page
    that does not exist."""
    with Session(engine) as session:
        study_row = study_by_name(session, study)
        return annotation_kind(study_row.config.kind).item_page(session, study_row, page, per_page, rated_only)


def page_bounds(total: int, page: int, per_page: int) -> int:
    """The number of pages; BadInput, saying what exists, when `page` is not one of them."""
    pages = max(1, -(-total // per_page))
    if page < 1 or page > pages:
        raise BadInput(f"page {page} does not exist: the study has {pages} page(s) of {per_page} items "
                       f"(ask for page=1 to {pages})")
    return pages


def with_comments(session: Session, page: ItemPage) -> ItemPage:
    """Each answer on the page with the comment of its assignment: one statement."""
    assignment_ids = {rating["assignment_id"] for item in page.items for rating in item.ratings}
    comments: dict[int, Any] = dict(session.execute(
        select(Assignment.id, Assignment.comment)
        .where(Assignment.id.in_(assignment_ids), Assignment.comment.is_not(None), Assignment.comment != "")
    ).all()) if assignment_ids else {}
    for item in page.items:
        for rating in item.ratings:
            rating["comment"] = comments.get(rating["assignment_id"])
    return page


def turns_of(session: Session, context_ids: set[int]) -> dict[int, list[dict[str, str]]]:
    """The turns of each context (the dialogue up to the response), in order: one statement."""
    turns: dict[int, list[dict[str, str]]] = {}
    for context_id, role, text in session.execute(
            select(Context.id, Turn.role, Turn.text)
            .join(Turn, and_(Turn.dialogue_id == Context.dialogue_id, Turn.idx <= Context.n_turns))
            .where(Context.id.in_(context_ids)).order_by(Context.id, Turn.idx)):
        turns.setdefault(context_id, []).append({"role": role, "text": text})
    return turns
