"""The best-worst scaling kind in the annotation room: what its claim hands out, its submissions, its export (the
best-worst table) and what the dashboard reads of it.

The payload shows, per tuple, the conversation and the responses in the order the placement logged
(`assignment_tuple.shown_order`), which the page labels A, B, C, ...: text only, no system name, no response or
system id, and nothing that says which tuple is a control.

A submission lists its answers under "best_worst":
    {"submission_id": "3f2c…", "comment": "optional",
     "best_worst": [{"item_id": 12, "best": {"empathy": "C", ...}, "worst": {"empathy": "A", ...},
                     "seconds": 9.5}, …]}
with exactly one entry per tuple of the assignment and, per criterion of the study, one letter as best and a
different one as worst, among the tuple's letters. They are stored as the slots those letters show
(`best_worst_choice.best_slot`, `worst_slot`), which the store's keys tie to the tuple's members; the export names
the systems.
"""
from __future__ import annotations

from dataclasses import asdict
from datetime import datetime
from typing import Any, ClassVar, NamedTuple

from sqlalchemy import Engine, distinct, exists, func, select
from sqlalchemy.orm import Session

from empeval.analysis.kinds.best_worst.schema import BEST_WORST_COLUMNS, SEPARATOR
from empeval.server.annotation import hot_sql
from empeval.server.annotation.item_browser import page_bounds, turns_of, with_comments
from empeval.server.annotation.kinds import AnnotationKind, BrowsedItem, ItemPage, register
from empeval.server.annotation.submission_schema import entries_schema, entry_item, entry_seconds, refuse_missing_units
from empeval.server.errors import BadInput
from empeval.server.store.kinds.best_worst import (
    MAX_TUPLE_SIZE,
    AssignmentTuple,
    BestWorstChoice,
    BestWorstSetup,
    TupleItem,
    TupleMember,
)
from empeval.server.store.models import Annotator, Assignment, Response, Study, System
from empeval.server.store.queries import iso_utc, study_by_name
from empeval.server.store.study_config import StudyConfig

DEFAULT_TITLE = "Pick the best and the worst response in conversations"
# Field name -> required. A field not listed is refused, so a misspelt "worse" is not silently dropped.
ENTRY_FIELDS = {"item_id": True, "best": True, "worst": True, "seconds": False}
LETTERS = "ABCDEF"[:MAX_TUPLE_SIZE]
PICKS = ("best", "worst")

# The tuples in position order, each as its members (part 0, by slot) and its context's turns (part 1, in order).
TUPLES = hot_sql.statement(
    "SELECT assignment_tuple.position, assignment_tuple.tuple_item_id, assignment_tuple.shown_order, 0 AS part, "
    "tuple_member.slot AS idx, NULL AS role, response.text FROM assignment_tuple "
    "JOIN tuple_member ON tuple_member.tuple_item_id = assignment_tuple.tuple_item_id "
    "JOIN response ON response.id = tuple_member.response_id WHERE assignment_tuple.assignment_id = :assignment "
    "UNION ALL "
    "SELECT assignment_tuple.position, assignment_tuple.tuple_item_id, assignment_tuple.shown_order, 1 AS part, "
    "turn.idx AS idx, turn.role, turn.text FROM assignment_tuple "
    "JOIN tuple_item ON tuple_item.id = assignment_tuple.tuple_item_id "
    "JOIN context ON context.id = tuple_item.context_id "
    "JOIN turn ON turn.dialogue_id = context.dialogue_id AND turn.idx <= context.n_turns "
    "WHERE assignment_tuple.assignment_id = :assignment ORDER BY 1, 4, 5")
# The tuples in position order with the order each shows its members in: what a submission is checked against.
PLACEMENTS = hot_sql.statement(
    "SELECT tuple_item_id, shown_order FROM assignment_tuple WHERE assignment_id = :assignment ORDER BY position")
