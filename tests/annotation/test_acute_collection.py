"""An ACUTE-Eval study through the app: the pairing (two different systems, the same prompt wherever the chat study
has one, only conversations that ended in a submitted session), the design's promises, the study file, creating one
over too few conversations (the message says how many there are and how many are needed), the blind payload (both
conversations as text, as the placement puts them), the seen rule across the linked chat study, every refusal of a
submission naming the entry and the question, the schema saying what the validator says (generated bodies), what
is stored, and the export's columns. The store's paths run on both databases."""
from __future__ import annotations

import copy
import re
from collections import Counter

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from empeval.analysis.kinds.acute.schema import ACUTE_COLUMNS, read_acute, validate_acute
from empeval.server.annotation.export import rows_to_csv
from empeval.server.annotation.kinds import annotation_kind
from empeval.server.annotation.kinds.acute import ExpectedComparisons
from empeval.server.annotation.submission import validate_submission
from empeval.server.annotation.submission_schema import MAX_SECONDS, submission_schema
from empeval.server.errors import BadInput
from empeval.server.store.kinds.acute import AcuteChoice, AcutePair, AssignmentAcutePair
from empeval.server.store.models import Annotator, SeenContext, Study
from empeval.tasks.kind_parts import StudyFileError, StudySetupError
from empeval.tasks.kinds.acute_design import Conversation, pair_conversations, plan_acute
from empeval.tasks.study_file import parse_study
from tests.annotation.acute_fixtures import (
    ACUTE,
    CHAT,
    CONTROL,
    PARTNERS,
    SYSTEMS,
    acute_file,
    chat_app,
    chat_sessions,
    finished_chat,
    make_acute,
    make_chat,
    placements,
    rater,
    stored_pairs,
)
from tests.annotation.json_bodies import bodies, fits, shown, why_not

KIND = annotation_kind("acute")
EXPECTED = ExpectedComparisons(item_ids=(12, 7, 30), criteria=("empathy", "talk_to"), min_justification=10,
                               max_justification=60)
WHY = "It asked how she felt about it."
A, B = SYSTEMS


# --- the pairing and the design ----------------------------------------------------------------------------------

def crossed(prompts=(10, 11, 12, 13), partners=("a", "b", "c"), missing=()) -> list[Conversation]:
    """A chat study's finished conversations: every prompt with every partner, less `missing` ((prompt, partner))."""
    talks, key = [], 100
    for prompt in prompts:
        for partner in partners:
            key += 1
            if (prompt, partner) not in missing:
                talks.append(Conversation(key, partner, prompt))
    return talks


def test_pairs_hold_two_systems_on_one_prompt_and_only_leftovers_go_across_prompts():
    talks = crossed(missing={(10, "b"), (12, "a")})
    real, controls = pair_conversations(talks, ("a", "b"), ("c",), seed=4)
    assert all(c.a.system != c.b.system and c.a.key < c.b.key and c.control is None for c in real)
    assert sorted((c.a.prompt, c.b.prompt) for c in real if c.same_prompt) == [(11, 11), (13, 13)]
    across = [c for c in real if not c.same_prompt]
    assert [sorted((c.a.prompt, c.b.prompt)) for c in across] == [[10, 12]]  # a on 10, b on 12: the leftovers
    used = Counter(key for c in real for key in c.key)
    assert set(used.values()) == {1}  # a conversation is in one pair per pair of systems
    strict, _ = pair_conversations(talks, ("a", "b"), seed=4, same_prompt_only=True)
    assert all(c.same_prompt for c in strict) and len(strict) == 2
    assert {c.label for c in controls} == {"a|c", "b|c"} and all(c.control == "c" for c in controls)
    assert len(controls) == 3 + 3 and all(c.same_prompt for c in controls)


