"""The Likert kind in the annotation room: what its claim hands out, its submissions, its export and what the
dashboard reads of it.

A submission lists its answers under "ratings":
    {"submission_id": "3f2c…", "comment": "optional",
     "ratings": [{"item_id": 12, "scores": {"empathy": 4, "relevance": 5, "fluency": 5}, "seconds": 9.5}, …]}
with exactly one entry per item of the assignment and one integer score within the study's scale per
criterion; each score is a row of `rating`. An entry may carry the rater's `comment` on the item when the study
takes item comments (server/annotation/item_comments.py). The payload the page gets carries the response and the
context's turns of each item, and the study's criteria and scale: no system name, no response or system id, nothing
that says which item is a control.
"""
from __future__ import annotations

from dataclasses import asdict
from datetime import datetime
from functools import lru_cache
from statistics import median
from typing import Any, ClassVar, NamedTuple

from sqlalchemy import Engine, and_, distinct, exists, func, select
from sqlalchemy.orm import Session

from empeval.analysis.kinds.likert.schema import EXPORT_COLUMNS  # the export's columns: defined once, in analysis
from empeval.server.annotation import hot_sql
from empeval.server.annotation.decision_state import DecisionLook
from empeval.server.annotation.item_browser import page_bounds, turns_of, with_comments
from empeval.server.annotation.item_comments import COMMENT_SCHEMA, comments_by_unit, entry_comment
from empeval.server.annotation.kinds import AnnotationKind, BrowsedItem, GoldChoice, ItemPage, register
from empeval.server.annotation.submission_schema import (
    entries_schema,
    entry_item,
    entry_seconds,
    json_integer,
    refuse_missing_units,
)
from empeval.server.errors import BadInput
from empeval.server.store.kinds.likert import AssignmentItem, LikertSetup, Rating, Scale, StudyItem
from empeval.server.store.models import Annotator, Assignment, Response, Study, System
from empeval.server.store.queries import iso_utc, study_by_name
from empeval.server.store.study_config import StudyConfig
from empeval.server.store.study_parts import Criterion

# Field name -> required. A field not listed is refused, so a misspelt "score" is not silently dropped.
ENTRY_FIELDS = {"item_id": True, "scores": True, "seconds": False, "comment": False}
DEFAULT_TITLE = "Rate responses in conversations"

# The assignment's items in stored order, each with its response and the context's turns (a row per turn).
ITEMS = hot_sql.statement(
    "SELECT assignment_item.position, study_item.id, response.text, turn.role, turn.text "
    "FROM assignment_item JOIN study_item ON study_item.id = assignment_item.item_id "
    "JOIN response ON response.id = study_item.response_id JOIN context ON context.id = response.context_id "
    "LEFT OUTER JOIN turn ON turn.dialogue_id = context.dialogue_id AND turn.idx <= context.n_turns "
    "WHERE assignment_item.assignment_id = :assignment ORDER BY assignment_item.position, turn.idx")
INSERT_RATINGS = hot_sql.rows_statement(
    "INSERT INTO rating (assignment_id, item_id, annotator_id, criterion, score, submitted_at, submission_id) "
    "VALUES (:assignment, :item, :annotator, :criterion, :score, :now, :submission)",
    "INSERT INTO rating (assignment_id, item_id, annotator_id, criterion, score, submitted_at, submission_id) "
    "SELECT :assignment, given.item, :annotator, given.criterion, given.score, :now, :submission "
    "FROM unnest(:item::integer[], :criterion::varchar[], :score::integer[]) AS given(item, criterion, score)")


class ExpectedRatings(NamedTuple):
    """What one assignment's submission must contain: one entry per item, one score per criterion, each an
    integer from `low` to `high` (the study's scale)."""

    item_ids: tuple[int, ...]
    criteria: tuple[str, ...]
    low: int
    high: int


class ItemRating(NamedTuple):
    scores: dict[str, int]
    seconds: float | None
    comment: str | None = None  # the rater's comment on the item (design.item_comments)