INSERT_CHOICES = hot_sql.rows_statement(
    "INSERT INTO best_worst_choice (assignment_id, tuple_item_id, annotator_id, criterion, best_slot, worst_slot, "
    "submitted_at, submission_id) VALUES (:assignment, :item, :annotator, :criterion, :best, :worst, :now, "
    ":submission)",
    "INSERT INTO best_worst_choice (assignment_id, tuple_item_id, annotator_id, criterion, best_slot, worst_slot, "
    "submitted_at, submission_id) SELECT :assignment, given.item, :annotator, given.criterion, given.best, "
    "given.worst, :now, :submission FROM unnest(:item::integer[], :criterion::varchar[], :best::integer[], "
    ":worst::integer[]) AS given(item, criterion, best, worst)")


class ExpectedPicks(NamedTuple):
    """What one best-worst assignment's submission must contain: one entry per tuple (in position order), with a
    best and a worst letter per criterion among the tuple's; `shown` is each tuple's order shown (slots)."""

    item_ids: tuple[int, ...]
    criteria: tuple[str, ...]
    shown: dict[int, str]

    def letters(self, item_id: int) -> str:
        return LETTERS[:len(self.shown[item_id])]


class TupleJudgment(NamedTuple):
    picks: dict[str, tuple[int, int]]  # criterion -> (best slot, worst slot)
    seconds: float | None


def _setup(config: StudyConfig) -> BestWorstSetup:
    setup = config.setup
    assert isinstance(setup, BestWorstSetup), f"a best-worst study's setup is a BestWorstSetup, got {setup!r}"
    return setup


def validate_picks(entries: Any, expected: ExpectedPicks) -> dict[int, TupleJudgment]:
    """Check a best-worst submission's entries; BadInput saying what was wrong, naming the entry, the tuple and the
    criterion. Returns, per tuple, the slots picked (the letters read through the order the tuple was shown in)."""
    if not isinstance(entries, list):
        raise BadInput("best_worst must be a list with one entry per tuple of the assignment")
    by_item: dict[int, TupleJudgment] = {}
    taken: set[int] = set()
    for i, entry in enumerate(entries):
        where = f"best_worst[{i}]"
        item_id = entry_item(entry, where, ENTRY_FIELDS, expected.item_ids, taken, verb="answered twice")
        letters = expected.letters(item_id)
        allowed = f"one of {', '.join(letters)}"
        answers: dict[str, dict[str, str]] = {}
        for pick in PICKS:
            given = entry.get(pick)
            if not isinstance(given, dict):
                raise BadInput(f"{where}.{pick} must be an object with one letter per criterion")
            missing = [c for c in expected.criteria if c not in given]
            if missing:
                raise BadInput(f"{where}: tuple {item_id} has no {pick} response for {missing[0]!r}")
            extra = sorted(set(given) - set(expected.criteria), key=str)
            if extra:
                raise BadInput(f"{where}: unknown criterion {extra[0]!r} in {pick} for tuple {item_id}; "
                               f"expected {', '.join(expected.criteria)}")
            for criterion in expected.criteria:
                letter = given[criterion]
                # isinstance first: a number or a list is no letter, and must not reach str.index.
                if not isinstance(letter, str) or len(letter) != 1 or letter not in letters:
                    raise BadInput(f"{where}: {pick} {criterion} response {letter!r} for tuple {item_id} must be "
                                   f"{allowed}")
            answers[pick] = given
        picks: dict[str, tuple[int, int]] = {}
        shown = expected.shown[item_id]
        for criterion in expected.criteria:
            best, worst = answers["best"][criterion], answers["worst"][criterion]
            if best == worst:
                raise BadInput(f"{where}: tuple {item_id} has {best!r} as both the best and the worst on "
                               f"{criterion!r}; pick two different responses")
            picks[criterion] = (int(shown[letters.index(best)]), int(shown[letters.index(worst)]))
        by_item[item_id] = TupleJudgment(picks, entry_seconds(entry, where))
    refuse_missing_units(expected.item_ids, by_item, what="best-worst answer", units="tuples")
    return by_item