@pytest.mark.parametrize("seed", range(6))
def test_the_plan_places_each_pair_k_times_never_a_prompt_twice_and_balances_the_sides(seed):
    real, controls = pair_conversations(crossed(prompts=range(10, 19)), ("a", "b", "c"), seed=seed)
    plan = plan_acute(real, controls[:0], judgments_per_pair=3, items_per_assignment=4, seed=seed)
    placed = Counter(p.comparison.key for a in plan for p in a.items)
    assert placed == {c.key: 3 for c in real}
    for assignment in plan:
        prompts = [prompt for p in assignment.items for prompt in p.comparison.prompts]
        assert len(prompts) == len(set(prompts)), "a prompt twice in one assignment"
        assert len({p.comparison.key for p in assignment.items}) == len(assignment.items)
    rounds = {c.key: sorted(a.round for a in plan for p in a.items if p.comparison.key == c.key) for c in real}
    assert set(map(tuple, rounds.values())) == {(0, 1, 2)}  # k placements, one per round: k assignments
    first_left = Counter()
    for assignment in plan:
        for p in assignment.items:
            first_left[p.comparison.label] += 1 if p.left.system == p.comparison.systems[0] else -1
    assert all(abs(v) <= 1 for v in first_left.values()), first_left
    for c in real:  # over its k placements
        sides = [p.a_left for a in plan for p in a.items if p.comparison.key == c.key]
        assert abs(2 * sum(sides) - len(sides)) <= 1


def test_controls_go_on_prompts_the_assignment_does_not_hold():
    real, controls = pair_conversations(crossed(prompts=range(10, 16)), ("a", "b"), ("c",), seed=1)
    plan = plan_acute(real, controls, judgments_per_pair=2, items_per_assignment=3, control_rate=0.34, seed=1)
    assert all(sum(p.comparison.control is not None for p in a.items) <= 1 for a in plan)
    assert sum(p.comparison.control is not None for a in plan for p in a.items) >= len(plan) - 1
    for assignment in plan:
        prompts = [prompt for p in assignment.items for prompt in p.comparison.prompts]
        assert len(prompts) == len(set(prompts))


# --- the study file ------------------------------------------------------------------------------------------------

def test_the_study_file_links_the_chat_study_and_asks_the_presets():
    spec = parse_study(acute_file(contexts={"split": "test"}))
    assert spec.kind == "acute" and spec.compare_with == CHAT and spec.setup.chat_study == CHAT
    assert spec.criterion_keys == ("empathy", "talk_to") and spec.contexts.count is None
    assert spec.criteria[0].question == "Which listener understood the speaker's feelings better?"
    assert spec.criteria[1].question == "Who would you rather talk to about something that upset you?"
    chosen = parse_study(acute_file(acute={"questions": ["engaging", "human"]}))
    assert [c.question for c in chosen.criteria] == ["Who would you prefer to talk to for a long conversation?",
                                                     "Which speaker sounds more human?"]
    default = parse_study({**acute_file(), "design": {}})
    assert default.design.items_per_assignment == 6 and default.setup.judgments_per_pair == 3  # 5 real + a control
    assert parse_study({**acute_file(), "compare_with": CHAT}).compare_with == CHAT


@pytest.mark.parametrize("change, message", [
    (lambda f: f["acute"].pop("chat_study"), "acute.chat_study: is required and must be a non-empty string"),
    (lambda f: f["acute"].update(questions=["empathy", "witty"]),
     "acute.questions[1]: unknown question 'witty'; the presets are empathy, talk_to, engaging, human"),
    (lambda f: f["acute"].update(questions=[]), "acute.questions: must name at least one question"),
    (lambda f: f.update(criteria=[{"key": "kind", "label": "Kind", "question": "Who was kinder?"}]) or
     f["acute"].update(questions=["empathy"]), "acute.questions: give the presets here or your own [[criteria]]"),
    (lambda f: f.update(compare_with="other"), "compare_with: names 'other' but acute.chat_study names 'talk'"),
    (lambda f: f["acute"].update(chat_study=ACUTE), "acute.chat_study: names this study itself"),
    (lambda f: f["acute"].update(min_justification=0), "acute.min_justification: must be an integer >= 1, got 0"),
    (lambda f: f["acute"].update(max_justification=5000), "acute.max_justification: must be an integer <= 2000"),
    (lambda f: f["acute"].update(same_prompt_only="yes"), "acute.same_prompt_only: must be true or false"),
    (lambda f: f["acute"].update(colour="red"), "acute.colour: unknown field"),
    (lambda f: f["systems"].update(names=[A]), "systems.names: an ACUTE study compares at least two partners"),
    (lambda f: f["design"].update(ratings_per_response=3), "design.ratings_per_response: an ACUTE study counts "
                                                           "judgments per pair of conversations"),
    (lambda f: f.update(scale={"min": 1}), "scale: an ACUTE study has no scale"),
    (lambda f: f.update(contexts={"count": 3, "ids": ["hit:0_conv:0#1"]}),
     "contexts: give exactly one of count (random contexts) or ids (listed contexts), or neither"),
])
def test_the_study_file_is_checked_field_by_field(change, message):
    file = copy.deepcopy(acute_file())
    change(file)
    with pytest.raises(StudyFileError, match=re.escape(message)):
        parse_study(file)


