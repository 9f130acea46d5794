"""The dashboard's item browser: a study's units (items, pairs, tuples, as its kind hands them out) a page at a
time, each with its conversation, the responses and the systems that wrote them (for the researcher's eyes only:
raters never see them), and every answer it got. The study's kind reads its page (AnnotationKind.item_page), with
the helpers below: three or four statements per page, whatever the study's size (the page of units, their turns,
their answers, their assignments' comments)."""
from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import Engine, and_, case, distinct, func, literal, or_, select
from sqlalchemy.orm import Session

from empeval.server.annotation.export import rows_to_csv
from empeval.server.annotation.kinds import BrowsedItem, ItemPage, annotation_kind
from empeval.server.errors import BadInput
from empeval.server.store.item_comment_tables import ItemComment
from empeval.server.store.kinds.likert import LikertSetup, Rating, StudyItem
from empeval.server.store.models import Annotator, Assignment, Context, Response, Study, System, Turn
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
    """Each answer on the page with the comment of its assignment (``comment``) and the rater's comment on that very
    item (``item_comment``, studies with design.item_comments: a Likert item, an A/B pair; None when she left none):
    two statements."""
    assignment_ids = {rating["assignment_id"] for item in page.items for rating in item.ratings}
    comments: dict[int, Any] = dict(session.execute(
        select(Assignment.id, Assignment.comment)
        .where(Assignment.id.in_(assignment_ids), Assignment.comment.is_not(None), Assignment.comment != "")
    ).all()) if assignment_ids else {}
    item_ids = {item.item_id for item in page.items if item.ratings}
    # item_comment.item_id names the kind's unit (study_item or pair_item), as the page's items do.
    on_item = {(a, i): text for a, i, text in session.execute(
        select(ItemComment.assignment_id, ItemComment.item_id, ItemComment.comment)
        .where(ItemComment.item_id.in_(item_ids), ItemComment.assignment_id.in_(assignment_ids)))} if item_ids else {}
    for item in page.items:
        for rating in item.ratings:
            rating["comment"] = comments.get(rating["assignment_id"])
            rating["item_comment"] = on_item.get((rating["assignment_id"], item.item_id))
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


# The filtered, sorted browser (issue 30 #8). Filters and sorts are for Likert studies (a score per criterion on a
# scale): the other kinds page their units as above. Everything is chosen in SQL (one statement for the count, one
# for the page's ids); Python only lays out the rows it shows.

MAX_SEARCH = 200  # characters of the free-text search
MAX_PER_PAGE = 200
SORT_KEYS = ("context", "system", "mean", "ratings", "sd")
ORDERS = ("asc", "desc")
FLAGGED = ("all", "only")


@dataclass(frozen=True)
class BrowserQuery:
    """What the researcher asked the item browser for, already checked (parse_query)."""

    q: str | None = None  # case-insensitive substring of the context's turns, the response, or a rater's comment on
    # the assignment or on the item (ASCII letters fold on SQLite; every letter on PostgreSQL)
    system: str | None = None  # the system's real name
    rater: str | None = None  # a pseudonym: items she rated
    criterion: str | None = None  # the criterion the mean, SD, count and score range are over (None: all)
    min_score: float | None = None  # the item's mean score at least this
    max_score: float | None = None  # ... and at most this
    flagged: str = "all"  # "only": items rated by a rater the report's quality rules flag
    sort: str = "context"
    order: str = "asc"
    page: int = 1
    per_page: int = PER_PAGE
    rated_only: bool = False

    def filtering(self) -> bool:
        """Whether anything beyond page and rated is asked for."""
        return self != BrowserQuery(page=self.page, per_page=self.per_page, rated_only=self.rated_only)

    def arguments(self) -> dict[str, str]:
        """The query as URL arguments, without defaults and without the page (the pager and the CSV link add theirs)."""
        default = BrowserQuery()
        named = {"q": self.q, "system": self.system, "rater": self.rater, "criterion": self.criterion,
                 "min": self.min_score, "max": self.max_score, "flagged": self.flagged, "sort": self.sort,
                 "order": self.order, "per_page": self.per_page, "rated": "only" if self.rated_only else "all"}
        defaults = {"q": None, "system": None, "rater": None, "criterion": None, "min": None, "max": None,
                    "flagged": default.flagged, "sort": default.sort, "order": default.order,
                    "per_page": default.per_page, "rated": "all"}
        return {k: _plain(v) for k, v in named.items() if v != defaults[k]}

    def describe(self) -> str:
        """The filters in words, for the CSV's first comment line ("all items" when none)."""
        words = [f"{k}={v}" for k, v in self.arguments().items() if k != "per_page"]
        return "; ".join(words) if words else "all items, by context"


