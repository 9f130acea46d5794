"""The ACUTE-Eval kind in the tasks room: its study-file fields, its pairing and design, its simulated raters, its
crowd parts and its page.

An ACUTE-Eval study (Li, Weston & Roller 2019): a third-party rater reads two whole conversations of a chat study
side by side, each between a speaker (a rater of the chat study) and a listener (a system, never named), and answers
each question by picking the listener on the left or the one on the right, with a short justification. Its study
file adds to the shared fields:

    kind = "acute"
    [acute]
    chat_study = "chat-pilot"            # required: whose ended and submitted conversations are compared; the study's
                                         # compare_with names it too (by default; a different one is refused)
    questions = ["empathy", "talk_to"]   # presets (the default): empathy, talk_to, engaging, human; or [[criteria]]
    same_prompt_only = false             # true: never pair two conversations on different prompts
    min_justification = 10               # characters, after trimming
    max_justification = 500
    [systems]
    names = ["retrieval", "retrieval-emoprepend"]   # partners of the chat study, every pair of them compared
    controls = ["control-generic"]                  # control partners of the chat study: control pairs
    [design]
    judgments_per_pair = 3               # k distinct raters per pair of conversations
    items_per_assignment = 6             # pairs per assignment, controls included (default: 5 real ones, plus the
                                         # control slots)
    [contexts]                           # optional: count or ids choose among the chat study's prompts; by default
    count = 6                            # every prompt with a finished conversation

ACUTE-Eval's onboarding is the study file's [qualification] (tasks/qualification.py): each gold item names a control
partner of systems.controls, whose finished conversation is set beside a real partner's (the same prompt where the
chat study has one) when the study is created, as the control pairs are; the real partner's side is right on every
question, and a rater must pick it before she is given real pairs:

    [[qualification.items]]
    control = "control-generic"
    feedback = "One listener gave the same generic line whatever the speaker said."

A study is made over the chat study's finished conversations (ended, not failed, in a submitted session) with the
systems and controls named: tasks.kinds.acute_design pairs them (the same prompt wherever possible) and plans the
assignments (k placements per pair, no prompt twice in an assignment, left/right balanced with the A/B design's
colouring). Creating one refuses, saying how many there are and how many are needed, when some system has no
finished conversation or some pair of systems nothing to compare.

A control's target is a Likert criterion (server.backend.controls); an ACUTE study scores a control pair on that
criterion when the study asks it, else on its first question (a generic, mismatched or scrambled listener loses on
"which listener understood the speaker's feelings better?" as on every other).

The hand-out's seen rule applies to both prompts of a pair, and, the study being linked to its chat study, across the
two: nobody judges a conversation on a prompt she talked about herself (her own conversations above all: ACUTE-Eval's
raters are third parties), and nobody who judged a prompt talks about it later.

The simulated raters judge each conversation by its partner's latent quality as the A/B raters do (tasks.kinds.
pairwise.pairwise_choices without ties; "talk_to" is judged as empathy, "engaging" as relevance and "human" as
fluency), each conversation with its own fixed deviation, and write a one-line justification.
"""
from __future__ import annotations

import random
from collections import Counter
from dataclasses import dataclass, replace
from typing import Any, ClassVar

from sqlalchemy import Engine, select
from sqlalchemy.orm import Session, aliased

from empeval.server.store.bulk import insert_rows
from empeval.server.store.kinds import StudySetup
from empeval.server.store.kinds.acute import (
    JUSTIFICATION_LIMIT,
    QUESTION_PRESETS,
    AcutePair,
    AcuteSetup,
    AssignmentAcutePair,
)
from empeval.server.store.kinds.chat import AssignmentConversation, ChatConversation, ChatSetup, ChatTurn
from empeval.server.store.models import Assignment, Context, Dialogue, Study
from empeval.server.store.qualification import Accepted, GoldItem, GoldRow, Panel, ShownTurn
from empeval.server.store.queries import study_by_name
from empeval.server.store.statuses import AssignmentStatus
from empeval.server.store.study_config import StudyConfig
from empeval.server.store.study_parts import Criterion, Design
from empeval.tasks.crowd.contract import Control
from empeval.tasks.design import controls_per_assignment
from empeval.tasks.gold_items import gold_feedback, gold_fields
from empeval.tasks.kind_parts import ChosenContexts, StudyFileParts, StudyFileReader, StudySetupError, StudySummary
from empeval.tasks.kinds import Answer, TaskKind, register
from empeval.tasks.kinds.acute_design import Conversation, pair_conversations, plan_acute
from empeval.tasks.kinds.pairwise import pairwise_choices
from empeval.tasks.simulate import CrowdModel, Rater, UnknownItem

