"""The pairwise (A/B) kind in the annotation room: what its claim hands out, its submissions, its export (the
judgment table) and what the dashboard reads of it.

The payload shows, per pair, the conversation and the two responses as the rater sees them, A on the left and B
on the right: A is the response the placement logged as shown on the left (`assignment_pair.shown_left`), B the
other one. It carries text only: no system name, no response or system id, and nothing that says which pair is a
control (a rater who could tell would judge the control, not the responses). "Tie" is offered only when the
study allows ties.

A submission lists its answers under "judgments":
    {"submission_id": "3f2c…", "comment": "optional",
     "judgments": [{"item_id": 12, "choices": {"empathy": "A", "relevance": "T", "fluency": "B"},
                    "seconds": 9.5}, …]}
with exactly one entry per pair of the assignment (`item_id` is the pair item the payload listed) and one choice
per criterion of the study: "A" (the response shown on the left), "B" (the one on the right) or "T" (a tie, only
when the study allows ties), and, when the study takes item comments, optionally the rater's `comment` on the pair
(server/annotation/item_comments.py). They are stored as the screen side, 'left' / 'right' / 'tie', in `choice`; which
system that means follows from the placement's `shown_left`, in the export, whose rows name both systems as shown
and the system preferred, so the analysis compares systems, never screen positions, except in its position-bias
check.
"""
from __future__ import annotations

from dataclasses import asdict
from datetime import datetime
from typing import Any, ClassVar, NamedTuple

from sqlalchemy import Engine, and_, distinct, exists, func, select
from sqlalchemy.orm import Session, aliased

from empeval.analysis.kinds.pairwise.schema import EXPORT_COLUMNS
from empeval.server.annotation import hot_sql
from empeval.server.annotation.decision_state import DecisionLook
from empeval.server.annotation.item_browser import page_bounds, turns_of, with_comments
from empeval.server.annotation.item_comments import COMMENT_SCHEMA, comments_by_unit, entry_comment
from empeval.server.annotation.kinds import AnnotationKind, BrowsedItem, GoldChoice, ItemPage, register
from empeval.server.annotation.submission_schema import entries_schema, entry_item, entry_seconds, refuse_missing_units
from empeval.server.errors import BadInput
from empeval.server.store.kinds.pairwise import AssignmentPair, Choice, PairItem, PairwiseSetup
from empeval.server.store.models import Annotator, Assignment, Response, Study, System
from empeval.server.store.queries import iso_utc, study_by_name
from empeval.server.store.study_config import StudyConfig

DEFAULT_TITLE = "Compare responses in conversations"
# Field name -> required. A field not listed is refused, so a misspelt "choice" is not silently dropped.
JUDGMENT_FIELDS = {"item_id": True, "choices": True, "seconds": False, "comment": False}
# What the rater answers (the labels on screen) -> what is stored (the screen side).
SIDES = {"A": "left", "B": "right", "T": "tie"}
TIE = "T"
PAIR_SEPARATOR = "|"

# The pairs in stored order, the response shown left first, with the context's turns (a row per turn).
PAIRS = hot_sql.statement(
    "SELECT assignment_pair.position, assignment_pair.pair_item_id, "
    "CASE WHEN assignment_pair.shown_left = 'a' THEN response_a.text ELSE response_b.text END, "
    "CASE WHEN assignment_pair.shown_left = 'a' THEN response_b.text ELSE response_a.text END, turn.role, turn.text "
    "FROM assignment_pair JOIN pair_item ON pair_item.id = assignment_pair.pair_item_id "
    "JOIN response AS response_a ON response_a.id = pair_item.response_a_id "
    "JOIN response AS response_b ON response_b.id = pair_item.response_b_id "
    "JOIN context ON context.id = pair_item.context_id "
    "LEFT OUTER JOIN turn ON turn.dialogue_id = context.dialogue_id AND turn.idx <= context.n_turns "
    "WHERE assignment_pair.assignment_id = :assignment ORDER BY assignment_pair.position, turn.idx")
