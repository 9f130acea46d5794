"""A study file's [qualification] (tasks/qualification.py and each kind's qualification_items): gold items read in the
kind's terms, the pass rule with its defaults, the stored configuration round trip, and every refusal naming the
field and what to do; a kind without a qualification, an MTurk study and a Prolific study without the code for
those who fail refuse the section."""
from __future__ import annotations

import copy

import pytest

from empeval.server.store.qualification import Accepted
from empeval.server.store.study_config import StudyConfig
from empeval.tasks.kind_parts import StudyFileError
from empeval.tasks.study_file import parse_study
from tests.annotation.qualification_fixtures import LIKERT_GOLD, PAIRWISE_GOLD, likert_file, pairwise_file

PROLIFIC = {"platform": "prolific", "prolific_study_id": "5f0c1e2d3a4b5c6d7e8f9a0b", "completion_code": "C1A2B3C4"}


def acute_file(**changes) -> dict:
    return {"name": "judge", "kind": "acute", "seed": 1, "systems": {"names": ["retrieval", "cobert"],
                                                                      "controls": ["control-generic"]},
            "acute": {"chat_study": "talk"}, **changes}


def refusal(data: dict) -> str:
    with pytest.raises(StudyFileError) as raised:
        parse_study(data, "study.toml")
    return str(raised.value)


def with_item(make, change: dict, index: int = 0, **top) -> dict:
    data = make(**top)
    data["qualification"] = copy.deepcopy(data["qualification"])
    data["qualification"]["items"][index] = {**data["qualification"]["items"][index], **change}
    for key, value in list(change.items()):
        if value is None:
            del data["qualification"]["items"][index][key]
    return data


def test_likert_gold_items_read_ranges_and_single_scores_on_the_scale_and_round_trip_through_the_store():
    config = parse_study(likert_file(), "study.toml")
    rule = config.qualification
    assert (rule.min_correct, rule.attempts, rule.code_on_failure) == (2, 1, "screened_out")
    first, _, third = rule.items
    assert first.turns == tuple(LIKERT_GOLD[0]["context"]) and first.responses == (LIKERT_GOLD[0]["response"],)
    assert first.accepted == (Accepted("empathy", (1, 2)), Accepted("relevance", (1, 2, 3)),
                              Accepted("fluency", (4, 5)))
    assert third.accepted[2] == Accepted("fluency", (1,))
    assert StudyConfig.from_json(config.to_json(), study="qual") == config
    without = {key: value for key, value in likert_file().items() if key != "qualification"}
    assert "qualification" not in parse_study(without, "study.toml").to_json()  # stored as it always was


def test_the_pass_rule_defaults_to_every_item_right_in_one_attempt():
    config = parse_study(likert_file(qualification={"items": LIKERT_GOLD}), "study.toml")
    assert (config.qualification.min_correct, config.qualification.attempts) == (3, 1)


def test_pairwise_gold_items_read_a_choice_or_a_list_of_them():
    rule = parse_study(pairwise_file(), "study.toml").qualification
    assert rule.items[0].responses == (PAIRWISE_GOLD[0]["response_a"], PAIRWISE_GOLD[0]["response_b"])
    assert rule.items[0].accepted == (Accepted("empathy", ("B",)), Accepted("relevance", ("B",)),
                                      Accepted("fluency", ("A", "B", "T")))


def test_acute_gold_items_name_a_control_partner_listed_under_the_studys_controls():
    data = acute_file(qualification={"items": [{"control": "control-generic", "feedback": "Generic."}]})
    item, = parse_study(data, "study.toml").qualification.items
    assert (item.control, item.feedback, item.accepted) == ("control-generic", "Generic.", ())
    data["qualification"]["items"][0]["control"] = "control-scrambled"
    assert "qualification.items[0].control: 'control-scrambled' is not among systems.controls" in refusal(data)