LISTING = {"title": "Compare two conversations about feelings",
           "description": "Read two short conversations side by side in which someone shares an experience, and say "
                          "which listener understood them better and which you would rather talk to, in a few words "
                          "each.",
           "tags": ["empathy", "dialogue", "comparison", "conversation", "research"]}
# Real pairs of conversations per assignment when the study file does not say (ParlAI's ACUTE-Eval task shows five).
REAL_PER_ASSIGNMENT = 5
# What a simulated rater judges each question by (the simulation's quality table has the Likert criteria).
SIMULATED_AS = {"empathy": "empathy", "talk_to": "empathy", "engaging": "relevance", "human": "fluency"}
SIMULATED_WHY = {"empathy": "listener seemed to understand how the speaker felt",
                 "talk_to": "listener answered with more care",
                 "engaging": "listener kept the conversation going",
                 "human": "listener sounded more natural"}


def _setup(spec: StudyConfig) -> AcuteSetup:
    setup = spec.setup
    assert isinstance(setup, AcuteSetup), f"an ACUTE study's setup is an AcuteSetup, got {type(setup).__name__}"
    return setup


def control_target(spec: StudyConfig, control: str) -> str:
    """The question a control pair of `control` is scored on: its own target when the study asks it, else the study's
    first question (see the module docstring)."""
    target = spec.control_targets.get(control, "")
    return target if target in spec.criterion_keys else spec.criteria[0].key


def finished_conversations(session: Session, chat_study_id: int, partners: tuple[str, ...]
                           ) -> list[tuple[int, str, int, str]]:
    """The chat study's conversations with `partners` that ended (not failed) in a submitted session: (placement id,
    partner, prompt's context id, prompt key conv_id#n_turns), by placement id."""
    return [(key, system, context_id, f"{conv_id}#{n_turns}") for key, system, context_id, conv_id, n_turns in
            session.execute(
                select(AssignmentConversation.id, ChatConversation.system, ChatConversation.context_id,
                       Dialogue.conv_id, Context.n_turns)
                .join(ChatConversation, ChatConversation.id == AssignmentConversation.conversation_id)
                .join(Assignment, Assignment.id == AssignmentConversation.assignment_id)
                .join(Context, Context.id == ChatConversation.context_id)
                .join(Dialogue, Dialogue.id == Context.dialogue_id)
                .where(ChatConversation.study_id == chat_study_id, ChatConversation.system.in_(partners),
                       AssignmentConversation.ended_at.is_not(None), AssignmentConversation.failed.is_(False),
                       Assignment.status == AssignmentStatus.SUBMITTED)
                .order_by(AssignmentConversation.id))]


def _count(n: int, what: str) -> str:
    return f"{n} {what}{'' if n == 1 else 's'}"


@dataclass(frozen=True)
class ShownComparison:
    """What one placement shows, as only the simulation may know it: the partners on the left and on the right and
    their conversations' keys (chat placement ids: each conversation's fixed deviation)."""

    left: str
    right: str
    left_key: object
    right_key: object