def _plain(value: object) -> str:
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def parse_query(args: Mapping[str, str], *, systems: Sequence[str], criteria: Sequence[str],
                scale: tuple[int, int] | None) -> BrowserQuery:
    """The browser's URL arguments checked one by one: BadInput naming the argument, what it got and what is allowed.
    `scale` is the study's (min, max), None for a kind without scores (which then takes page and rated only)."""
    known = {"q", "system", "rater", "criterion", "min", "max", "flagged", "sort", "order", "page", "per_page",
             "rated"}
    unknown = sorted(set(args) - known)
    if unknown:
        raise BadInput(f"unknown argument {_shown(unknown[0])} for the item browser: it takes "
                       f"{', '.join(sorted(known))}")
    page = _whole(args, "page", 1, 0, 10**9)  # page 0 (and one past the last) is told which pages exist
    per_page = _whole(args, "per_page", PER_PAGE, 1, MAX_PER_PAGE)
    rated = args.get("rated", "all")
    if rated not in ("all", "only"):
        raise BadInput(f"rated must be all or only (the items rated at least once), got {_shown(rated)}")
    query = BrowserQuery(page=page, per_page=per_page, rated_only=rated == "only")
    if scale is None:
        extra = sorted(set(args) - {"page", "per_page", "rated"})
        if extra:
            raise BadInput(f"{extra[0]}: the item browser's filters and sorts are for Likert studies (scores on a "
                           f"scale); this study's units take page, per_page and rated only")
        return query
    q = args.get("q", "").strip() or None
    if q is not None and len(q) > MAX_SEARCH:
        raise BadInput(f"q (the search) may be at most {MAX_SEARCH} characters, got {len(q)}")
    if q is not None and "\x00" in q:
        raise BadInput("q (the search) must not contain a NUL character")
    system = _one_of(args, "system", systems, "the study's systems")
    criterion = _one_of(args, "criterion", criteria, "the study's criteria")
    rater = args.get("rater", "").strip() or None
    if rater is not None and (len(rater) > 64 or "\x00" in rater):
        raise BadInput(f"rater must be a rater's pseudonym (at most 64 characters), got {_shown(rater)}")
    low, high = scale
    min_score = _score(args, "min", low, high)
    max_score = _score(args, "max", low, high)
    if min_score is not None and max_score is not None and min_score > max_score:
        raise BadInput(f"min ({_plain(min_score)}) must not be above max ({_plain(max_score)})")
    flagged = args.get("flagged", "all")
    if flagged not in FLAGGED:
        raise BadInput(f"flagged must be all or only (the items rated by a rater the report's quality rules flag), "
                       f"got {_shown(flagged)}")
    sort = args.get("sort", "context")
    if sort not in SORT_KEYS:
        raise BadInput(f"sort must be one of {', '.join(SORT_KEYS)} (ratings: their number; sd: the raters' "
                       f"disagreement), got {_shown(sort)}")
    order = args.get("order", "asc")
    if order not in ORDERS:
        raise BadInput(f"order must be asc or desc, got {_shown(order)}")
    return BrowserQuery(q, system, rater, criterion, min_score, max_score, flagged, sort, order, page, per_page,
                        rated == "only")


def _shown(text: str) -> str:
    """A refused value as the message quotes it: at most 40 characters."""
    return repr(text[:40] + "..." if len(text) > 40 else text)


