"""The study file's [recruitment] section: the platform (local volunteers by default, Prolific, MTurk), and
for Prolific the study id the link is bound to and the completion code; every refusal names the field; the
section survives the store, and a study without it stores the JSON it always did."""
from __future__ import annotations

import pytest

from empeval.server.store.study_config import StudyConfig
from empeval.server.store.study_parts import Recruitment, StudyConfigError
from empeval.tasks.kind_parts import StudyFileError
from empeval.tasks.study_file import parse_study

PROLIFIC_STUDY_ID = "5f0c1e2d3a4b5c6d7e8f9a0b"


def study(recruitment: dict | None = None) -> dict:
    data = {"name": "p", "contexts": {"count": 3}, "systems": {"names": ["gold"]}}
    if recruitment is not None:
        data["recruitment"] = recruitment
    return data


def test_a_study_without_the_section_recruits_local_volunteers_and_stores_no_recruitment_key():
    config = parse_study(study())
    assert config.recruitment == Recruitment(platform="local", prolific_study_id=None, completion_code=None)
    assert "recruitment" not in config.to_json()


def test_a_prolific_study_keeps_its_study_id_and_completion_code_through_the_store():
    config = parse_study(study({"platform": "prolific", "prolific_study_id": PROLIFIC_STUDY_ID,
                                "completion_code": "C1A2B3C4"}))
    assert config.recruitment == Recruitment("prolific", PROLIFIC_STUDY_ID, "C1A2B3C4")
    assert config.to_json()["recruitment"]["prolific_study_id"] == PROLIFIC_STUDY_ID
    assert StudyConfig.from_json(config.to_json(), study="p") == config


def test_an_mturk_study_is_stored_with_its_platform():
    config = parse_study(study({"platform": "mturk"}))
    assert config.recruitment.platform == "mturk"
    assert StudyConfig.from_json(config.to_json(), study="p").recruitment.platform == "mturk"


def test_a_stored_row_without_the_section_reads_as_local_volunteers():
    config = StudyConfig.from_json({"name": "old", "systems": ["gold"]}, study="old")
    assert config.recruitment.platform == "local" and config.recruitment.completion_code is None


@pytest.mark.parametrize(("recruitment", "field", "says"), [
    ({"platform": "upwork"}, "recruitment.platform", "expected one of local, prolific, mturk"),
    ({"platform": ""}, "recruitment.platform", "non-empty"),
    ({"platform": 3}, "recruitment.platform", "non-empty string"),
    ({"platform": "prolific", "completion_code": "C1A2B3C4"}, "recruitment.prolific_study_id", "is required"),
    ({"platform": "prolific", "prolific_study_id": "5f0c1e2d3a4b5c6d7e8f9a0", "completion_code": "C1"},
     "recruitment.prolific_study_id", "24 lower-case hexadecimal"),
    ({"platform": "prolific", "prolific_study_id": PROLIFIC_STUDY_ID.upper(), "completion_code": "C1"},
     "recruitment.prolific_study_id", "24 lower-case hexadecimal"),
    ({"platform": "prolific", "prolific_study_id": "5f0c1e2d3a4b5c6d7e8f9a0g", "completion_code": "C1"},
     "recruitment.prolific_study_id", "24 lower-case hexadecimal"),
    ({"platform": "prolific", "prolific_study_id": PROLIFIC_STUDY_ID}, "recruitment.completion_code",
     "is required"),
    ({"platform": "prolific", "prolific_study_id": PROLIFIC_STUDY_ID, "completion_code": "C1A2&x=<b>"},
     "recruitment.completion_code", "letters or digits"),
    ({"platform": "prolific", "prolific_study_id": PROLIFIC_STUDY_ID, "completion_code": "C1 A2"},
     "recruitment.completion_code", "letters or digits"),
    ({"platform": "prolific", "prolific_study_id": PROLIFIC_STUDY_ID, "completion_code": "C" * 41},
     "recruitment.completion_code", "1-40"),
    ({"platform": "local", "completion_code": "C1A2B3C4"}, "recruitment.completion_code", "Prolific studies only"),
    ({"platform": "mturk", "prolific_study_id": PROLIFIC_STUDY_ID}, "recruitment.prolific_study_id",
     "Prolific studies only"),
    ({"platform": "prolific", "study": PROLIFIC_STUDY_ID}, "recruitment.study", "unknown field"),
])
def test_a_bad_recruitment_section_is_refused_naming_the_field(recruitment, field, says):
    with pytest.raises(StudyFileError) as caught:
        parse_study(study(recruitment), "study.toml")
    assert caught.value.field_path == field
    assert says in caught.value.reason
    assert str(caught.value).startswith(f"study.toml: {field}: ")


def test_a_recruitment_value_that_is_not_a_table_is_refused():
    with pytest.raises(StudyFileError) as caught:
        parse_study(study("prolific"))  # type: ignore[arg-type]
    assert caught.value.field_path == "recruitment"


@pytest.mark.parametrize(("stored", "key"), [
    ("prolific", "recruitment"),
    ({"platform": 1}, "recruitment.platform"),
    ({"platform": "prolific", "completion_code": ["C1"]}, "recruitment.completion_code"),
])
def test_a_stored_recruitment_that_does_not_validate_names_the_key(stored, key):
    with pytest.raises(StudyConfigError) as caught:
        StudyConfig.from_json({"recruitment": stored}, study="p")
    assert caught.value.key == key