INSERT_CHOICES = hot_sql.rows_statement(
    "INSERT INTO choice (assignment_id, pair_item_id, annotator_id, criterion, choice, submitted_at, submission_id) "
    "VALUES (:assignment, :item, :annotator, :criterion, :choice, :now, :submission)",
    "INSERT INTO choice (assignment_id, pair_item_id, annotator_id, criterion, choice, submitted_at, submission_id) "
    "SELECT :assignment, given.item, :annotator, given.criterion, given.choice, :now, :submission "
    "FROM unnest(:item::integer[], :criterion::varchar[], :choice::varchar[]) AS given(item, criterion, choice)")

_RESPONSE_A, _RESPONSE_B = aliased(Response, name="response_a"), aliased(Response, name="response_b")
_SYSTEM_A, _SYSTEM_B = aliased(System, name="system_a"), aliased(System, name="system_b")


class ExpectedChoices(NamedTuple):
    """What one pairwise assignment's submission must contain: one entry per pair item, one choice per
    criterion, a tie only when `ties`."""

    item_ids: tuple[int, ...]
    criteria: tuple[str, ...]
    ties: bool


class PairJudgment(NamedTuple):
    sides: dict[str, str]  # criterion -> 'left' | 'right' | 'tie'
    seconds: float | None
    comment: str | None = None  # the rater's comment on the pair (design.item_comments)


def _setup(config: StudyConfig) -> PairwiseSetup:
    setup = config.setup
    assert isinstance(setup, PairwiseSetup), f"a pairwise study's setup is a PairwiseSetup, got {type(setup).__name__}"
    return setup


def validate_judgments(judgments: Any, expected: ExpectedChoices) -> dict[int, PairJudgment]:
    """Check a pairwise submission's judgments; BadInput saying what was wrong, naming the entry, the item and the
    criterion."""
    if not isinstance(judgments, list):
        raise BadInput("judgments must be a list with one entry per pair of the assignment")
    allowed = "A, B or T (tie)" if expected.ties else "A or B (this study allows no tie)"
    by_item: dict[int, PairJudgment] = {}
    taken: set[int] = set()
    for i, entry in enumerate(judgments):
        where = f"judgments[{i}]"
        item_id = entry_item(entry, where, JUDGMENT_FIELDS, expected.item_ids, taken, verb="judged twice")
        choices = entry.get("choices")
        if not isinstance(choices, dict):
            raise BadInput(f"{where}.choices must be an object with one choice per criterion")
        missing = [c for c in expected.criteria if c not in choices]
        if missing:
            raise BadInput(f"{where}: item {item_id} has no choice for {missing[0]!r}")
        extra = sorted(set(choices) - set(expected.criteria), key=str)
        if extra:
            raise BadInput(f"{where}: unknown criterion {extra[0]!r} for item {item_id}; "
                           f"expected {', '.join(expected.criteria)}")
        sides: dict[str, str] = {}
        for criterion in expected.criteria:
            answer = choices[criterion]
            # isinstance first: a boolean or a number is no answer, and an unhashable value must not reach SIDES.
            if not isinstance(answer, str) or answer not in SIDES:
                raise BadInput(f"{where}: {criterion} choice {answer!r} for item {item_id} must be {allowed}")
            if answer == TIE and not expected.ties:
                raise BadInput(f"{where}: {criterion} choice 'T' (tie) for item {item_id} is not allowed in this "
                               f"study; choose A or B")
            sides[criterion] = SIDES[answer]
        by_item[item_id] = PairJudgment(sides, entry_seconds(entry, where), entry_comment(entry, where))
    refuse_missing_units(expected.item_ids, by_item, what="judgment", units="pairs")
    return by_item