def _whole(args: Mapping[str, str], name: str, default: int, low: int, high: int) -> int:
    text = args.get(name)
    if text is None:
        return default
    if not text.isdigit() or len(text) > 10 or not low <= int(text) <= high:
        allowed = "from 1" if name == "page" else f"from {low} to {high}"
        raise BadInput(f"{name} must be a whole number {allowed}, got {_shown(text)}")
    return int(text)


def _one_of(args: Mapping[str, str], name: str, allowed: Sequence[str], what: str) -> str | None:
    text = args.get(name, "")
    if not text:
        return None
    if text not in allowed:
        raise BadInput(f"{name} must be one of {what}: {', '.join(allowed)}; got {_shown(text)}")
    return text


def _score(args: Mapping[str, str], name: str, low: int, high: int) -> float | None:
    text = args.get(name, "").strip()
    if not text:
        return None
    try:
        value = float(text) if len(text) <= 20 else None
    except ValueError:
        value = None
    if value is None or not low <= value <= high:  # NaN and inf fail the comparison
        raise BadInput(f"{name} must be a number on the study's scale, {low} to {high}, got {_shown(text)}")
    return value


def browsed_systems(session: Session, study: Study) -> tuple[str, ...]:
    """The systems (controls' included) whose responses a Likert study's items hold, by name: what the system
    filter takes. Empty for another kind."""
    if not isinstance(study.config.setup, LikertSetup):
        return ()
    return tuple(session.scalars(
        select(System.name).join(Response, Response.system_id == System.id)
        .join(StudyItem, StudyItem.response_id == Response.id).where(StudyItem.study_id == study.id)
        .group_by(System.name).order_by(System.name)))


@dataclass
class BrowserPage:
    """One page of the filtered view: the kind's ItemPage (its items in the view's order) with each item's mean
    score, number of raters and SD (over the query's criterion, or every criterion), and the query itself."""

    items: ItemPage
    query: BrowserQuery
    stats: dict[int, tuple[float | None, int, float | None]] = field(default_factory=dict)


def _likert_view(session: Session, study: Study, query: BrowserQuery, flagged: set[str] | None):
    """The SELECT of the view's item ids with their mean, count and variance, filtered and ordered (not paged)."""
    on_criterion = [Rating.criterion == query.criterion] if query.criterion else []
    score = Rating.score * 1.0
    n = func.count(Rating.id)
    mean = func.avg(score)
    variance = case((n > 1, (func.sum(score * score) - func.sum(score) * func.sum(score) / n) / (n - 1)),
                    else_=None)
    raters = func.count(distinct(Rating.assignment_id))
    aggregate = (select(Rating.item_id.label("item_id"), mean.label("mean"), raters.label("raters"),
                        variance.label("variance"))
                 .join(StudyItem, StudyItem.id == Rating.item_id)
                 .where(StudyItem.study_id == study.id, *on_criterion).group_by(Rating.item_id).subquery())
    conditions: list[Any] = [StudyItem.study_id == study.id]
    if query.rated_only:
        conditions.append(aggregate.c.item_id.is_not(None))
    if query.system is not None:
        conditions.append(System.name == query.system)
    # Each filter on the ratings or the texts is one uncorrelated IN (a set computed once), not an EXISTS per item.
    rated_by = select(Rating.item_id).join(Annotator, Annotator.id == Rating.annotator_id)
    if query.rater is not None:
        conditions.append(StudyItem.id.in_(rated_by.where(Annotator.pseudonym == query.rater)))
    if query.flagged == "only":
        conditions.append(StudyItem.id.in_(rated_by.where(Annotator.pseudonym.in_(sorted(flagged or ())))))
    if query.min_score is not None:
        conditions.append(aggregate.c.mean >= query.min_score)
    if query.max_score is not None:
        conditions.append(aggregate.c.mean <= query.max_score)
    if query.q is not None:
        # The search's own % and _ are escaped (matched as written), and both sides are lowered by the database's
        # lower(), so that its case folding (ASCII only on SQLite) is the same on each.
        escaped = query.q.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
        pattern = func.lower(literal("%" + escaped + "%"))

        def found(text: Any) -> Any:
            return func.lower(text).like(pattern, escape="\\")

        contexts = (select(Response.context_id).join(StudyItem, StudyItem.response_id == Response.id)
                    .where(StudyItem.study_id == study.id))
        in_turns = (select(Context.id)
                    .join(Turn, and_(Turn.dialogue_id == Context.dialogue_id, Turn.idx <= Context.n_turns))
                    .where(Context.id.in_(contexts), found(Turn.text)))
        in_comments = (select(Rating.item_id).join(Assignment, Assignment.id == Rating.assignment_id)
                       .where(Assignment.study_id == study.id, found(Assignment.comment)))
        in_item_comments = (select(ItemComment.item_id).join(Assignment, Assignment.id == ItemComment.assignment_id)
                            .where(Assignment.study_id == study.id, found(ItemComment.comment)))
        conditions.append(or_(found(Response.text), Response.context_id.in_(in_turns), StudyItem.id.in_(in_comments),
                              StudyItem.id.in_(in_item_comments)))
    keys: list[Any] = {"context": [Response.context_id, System.name],
            "system": [System.name, Response.context_id],
            "mean": [aggregate.c.mean], "ratings": [func.coalesce(aggregate.c.raters, 0)],
            "sd": [aggregate.c.variance]}[query.sort]  # type: ignore[assignment]
    nulls_last = [case((key.is_(None), 1), else_=0) for key in keys if query.sort in ("mean", "sd")]
    ordered = [key.desc() if query.order == "desc" else key.asc() for key in keys]
    return (select(StudyItem.id, aggregate.c.mean, func.coalesce(aggregate.c.raters, 0), aggregate.c.variance)
            .join(Response, Response.id == StudyItem.response_id).join(System, System.id == Response.system_id)
            .outerjoin(aggregate, aggregate.c.item_id == StudyItem.id)
            .where(*conditions).order_by(*nulls_last, *ordered, StudyItem.id))


