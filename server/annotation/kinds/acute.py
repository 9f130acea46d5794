"""The ACUTE-Eval kind in the annotation room: what its claim hands out, its submissions, its export (the A/B judgment
table's columns plus its own) and what the dashboard reads of it.

The payload shows, per pair of conversations, the conversation on the left and the one on the right as the
placement's `shown_left` says, each with its prompt (the emotion and situation the speaker talked about) and its
turns as text, the speaker's and the listener's: never a system's name, a conversation's or session's id, or which
pair is a control.

A submission lists its answers under "comparisons":
    {"submission_id": "3f2c…", "comment": "optional",
     "comparisons": [{"item_id": 12, "choices": {"empathy": "left", "talk_to": "right"},
                      "justifications": {"empathy": "It asked how she felt.", "talk_to": "It listened more."},
                      "seconds": 41.5}, …]}
with exactly one entry per pair of the assignment and, per question of the study, a side ("left" or "right": the
listener picked; ACUTE-Eval has no tie) and a justification: text the store can hold, at least the study's
`min_justification` characters once blanks (spaces, tabs, line breaks) around it are trimmed, at most its
`max_justification` as sent; it is stored trimmed. The side is stored as sent, in `acute_choice`; which system
that means follows from the placement's `shown_left`, in the export.
"""
from __future__ import annotations

from dataclasses import asdict
from datetime import datetime
from typing import Any, ClassVar, NamedTuple

from sqlalchemy import Engine, and_, distinct, exists, func, select
from sqlalchemy.orm import Session, aliased

from empeval.analysis.kinds.acute.schema import ACUTE_COLUMNS
from empeval.server.annotation import hot_sql
from empeval.server.annotation.item_browser import page_bounds, with_comments
from empeval.server.annotation.kinds import AnnotationKind, BrowsedItem, GoldChoice, ItemPage, register
from empeval.server.annotation.submission_schema import (
    STORABLE_TEXT_PATTERN,
    STORABLE_TEXT_RULE,
    entries_schema,
    entry_item,
    entry_seconds,
    refuse_missing_units,
)
from empeval.server.errors import BadInput
from empeval.server.store.kinds.acute import (
    JUSTIFICATION_LIMIT,
    AcuteChoice,
    AcutePair,
    AcuteSetup,
    AssignmentAcutePair,
)
from empeval.server.store.kinds.chat import AssignmentConversation, ChatConversation, ChatTurn
from empeval.server.store.models import Annotator, Assignment, Context, Dialogue, Study
from empeval.server.store.queries import iso_utc, study_by_name
from empeval.server.store.storable import text_problem
from empeval.server.store.study_config import StudyConfig

DEFAULT_TITLE = "Compare two conversations"
ENTRY_FIELDS = {"item_id": True, "choices": True, "justifications": True, "seconds": False}
SIDES = ("left", "right")
# The blanks trimmed around a justification before its length is counted: ASCII only, so that the validator and the
# schema's pattern (ECMA-262's \s is not Python's) agree character for character.
BLANKS = " \t\n\r"
SPEAKERS = {"rater": "speaker", "system": "listener"}


def justification_pattern(least: int) -> str:
    """The pattern of a justification of at least `least` characters once BLANKS around it are trimmed (anchored, so
    the schema and the validator's fullmatch read it alike)."""
    if least <= 1:
        return "^[ \\t\\n\\r]*[^ \\t\\n\\r][\\s\\S]*$"
    return f"^[ \\t\\n\\r]*[^ \\t\\n\\r][\\s\\S]{{{least - 2},}}[^ \\t\\n\\r][ \\t\\n\\r]*$"