def test_other_kinds_still_need_their_contexts():
    with pytest.raises(StudyFileError, match=r"contexts: give exactly one of count \(random contexts\) or ids "
                                             r"\(listed contexts\)$"):
        parse_study({"name": "p", "systems": {"names": ["gold"]}})


# --- validation: every refusal, named ------------------------------------------------------------------------------

def _body(**changes) -> dict:
    body = {"submission_id": "acute-retry-0001", "comment": "fine",
            "comparisons": [{"item_id": item, "choices": {"empathy": "left", "talk_to": "right"},
                             "justifications": {"empathy": WHY, "talk_to": WHY}, "seconds": 20.5}
                            for item in EXPECTED.item_ids]}
    body.update(changes)
    return body


def _entry(i: int = 0, **changes) -> dict:
    body = _body()
    body["comparisons"][i].update(changes)
    return body


def _part(field: str, i: int = 0, drop: str | None = None, **changes) -> dict:
    body = _body()
    body["comparisons"][i][field].update(changes)
    if drop:
        body["comparisons"][i][field].pop(drop)
    return body


def _why(text, i: int = 0, question: str = "empathy") -> dict:
    return _part("justifications", i, **{question: text})


SHORT = "must be at least 10 characters (got {}): say in a few words why you picked that side"
REFUSALS = {
    "not an object": (["comparisons"], "body must be a JSON object with submission_id and comparisons"),
    "unknown field": (_body(judgments=[]), "unknown field 'judgments'; expected submission_id, comparisons, comment"),
    "no comparisons": (_body(comparisons=None), "comparisons must be a list with one entry per pair of "
                                                "conversations of the assignment"),
    "entry not an object": (_body(comparisons=[12]), "comparisons[0] must be an object with item_id and choices and "
                                                     "justifications"),
    "unknown entry field": (_entry(1, scores={}), "comparisons[1]: unknown field 'scores'; expected item_id, choices, "
                                                  "justifications, seconds"),
    "item of another assignment": (_entry(2, item_id=99), "comparisons[2]: item 99 is not part of this assignment"),
    "item twice": (_entry(1, item_id=12), "comparisons[1]: item 12 is judged twice"),
    "choices not an object": (_entry(0, choices=["left", "right"]),
                              "comparisons[0].choices must be an object with one choice per question"),
    "a question without a choice": (_part("choices", 1, drop="talk_to"),
                                    "comparisons[1]: item 7 has no choice for 'talk_to'"),
    "unknown question": (_part("choices", 0, humour="left"), "comparisons[0]: unknown question 'humour' in choices "
                                                             "for item 12; expected empathy, talk_to"),
    "a tie": (_part("choices", 2, empathy="tie"), "comparisons[2]: empathy choice 'tie' for item 30 must be left or "
                                                  "right"),
    "the A/B kind's letter": (_part("choices", 0, talk_to="A"), "comparisons[0]: talk_to choice 'A' for item 12 must "
                                                                "be left or right"),
    "a boolean choice": (_part("choices", 1, empathy=True), "comparisons[1]: empathy choice True for item 7 must be "
                                                            "left or right"),
    "no justifications": (_entry(0, justifications=None), "comparisons[0].justifications must be an object with one "
                                                          "justification per question"),
    "a question without a justification": (_part("justifications", 0, drop="empathy"),
                                           "comparisons[0]: item 12 has no justification for 'empathy'"),
    "a justification of an unknown question": (_part("justifications", 2, humour=WHY),
                                               "comparisons[2]: unknown question 'humour' in justifications for item "
                                               "30; expected empathy, talk_to"),
    "an empty justification": (_why(""), f"comparisons[0]: empathy justification for item 12 {SHORT.format(0)}"),
    "a blank justification": (_why(" \n\t  \r"), f"comparisons[0]: empathy justification for item 12 "
                                                 f"{SHORT.format(0)}"),
    "a short justification": (_why("Nice one", 1, "talk_to"),
                              f"comparisons[1]: talk_to justification for item 7 {SHORT.format(8)}"),
    "short once trimmed": (_why("     kind!     "), f"comparisons[0]: empathy justification for item 12 "
                                                    f"{SHORT.format(5)}"),
    "a long justification": (_why("x" * 61), "comparisons[0]: empathy justification for item 12 is 61 characters "
                                             "long; at most 60 are allowed"),
    "a NUL character": (_why("It cared \x00 more than the other."),
                        "comparisons[0]: empathy justification for item 12 contains a NUL character (at position 9), "
                        "which text cannot hold"),
    "a surrogate": (_why("It cared more \udc80 than the other."),
                    "comparisons[0]: empathy justification for item 12 contains an unpaired surrogate ('\\udc80' at "
                    "position 14), which is not valid Unicode text (was it decoded from bytes that are not UTF-8?)"),
    "a number": (_why(42), "comparisons[0]: empathy justification for item 12 must be text: say in a few words why "
                           "you picked that side"),
    "negative seconds": (_entry(0, seconds=-1), f"comparisons[0].seconds must be a number from 0 to {MAX_SECONDS}"),
    "an item missing": (_body(comparisons=_body()["comparisons"][:1]),
                        "item 7 of this assignment has no comparison (2 of 3 pairs of conversations missing)"),
}
# The schema states "no unpaired surrogate" in words only (submission_schema.STORABLE_TEXT_RULE).
IN_WORDS_ONLY = {"a surrogate"}