@register
class BestWorstAnnotation(AnnotationKind):
    name: ClassVar[str] = "best_worst"
    unit, units, answered = "tuple", "tuples", "answered"
    entries, counted, per_annotator = "best_worst", "choices", "tuples"
    placement_table, item_column = "assignment_tuple", "tuple_item_id"
    placement_columns = ("tuple_item_id", "position", "shown_order")  # an expiry copy shows each tuple alike
    item_table, answer_table = "tuple_item", "best_worst_choice"
    contexts_from = "assignment_tuple JOIN tuple_item ON tuple_item.id = assignment_tuple.tuple_item_id"
    contexts_assignment, context_column = "assignment_tuple.assignment_id", "tuple_item.context_id"
    export_columns = BEST_WORST_COLUMNS

    def payload(self, executor: Any, study: Any, assignment_id: int, status: str,
                expires_at: datetime | None) -> dict[str, Any]:
        """In the shape of the other kinds' payloads (assignment_id, status, expires_at, study, criteria, items),
        each item with `responses`, the texts in the order shown (the page labels them A, B, ...)."""
        config = study.config
        items: list[dict[str, Any]] = []
        by_slot: dict[str, str] = {}
        for row in hot_sql.run(executor, TUPLES, {"assignment": assignment_id}):
            position, tuple_item_id, shown_order, part, idx, role, text = tuple(row)
            if not items or items[-1]["position"] != position:
                by_slot = {}
                items.append({"item_id": tuple_item_id, "position": position, "context": [], "responses": [],
                              "_shown": shown_order})
            if part == 0:
                by_slot[str(idx)] = text
                if len(by_slot) == len(shown_order):
                    items[-1]["responses"] = [by_slot[slot] for slot in shown_order]
            else:
                items[-1]["context"].append({"role": role, "text": text})
        for item in items:
            del item["_shown"]
        return {
            "kind": self.name,
            "assignment_id": assignment_id,
            "status": status,
            "expires_at": iso_utc(expires_at),
            "study": {"name": study.name, "title": config.title or DEFAULT_TITLE, "instructions": config.instructions},
            "criteria": [asdict(c) for c in config.criteria],
            "items": items,
        }

    def expected(self, executor: Any, assignment_id: int, config: StudyConfig) -> ExpectedPicks:
        placements = [tuple(row) for row in hot_sql.run(executor, PLACEMENTS, {"assignment": assignment_id})]
        return ExpectedPicks(item_ids=tuple(item for item, _ in placements), criteria=tuple(config.criterion_keys),
                             shown={item: shown for item, shown in placements})

    def validate(self, entries: Any, expected: Any) -> dict[int, TupleJudgment]:
        return validate_picks(entries, expected)

    def store(self, executor: Any, assignment_id: int, annotator_id: int, submission_id: str, answers: Any,
              now: datetime) -> int:
        """The time on each tuple (one UPDATE) and every answer (one INSERT), each one statement for all rows."""
        timed = [{"item": item_id, "seconds": judgment.seconds}
                 for item_id, judgment in answers.items() if judgment.seconds is not None]
        if timed:
            hot_sql.run_rows(executor, hot_sql.kind_statements(self).time_on_item, {"assignment": assignment_id}, timed)
        rows = [{"item": item_id, "criterion": criterion, "best": best, "worst": worst}
                for item_id, judgment in answers.items() for criterion, (best, worst) in judgment.picks.items()]
        hot_sql.run_rows(executor, INSERT_CHOICES, {
            "assignment": assignment_id, "annotator": annotator_id, "now": hot_sql.moment(executor, now),
            "submission": submission_id}, rows)
        return len(rows)

    def entries_schema(self, expected: Any | None = None) -> dict[str, Any]:
        if expected is None:
            letter = {"enum": list(LETTERS), "description": "a response's letter as the page labels it (A is the one "
                                                            "shown first); the best and the worst differ"}
            picks: dict[str, Any] = {"type": "object", "additionalProperties": letter,
                                     "description": "one letter per criterion of the study (the assignment says "
                                                    "which)"}
            return entries_schema(ENTRY_FIELDS, {"best": picks, "worst": picks}, None, unit="tuple")
        # All tuples of a study have one size, so every entry's letters are the same.
        letters = sorted({expected.letters(item) for item in expected.item_ids}, key=len)
        allowed = {"enum": list(letters[0] if letters else LETTERS)}
        picks = {"type": "object", "required": list(expected.criteria), "additionalProperties": False,
                 "properties": {criterion: allowed for criterion in expected.criteria}}
        schema = entries_schema(ENTRY_FIELDS, {"best": picks, "worst": picks}, expected.item_ids, unit="tuple")
        # The best and the worst differ on every criterion: per criterion, one of the pairs of different letters
        # (spelt out rather than with "not", which the schema-driven generators of the drift tests cannot sample).
        schema["items"]["allOf"] = [
            {"anyOf": [{"properties": {"best": {"properties": {c: {"const": best}}},
                                       "worst": {"properties": {c: {"const": worst}}}}}
                       for best in allowed["enum"] for worst in allowed["enum"] if best != worst]}
            for c in expected.criteria]
        return schema

    def export_rows(self, engine: Engine, study: str) -> list[dict[str, Any]]:
        """Every answer of the study as a best-worst table row, ordered by assignment, position and criterion."""
        with Session(engine) as session:
            study_row = study_by_name(session, study)
            members: dict[int, dict[int, str]] = {}
            for tuple_id, slot, system in session.execute(
                    select(TupleMember.tuple_item_id, TupleMember.slot, System.name)
                    .join(TupleItem, TupleItem.id == TupleMember.tuple_item_id)
                    .join(Response, Response.id == TupleMember.response_id)
                    .join(System, System.id == Response.system_id)
                    .where(TupleItem.study_id == study_row.id)):
                members.setdefault(tuple_id, {})[slot] = system
            rows = session.execute(
                select(BestWorstChoice.assignment_id, Annotator.pseudonym, TupleItem.id, TupleItem.context_id,
                       BestWorstChoice.criterion, BestWorstChoice.best_slot, BestWorstChoice.worst_slot,
                       AssignmentTuple.shown_order, AssignmentTuple.position, TupleItem.is_control,
                       TupleItem.control_slot, TupleItem.control_target, Assignment.late)
                .join(AssignmentTuple, (AssignmentTuple.assignment_id == BestWorstChoice.assignment_id)
                      & (AssignmentTuple.tuple_item_id == BestWorstChoice.tuple_item_id))
                .join(TupleItem, TupleItem.id == BestWorstChoice.tuple_item_id)
                .join(Annotator, Annotator.id == BestWorstChoice.annotator_id)
                .join(Assignment, Assignment.id == BestWorstChoice.assignment_id)
                .where(TupleItem.study_id == study_row.id)
                .order_by(BestWorstChoice.assignment_id, AssignmentTuple.position, BestWorstChoice.criterion)
            ).all()
            table = []
            for (assignment_id, pseudonym, tuple_id, context_id, criterion, best, worst, shown_order, position,
                 is_control, control_slot, control_target, late) in rows:
                systems = members[tuple_id]
                table.append({
                    "study": study_row.name, "assignment_id": assignment_id, "annotator": pseudonym,
                    "context_id": context_id, "criterion": criterion,
                    "tuple": SEPARATOR.join(sorted(systems.values())),
                    "shown": SEPARATOR.join(systems[int(slot)] for slot in shown_order),
                    "best": systems[best], "worst": systems[worst], "position": position,
                    "is_control": bool(is_control),
                    "control_system": systems[control_slot] if is_control else None,
                    "control_target": control_target if is_control else None, "late": bool(late),
                })
            return table

    def report_meta(self, config: StudyConfig) -> dict[str, Any]:
        setup = _setup(config)
        return {"k": setup.judgments_per_tuple, "tuple_size": setup.tuple_size}

    def progress(self, session: Session, study: Study) -> dict[str, Any]:
        """Answers about a tuple (an annotator's picks in one assignment), choices (one per criterion), tuples
        answered at least once and tuples per annotator (by pseudonym): two statements. An annotator answers a
        tuple once at most (the store's key on tuple, annotator and criterion)."""
        of_study = BestWorstChoice.tuple_item_id.in_(select(TupleItem.id).where(TupleItem.study_id == study.id))
        choices, tuples = session.execute(select(func.count(), func.count(distinct(BestWorstChoice.tuple_item_id)))
                                          .where(of_study)).one()
        per_annotator = dict(session.execute(
            select(Annotator.pseudonym, func.count(distinct(BestWorstChoice.tuple_item_id)))
            .join(BestWorstChoice, BestWorstChoice.annotator_id == Annotator.id)
            .where(of_study).group_by(Annotator.pseudonym).order_by(Annotator.pseudonym)).all())
        setup = _setup(study.config)
        answers = sum(per_annotator.values())
        return {"tuples_answered": tuples, "answers": answers, "choices": choices,
                "tuples_per_annotator": per_annotator, "judgments_per_tuple": setup.judgments_per_tuple,
                "summary": f"best-worst study: {tuples} tuples of {setup.tuple_size} answered, {answers} answers of "
                           f"{choices} best-worst choices (k = {setup.judgments_per_tuple} per tuple)",
                "per_annotator": per_annotator}

    def item_page(self, session: Session, study: Study, page: int, per_page: int, rated_only: bool) -> ItemPage:
        """Tuples with their responses and systems (by slot), and each answer as the systems picked best and worst
        on each criterion."""
        shown = [TupleItem.study_id == study.id]
        if rated_only:
            shown.append(exists().where(BestWorstChoice.tuple_item_id == TupleItem.id))
        total = session.scalar(select(func.count()).select_from(TupleItem).where(*shown)) or 0
        pages = page_bounds(total, page, per_page)
        rows = session.execute(
            select(TupleItem.id, TupleItem.context_id, TupleItem.is_control, TupleItem.control_target)
            .where(*shown).order_by(TupleItem.context_id, TupleItem.id).limit(per_page)
            .offset((page - 1) * per_page)).all()
        turns = turns_of(session, {row[1] for row in rows})
        items = {row[0]: BrowsedItem(row[0], row[1], turns.get(row[1], []), [], bool(row[2]), row[3])
                 for row in rows}
        systems: dict[int, dict[int, str]] = {}
        for tuple_id, slot, system, text in session.execute(
                select(TupleMember.tuple_item_id, TupleMember.slot, System.name, Response.text)
                .join(Response, Response.id == TupleMember.response_id)
                .join(System, System.id == Response.system_id)
                .where(TupleMember.tuple_item_id.in_(items)).order_by(TupleMember.tuple_item_id, TupleMember.slot)):
            items[tuple_id].responses.append((system, text))
            systems.setdefault(tuple_id, {})[slot] = system
        answers: dict[tuple[int, int, str], dict[str, str]] = {}
        for tuple_id, assignment_id, pseudonym, criterion, best, worst in session.execute(
                select(BestWorstChoice.tuple_item_id, BestWorstChoice.assignment_id, Annotator.pseudonym,
                       BestWorstChoice.criterion, BestWorstChoice.best_slot, BestWorstChoice.worst_slot)
                .join(Annotator, Annotator.id == BestWorstChoice.annotator_id)
                .where(BestWorstChoice.tuple_item_id.in_(items))
                .order_by(BestWorstChoice.tuple_item_id, Annotator.pseudonym, BestWorstChoice.criterion)):
            answers.setdefault((tuple_id, assignment_id, pseudonym), {})[criterion] = \
                f"best {systems[tuple_id][best]}, worst {systems[tuple_id][worst]}"
        for (tuple_id, assignment_id, pseudonym), by_criterion in answers.items():
            items[tuple_id].ratings.append({"annotator": pseudonym, "assignment_id": assignment_id,
                                            "scores": by_criterion})
        return with_comments(session, ItemPage(page, pages, total, list(items.values()), rated_only))