@register
class PairwiseAnnotation(AnnotationKind):
    name: ClassVar[str] = "pairwise"
    unit, units, answered = "pair", "pairs", "judged"
    entries, counted, per_annotator = "judgments", "choices", "judgments"
    placement_table, item_column = "assignment_pair", "pair_item_id"
    placement_columns = ("pair_item_id", "position", "shown_left")  # an expiry copy keeps each pair on its side
    item_table, answer_table = "pair_item", "choice"
    contexts_from = "assignment_pair JOIN pair_item ON pair_item.id = assignment_pair.pair_item_id"
    contexts_assignment, context_column = "assignment_pair.assignment_id", "pair_item.context_id"
    export_columns = EXPORT_COLUMNS  # the judgment contract and the comment on the pair

    def decision_look(self) -> DecisionLook:
        """Its [decisions] are looked at by server/annotation/kinds/pairwise_decisions.py (imported at the first look,
        as Likert's)."""
        from empeval.server.annotation.kinds.pairwise_decisions import PAIRWISE_LOOK

        return PAIRWISE_LOOK

    def payload(self, executor: Any, study: Any, assignment_id: int, status: str,
                expires_at: datetime | None) -> dict[str, Any]:
        """In the Likert payload's shape where they share a meaning (assignment_id, status, expires_at, study,
        criteria, items) plus `ties`, and no scale; each item with `response_a` / `response_b`, the texts shown
        left and right."""
        config = study.config
        items: list[dict[str, Any]] = []
        for row in hot_sql.run(executor, PAIRS, {"assignment": assignment_id}):
            position, pair_item_id, left, right, role, text = tuple(row)
            if not items or items[-1]["position"] != position:
                items.append({"item_id": pair_item_id, "position": position, "context": [],
                              "response_a": left, "response_b": right})
            if role is not None:
                items[-1]["context"].append({"role": role, "text": text})
        return {
            "kind": self.name,
            "assignment_id": assignment_id,
            "status": status,
            "expires_at": iso_utc(expires_at),
            "study": {"name": study.name, "title": config.title or DEFAULT_TITLE, "instructions": config.instructions},
            "criteria": [asdict(c) for c in config.criteria],
            "ties": bool(_setup(config).ties),
            "items": items,
            **({"item_comments": True} if config.design.item_comments else {}),  # a comment box under each item
        }

    def expected(self, executor: Any, assignment_id: int, config: StudyConfig) -> ExpectedChoices:
        item_ids = hot_sql.run(executor, hot_sql.kind_statements(self).item_ids,
                               {"assignment": assignment_id}).scalars().all()
        return ExpectedChoices(item_ids=tuple(item_ids), criteria=tuple(config.criterion_keys),
                               ties=_setup(config).ties)

    def validate(self, entries: Any, expected: Any) -> dict[int, PairJudgment]:
        return validate_judgments(entries, expected)

    def store(self, executor: Any, assignment_id: int, annotator_id: int, submission_id: str, answers: Any,
              now: datetime) -> int:
        """The time on each pair (one UPDATE) and every choice (one INSERT), each one statement for all the rows
        (hot_sql.run_rows)."""
        timed = [{"item": item_id, "seconds": judgment.seconds}
                 for item_id, judgment in answers.items() if judgment.seconds is not None]
        if timed:
            hot_sql.run_rows(executor, hot_sql.kind_statements(self).time_on_item, {"assignment": assignment_id}, timed)
        rows = [{"item": item_id, "criterion": criterion, "choice": side}
                for item_id, judgment in answers.items() for criterion, side in judgment.sides.items()]
        hot_sql.run_rows(executor, INSERT_CHOICES, {
            "assignment": assignment_id, "annotator": annotator_id, "now": hot_sql.moment(executor, now),
            "submission": submission_id}, rows)
        return len(rows)

    def entries_schema(self, expected: Any | None = None) -> dict[str, Any]:
        answers = list(SIDES) if expected is None or expected.ties else [a for a in SIDES if a != TIE]
        answer = {"enum": answers, "description": "A (the response shown left), B (right) or T (tie, if the study "
                                                  "allows ties)"}
        if expected is None:
            choices: dict[str, Any] = {"type": "object", "additionalProperties": answer,
                                       "description": "one answer per criterion of the study (the assignment says "
                                                      "which)"}
            item_ids = None
        else:
            choices = {"type": "object", "required": list(expected.criteria), "additionalProperties": False,
                       "properties": {criterion: answer for criterion in expected.criteria}}
            item_ids = expected.item_ids
        return entries_schema(JUDGMENT_FIELDS, {"choices": choices, "comment": COMMENT_SCHEMA}, item_ids, unit="pair")

    def export_rows(self, engine: Engine, study: str) -> list[dict[str, Any]]:
        """Every choice of the study as a judgment-table row, ordered by assignment, position and criterion, with the
        comment the rater left on the pair (design.item_comments) and the seconds the page measured on it (for the
        report's speed rule) on each of its rows."""
        with Session(engine) as session:
            study_row = study_by_name(session, study)
            rows = session.execute(
                select(Choice.assignment_id, Annotator.pseudonym, PairItem.context_id, Choice.criterion,
                       Choice.choice, AssignmentPair.shown_left, _SYSTEM_A.name, _SYSTEM_B.name,
                       AssignmentPair.position, PairItem.is_control, PairItem.control_target, Assignment.late,
                       Choice.pair_item_id, AssignmentPair.seconds_on_item)
                .join(AssignmentPair, (AssignmentPair.assignment_id == Choice.assignment_id)
                      & (AssignmentPair.pair_item_id == Choice.pair_item_id))
                .join(PairItem, PairItem.id == Choice.pair_item_id)
                .join(_RESPONSE_A, _RESPONSE_A.id == PairItem.response_a_id)
                .join(_SYSTEM_A, _SYSTEM_A.id == _RESPONSE_A.system_id)
                .join(_RESPONSE_B, _RESPONSE_B.id == PairItem.response_b_id)
                .join(_SYSTEM_B, _SYSTEM_B.id == _RESPONSE_B.system_id)
                .join(Annotator, Annotator.id == Choice.annotator_id)
                .join(Assignment, Assignment.id == Choice.assignment_id)
                .where(PairItem.study_id == study_row.id)
                .order_by(Choice.assignment_id, AssignmentPair.position, Choice.criterion)
            ).all()
            on_pairs = comments_by_unit(session, {row[0] for row in rows})
            table = []
            for (assignment_id, pseudonym, context_id, criterion, side, shown_left, system_a, system_b, position,
                 is_control, control_target, late, pair_item_id, seconds) in rows:
                left, right = (system_a, system_b) if shown_left == "a" else (system_b, system_a)
                preferred = {"left": left, "right": right}.get(side, "tie")
                table.append({
                    "study": study_row.name, "assignment_id": assignment_id, "annotator": pseudonym,
                    "context_id": context_id, "criterion": criterion,
                    "pair": PAIR_SEPARATOR.join(sorted((system_a, system_b))),
                    "system_left": left, "system_right": right, "choice": side, "preferred": preferred,
                    "position": position, "is_control": bool(is_control),
                    "control_target": control_target if is_control else None, "late": bool(late),
                    "item_comment": on_pairs.get((assignment_id, pair_item_id)),
                    "seconds_on_item": seconds,
                })
            return table

    def qualification_choices(self, config: StudyConfig) -> tuple[GoldChoice, ...]:
        """A, B and, when the study allows ties, a tie (T), as the A/B page offers them."""
        ties = (GoldChoice("T", "Tie"),) if _setup(config).ties else ()
        return (GoldChoice("A", "A"), GoldChoice("B", "B"), *ties)

    def report_meta(self, config: StudyConfig) -> dict[str, Any]:
        setup = _setup(config)
        return {"k": setup.judgments_per_pair, "ties": setup.ties, "anchor": setup.anchor}

    def progress(self, session: Session, study: Study) -> dict[str, Any]:
        """Judgments (an annotator's answers about one pair in one assignment), choices (one per criterion), pairs
        judged at least once and judgments per annotator (by pseudonym): two statements. An annotator judges a pair
        once at most (the store's key on pair item, annotator and criterion), so her judgments are her distinct
        pairs."""
        of_study = Choice.pair_item_id.in_(select(PairItem.id).where(PairItem.study_id == study.id))
        choices, pairs = session.execute(select(func.count(), func.count(distinct(Choice.pair_item_id)))
                                         .where(of_study)).one()
        per_annotator = dict(session.execute(
            select(Annotator.pseudonym, func.count(distinct(Choice.pair_item_id)))
            .join(Choice, Choice.annotator_id == Annotator.id)
            .where(of_study).group_by(Annotator.pseudonym).order_by(Annotator.pseudonym)).all())
        k = _setup(study.config).judgments_per_pair
        judgments = sum(per_annotator.values())
        return {"judgments": judgments, "choices": choices, "pairs_judged": pairs,
                "judgments_per_annotator": per_annotator, "judgments_per_pair": k,
                "summary": f"A/B study: {pairs} (context, pair)s judged, {judgments} judgments of {choices} choices "
                           f"(k = {k} per pair)",
                "per_annotator": per_annotator}

    def item_page(self, session: Session, study: Study, page: int, per_page: int, rated_only: bool) -> ItemPage:
        """Pairs with both responses and their systems, and each judgment as the system preferred on each
        criterion (the side she chose, read through the placement's `shown_left`)."""
        shown = [PairItem.study_id == study.id]
        if rated_only:
            shown.append(exists().where(Choice.pair_item_id == PairItem.id))
        total = session.scalar(select(func.count()).select_from(PairItem).where(*shown)) or 0
        pages = page_bounds(total, page, per_page)
        rows = session.execute(
            select(PairItem.id, PairItem.context_id, _SYSTEM_A.name, _RESPONSE_A.text, _SYSTEM_B.name,
                   _RESPONSE_B.text, PairItem.is_control, PairItem.control_target)
            .join(_RESPONSE_A, _RESPONSE_A.id == PairItem.response_a_id)
            .join(_SYSTEM_A, _SYSTEM_A.id == _RESPONSE_A.system_id)
            .join(_RESPONSE_B, _RESPONSE_B.id == PairItem.response_b_id)
            .join(_SYSTEM_B, _SYSTEM_B.id == _RESPONSE_B.system_id)
            .where(*shown)
            .order_by(PairItem.context_id, PairItem.id).limit(per_page).offset((page - 1) * per_page)
        ).all()
        turns = turns_of(session, {row[1] for row in rows})
        items = {row[0]: BrowsedItem(row[0], row[1], turns.get(row[1], []), [(row[2], row[3]), (row[4], row[5])],
                                     bool(row[6]), row[7]) for row in rows}
        choices: dict[tuple[int, int, str], dict[str, str]] = {}
        for pair_id, assignment_id, pseudonym, criterion, side, shown_left in session.execute(
                select(Choice.pair_item_id, Choice.assignment_id, Annotator.pseudonym, Choice.criterion,
                       Choice.choice, AssignmentPair.shown_left)
                .join(AssignmentPair, and_(AssignmentPair.assignment_id == Choice.assignment_id,
                                           AssignmentPair.pair_item_id == Choice.pair_item_id))
                .join(Annotator, Annotator.id == Choice.annotator_id).where(Choice.pair_item_id.in_(items))
                .order_by(Choice.pair_item_id, Annotator.pseudonym, Choice.criterion)):
            (system_a, _), (system_b, _) = items[pair_id].responses
            left, right = (system_a, system_b) if shown_left == "a" else (system_b, system_a)
            choices.setdefault((pair_id, assignment_id, pseudonym), {})[criterion] = \
                {"left": left, "right": right}.get(side, "tie")
        for (pair_id, assignment_id, pseudonym), by_criterion in choices.items():
            items[pair_id].ratings.append({"annotator": pseudonym, "assignment_id": assignment_id,
                                           "scores": by_criterion})
        return with_comments(session, ItemPage(page, pages, total, list(items.values()), rated_only))