def validate_ratings(ratings: Any, expected: ExpectedRatings) -> dict[int, ItemRating]:
    """Check a submission's ratings (see the module docstring); BadInput saying what was wrong and where."""
    if not isinstance(ratings, list):
        raise BadInput("ratings must be a list with one entry per item of the assignment")
    criteria, low, high = expected.criteria, expected.low, expected.high
    by_item: dict[int, ItemRating] = {}
    taken: set[int] = set()
    for i, entry in enumerate(ratings):
        where = f"ratings[{i}]"
        item_id = entry_item(entry, where, ENTRY_FIELDS, expected.item_ids, taken, verb="rated twice")
        scores = entry.get("scores")
        if not isinstance(scores, dict):
            raise BadInput(f"{where}.scores must be an object with one score per criterion")
        missing = [c for c in criteria if c not in scores]
        if missing:
            raise BadInput(f"{where}: item {item_id} has no score for {missing[0]!r}")
        extra = sorted(set(scores) - set(criteria), key=str)
        if extra:
            raise BadInput(f"{where}: unknown criterion {extra[0]!r}; expected {', '.join(criteria)}")
        checked: dict[str, int] = {}
        for criterion in criteria:
            score = json_integer(scores[criterion])
            if score is None or not low <= score <= high:
                raise BadInput(f"{where}: {criterion} score {scores[criterion]!r} for item {item_id} must be an "
                               f"integer from {low} to {high}")
            checked[criterion] = score
        by_item[item_id] = ItemRating(checked, entry_seconds(entry, where), entry_comment(entry, where))
    refuse_missing_units(expected.item_ids, by_item, what="rating", units="items")
    return by_item


@lru_cache(maxsize=256)
def _criteria_json(criteria: tuple[Criterion, ...]) -> tuple[dict[str, Any], ...]:
    return tuple(asdict(c) for c in criteria)


@lru_cache(maxsize=256)
def _scale_json(scale: Scale) -> dict[str, Any]:
    return {**asdict(scale), "labels": list(scale.labels)}


def _setup(config: StudyConfig) -> LikertSetup:
    setup = config.setup
    assert isinstance(setup, LikertSetup), f"a Likert study's setup is a LikertSetup, got {type(setup).__name__}"
    return setup


def alpha_so_far(scores: list[tuple[int, str, int]], criterion: str,
                 scale: tuple[int, int] = (1, 5)) -> float | None:
    """Krippendorff's alpha (ordinal) over the (item, criterion, score) ratings of non-control items so far, computed
    by analysis/ (the same code the report uses); None while it is undefined (no pairable item, no variation)."""
    import numpy as np  # here, not at the top: pandas and the statistics load at the first progress page, so that a
    import pandas as pd  # server starts (and a rater is answered) without them

    from empeval.analysis.stats.agreement import reliability_counts
    from empeval.analysis.stats.coefficients import krippendorff_alpha

    table = pd.DataFrame([{"item": item, "score": score} for item, rated, score in scores if rated == criterion],
                         columns=["item", "score"])
    if table.empty:
        return None
    counts, values = reliability_counts(table, scale=scale)
    alpha = float(krippendorff_alpha(counts, values, level="ordinal"))
    return None if np.isnan(alpha) else alpha