def _side_sql(side: str) -> str:
    """One side of the payload's statement: each placement's conversation shown on `side` with its prompt and turns."""
    a_when = "'a'" if side == "left" else "'b'"
    return ("SELECT placed.position, placed.acute_pair_id, " + ("0" if side == "left" else "1") + " AS side, "
            "dialogue.emotion, dialogue.situation, turn.idx, turn.speaker, turn.text "
            "FROM assignment_acute_pair AS placed JOIN acute_pair AS pair ON pair.id = placed.acute_pair_id "
            "JOIN assignment_conversation AS talk ON talk.id = CASE WHEN placed.shown_left = " + a_when +
            " THEN pair.conversation_a_id ELSE pair.conversation_b_id END "
            "JOIN chat_conversation AS conversation ON conversation.id = talk.conversation_id "
            "JOIN context ON context.id = conversation.context_id JOIN dialogue ON dialogue.id = context.dialogue_id "
            "LEFT OUTER JOIN chat_turn AS turn ON turn.assignment_id = talk.assignment_id "
            "AND turn.conversation_id = talk.conversation_id WHERE placed.assignment_id = :assignment")


# The pairs in position order, the left conversation's rows (side 0) before the right one's, each with its turns.
COMPARISONS = hot_sql.statement(_side_sql("left") + " UNION ALL " + _side_sql("right") + " ORDER BY 1, 3, 6")
INSERT_CHOICES = hot_sql.rows_statement(
    "INSERT INTO acute_choice (assignment_id, acute_pair_id, annotator_id, criterion, choice, justification, "
    "submitted_at, submission_id) VALUES (:assignment, :item, :annotator, :criterion, :choice, :justification, :now, "
    ":submission)",
    "INSERT INTO acute_choice (assignment_id, acute_pair_id, annotator_id, criterion, choice, justification, "
    "submitted_at, submission_id) SELECT :assignment, given.item, :annotator, given.criterion, given.choice, "
    "given.justification, :now, :submission FROM unnest(:item::integer[], :criterion::varchar[], :choice::varchar[], "
    ":justification::text[]) AS given(item, criterion, choice, justification)")

_TALK_A, _TALK_B = aliased(AssignmentConversation, name="talk_a"), aliased(AssignmentConversation, name="talk_b")
_CHAT_A, _CHAT_B = aliased(ChatConversation, name="chat_a"), aliased(ChatConversation, name="chat_b")


class ExpectedComparisons(NamedTuple):
    """What one ACUTE assignment's submission must contain: one entry per pair of conversations, a side and a
    justification per question, the justification's bounds."""

    item_ids: tuple[int, ...]
    criteria: tuple[str, ...]
    min_justification: int
    max_justification: int


class Comparison(NamedTuple):
    sides: dict[str, str]  # question -> 'left' | 'right'
    justifications: dict[str, str]  # question -> the text, trimmed
    seconds: float | None


def _setup(config: StudyConfig) -> AcuteSetup:
    setup = config.setup
    assert isinstance(setup, AcuteSetup), f"an ACUTE study's setup is an AcuteSetup, got {type(setup).__name__}"
    return setup


def _per_question(value: Any, where: str, field: str, what: str, item_id: int, criteria: tuple[str, ...]) -> dict:
    """An entry's `field` checked to be an object with exactly one value per question."""
    if not isinstance(value, dict):
        raise BadInput(f"{where}.{field} must be an object with one {what} per question")
    missing = [c for c in criteria if c not in value]
    if missing:
        raise BadInput(f"{where}: item {item_id} has no {what} for {missing[0]!r}")
    extra = sorted(set(value) - set(criteria), key=str)
    if extra:
        raise BadInput(f"{where}: unknown question {extra[0]!r} in {field} for item {item_id}; expected "
                       f"{', '.join(criteria)}")
    return value


def _justification(text: Any, where: str, criterion: str, item_id: int, expected: ExpectedComparisons) -> str:
    said = f"{where}: {criterion} justification for item {item_id}"
    if not isinstance(text, str):
        raise BadInput(f"{said} must be text: say in a few words why you picked that side")
    if problem := text_problem(text):
        raise BadInput(f"{said} {problem}")
    if len(text) > expected.max_justification:
        raise BadInput(f"{said} is {len(text)} characters long; at most {expected.max_justification} are allowed")
    core = text.strip(BLANKS)
    if len(core) < expected.min_justification:
        raise BadInput(f"{said} must be at least {expected.min_justification} characters (got {len(core)}): say in "
                       "a few words why you picked that side")
    return core