def comparison_placements(engine: Engine, study: str) -> dict[tuple[int, int], ShownComparison]:
    """(assignment id, pair id) -> ShownComparison for every placement of an ACUTE study (the truth the simulation
    needs and the API hides); read once, like the A/B kind's pair_placements."""
    talk_a, talk_b = aliased(AssignmentConversation), aliased(AssignmentConversation)
    chat_a, chat_b = aliased(ChatConversation), aliased(ChatConversation)
    with Session(engine) as session:
        found = study_by_name(session, study)
        rows = session.execute(
            select(AssignmentAcutePair.assignment_id, AssignmentAcutePair.acute_pair_id, AssignmentAcutePair.shown_left,
                   chat_a.system, AcutePair.conversation_a_id, chat_b.system, AcutePair.conversation_b_id)
            .join(AcutePair, AcutePair.id == AssignmentAcutePair.acute_pair_id)
            .join(talk_a, talk_a.id == AcutePair.conversation_a_id).join(chat_a, chat_a.id == talk_a.conversation_id)
            .join(talk_b, talk_b.id == AcutePair.conversation_b_id).join(chat_b, chat_b.id == talk_b.conversation_id)
            .where(AcutePair.study_id == found.id)).all()
    placements = {}
    for assignment_id, pair_id, shown_left, system_a, key_a, system_b, key_b in rows:
        a, b = (system_a, f"conversation-{key_a}"), (system_b, f"conversation-{key_b}")
        (left, left_key), (right, right_key) = (a, b) if shown_left == "a" else (b, a)
        placements[assignment_id, pair_id] = ShownComparison(left, right, left_key, right_key)
    return placements