@register
class LikertAnnotation(AnnotationKind):
    name: ClassVar[str] = "likert"
    unit, units, answered = "item", "items", "rated"
    entries, counted, per_annotator = "ratings", "ratings", "ratings"
    placement_table, item_column, placement_columns = "assignment_item", "item_id", ("item_id", "position")
    item_table, answer_table = "study_item", "rating"
    contexts_from = ("assignment_item JOIN study_item ON study_item.id = assignment_item.item_id "
                     "JOIN response ON response.id = study_item.response_id")
    contexts_assignment, context_column = "assignment_item.assignment_id", "response.context_id"
    export_columns = EXPORT_COLUMNS

    def decision_look(self) -> DecisionLook:
        """Its [decisions] are looked at by server/annotation/kinds/likert_decisions.py (imported at the first look:
        it needs pandas and the statistics, which a server answering raters never loads)."""
        from empeval.server.annotation.kinds.likert_decisions import LIKERT_LOOK

        return LIKERT_LOOK

    def payload(self, executor: Any, study: Any, assignment_id: int, status: str,
                expires_at: datetime | None) -> dict[str, Any]:
        config = study.config
        scale = _scale_json(_setup(config).scale)
        items: list[dict[str, Any]] = []
        for row in hot_sql.run(executor, ITEMS, {"assignment": assignment_id}):
            position, item_id, response, role, text = tuple(row)
            if not items or items[-1]["position"] != position:
                items.append({"item_id": item_id, "position": position, "response": response, "context": []})
            if role is not None:
                items[-1]["context"].append({"role": role, "text": text})
        return {
            "kind": self.name,
            "assignment_id": assignment_id,
            "status": status,
            "expires_at": iso_utc(expires_at),
            "study": {"name": study.name, "title": config.title or DEFAULT_TITLE,
                      "instructions": config.instructions},
            "criteria": [dict(c) for c in _criteria_json(config.criteria)],  # copies: the caller may change them
            "scale": {**scale, "labels": list(scale["labels"])},
            "items": items,
            **({"item_comments": True} if config.design.item_comments else {}),  # a comment box under each item
        }

    def expected(self, executor: Any, assignment_id: int, config: StudyConfig) -> ExpectedRatings:
        item_ids = hot_sql.run(executor, hot_sql.kind_statements(self).item_ids,
                               {"assignment": assignment_id}).scalars().all()
        scale = _setup(config).scale
        return ExpectedRatings(item_ids=tuple(item_ids), criteria=tuple(config.criterion_keys),
                               low=scale.min, high=scale.max)

    def validate(self, entries: Any, expected: Any) -> dict[int, ItemRating]:
        return validate_ratings(entries, expected)

    def store(self, executor: Any, assignment_id: int, annotator_id: int, submission_id: str, answers: Any,
              now: datetime) -> int:
        """The time on each item (one UPDATE) and every rating (one INSERT), each one statement for all the rows
        (hot_sql.run_rows)."""
        timed = [{"item": item_id, "seconds": rating.seconds}
                 for item_id, rating in answers.items() if rating.seconds is not None]
        if timed:  # a claimed assignment's items have no time yet: items sent without one stay so
            hot_sql.run_rows(executor, hot_sql.kind_statements(self).time_on_item, {"assignment": assignment_id}, timed)
        rows = [{"item": item_id, "criterion": criterion, "score": score}
                for item_id, rating in answers.items() for criterion, score in rating.scores.items()]
        hot_sql.run_rows(executor, INSERT_RATINGS, {
            "assignment": assignment_id, "annotator": annotator_id, "now": hot_sql.moment(executor, now),
            "submission": submission_id}, rows)
        return len(rows)

    def entries_schema(self, expected: Any | None = None) -> dict[str, Any]:
        if expected is None:
            scores: dict[str, Any] = {
                "type": "object", "additionalProperties": {"type": "integer"},
                "description": "one integer score per criterion of the study, within its scale (the assignment "
                               "says both)"}
            item_ids = None
        else:
            score = {"type": "integer", "minimum": expected.low, "maximum": expected.high}
            scores = {"type": "object", "required": list(expected.criteria), "additionalProperties": False,
                      "properties": {criterion: score for criterion in expected.criteria}}
            item_ids = expected.item_ids
        return entries_schema(ENTRY_FIELDS, {"scores": scores, "comment": COMMENT_SCHEMA}, item_ids, unit="item")

    def export_rows(self, engine: Engine, study: str) -> list[dict[str, Any]]:
        """Every rating of the study with its item, context, system, annotator pseudonym, position, times, the
        comment the annotator left on the assignment (on each of its rows) and the one she left on the item (on
        each rating of the item)."""
        with Session(engine) as session:
            study_row = study_by_name(session, study)
            rows = session.execute(
                select(Rating, StudyItem, Response.context_id, System.name, Annotator.pseudonym,
                       AssignmentItem.position, AssignmentItem.seconds_on_item, Assignment.started_at, Assignment.late,
                       Assignment.comment)
                .join(StudyItem, StudyItem.id == Rating.item_id)
                .join(Response, Response.id == StudyItem.response_id)
                .join(System, System.id == Response.system_id)
                .join(Annotator, Annotator.id == Rating.annotator_id)
                .join(Assignment, Assignment.id == Rating.assignment_id)
                .join(AssignmentItem, (AssignmentItem.assignment_id == Rating.assignment_id)
                      & (AssignmentItem.item_id == Rating.item_id))
                .where(StudyItem.study_id == study_row.id)
                .order_by(Rating.assignment_id, AssignmentItem.position, Rating.criterion)
            ).all()
            on_items = comments_by_unit(session, {rating.assignment_id for rating, *_ in rows})
            return [
                {"study": study_row.name, "item_id": item.id, "context_id": context_id, "system": system,
                 "annotator": pseudonym, "criterion": rating.criterion, "score": rating.score, "position": position,
                 "is_control": item.is_control, "control_kind": system if item.is_control else None,
                 "control_target": item.control_target, "assignment_id": rating.assignment_id,
                 "started_at": iso_utc(started_at), "submitted_at": iso_utc(rating.submitted_at),
                 "seconds_on_item": seconds, "late": late, "comment": comment or None,
                 "item_comment": on_items.get((rating.assignment_id, item.id))}
                for rating, item, context_id, system, pseudonym, position, seconds, started_at, late, comment in rows
            ]

    def qualification_choices(self, config: StudyConfig) -> tuple[GoldChoice, ...]:
        """The study's scale: each point with its label, as the rating page shows them."""
        scale = _setup(config).scale
        return tuple(GoldChoice(point, label) for point, label in zip(range(scale.min, scale.max + 1), scale.labels,
                                                                   strict=True))

    def report_meta(self, config: StudyConfig) -> dict[str, Any]:
        setup = _setup(config)
        return {"k": setup.ratings_per_response, "scale": [setup.scale.min, setup.scale.max]}

    def progress(self, session: Session, study: Study) -> dict[str, Any]:
        """Ratings, items rated, ratings per annotator (by pseudonym), the median seconds per rated item (one value
        per item an annotator rated: read on the first criterion's rating), k and alpha so far per criterion: four
        statements."""
        config = study.config
        setup = _setup(config)
        criteria = config.criterion_keys
        of_study = Rating.item_id.in_(select(StudyItem.id).where(StudyItem.study_id == study.id))
        ratings, items = session.execute(select(func.count(), func.count(distinct(Rating.item_id)))
                                         .where(of_study)).one()
        per_annotator = dict(session.execute(
            select(Annotator.pseudonym, func.count()).join(Rating, Rating.annotator_id == Annotator.id)
            .where(of_study).group_by(Annotator.pseudonym).order_by(Annotator.pseudonym)).all())
        seconds = list(session.scalars(
            select(AssignmentItem.seconds_on_item)
            .join(Rating, and_(Rating.assignment_id == AssignmentItem.assignment_id,
                               Rating.item_id == AssignmentItem.item_id))
            .where(of_study, Rating.criterion == criteria[0], AssignmentItem.seconds_on_item.is_not(None))))
        scores = [(item, criterion, score) for item, criterion, score in session.execute(
            select(Rating.item_id, Rating.criterion, Rating.score).join(StudyItem, StudyItem.id == Rating.item_id)
            .where(StudyItem.study_id == study.id, StudyItem.is_control.is_(False)))]
        scale = (setup.scale.min, setup.scale.max)
        measured = [s for s in seconds if s is not None]
        median_seconds = median(measured) if measured else None
        timed = f"{median_seconds:.1f} s" if median_seconds is not None else "n/a"
        return {"ratings": ratings, "items_rated": items, "ratings_per_annotator": per_annotator,
                "ratings_per_response": setup.ratings_per_response, "median_seconds_per_item": median_seconds,
                "alpha_ordinal": {c: alpha_so_far(scores, c, scale) for c in criteria},
                "summary": f"{items} items rated, {ratings} ratings (k = {setup.ratings_per_response} per response); "
                           f"median time per item: {timed}",
                "per_annotator": per_annotator}

    def item_page(self, session: Session, study: Study, page: int, per_page: int, rated_only: bool) -> ItemPage:
        """Items ordered by context then system, so the responses to one conversation sit together; each rating as
        the annotator's score per criterion."""
        shown = [StudyItem.study_id == study.id]
        if rated_only:
            shown.append(exists().where(Rating.item_id == StudyItem.id))
        total = session.scalar(select(func.count()).select_from(StudyItem).where(*shown)) or 0
        pages = page_bounds(total, page, per_page)
        rows = session.execute(
            select(StudyItem.id, Response.context_id, System.name, Response.text, StudyItem.is_control,
                   StudyItem.control_target)
            .join(Response, Response.id == StudyItem.response_id).join(System, System.id == Response.system_id)
            .where(*shown)
            .order_by(Response.context_id, System.name, StudyItem.id).limit(per_page).offset((page - 1) * per_page)
        ).all()
        turns = turns_of(session, {row.context_id for row in rows})
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
        return with_comments(session, ItemPage(page, pages, total, list(items.values()), rated_only))
