"""Pairwise (A/B) study files: the kind, the pairs (listed, around an anchor, or all), k per (context, pair),
ties, the link to another study; every refusal names the field; the typed configuration survives the store."""
from __future__ import annotations

import re

import pytest

from empeval.server.store import open_store, unit_of_work
from empeval.server.store.kinds.likert import LikertSetup, Scale
from empeval.server.store.kinds.pairwise import DEFAULT_PAIRWISE_CRITERIA, Pair
from empeval.server.store.models import Study
from empeval.server.store.queries import study_by_name
from empeval.server.store.study_config import StudyConfig
from empeval.server.store.study_parts import DEFAULT_CRITERIA
from empeval.tasks.kind_parts import StudyFileError
from empeval.tasks.study_file import parse_study


def pairwise(**overrides) -> dict:
    data = {"name": "ab", "kind": "pairwise", "contexts": {"count": 4},
            "systems": {"names": ["moel", "gold", "mime"]}}
    for key, value in overrides.items():
        if isinstance(value, dict) and isinstance(data.get(key), dict):
            data[key] = {**data[key], **value}
        elif value is None:
            data.pop(key, None)
        else:
            data[key] = value
    return data


def test_a_likert_file_stays_likert_and_stores_no_pairwise_key():
    config = parse_study({"name": "l", "contexts": {"count": 3}, "systems": {"names": ["gold"]}})
    assert config.kind == "likert" and isinstance(config.setup, LikertSetup) and config.criteria == DEFAULT_CRITERIA
    assert not {"kind", "pairwise", "compare_with"} & set(config.to_json())


def test_without_pairs_or_anchor_every_pair_of_names_is_compared_in_the_order_named():
    config = parse_study(pairwise())
    assert config.kind == "pairwise" and config.criteria == DEFAULT_PAIRWISE_CRITERIA
    assert config.setup.pairs == (Pair("moel", "gold"), Pair("moel", "mime"), Pair("gold", "mime"))
    assert [p.label for p in config.setup.pairs] == ["gold|moel", "mime|moel", "gold|mime"]
    assert config.setup.judgments_per_pair == 3 and config.setup.ties is True


def test_an_anchor_is_compared_with_each_other_name():
    config = parse_study(pairwise(systems={"anchor": "mime"}))
    assert config.setup.pairs == (Pair("mime", "moel"), Pair("mime", "gold"))
    assert config.setup.anchor == "mime"


def test_listed_pairs_k_ties_and_the_link_are_kept():
    config = parse_study(pairwise(systems={"pairs": [["gold", "moel"], ["mime", "moel"]]}, compare_with="demo",
                                  design={"judgments_per_pair": 5, "ties": False, "items_per_assignment": 6}))
    assert config.setup.pairs == (Pair("gold", "moel"), Pair("mime", "moel"))
    assert (config.setup.judgments_per_pair, config.setup.ties, config.compare_with) == (5, False, "demo")
    assert config.design.items_per_assignment == 6


def test_the_pairwise_questions_ask_for_a_choice():
    assert all(c.question.startswith("Which response") for c in DEFAULT_PAIRWISE_CRITERIA)
    assert [c.key for c in DEFAULT_PAIRWISE_CRITERIA] == [c.key for c in DEFAULT_CRITERIA]