@pytest.mark.parametrize("case", REFUSALS)
def test_each_refusal_says_what_and_where(case):
    body, message = REFUSALS[case]
    with pytest.raises(BadInput, match=f"^{re.escape(message)}$"):
        validate_submission(body, KIND, EXPECTED)


@pytest.mark.parametrize("case", sorted(set(REFUSALS) - IN_WORDS_ONLY))
def test_the_generated_schema_refuses_each_body_the_validator_refuses(case):
    body, _ = REFUSALS[case]
    assert not fits(submission_schema(KIND, EXPECTED), body)


ACCEPTED = {
    "as the page sends it": _body(),
    "exactly the least once trimmed": _why("  \n0123456789\t "),
    "exactly the most": _why("é" * 60),
    "emoji and lines": _why("It said 😀 and\nasked how I was."),
    "no seconds, no comment": _entry(0, seconds=None),
    "entries in any order": _body(comparisons=list(reversed(_body()["comparisons"]))),
}


@pytest.mark.parametrize("case", ACCEPTED)
def test_both_accept_each_body_at_the_limits_and_the_justification_is_kept_trimmed(case):
    body = ACCEPTED[case]
    schema = submission_schema(KIND, EXPECTED)
    assert fits(schema, body), why_not(schema, body)
    valid = validate_submission(body, KIND, EXPECTED)
    sent = {e["item_id"]: e for e in body["comparisons"]}
    for item, answer in valid.answers.items():
        assert answer.sides == sent[item]["choices"]
        assert answer.justifications == {q: t.strip(" \t\n\r") for q, t in sent[item]["justifications"].items()}


