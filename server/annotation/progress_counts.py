"""A study's progress counted in SQL, for the dashboard and /api/studies/<name>/progress: ratings (or A/B
judgments) in total and per annotator, items (pairs) covered, and the times measured, without building the
export."""
from __future__ import annotations

from typing import Any

from sqlalchemy import and_, distinct, func, select
from sqlalchemy.orm import Session

from empeval.server.store.models import Annotator, AssignmentItem, Choice, PairItem, Rating, StudyItem


def likert_counts(session: Session, study_id: int, first_criterion: str) -> dict[str, Any]:
    """Ratings, items rated, ratings per annotator (by pseudonym) and the seconds measured per rated item (one
    value per item an annotator rated: read on the first criterion's rating): three statements."""
    of_study = Rating.item_id.in_(select(StudyItem.id).where(StudyItem.study_id == study_id))
    ratings, items = session.execute(select(func.count(), func.count(distinct(Rating.item_id))).where(of_study)).one()
    per_annotator = dict(session.execute(
        select(Annotator.pseudonym, func.count()).join(Rating, Rating.annotator_id == Annotator.id)
        .where(of_study).group_by(Annotator.pseudonym).order_by(Annotator.pseudonym)).all())
    seconds = list(session.scalars(
        select(AssignmentItem.seconds_on_item)
        .join(Rating, and_(Rating.assignment_id == AssignmentItem.assignment_id,
                           Rating.item_id == AssignmentItem.item_id))
        .where(of_study, Rating.criterion == first_criterion, AssignmentItem.seconds_on_item.is_not(None))))
    return {"ratings": ratings, "items_rated": items, "ratings_per_annotator": per_annotator, "seconds": seconds}


def likert_scores(session: Session, study_id: int) -> list[tuple[int, str, int]]:
    """(item, criterion, score) of every rating of a real (non-control) item: what alpha so far is computed on."""
    return [tuple(row) for row in session.execute(  # type: ignore[misc]
        select(Rating.item_id, Rating.criterion, Rating.score).join(StudyItem, StudyItem.id == Rating.item_id)
        .where(StudyItem.study_id == study_id, StudyItem.is_control.is_(False))).all()]


def pairwise_counts(session: Session, study_id: int) -> dict[str, Any]:
    """Judgments (an annotator's answers about one pair in one assignment), choices (one per criterion), pairs
    judged at least once and judgments per annotator (by pseudonym): two statements. An annotator judges a pair once
    at most (the store's key on pair item, annotator and criterion), so her judgments are her distinct pairs."""
    of_study = Choice.pair_item_id.in_(select(PairItem.id).where(PairItem.study_id == study_id))
    choices, pairs = session.execute(select(func.count(), func.count(distinct(Choice.pair_item_id)))
                                     .where(of_study)).one()
    per_annotator = dict(session.execute(
        select(Annotator.pseudonym, func.count(distinct(Choice.pair_item_id)))
        .join(Choice, Choice.annotator_id == Annotator.id)
        .where(of_study).group_by(Annotator.pseudonym).order_by(Annotator.pseudonym)).all())
    return {"judgments": sum(per_annotator.values()), "choices": choices, "pairs_judged": pairs,
            "judgments_per_annotator": per_annotator}