@pytest.mark.parametrize(("overrides", "field", "says"), [
    ({"systems": {"pairs": [["moel", "kemp"]]}}, "systems.pairs[0]", "'kemp' is not among systems.names"),
    ({"systems": {"pairs": [["moel", "gold"], ["mime", "mime"]]}}, "systems.pairs[1]", "with itself"),
    ({"systems": {"pairs": [["moel", "gold"], ["mime", "gold"], ["gold", "moel"]]}}, "systems.pairs[2]",
     "repeats systems.pairs[0]"),
    ({"systems": {"pairs": [["moel"]]}}, "systems.pairs[0]", "two system names"),
    ({"systems": {"pairs": []}}, "systems.pairs", "non-empty list"),
    ({"systems": {"pairs": [["moel", "gold"]]}}, "systems.names", "'mime' is in no pair"),
    ({"systems": {"anchor": "kemp"}}, "systems.anchor", "'kemp' is not among systems.names"),
    ({"systems": {"anchor": "moel", "pairs": [["moel", "gold"]]}}, "systems", "pairs or anchor, not both"),
    ({"systems": {"names": ["moel"]}}, "systems.names", "at least two systems"),
    ({"kind": "ranking"}, "kind", "unknown study kind 'ranking'"),
    ({"compare_with": "ab"}, "compare_with", "names this study itself"),
    ({"compare_with": "no spaces"}, "compare_with", "is not a study name"),
    ({"design": {"ratings_per_response": 3}}, "design.ratings_per_response", "use design.judgments_per_pair"),
    ({"design": {"judgments_per_pair": 0}}, "design.judgments_per_pair", ">= 1"),
    ({"design": {"ties": "yes"}}, "design.ties", "true or false"),
    ({"scale": {"min": 1, "max": 3, "labels": ["a", "b", "c"]}}, "scale", "no scale"),
])
def test_bad_pairwise_input_is_refused_naming_the_field(overrides, field, says):
    with pytest.raises(StudyFileError) as caught:
        parse_study(pairwise(**overrides), "ab.toml")
    assert caught.value.field_path == field and says in caught.value.reason
    assert str(caught.value).startswith(f"ab.toml: {field}: ")


@pytest.mark.parametrize(("section", "key", "value"), [
    ("systems", "pairs", [["gold", "moel"]]), ("systems", "anchor", "gold"),
    ("design", "judgments_per_pair", 2), ("design", "ties", False),
])
def test_pairwise_fields_in_a_likert_file_are_refused_naming_them(section, key, value):
    data = {"name": "l", "contexts": {"count": 3}, "systems": {"names": ["gold", "moel"]}}
    data.setdefault(section, {})[key] = value
    with pytest.raises(StudyFileError) as caught:
        parse_study(data)
    # Every kind that reads the field is named (ACUTE studies count judgments per pair too).
    assert caught.value.field_path == f"{section}.{key}" and re.search(r"is for (\w+ and )*pairwise( and \w+)* "
                                                                       r"studies only", caught.value.reason)


def test_a_pairwise_configuration_survives_the_store_unchanged(sqlite_url):
    config = parse_study(pairwise(systems={"anchor": "moel", "controls": ["control-generic"]}, compare_with="demo",
                                  design={"judgments_per_pair": 2, "ties": False}))
    engine = open_store(sqlite_url)
    with unit_of_work(engine) as session:
        session.add(Study(name="ab", config=config, seed=0))
    with unit_of_work(engine) as session:
        stored = study_by_name(session, "ab").config
    assert stored == config and stored.control_targets == {"control-generic": "empathy"}
    assert StudyConfig.from_json(config.to_json(), study="ab") == config
    engine.dispose()


@pytest.mark.parametrize(("pairwise_json", "named"), [
    ({"pairs": [{"first": "a", "second": 2}]}, "pairwise.pairs[0].second"),
    ({"ties": "no"}, "pairwise.ties"),
    ({"judgments_per_pair": "3"}, "pairwise.judgments_per_pair"),
    ("moel", "pairwise"),
])
def test_a_stored_pairwise_setup_that_does_not_validate_names_the_key(pairwise_json, named):
    from empeval.server.store.study_parts import StudyConfigError

    with pytest.raises(StudyConfigError) as caught:
        StudyConfig.from_json({"kind": "pairwise", "pairwise": pairwise_json}, study="ab")
    assert caught.value.key == named


def test_a_configuration_stored_before_pairwise_studies_loads_as_likert_and_writes_back_the_same_json():
    from tests.store.test_study_config import OLD_ROW

    config = StudyConfig.from_json(OLD_ROW, study="old-pilot")
    scale = Scale(min=1, max=4, labels=("1", "2", "3", "4"))  # OLD_ROW's own scale
    assert (config.kind, config.setup, config.compare_with) == ("likert", LikertSetup(scale=scale), "")
    assert config.to_json() == OLD_ROW