@pytest.mark.slow
def test_validator_and_generated_schema_agree_on_generated_bodies():
    """Bodies fitting the assignment's schema, bodies mutated not to, and bodies fitting only the generic schema:
    the validator accepts exactly those the assignment's schema admits, and they fit the generic one."""
    import jsonschema_rs

    expected = EXPECTED._replace(min_justification=3, max_justification=12)
    schema, generic = submission_schema(KIND, expected), submission_schema(KIND)
    assert jsonschema_rs.meta.is_valid(schema) and jsonschema_rs.meta.is_valid(generic)

    @given(body=st.one_of(bodies(schema), bodies(schema, fitting=False), bodies(generic)))
    @settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck), database=None)
    def agree(body):
        try:
            validate_submission(body, KIND, expected)
            refusal = None
        except BadInput as error:
            refusal = error.message
        if fits(schema, body):
            assert refusal is None, f"the schema admits this body but the validator says: {refusal}\n{shown(body)}"
            assert fits(generic, body), why_not(generic, body)
        else:
            assert refusal is not None, (f"the validator accepts a body the schema refuses "
                                         f"({why_not(schema, body)})\n{shown(body)}")

    agree()


# --- against the store, on both databases ------------------------------------------------------------------------

def test_creating_one_over_too_few_finished_conversations_says_how_many_there_are_and_are_needed(sample_engine):
    make_chat(sample_engine)
    too_few = (f"chat study {CHAT!r} has 0 ended and submitted conversations with the systems compared ({A}: 0, "
               f"{B}: 0); an ACUTE study of 2 systems needs at least 2, one with each of them: let more of its "
               "sessions be submitted, or compare fewer systems")
    with pytest.raises(StudySetupError, match=f"^{re.escape(too_few)}$"):
        make_acute(sample_engine)
    with chat_app(sample_engine) as app:
        chat_sessions(app, sample_engine, ("cara",), submit=False)  # talked and ended, never submitted
        with pytest.raises(StudySetupError, match=f"^{re.escape(too_few)}$"):
            make_acute(sample_engine)
        chat_sessions(app, sample_engine, ("cleo",))  # one conversation with each partner, each on its own prompt
    with pytest.raises(StudySetupError, match=re.escape(
            f"no pair of conversations of {A} and {B} to compare: chat study {CHAT!r} has 1 ended and submitted with "
            f"{A} and 1 with {B} on the 3 prompts chosen and acute.same_prompt_only asks for a shared prompt, which "
            "they have none of; each pair of systems needs at least one of each, 2 in all")):
        make_acute(sample_engine, acute={"same_prompt_only": True})
    with pytest.raises(StudySetupError, match=re.escape("compare_with: no study named 'nope' in the store")):
        make_acute(sample_engine, acute={"chat_study": "nope"})
    with pytest.raises(StudySetupError, match=re.escape(f"system 'gold' is not a partner of chat study {CHAT!r}")):
        make_acute(sample_engine, systems={"names": ["gold", A], "controls": [CONTROL]})
    summary = make_acute(sample_engine)  # across prompts, since nothing else is there
    real = [p for p in stored_pairs(sample_engine).values() if not p.is_control]
    assert summary.items == len(real) == 1 and real[0].prompts[0] != real[0].prompts[1]