def browse(engine: Engine, study: str, query: BrowserQuery, *,
           flagged: Callable[[], set[str] | None] | None = None) -> BrowserPage:
    """The query's page of the study's units. A Likert study is filtered and sorted in SQL (a count and the page's
    ids, then the page's items); another kind pages as item_page does. `flagged` gives the flagged pseudonyms
    (computed only when the query asks for them); None, or a kind without quality rules, refuses flagged=only."""
    with Session(engine) as session:
        study_row = study_by_name(session, study)
        if not isinstance(study_row.config.setup, LikertSetup):
            kind = annotation_kind(study_row.config.kind)
            return BrowserPage(kind.item_page(session, study_row, query.page, query.per_page, query.rated_only),
                               query)
        names = _flagged_names(query, flagged)
        view = _likert_view(session, study_row, query, names).subquery()
        total = session.scalar(select(func.count()).select_from(view)) or 0
        pages = page_bounds(total, query.page, query.per_page)
        rows = session.execute(select(view).limit(query.per_page).offset((query.page - 1) * query.per_page)).all()
        items = likert_items(session, [row[0] for row in rows])
        page = ItemPage(query.page, pages, total, items, query.rated_only)
        return BrowserPage(page, query, {row[0]: _stats(row) for row in rows})


def _flagged_names(query: BrowserQuery, flagged: Callable[[], set[str] | None] | None) -> set[str] | None:
    if query.flagged != "only":
        return None
    names = flagged() if flagged is not None else None
    if names is None:
        raise BadInput("flagged=only needs the report's quality rules, which this study's kind does not have")
    return names


def _stats(row: Any) -> tuple[float | None, int, float | None]:
    _, mean, raters, variance = row
    sd = math.sqrt(max(0.0, float(variance))) if variance is not None else None
    return (float(mean) if mean is not None else None, int(raters), sd)