@pytest.mark.parametrize(("data", "says"), [
    (with_item(likert_file, {"answer": {"empathy": [1, 2], "relevance": [1, 3], "fluency": 6}}),
     "qualification.items[0].answer.fluency: 6 is off the study's scale (1-5)"),
    (with_item(likert_file, {"answer": {"empathy": [2, 1], "relevance": [1, 3], "fluency": 5}}),
     "qualification.items[0].answer.empathy: [2, 1] is not [lowest, highest]: write [1, 2]"),
    (with_item(likert_file, {"answer": {"empathy": "low", "relevance": [1, 3], "fluency": 5}}),
     "answer.empathy: must be a score or [lowest, highest] on the study's scale (1-5)"),
    (with_item(likert_file, {"answer": {"empathy": [1, 2], "relevance": [1, 3]}}),
     "qualification.items[0].answer.fluency: is required: every criterion of the study needs its right answer"),
    (with_item(likert_file, {"answer": {"empathy": [1, 2], "relevance": [1, 3], "fluency": 5, "humour": 1}}),
     "qualification.items[0].answer.humour: is not a criterion of the study; expected empathy, relevance, fluency"),
    (with_item(likert_file, {"answer": {"empathy": [1, 5], "relevance": [1, 5], "fluency": [1, 5]}}),
     "counts every score right on every criterion"),
    (with_item(likert_file, {"context": ["I passed!", "Well done!"]}),
     "qualification.items[0].context: has 2 turns: it must end with a turn of the speaker"),
    (with_item(likert_file, {"context": []}), "qualification.items[0].context: must list the conversation's turns"),
    (with_item(likert_file, {"response": None}), "qualification.items[0].response: is required"),
    (with_item(likert_file, {"feedback": ""}), "qualification.items[0].feedback: must be a non-empty string"),
    (with_item(likert_file, {"response_a": "A"}), "qualification.items[0].response_a: unknown field of a gold item"),
    (with_item(likert_file, {"feedback": "bad \x00 text"}), "qualification.items[0].feedback: contains a NUL"),
    (likert_file(qualification={"min_correct": 4, "items": LIKERT_GOLD}),
     "qualification.min_correct: must be an integer <= 3, got 4"),
    (likert_file(qualification={"attempts": 0, "items": LIKERT_GOLD}),
     "qualification.attempts: must be an integer >= 1"),
    (likert_file(qualification={"items": []}), "qualification.items: must list the gold items as tables"),
    (likert_file(qualification={"items": LIKERT_GOLD * 7}), "lists 21 gold items; a qualification is a short training"),
    (likert_file(qualification={"items": LIKERT_GOLD, "pass": 2}), "qualification.pass: unknown field"),
    (likert_file(qualification={"items": LIKERT_GOLD, "code_on_failure": "rejected"}),
     "qualification.code_on_failure: unknown code 'rejected'; expected 'screened_out' or 'failed_checks'"),
    (with_item(pairwise_file, {"answer": {"empathy": "C", "relevance": "B", "fluency": "A"}}),
     "qualification.items[0].answer.empathy: 'C' is not a choice of the study; expected \"A\" or \"B\" or \"T\""),
    (with_item(pairwise_file, {"answer": {"empathy": "T", "relevance": "B", "fluency": "A"}},
               design={"judgments_per_pair": 2, "items_per_assignment": 2, "ties": False}),
     "'T' is not a choice of the study (the study has no ties: design.ties = false)"),
    (with_item(pairwise_file, {"answer": {"empathy": ["A", "A"], "relevance": "B", "fluency": "A"}}),
     "answer.empathy: lists a choice twice"),
    (with_item(pairwise_file, {"response": "one"}), "qualification.items[0].response: unknown field of a gold item"),
])
def test_a_gold_item_or_rule_that_does_not_fit_is_refused_naming_the_field(data, says):
    assert says in refusal(data)


def test_a_kind_without_a_qualification_refuses_the_section_naming_the_kinds_that_have_one():
    data = {"name": "bws", "kind": "best_worst", "seed": 1, "contexts": {"count": 4},
            "systems": {"names": ["a", "b", "c"]}, "qualification": {"items": LIKERT_GOLD}}
    assert refusal(data) == ("study.toml: qualification: a best-worst scaling study has no qualification (the kinds "
                             "that have one: likert, pairwise, acute); remove the [qualification] section")


def test_an_mturk_study_is_told_to_use_mephistos_onboarding():
    assert "MTurk workers are onboarded by Mephisto" in refusal(likert_file(recruitment={"platform": "mturk"}))


def test_a_prolific_study_needs_the_code_a_failed_participant_is_given():
    says = refusal(likert_file(recruitment=PROLIFIC))
    assert "recruitment.screened_out_code: is required on Prolific when the study has a [qualification]" in says
    failed_checks = likert_file(recruitment=PROLIFIC, qualification={"items": LIKERT_GOLD,
                                                                     "code_on_failure": "failed_checks"})
    assert "recruitment.failed_checks_code: is required on Prolific" in refusal(failed_checks)
    fine = parse_study(likert_file(recruitment={**PROLIFIC, "screened_out_code": "S0C1D2E3",
                                                "failed_checks_code": "F4A5B6C7"}), "study.toml")
    assert fine.recruitment.code_for("screened_out") == "S0C1D2E3"
    assert fine.recruitment.code_for("failed_checks") == "F4A5B6C7"
    assert StudyConfig.from_json(fine.to_json(), study="qual") == fine


@pytest.mark.parametrize(("recruitment", "says"), [
    ({**PROLIFIC, "screened_out_code": "C1A2B3C4"}, "recruitment.screened_out_code: 'C1A2B3C4' is given for another "
                                                    "outcome too"),
    ({**PROLIFIC, "failed_checks_code": "no-dashes"}, "recruitment.failed_checks_code: 'no-dashes' must be 1-40 "
                                                      "letters or digits"),
    ({"platform": "local", "screened_out_code": "S0"}, "recruitment.screened_out_code: is for Prolific studies only"),
])
def test_the_completion_codes_are_checked_like_the_first_one(recruitment, says):
    data = {k: v for k, v in likert_file(recruitment=recruitment).items() if k != "qualification"}
    assert says in refusal(data)