def test_pairs_are_two_systems_on_a_shared_prompt_from_submitted_sessions_only(sample_engine):
    make_chat(sample_engine)
    with chat_app(sample_engine) as app:
        submitted = chat_sessions(app, sample_engine, ("cara", "cleo"))
        unsubmitted = chat_sessions(app, sample_engine, ("cole",), submit=False)
    summary = make_acute(sample_engine)
    pairs = stored_pairs(sample_engine)
    from empeval.server.store.kinds.chat import AssignmentConversation, ChatConversation

    with Session(sample_engine) as session:
        talks = {key: (assignment, system, prompt) for key, assignment, system, prompt in session.execute(
            select(AssignmentConversation.id, AssignmentConversation.assignment_id, ChatConversation.system,
                   ChatConversation.context_id).join(ChatConversation))}
    sessions = {talks[key][0] for p in pairs.values() for key in p.conversations}
    assert sessions == set(submitted.values()) and not sessions & set(unsubmitted.values())
    finished = [t for t in talks.values() if t[0] in submitted.values()]
    prompts = {s: {prompt for _, system, prompt in finished if system == s} for s in PARTNERS}
    shared = len(prompts[A] & prompts[B])
    real = [p for p in pairs.values() if not p.is_control]
    assert all(p.systems[0] != p.systems[1] and set(p.systems) == set(SYSTEMS) for p in real)
    assert sum(p.prompts[0] == p.prompts[1] for p in real) == shared > 0  # every shared prompt is used ...
    assert len(real) == shared + min(len(prompts[A]), len(prompts[B])) - shared  # ... then the leftovers across
    assert summary.items == len(real)
    for p in pairs.values():
        if p.is_control:
            assert CONTROL in p.systems and p.systems[0 if p.control_side == "a" else 1] == CONTROL
        else:
            assert CONTROL not in p.systems and p.control_side is None
    with Session(sample_engine) as session:
        placed = session.execute(select(AssignmentAcutePair.assignment_id, AssignmentAcutePair.acute_pair_id)
                                 .join(AcutePair, AcutePair.id == AssignmentAcutePair.acute_pair_id)
                                 .join(Study, Study.id == AcutePair.study_id).where(Study.name == ACUTE)).all()
    per_pair = Counter(pair for _, pair in placed)
    assert all(per_pair[p.pair_id] == 2 for p in real)  # k = 2 placements, in 2 different assignments
    held: dict[int, list[int]] = {}
    for assignment, pair in placed:
        held.setdefault(assignment, []).extend(set(pairs[pair].prompts))
    assert all(len(prompts) == len(set(prompts)) for prompts in held.values()), "a prompt twice in an assignment"