def likert_items(session: Session, item_ids: list[int]) -> list[BrowsedItem]:
    """The Likert items `item_ids`, in that order, as the browser shows them (conversation, response, system, each
    rating with its assignment's comment and her comment on the item): five statements."""
    rows = session.execute(
        select(StudyItem.id, Response.context_id, System.name, Response.text, StudyItem.is_control,
               StudyItem.control_target)
        .join(Response, Response.id == StudyItem.response_id).join(System, System.id == Response.system_id)
        .where(StudyItem.id.in_(item_ids))).all() if item_ids else []
    turns = turns_of(session, {row.context_id for row in rows}) if rows else {}
    found = {row.id: BrowsedItem(row.id, row.context_id, turns.get(row.context_id, []), [(row.name, row.text)],
                                 bool(row.is_control), row.control_target) for row in rows}
    scores: dict[tuple[int, int, str], dict[str, int]] = {}
    if found:
        for item_id, assignment_id, pseudonym, criterion, score in session.execute(
                select(Rating.item_id, Rating.assignment_id, Annotator.pseudonym, Rating.criterion, Rating.score)
                .join(Annotator, Annotator.id == Rating.annotator_id).where(Rating.item_id.in_(found))
                .order_by(Rating.item_id, Annotator.pseudonym, Rating.criterion)):
            scores.setdefault((item_id, assignment_id, pseudonym), {})[criterion] = score
    for (item_id, assignment_id, pseudonym), by_criterion in scores.items():
        found[item_id].ratings.append({"annotator": pseudonym, "assignment_id": assignment_id, "scores": by_criterion})
    ordered = [found[i] for i in item_ids if i in found]
    with_comments(session, ItemPage(1, 1, len(ordered), ordered))
    return ordered


CSV_COLUMNS = ("item_id", "context_id", "system", "is_control", "raters", "mean", "sd", "annotator",
               "assignment_id")
CHUNK = 500  # item ids per statement when the CSV reads the whole view


def view_csv(engine: Engine, study: str, query: BrowserQuery, *,
             flagged: Callable[[], set[str] | None] | None = None) -> str:
    """Every item of the query's view (all its pages, in its order) as CSV: one row per item and rater (an item not
    rated yet, one row without a rater), the item's mean, raters and SD as the page shows them, her score on each
    criterion, her comment on the assignment and on the item, the response and the conversation. The first line is
    a comment naming the study and the filters. Cells are written as the export writes them (formula cells quoted)."""
    with Session(engine) as session:
        study_row = study_by_name(session, study)
        if not isinstance(study_row.config.setup, LikertSetup):
            raise BadInput(f"the item browser's CSV is for Likert studies; {study} is a {study_row.config.kind} "
                           f"study: its export has every answer (/api/studies/{study}/export)")
        criteria = list(study_row.config.criterion_keys)
        names = _flagged_names(query, flagged)
        view = session.execute(_likert_view(session, study_row, query, names)).all()
        rows: list[dict[str, Any]] = []
        for start in range(0, len(view), CHUNK):
            chunk = view[start:start + CHUNK]
            stats = {row[0]: _stats(row) for row in chunk}
            for item in likert_items(session, [row[0] for row in chunk]):
                mean, raters, sd = stats[item.item_id]
                base = {"item_id": item.item_id, "context_id": item.context_id, "system": item.responses[0][0],
                        "is_control": item.is_control, "raters": raters,
                        "mean": None if mean is None else round(mean, 4), "sd": None if sd is None else round(sd, 4),
                        "response": item.responses[0][1],
                        "context": "\n".join(f"{t['role']}: {t['text']}" for t in item.context)}
                for rating in item.ratings or [{}]:
                    rows.append({**base, "annotator": rating.get("annotator"),
                                 "assignment_id": rating.get("assignment_id"),
                                 **{c: rating.get("scores", {}).get(c) for c in criteria},
                                 "comment": rating.get("comment"), "item_comment": rating.get("item_comment")})
    columns = [*CSV_COLUMNS, *criteria, "comment", "item_comment", "response", "context"]
    header = f"# item browser of study {study}: {query.describe()}; {len(view)} items, {len(rows)} rows\n"
    return header + rows_to_csv(rows, columns)