def validate_comparisons(entries: Any, expected: ExpectedComparisons) -> dict[int, Comparison]:
    """Check an ACUTE submission's entries; BadInput saying what was wrong, naming the entry, the item and the
    question."""
    if not isinstance(entries, list):
        raise BadInput("comparisons must be a list with one entry per pair of conversations of the assignment")
    answers: dict[int, Comparison] = {}
    taken: set[int] = set()
    for i, entry in enumerate(entries):
        where = f"comparisons[{i}]"
        item_id = entry_item(entry, where, ENTRY_FIELDS, expected.item_ids, taken, verb="judged twice")
        choices = _per_question(entry.get("choices"), where, "choices", "choice", item_id, expected.criteria)
        sides = {}
        for criterion in expected.criteria:
            answer = choices[criterion]
            if not isinstance(answer, str) or answer not in SIDES:
                raise BadInput(f"{where}: {criterion} choice {answer!r} for item {item_id} must be left or right")
            sides[criterion] = answer
        why = _per_question(entry.get("justifications"), where, "justifications", "justification", item_id,
                            expected.criteria)
        justifications = {c: _justification(why[c], where, c, item_id, expected) for c in expected.criteria}
        answers[item_id] = Comparison(sides, justifications, entry_seconds(entry, where))
    refuse_missing_units(expected.item_ids, answers, what="comparison", units="pairs of conversations")
    return answers


def _transcript(turns: list[tuple[str, str]]) -> str:
    return "\n".join(f"{SPEAKERS.get(speaker, speaker).capitalize()}: {text}" for speaker, text in turns)