def test_a_third_party_sees_both_conversations_blind_and_her_choices_are_stored_and_exported(sample_engine):
    chat_raters = finished_chat(sample_engine)
    make_acute(sample_engine)
    pairs = stored_pairs(sample_engine)
    with chat_app(sample_engine) as app:
        judy = rater(app, sample_engine, "judy", ACUTE)
        page = judy.get("/api/annotate/next").get_json()["assignment"]
        assert page["kind"] == "acute" and [c["key"] for c in page["criteria"]] == ["empathy", "talk_to"]
        assert page["justification"] == {"min": 10, "max": 500}
        text = str(page)
        assert not any(name in text for name in PARTNERS) and "control" not in text
        assert not {"system", "is_control", "conversation_id", "assignment_id"} & {
            key for item in page["items"] for side in ("left", "right") for key in item[side]}
        placed = placements(sample_engine, page["assignment_id"])
        assert [(i["position"], i["item_id"]) for i in page["items"]] == [(p, pair) for p, pair, _ in placed]
        for item, (_, pair_id, shown_left) in zip(page["items"], placed, strict=True):
            pair = pairs[pair_id]
            a, b = pair.turns
            left, right = (a, b) if shown_left == "a" else (b, a)
            assert tuple((t["speaker"], t["text"]) for t in item["left"]["turns"]) == left
            assert tuple((t["speaker"], t["text"]) for t in item["right"]["turns"]) == right
            assert [t["index"] for t in item["left"]["turns"]] == list(range(len(left)))
            assert item["left"]["prompt"]["situation"] and item["left"]["prompt"]["emotion"]
        # Her seen rows: both prompts of every pair, under this study and under the chat study it is linked to.
        with Session(sample_engine) as session:
            seen = session.execute(select(Study.name, SeenContext.context_id)
                                   .join(Study, Study.id == SeenContext.study_id)
                                   .join(Annotator, Annotator.id == SeenContext.annotator_id)
                                   .where(Annotator.display_name == "judy")).all()
        prompts = {prompt for _, pair_id, _ in placed for prompt in pairs[pair_id].prompts}
        assert {(s, c) for s, c in seen} == {(study, c) for study in (ACUTE, CHAT) for c in prompts}
        # A rater of the chat study has talked about every prompt: nothing of the ACUTE study is hers to judge.
        cara = rater(app, sample_engine, "cara", ACUTE)
        assert cara.get("/api/annotate/next").get_json()["assignment"] is None

        def body(why: str, submission_id: str) -> dict:
            return {"submission_id": submission_id, "comparisons": [
                {"item_id": item["item_id"], "seconds": 30.0 + n,
                 "choices": {"empathy": "left" if n % 2 == 0 else "right", "talk_to": "right"},
                 "justifications": {"empathy": why, "talk_to": f"  The reply to pair {n} was warmer.  "}}
                for n, item in enumerate(page["items"])]}

        submit = f"/api/assignments/{page['assignment_id']}/submit"
        refused = judy.post(submit, json=body("short", "acute-judy-0001"))
        assert refused.status_code == 400
        assert refused.get_json()["message"] == (f"comparisons[0]: empathy justification for item "
                                                 f"{page['items'][0]['item_id']} must be at least 10 characters (got "
                                                 "5): say in a few words why you picked that side")
        with Session(sample_engine) as session:
            assert session.scalar(select(func.count()).select_from(AcuteChoice)) == 0
        receipt = judy.post(submit, json=body("It asked how she felt.", "acute-judy-0002"))
        assert receipt.status_code == 200, receipt.get_json()
        assert receipt.get_json()["choices"] == 2 * len(page["items"])
        assert judy.post(submit, json=body("It asked how she felt.", "acute-judy-0002")).get_json()["choices"] == \
            2 * len(page["items"])  # a retry stores nothing twice
    with Session(sample_engine) as session:
        stored = {(c.acute_pair_id, c.criterion): (c.choice, c.justification)
                  for c in session.scalars(select(AcuteChoice))}
        seconds = dict(session.execute(select(AssignmentAcutePair.acute_pair_id, AssignmentAcutePair.seconds_on_item)
                                       .where(AssignmentAcutePair.assignment_id == page["assignment_id"])).all())
    for n, item in enumerate(page["items"]):
        assert stored[item["item_id"], "empathy"] == ("left" if n % 2 == 0 else "right", "It asked how she felt.")
        assert stored[item["item_id"], "talk_to"] == ("right", f"The reply to pair {n} was warmer.")
        assert seconds[item["item_id"]] == 30.0 + n

    rows = KIND.export_rows(sample_engine, ACUTE)
    assert len(rows) == len(stored) and all(list(row) == list(ACUTE_COLUMNS) for row in rows)
    for row in rows:
        pair = pairs[row["comparison_id"]]
        shown_left = next(s for _, pid, s in placed if pid == pair.pair_id)
        a, b = 0, 1
        left, right = (a, b) if shown_left == "a" else (b, a)
        assert (row["system_left"], row["system_right"]) == (pair.systems[left], pair.systems[right])
        assert (row["context_left"], row["context_right"]) == (pair.prompts[left], pair.prompts[right])
        assert row["context_id"] == min(pair.prompts) and row["same_prompt"] == (pair.prompts[0] == pair.prompts[1])
        assert row["preferred"] == row[f"system_{row['choice']}"] and row["annotator"] != "judy"  # a pseudonym
        assert row["pair"] == "|".join(sorted(pair.systems)) and row["is_control"] == pair.is_control
        assert row["chat_assignment_left"] in chat_raters.values() and row["late"] is False
        assert row["control_target"] == ("empathy" if pair.is_control else None)  # the scrambled control's target,
        # fluency, is no question of this study: its first question stands in
    table = validate_acute(rows)
    assert list(table.columns) == list(ACUTE_COLUMNS) and len(table) == len(rows)

    # The dashboard counts her comparisons; its browser shows each conversation under its system, her pick named.
    with Session(sample_engine) as session:
        study = session.scalar(select(Study).where(Study.name == ACUTE))
        progress = KIND.progress(session, study)
        browsed = KIND.item_page(session, study, 1, 50, rated_only=True)
    assert progress["comparisons"] == len(page["items"]) and progress["choices"] == len(stored)
    assert browsed.total == len(page["items"]) and all(len(i.responses) == 2 for i in browsed.items)
    first = next(i for i in browsed.items if i.item_id == page["items"][0]["item_id"])
    assert {system for system, _ in first.responses} == set(pairs[first.item_id].systems)
    assert first.ratings[0]["scores"]["empathy"].endswith(": It asked how she felt.")


