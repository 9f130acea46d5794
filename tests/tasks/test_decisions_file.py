"""The study file's [decisions] table (tasks/decisions_file.py): comparisons as "A vs B" or "A vs B on criterion", all
pairs by default; every wrong value refused with the file and the field named; stored in the study's configuration and
read back the same, and a study without the table stores what it always did."""
from __future__ import annotations

import pytest

from empeval.server.store.study_config import StudyConfig
from empeval.server.store.study_decisions import Comparison
from empeval.tasks.kind_parts import StudyFileError
from empeval.tasks.study_file import parse_study

BASE = {"name": "p", "contexts": {"count": 10}, "systems": {"names": ["gold", "moel", "mime"]}}


def _parse(decisions):
    return parse_study({**BASE, "decisions": decisions}, "s.toml")


def test_comparisons_expand_per_criterion_and_round_trip_through_the_store():
    config = _parse({"comparisons": ["gold vs moel on empathy", "gold vs mime"], "margin": 0.3,
                     "stop_when_decided": True, "budget": 50})
    d = config.decisions
    assert d.comparisons == (Comparison("gold", "moel", "empathy"), Comparison("gold", "mime", "empathy"),
                             Comparison("gold", "mime", "relevance"), Comparison("gold", "mime", "fluency"))
    assert (d.margin, d.alpha, d.stop_when_decided, d.budget) == (0.3, 0.05, True, 50)
    assert d.alpha_each == pytest.approx(0.05 / 4)
    assert StudyConfig.from_json(config.to_json(), study="p") == config


def test_all_pairs_on_every_criterion_by_default_and_no_table_stores_nothing():
    d = _parse({}).decisions
    assert len(d.comparisons) == 3 * 3 and not d.stop_when_decided and d.margin is None and d.budget is None
    plain = parse_study(BASE, "s.toml")
    assert plain.decisions is None and "decisions" not in plain.to_json()


@pytest.mark.parametrize(("decisions", "field", "says"), [
    ({"comparisons": ["gold vs gold"]}, "decisions.comparisons[0]", "compares a system with itself"),
    ({"comparisons": ["gold - moel"]}, "decisions.comparisons[0]", "must read"),
    ({"comparisons": ["gold vs moel", "gold vs nobody"]}, "decisions.comparisons[1]", "not one of the study's systems"),
    ({"comparisons": ["gold vs moel on taste"]}, "decisions.comparisons[0]", "unknown criterion 'taste'"),
    ({"comparisons": ["gold vs moel", "gold vs moel on empathy"]}, "decisions.comparisons", "one comparison twice"),
    ({"margin": 0}, "decisions.margin", "above 0"),
    ({"margin": "small"}, "decisions.margin", "must be a number"),
    ({"alpha": 0.9}, "decisions.alpha", "between"),
    ({"stop_when_decided": "yes"}, "decisions.stop_when_decided", "true or false"),
    ({"budget": 0}, "decisions.budget", ">= 1"),
    ({"colour": 1}, "decisions.colour", "unknown field"),
])
def test_a_wrong_value_is_refused_naming_the_field(decisions, field, says):
    with pytest.raises(StudyFileError) as refused:
        _parse(decisions)
    assert refused.value.field_path == field and says in refused.value.reason
    assert str(refused.value).startswith(f"s.toml: {field}: ")


@pytest.mark.parametrize("kind", ["pairwise", "best_worst"])
def test_a_study_of_another_kind_is_refused_the_table_naming_its_kind(kind):
    """Their monitoring reads Likert ratings: the table would never close the study nor show a state."""
    names = ["gold", "moel", "mime"][: 2 if kind == "pairwise" else 3]
    with pytest.raises(StudyFileError) as refused:
        parse_study({**BASE, "kind": kind, "systems": {"names": names}, "decisions": {"stop_when_decided": True}},
                    "s.toml")
    assert refused.value.field_path == "decisions"
    assert f"is for Likert studies only (this study's kind is {kind!r})" in refused.value.reason