@register
class AcuteAnnotation(AnnotationKind):
    name: ClassVar[str] = "acute"
    unit, units, answered = "pair of conversations", "pairs of conversations", "judged"
    entries, counted, per_annotator = "comparisons", "choices", "comparisons"
    placement_table, item_column = "assignment_acute_pair", "acute_pair_id"
    placement_columns = ("acute_pair_id", "position", "shown_left")  # an expiry copy keeps each pair on its side
    item_table, answer_table = "acute_pair", "acute_choice"
    # Both prompts of every pair (one, when they share it): the seen rule records and checks each.
    contexts_from = ("(SELECT placed.assignment_id AS assignment_id, pair.context_a_id AS context_id "
                     "FROM assignment_acute_pair AS placed JOIN acute_pair AS pair ON pair.id = placed.acute_pair_id "
                     "UNION ALL SELECT placed.assignment_id, pair.context_b_id FROM assignment_acute_pair AS placed "
                     "JOIN acute_pair AS pair ON pair.id = placed.acute_pair_id) AS acute_prompt")
    contexts_assignment, context_column = "acute_prompt.assignment_id", "acute_prompt.context_id"
    export_columns = ACUTE_COLUMNS

    def payload(self, executor: Any, study: Any, assignment_id: int, status: str,
                expires_at: datetime | None) -> dict[str, Any]:
        """In the A/B payload's shape where they share a meaning (assignment_id, status, expires_at, study, criteria,
        items), plus the justification's bounds; each item with `left` and `right`, each a conversation: its prompt
        and its turns ({index, speaker: "speaker" | "listener", text})."""
        config = study.config
        setup = _setup(config)
        items: list[dict[str, Any]] = []
        for row in hot_sql.run(executor, COMPARISONS, {"assignment": assignment_id}):
            position, pair_id, side, emotion, situation, idx, speaker, text = tuple(row)
            if not items or items[-1]["position"] != position:
                items.append({"item_id": pair_id, "position": position})
            key = "left" if side == 0 else "right"
            if key not in items[-1]:
                items[-1][key] = {"prompt": {"emotion": emotion or "", "situation": situation or ""}, "turns": []}
            if idx is not None:
                items[-1][key]["turns"].append({"index": idx, "speaker": SPEAKERS.get(speaker, speaker),
                                                "text": text})
        return {
            "kind": self.name, "assignment_id": assignment_id, "status": status, "expires_at": iso_utc(expires_at),
            "study": {"name": study.name, "title": config.title or DEFAULT_TITLE, "instructions": config.instructions},
            "criteria": [asdict(c) for c in config.criteria],
            "justification": {"min": setup.min_justification, "max": setup.max_justification},
            "items": items,
        }

    def expected(self, executor: Any, assignment_id: int, config: StudyConfig) -> ExpectedComparisons:
        item_ids = hot_sql.run(executor, hot_sql.kind_statements(self).item_ids,
                               {"assignment": assignment_id}).scalars().all()
        setup = _setup(config)
        return ExpectedComparisons(tuple(item_ids), tuple(config.criterion_keys), setup.min_justification,
                                   setup.max_justification)

    def validate(self, entries: Any, expected: Any) -> dict[int, Comparison]:
        return validate_comparisons(entries, expected)

    def store(self, executor: Any, assignment_id: int, annotator_id: int, submission_id: str, answers: Any,
              now: datetime) -> int:
        """The time on each pair (one UPDATE) and every choice with its justification (one INSERT)."""
        timed = [{"item": item_id, "seconds": answer.seconds}
                 for item_id, answer in answers.items() if answer.seconds is not None]
        if timed:
            hot_sql.run_rows(executor, hot_sql.kind_statements(self).time_on_item, {"assignment": assignment_id}, timed)
        rows = [{"item": item_id, "criterion": criterion, "choice": side,
                 "justification": answer.justifications[criterion]}
                for item_id, answer in answers.items() for criterion, side in answer.sides.items()]
        hot_sql.run_rows(executor, INSERT_CHOICES, {
            "assignment": assignment_id, "annotator": annotator_id, "now": hot_sql.moment(executor, now),
            "submission": submission_id}, rows)
        return len(rows)

    def entries_schema(self, expected: Any | None = None) -> dict[str, Any]:
        side = {"enum": list(SIDES), "description": "the listener picked: the one on the left or on the right"}
        least = 1 if expected is None else expected.min_justification
        text = {"type": "string", "maxLength": JUSTIFICATION_LIMIT if expected is None else expected.max_justification,
                "allOf": [{"pattern": STORABLE_TEXT_PATTERN}, {"pattern": justification_pattern(least)}],
                "description": f"why, in a few words: at least {least} characters once blanks around it are trimmed; "
                               f"{STORABLE_TEXT_RULE}"}
        if expected is None:
            choices: dict[str, Any] = {"type": "object", "additionalProperties": side,
                                       "description": "one side per question of the study (the assignment says "
                                                      "which)"}
            justifications: dict[str, Any] = {"type": "object", "additionalProperties": text,
                                              "description": "one justification per question of the study"}
            item_ids = None
        else:
            choices = {"type": "object", "required": list(expected.criteria), "additionalProperties": False,
                       "properties": {criterion: side for criterion in expected.criteria}}
            justifications = {"type": "object", "required": list(expected.criteria), "additionalProperties": False,
                              "properties": {criterion: text for criterion in expected.criteria}}
            item_ids = expected.item_ids
        return entries_schema(ENTRY_FIELDS, {"choices": choices, "justifications": justifications}, item_ids,
                              unit="pair of conversations")

    # --- the export -------------------------------------------------------------------------------------------
    def export_rows(self, engine: Engine, study: str) -> list[dict[str, Any]]:
        """Every choice of the study as an ACUTE judgment-table row (analysis.kinds.acute.schema), ordered by
        assignment, position and question."""
        with Session(engine) as session:
            study_row = study_by_name(session, study)
            rows = session.execute(
                select(AcuteChoice.assignment_id, Annotator.pseudonym, AcuteChoice.acute_pair_id, AcuteChoice.criterion,
                       AcuteChoice.choice, AcuteChoice.justification, AssignmentAcutePair.shown_left,
                       AssignmentAcutePair.position, AcutePair.is_control, AcutePair.control_target,
                       AcutePair.context_a_id, AcutePair.context_b_id, _CHAT_A.system, _CHAT_A.id,
                       _TALK_A.assignment_id, _CHAT_B.system, _CHAT_B.id, _TALK_B.assignment_id, Assignment.late)
                .join(AssignmentAcutePair, (AssignmentAcutePair.assignment_id == AcuteChoice.assignment_id)
                      & (AssignmentAcutePair.acute_pair_id == AcuteChoice.acute_pair_id))
                .join(AcutePair, AcutePair.id == AcuteChoice.acute_pair_id)
                .join(_TALK_A, _TALK_A.id == AcutePair.conversation_a_id)
                .join(_CHAT_A, _CHAT_A.id == _TALK_A.conversation_id)
                .join(_TALK_B, _TALK_B.id == AcutePair.conversation_b_id)
                .join(_CHAT_B, _CHAT_B.id == _TALK_B.conversation_id)
                .join(Annotator, Annotator.id == AcuteChoice.annotator_id)
                .join(Assignment, Assignment.id == AcuteChoice.assignment_id)
                .where(AcutePair.study_id == study_row.id)
                .order_by(AcuteChoice.assignment_id, AssignmentAcutePair.position, AcuteChoice.criterion)
            ).all()
        table = []
        for (assignment_id, pseudonym, pair_id, criterion, side, justification, shown_left, position, is_control,
             control_target, context_a, context_b, system_a, conversation_a, session_a, system_b, conversation_b,
             session_b, late) in rows:
            a = (system_a, conversation_a, session_a, context_a)
            b = (system_b, conversation_b, session_b, context_b)
            left, right = (a, b) if shown_left == "a" else (b, a)
            table.append({
                "study": study_row.name, "assignment_id": assignment_id, "annotator": pseudonym,
                "context_id": min(context_a, context_b), "criterion": criterion,
                "pair": "|".join(sorted((system_a, system_b))), "system_left": left[0], "system_right": right[0],
                "choice": side, "preferred": left[0] if side == "left" else right[0], "position": position,
                "is_control": bool(is_control), "control_target": control_target if is_control else None,
                "late": bool(late), "comparison_id": pair_id, "conversation_left": left[1],
                "conversation_right": right[1], "chat_assignment_left": left[2], "chat_assignment_right": right[2],
                "context_left": left[3], "context_right": right[3], "same_prompt": context_a == context_b,
                "justification": justification})
        return table

    def qualification_choices(self, config: StudyConfig) -> tuple[GoldChoice, ...]:
        """The listener of conversation 1 (left) or of conversation 2 (right), as the ACUTE page offers them; a gold
        item asks no justification."""
        return GoldChoice("left", "Conversation 1's listener"), GoldChoice("right", "Conversation 2's listener")

    def report_meta(self, config: StudyConfig) -> dict[str, Any]:
        setup = _setup(config)
        return {"k": setup.judgments_per_pair, "ties": False, "chat_study": setup.chat_study,
                "same_prompt_only": setup.same_prompt_only, "controls": list(config.controls),
                "min_justification": setup.min_justification}

    # --- the dashboard ----------------------------------------------------------------------------------------
    def progress(self, session: Session, study: Study) -> dict[str, Any]:
        """Comparisons (an annotator's answers about one pair in one assignment), choices (one per question), pairs
        judged at least once and comparisons per annotator: two statements."""
        of_study = AcuteChoice.acute_pair_id.in_(select(AcutePair.id).where(AcutePair.study_id == study.id))
        choices, pairs = session.execute(select(func.count(), func.count(distinct(AcuteChoice.acute_pair_id)))
                                         .where(of_study)).one()
        per_annotator = dict(session.execute(
            select(Annotator.pseudonym, func.count(distinct(AcuteChoice.acute_pair_id)))
            .join(AcuteChoice, AcuteChoice.annotator_id == Annotator.id)
            .where(of_study).group_by(Annotator.pseudonym).order_by(Annotator.pseudonym)).all())
        k = _setup(study.config).judgments_per_pair
        comparisons = sum(per_annotator.values())
        return {"comparisons": comparisons, "choices": choices, "pairs_judged": pairs,
                "comparisons_per_annotator": per_annotator, "judgments_per_pair": k,
                "summary": f"ACUTE-Eval study: {pairs} pairs of conversations judged, {comparisons} comparisons of "
                           f"{choices} choices (k = {k} per pair)",
                "per_annotator": per_annotator}

    def item_page(self, session: Session, study: Study, page: int, per_page: int, rated_only: bool) -> ItemPage:
        """Pairs of conversations with their prompts, each conversation as a transcript under its system's name, and
        each judgment as the system picked on each question, with the justification."""
        shown = [AcutePair.study_id == study.id]
        if rated_only:
            shown.append(exists().where(AcuteChoice.acute_pair_id == AcutePair.id))
        total = session.scalar(select(func.count()).select_from(AcutePair).where(*shown)) or 0
        pages = page_bounds(total, page, per_page)
        rows = session.execute(
            select(AcutePair.id, AcutePair.context_a_id, AcutePair.context_b_id, AcutePair.is_control,
                   AcutePair.control_target, _CHAT_A.system, _TALK_A.assignment_id, _TALK_A.conversation_id,
                   _CHAT_B.system, _TALK_B.assignment_id, _TALK_B.conversation_id)
            .join(_TALK_A, _TALK_A.id == AcutePair.conversation_a_id)
            .join(_CHAT_A, _CHAT_A.id == _TALK_A.conversation_id)
            .join(_TALK_B, _TALK_B.id == AcutePair.conversation_b_id)
            .join(_CHAT_B, _CHAT_B.id == _TALK_B.conversation_id)
            .where(*shown).order_by(AcutePair.context_a_id, AcutePair.id).limit(per_page)
            .offset((page - 1) * per_page)).all()
        talks = {(row[6], row[7]) for row in rows} | {(row[9], row[10]) for row in rows}
        turns: dict[tuple[int, int], list[tuple[str, str]]] = {}
        if talks:
            for assignment_id, conversation_id, speaker, text in session.execute(
                    select(ChatTurn.assignment_id, ChatTurn.conversation_id, ChatTurn.speaker, ChatTurn.text)
                    .where(ChatTurn.assignment_id.in_({a for a, _ in talks}),
                           ChatTurn.conversation_id.in_({c for _, c in talks}))
                    .order_by(ChatTurn.assignment_id, ChatTurn.conversation_id, ChatTurn.idx)):
                turns.setdefault((assignment_id, conversation_id), []).append((speaker, text))
        prompts = dict(session.execute(
            select(Context.id, Dialogue.emotion + ": " + Dialogue.situation)
            .join(Dialogue, Dialogue.id == Context.dialogue_id)
            .where(Context.id.in_({row[1] for row in rows} | {row[2] for row in rows}))).all()) if rows else {}
        items: dict[int, BrowsedItem] = {}
        systems: dict[int, tuple[str, str]] = {}
        for (pair_id, context_a, context_b, is_control, target, system_a, session_a, chat_a, system_b, session_b,
             chat_b) in rows:
            context = [{"role": "prompt", "text": prompts.get(context) or ""}
                       for context in dict.fromkeys((context_a, context_b))]
            items[pair_id] = BrowsedItem(pair_id, context_a, context,
                                         [(system_a, _transcript(turns.get((session_a, chat_a), []))),
                                          (system_b, _transcript(turns.get((session_b, chat_b), [])))],
                                         bool(is_control), target)
            systems[pair_id] = (system_a, system_b)
        answers: dict[tuple[int, int, str], dict[str, str]] = {}
        for pair_id, assignment_id, pseudonym, criterion, side, why, shown_left in session.execute(
                select(AcuteChoice.acute_pair_id, AcuteChoice.assignment_id, Annotator.pseudonym, AcuteChoice.criterion,
                       AcuteChoice.choice, AcuteChoice.justification, AssignmentAcutePair.shown_left)
                .join(AssignmentAcutePair, and_(AssignmentAcutePair.assignment_id == AcuteChoice.assignment_id,
                                                AssignmentAcutePair.acute_pair_id == AcuteChoice.acute_pair_id))
                .join(Annotator, Annotator.id == AcuteChoice.annotator_id).where(AcuteChoice.acute_pair_id.in_(items))
                .order_by(AcuteChoice.acute_pair_id, Annotator.pseudonym, AcuteChoice.criterion)):
            system_a, system_b = systems[pair_id]
            picked = system_a if (side == "left") == (shown_left == "a") else system_b
            answers.setdefault((pair_id, assignment_id, pseudonym), {})[criterion] = f"{picked}: {why}"
        for (pair_id, assignment_id, pseudonym), by_criterion in answers.items():
            items[pair_id].ratings.append({"annotator": pseudonym, "assignment_id": assignment_id,
                                           "scores": by_criterion})
        return with_comments(session, ItemPage(page, pages, total, list(items.values()), rated_only))