def test_the_reports_of_the_two_linked_studies_name_each_other(sample_engine, tmp_path):
    from empeval.reporting import write_study_report

    finished_chat(sample_engine)
    make_acute(sample_engine)
    with chat_app(sample_engine) as app:
        judy = rater(app, sample_engine, "judy", ACUTE)
        page = judy.get("/api/annotate/next").get_json()["assignment"]
        body = {"submission_id": "acute-judy-0001", "comparisons": [
            {"item_id": item["item_id"], "choices": {"empathy": "left", "talk_to": "left"},
             "justifications": {"empathy": "It asked how she felt.", "talk_to": "It listened to her."}}
            for item in page["items"]]}
        assert judy.post(f"/api/assignments/{page['assignment_id']}/submit", json=body).status_code == 200
    acute = write_study_report(sample_engine, ACUTE, tmp_path / "acute")["markdown"].read_text(encoding="utf-8")
    assert "(ACUTE-Eval, pairs of conversations)" in acute and f"chat study **{CHAT}**" in acute
    chat = write_study_report(sample_engine, CHAT, tmp_path / "chat")["markdown"].read_text(encoding="utf-8")
    assert "Linked ACUTE-Eval studies" in chat and f"**{ACUTE}**, an ACUTE-Eval study" in chat


def test_simulated_raters_answer_every_pair_and_the_crowd_scores_the_control_pairs(sample_engine):
    import random

    from empeval.server.annotation.handout import assignment_payload
    from empeval.tasks.crowd.contract import score_controls
    from empeval.tasks.kinds import task_kind
    from empeval.tasks.simulate import CrowdModel, Rater

    finished_chat(sample_engine)
    make_acute(sample_engine)
    tasks = task_kind("acute")
    judge = tasks.simulated_answers(sample_engine, ACUTE, CrowdModel(), seed=1)
    with Session(sample_engine) as session:
        assignments = session.scalars(select(AssignmentAcutePair.assignment_id).distinct()).all()
        config = session.scalar(select(Study).where(Study.name == ACUTE)).config
    model = CrowdModel()
    for assignment_id in assignments:
        payload = assignment_payload(sample_engine, assignment_id)
        good = Rater.draw("sim", model, random.Random(assignment_id), behaviour="good")
        body = judge(good, random.Random(assignment_id), payload)
        with sample_engine.connect() as connection:
            expected = KIND.expected(connection, assignment_id, config)
        valid = validate_submission({"submission_id": f"sim-{assignment_id:08d}", **body}, KIND, expected)
        assert all(len(why) >= 10 for answer in valid.answers.values() for why in answer.justifications.values())
        assert set(valid.answers) == {item["item_id"] for item in payload["items"]}
        with Session(sample_engine) as session:
            contexts, controls = tasks.crowd_controls(session, assignment_id)
        placed = placements(sample_engine, assignment_id)
        pairs = stored_pairs(sample_engine)
        assert contexts == sorted({c for _, pid, _ in placed for c in pairs[pid].prompts})
        for control in controls:
            pair = pairs[control.item_id]
            shown_left = next(side for _, pid, side in placed if pid == control.item_id)
            control_left = pair.control_side == shown_left
            assert control.passing == (("right",) if control_left else ("left",)) and control.target == "empathy"
            careful = {"comparisons": [{"item_id": control.item_id, "choices": {"empathy": control.passing[0]}}]}
            assert score_controls(careful, [control]).passed == 1


def test_the_export_file_is_read_back_by_its_kind(tmp_path):
    from empeval.analysis.kinds.acute.schema import acute_rows
    from empeval.analysis.report.study import export_kind

    rows = acute_rows([(1, 10, A, 3, 11, B, 4, "left"), (2, 12, B, 5, 13, A, 5, "right")],
                      criteria=("empathy", "talk_to"))
    path = tmp_path / "judge.csv"
    path.write_text(rows_to_csv(rows, ACUTE_COLUMNS), encoding="utf-8")
    assert export_kind(path).name == "acute"
    read = read_acute(path)
    assert read["same_prompt"].tolist() == [False, False, True, True] and read["context_id"].tolist() == [3, 3, 5, 5]