@register
class AcuteTasks(TaskKind):
    name: ClassVar[str] = "acute"
    setup = AcuteSetup
    fields: ClassVar[dict[str, frozenset[str]]] = {"design": frozenset({"judgments_per_pair"})}
    sections: ClassVar[frozenset[str]] = frozenset({"acute"})
    foreign_hints: ClassVar[dict[str, str]] = {
        "design.ratings_per_response": "an ACUTE study counts judgments per pair of conversations: use "
                                       "design.judgments_per_pair",
        "scale": "an ACUTE study has no scale: raters pick the listener on the left or on the right",
        "systems.pairs": "an ACUTE study compares every pair of systems.names",
        "systems.anchor": "an ACUTE study compares every pair of systems.names; it has no anchor",
        "chat": "an ACUTE study compares the conversations of a chat study: name it in acute.chat_study",
    }
    listing: ClassVar[dict[str, Any]] = LISTING
    ui_page: ClassVar[str] = "acute"
    own_contexts: ClassVar[bool] = True

    # --- the study file ---------------------------------------------------------------------------------------
    def parse(self, reader: StudyFileReader, data: dict[str, Any], parts: StudyFileParts) -> tuple[AcuteSetup,
                                                                                                  Design]:
        known = {"chat_study", "questions", "same_prompt_only", "min_justification", "max_justification"}
        acute = reader.table(data, "acute", "acute", known)
        chat_study = reader.string(acute, "chat_study", "acute.chat_study")
        if chat_study == parts.name:
            raise reader.error("acute.chat_study", "names this study itself; name the chat study whose conversations "
                               "are compared")
        compare_with = data.get("compare_with")
        if compare_with is not None and compare_with != chat_study:
            raise reader.error("compare_with", f"names {compare_with!r} but acute.chat_study names {chat_study!r}: an "
                               "ACUTE study is linked to its chat study (leave compare_with out)")
        d = AcuteSetup()
        questions = reader.strings(acute, "questions", "acute.questions", d.questions)
        if not questions:
            raise reader.error("acute.questions", "must name at least one question")
        for i, key in enumerate(questions):
            if key not in QUESTION_PRESETS:
                raise reader.error(f"acute.questions[{i}]", f"unknown question {key!r}; the presets are "
                                   f"{', '.join(QUESTION_PRESETS)} (or word your own with [[criteria]])")
        if "questions" in acute and "criteria" in data:
            raise reader.error("acute.questions", "give the presets here or your own [[criteria]], not both")
        same = acute.get("same_prompt_only", d.same_prompt_only)
        if not isinstance(same, bool):
            raise reader.error("acute.same_prompt_only", f"must be true or false, got {same!r}")
        low = reader.integer(acute, "min_justification", "acute.min_justification", d.min_justification,
                             minimum=1, maximum=200)
        assert low is not None
        high = reader.integer(acute, "max_justification", "acute.max_justification", max(d.max_justification, low),
                              minimum=max(low, 20), maximum=JUSTIFICATION_LIMIT)
        assert high is not None
        k = reader.integer(data.get("design", {}), "judgments_per_pair", "design.judgments_per_pair",
                           d.judgments_per_pair, minimum=1, maximum=50)
        if len(parts.systems) < 2:
            raise reader.error("systems.names", "an ACUTE study compares at least two partners of its chat study")
        design = parts.design
        if "items_per_assignment" not in parts.design_given:
            size = next(n for n in range(REAL_PER_ASSIGNMENT, 201)
                        if n - self._control_slots(n, design, parts) >= REAL_PER_ASSIGNMENT
                        and (self._control_slots(n, design, parts) or not parts.controls or not design.control_rate))
            design = replace(design, items_per_assignment=size)
        setup = AcuteSetup(chat_study=chat_study, judgments_per_pair=k or d.judgments_per_pair, same_prompt_only=same,
                           questions=questions, min_justification=low, max_justification=high)
        return setup, design

    def qualification_items(self, reader: StudyFileReader, entries: list[Any], setup: StudySetup,
                            criteria: tuple[Criterion, ...], controls: tuple[str, ...]) -> tuple[GoldItem, ...]:
        """Each gold item, ACUTE-Eval's onboarding as its control pairs are made: `control`, the control partner
        (one of systems.controls) whose conversation of the chat study is set beside a real partner's (both drawn
        when the study is created; the real partner's side is right on every question), and its `feedback`."""
        items = []
        for i, entry in enumerate(entries):
            path = f"qualification.items[{i}]"
            gold_fields(reader, entry, path, ("control", "feedback"))
            control = reader.string(entry, "control", f"{path}.control")
            if control not in controls:
                raise reader.error(f"{path}.control", f"{control!r} is not among systems.controls "
                                   f"({', '.join(controls) or 'none listed'}): a gold item sets a control partner's "
                                   "conversation beside a real one; list the control there")
            items.append(GoldItem(feedback=gold_feedback(reader, entry, path), control=control))
        return tuple(items)

    def qualification_rows(self, session: Session, spec: StudyConfig) -> list[GoldRow]:
        """Per gold item, a finished conversation of its control partner and one of a real partner (the same prompt
        where the chat study has one; conversations not used by an earlier item first), drawn with the study's seed,
        the control on a side drawn too; every question's right answer is the real partner's side.
        StudySetupError when the chat study has no finished conversation of the control or of any real partner."""
        assert spec.qualification is not None
        chat = self._chat_study(session, spec)
        finished = finished_conversations(session, chat.id, (*spec.systems, *spec.controls))
        real = [talk for talk in finished if talk[1] in spec.systems]
        if not real:
            raise StudySetupError(f"qualification: chat study {chat.name!r} has no ended and submitted conversation "
                                  f"with {', '.join(spec.systems)} to set beside a control's")
        rng = random.Random(f"{spec.seed}:qualification")
        used: set[int] = set()
        rows = []
        for i, item in enumerate(spec.qualification.items):
            bad = [talk for talk in finished if talk[1] == item.control]
            if not bad:
                raise StudySetupError(f"qualification.items[{i}].control: chat study {chat.name!r} has no ended and "
                                      f"submitted conversation with {item.control!r}: let more of its sessions be "
                                      "submitted, or name another control")
            control = rng.choice([talk for talk in bad if talk[0] not in used] or bad)
            fresh = [talk for talk in real if talk[0] not in used]
            partner = rng.choice([talk for talk in fresh if talk[2] == control[2]] or fresh or real)
            used |= {control[0], partner[0]}
            control_left = rng.random() < 0.5
            left, right = (control, partner) if control_left else (partner, control)
            panels = tuple(self._gold_panel(session, talk[0], number) for number, talk in ((1, left), (2, right)))
            right_side = ("right",) if control_left else ("left",)
            rows.append(GoldRow(panels, tuple(Accepted(c.key, right_side) for c in spec.criteria), item.feedback))
        return rows

    @staticmethod
    def _gold_panel(session: Session, placement_id: int, number: int) -> Panel:
        """A chat study's conversation (a placement id of assignment_conversation) as the ACUTE page shows it: its
        prompt and its turns, the listener named by its side."""
        emotion, situation, assignment_id, conversation_id = session.execute(
            select(Dialogue.emotion, Dialogue.situation, AssignmentConversation.assignment_id,
                   AssignmentConversation.conversation_id)
            .join(ChatConversation, ChatConversation.id == AssignmentConversation.conversation_id)
            .join(Context, Context.id == ChatConversation.context_id).join(Dialogue, Dialogue.id == Context.dialogue_id)
            .where(AssignmentConversation.id == placement_id)).one()
        turns = session.execute(select(ChatTurn.speaker, ChatTurn.text)
                                .where(ChatTurn.assignment_id == assignment_id,
                                       ChatTurn.conversation_id == conversation_id).order_by(ChatTurn.idx)).all()
        note = " ".join(part for part in (f"Feeling {emotion}." if emotion else "", situation or "") if part)
        return Panel(f"Conversation {number}",
                     tuple(ShownTurn("speaker", text, "Speaker") if speaker == "rater"
                           else ShownTurn("listener", text, f"Listener {number}") for speaker, text in turns), note)

    @staticmethod
    def _control_slots(size: int, design: Design, parts: StudyFileParts) -> int:
        return controls_per_assignment(size, design.control_rate) if parts.controls else 0

    def criteria_asked(self, setup: Any) -> tuple[Criterion, ...]:
        """The question presets the study file chose (acute.questions; by default empathy and talk_to)."""
        return setup.asked() if isinstance(setup, AcuteSetup) else setup.default_criteria

    def linked_study(self, setup: Any) -> str:
        """The chat study: an ACUTE study is linked to it (compare_with) for the seen rule and the reports."""
        return setup.chat_study if isinstance(setup, AcuteSetup) else ""

    # --- creating a study -------------------------------------------------------------------------------------
    def system_role(self, spec: StudyConfig, system: str) -> str:
        return " (a control partner of the chat study)" if system in spec.controls else " (a partner compared)"

    def _chat_study(self, session: Session, spec: StudyConfig) -> Study:
        setup = _setup(spec)
        chat = session.scalar(select(Study).where(Study.name == setup.chat_study))
        if chat is None:
            raise StudySetupError(f"acute.chat_study: no study named {setup.chat_study!r} in the store: create the "
                                  "chat study first and let its sessions be submitted")
        if not isinstance(chat.config.setup, ChatSetup):
            raise StudySetupError(f"acute.chat_study: {setup.chat_study!r} is a {chat.config.setup.label} study; an "
                                  "ACUTE study compares the conversations of a chat study")
        return chat

    def study_contexts(self, session: Session, spec: StudyConfig) -> dict[str, int]:
        """The prompts of the chat study's finished conversations with the systems and controls compared;
        StudySetupError when a name is no partner there, or a system has no finished conversation (saying how many
        there are and how many are needed)."""
        chat = self._chat_study(session, spec)
        partners, controls = chat.config.systems, chat.config.controls
        for name in spec.systems:
            if name in controls:
                raise StudySetupError(f"system {name!r} is a control partner of chat study {chat.name!r}: list it "
                                      "under systems.controls")
            if name not in partners:
                raise StudySetupError(f"system {name!r} is not a partner of chat study {chat.name!r} (its partners: "
                                      f"{', '.join(partners)}; its controls: {', '.join(controls) or 'none'})")
        for name in spec.controls:
            if name not in controls:
                raise StudySetupError(f"control {name!r} is not a control partner of chat study {chat.name!r} (its "
                                      f"controls: {', '.join(controls) or 'none'})")
        finished = finished_conversations(session, chat.id, (*spec.systems, *spec.controls))
        counts = Counter(system for _, system, _, _ in finished)
        real = sum(counts[name] for name in spec.systems)
        if any(counts[name] == 0 for name in spec.systems):
            n = len(spec.systems)
            raise StudySetupError(
                f"chat study {chat.name!r} has {_count(real, 'ended and submitted conversation')} with the systems "
                f"compared ({', '.join(f'{name}: {counts[name]}' for name in spec.systems)}); an ACUTE study of {n} "
                f"systems needs at least {n}, one with each of them: let more of its sessions be submitted, or "
                "compare fewer systems")
        lacking = [name for name in spec.controls if counts[name] == 0]
        if lacking and controls_per_assignment(spec.design.items_per_assignment, spec.design.control_rate):
            raise StudySetupError(f"control {lacking[0]!r} has no ended and submitted conversation in chat study "
                                  f"{chat.name!r}: leave it out of systems.controls, or let more sessions be submitted")
        return {key: context_id for _, _, context_id, key in finished}

    def create(self, session: Session, spec: StudyConfig, study: Study, chosen: ChosenContexts) -> StudySummary:
        """Pair the chat study's finished conversations on the chosen prompts (acute_design.pair_conversations),
        plan the assignments (plan_acute) and write the pairs and their placements (the lower chat placement id as
        'a'; each placement logs which is shown on the left)."""
        setup = _setup(spec)
        chat = self._chat_study(session, spec)
        prompts = set(chosen.ids)
        talks = [Conversation(key, system, context_id) for key, system, context_id, _ in
                 finished_conversations(session, chat.id, (*spec.systems, *spec.controls)) if context_id in prompts]
        real, controls = pair_conversations(talks, spec.systems, spec.controls, same_prompt_only=setup.same_prompt_only,
                                            seed=spec.seed)
        counts = Counter(talk.system for talk in talks)
        compared = {comparison.label for comparison in real}
        for i, first in enumerate(spec.systems):
            for second in spec.systems[i + 1:]:
                if "|".join(sorted((first, second))) in compared:
                    continue
                shared = (" and acute.same_prompt_only asks for a shared prompt, which they have none of"
                          if setup.same_prompt_only and counts[first] and counts[second] else "")
                raise StudySetupError(
                    f"no pair of conversations of {first} and {second} to compare: chat study {chat.name!r} has "
                    f"{counts[first]} ended and submitted with {first} and {counts[second]} with {second} on the "
                    f"{len(prompts)} prompts chosen{shared}; each pair of systems needs at least one of each, 2 in all")
        control_rate = spec.design.control_rate if spec.controls else 0.0
        if spec.controls and controls_per_assignment(spec.design.items_per_assignment, control_rate) and not controls:
            raise StudySetupError(f"the controls ({', '.join(spec.controls)}) have no ended and submitted conversation "
                                  f"on the {len(prompts)} prompts chosen in chat study {chat.name!r}")
        try:
            plan = plan_acute(real, controls, judgments_per_pair=setup.judgments_per_pair,
                              items_per_assignment=spec.design.items_per_assignment, control_rate=control_rate,
                              seed=spec.seed)
        except ValueError as error:
            raise StudySetupError(f"design: {error}") from None
        rows: dict[tuple[int, int], AcutePair] = {}
        for planned in plan:
            for placed in planned.items:
                comparison = placed.comparison
                if comparison.key in rows:
                    continue
                control = comparison.control
                rows[comparison.key] = AcutePair(
                    study_id=study.id, conversation_a_id=comparison.a.key, conversation_b_id=comparison.b.key,
                    context_a_id=comparison.a.prompt, context_b_id=comparison.b.prompt, is_control=control is not None,
                    control_target=control_target(spec, control) if control else None,
                    control_side=None if control is None else "a" if comparison.a.system == control else "b",
                    design={"pair": comparison.label, "systems": [comparison.a.system, comparison.b.system],
                            "same_prompt": comparison.same_prompt})
        session.add_all(rows.values())
        session.flush()
        from empeval.tasks.study_create import add_assignments  # the shared writer (study_create imports kinds)

        insert_rows(session, AssignmentAcutePair, [
            {"assignment_id": assignment_id, "acute_pair_id": rows[p.comparison.key].id, "position": position,
             "shown_left": "a" if p.a_left else "b"}
            for assignment_id, planned in zip(add_assignments(session, study, plan), plan, strict=True)
            for position, p in enumerate(planned.items)])

        n_slots = sum(len(a.items) for a in plan)
        expected = n_slots * len(spec.criteria)
        cost = spec.pay.cost(len(plan))
        same = sum(1 for comparison in real if comparison.same_prompt)
        n_controls = len(rows) - len(real)
        return StudySummary(
            name=spec.name, kind=self.name, contexts=len(prompts), systems=list(spec.systems), items=len(real),
            control_items=n_controls, assignments=len(plan), per_unit=setup.judgments_per_pair,
            expected_answers=expected, cost=cost, currency=spec.pay.currency if cost is not None else None,
            sentence=(f"ACUTE-Eval study {spec.name!r} over chat study {chat.name!r}: {len(talks)} finished "
                      f"conversations on {len(prompts)} prompts make {_count(len(real), 'pair')} of conversations "
                      f"({same} on a shared prompt) of {len(spec.systems)} systems (+{n_controls} control pairs), "
                      f"{len(plan)} assignments, k={setup.judgments_per_pair} judgments per pair, {expected} choices "
                      "expected"))

    # --- simulated raters -------------------------------------------------------------------------------------
    def simulated_answers(self, engine: Engine, study: str, model: CrowdModel, seed: int) -> Answer:
        """Per pair and question, the listener on the left or on the right (pairwise_choices without ties, the
        question judged as SIMULATED_AS says), each conversation with its own deviation; a justification each."""
        placements = comparison_placements(engine, study)

        def judge(rater: Rater, rng: random.Random, assignment: dict) -> dict:
            questions = tuple(c["key"] for c in assignment["criteria"])
            judged = tuple(dict.fromkeys(SIMULATED_AS.get(q, q) for q in questions))
            entries = []
            for item in assignment["items"]:
                shown = placements.get((assignment["assignment_id"], item["item_id"]))
                if shown is None:
                    raise UnknownItem(f"pair {item['item_id']} of assignment {assignment['assignment_id']} is not "
                                      "among the placements the simulation was given")
                seconds = rater.seconds(model, rng) * 4  # two whole conversations to read
                chosen = pairwise_choices(rater, shown.left, shown.right, judged, model, rng, ties=False,
                                          left_deviation=model.response_deviation(shown.left_key, seed, judged),
                                          right_deviation=model.response_deviation(shown.right_key, seed, judged))
                choices = {q: "left" if chosen[SIMULATED_AS.get(q, q)] == "A" else "right" for q in questions}
                entries.append({"item_id": item["item_id"], "seconds": seconds, "choices": choices,
                                "justifications": {q: f"The {side} {SIMULATED_WHY.get(q, 'listener was better')}."
                                                   for q, side in choices.items()}})
            return {"comparisons": entries}

        return judge

    # --- crowd jobs -------------------------------------------------------------------------------------------
    def crowd_controls(self, session: Session, assignment_id: int) -> tuple[list[int], list[Control]]:
        """Both prompts of each pair, and each control pair scored as the analysis scores it: it passes when the
        worker picked the real partner's side on the control's target."""
        rows = session.execute(
            select(AcutePair.id, AcutePair.context_a_id, AcutePair.context_b_id, AcutePair.is_control,
                   AcutePair.control_target, AcutePair.control_side, AssignmentAcutePair.shown_left)
            .join(AssignmentAcutePair, AssignmentAcutePair.acute_pair_id == AcutePair.id)
            .where(AssignmentAcutePair.assignment_id == assignment_id)).all()
        return (sorted({context for row in rows for context in (row[1], row[2])}),
                [Control(item_id=pair_id, target=target or "", rule="one-of", entries="comparisons", field="choices",
                         passing=("right",) if side == left else ("left",))
                 for pair_id, _, _, is_control, target, side, left in rows if is_control])
