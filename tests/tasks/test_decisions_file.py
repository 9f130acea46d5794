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
    _refused(_parse, "s.toml", decisions, field, says)


def _refused(parse, source: str, decisions, field: str, says: str) -> None:
    """`parse(decisions)` refuses the study file, naming `field` of `source` and saying `says`."""
    with pytest.raises(StudyFileError) as refused:
        parse(decisions)
    assert refused.value.field_path == field and says in refused.value.reason
    assert str(refused.value).startswith(f"{source}: {field}: ")


OTHER_KINDS = {
    "best_worst": {**BASE, "kind": "best_worst"},
    "chat": {"name": "talk", "kind": "chat", "seed": 2, "contexts": {"split": "test", "count": 8},
             "systems": {"names": ["control-generic", "control-mismatched"], "controls": []},
             "chat": {"conversations_per_system": 4, "min_utterances": 2, "max_utterances": 40}},
    "acute": {"name": "judge", "kind": "acute", "seed": 1, "systems": {"names": ["retrieval", "cobert"]},
              "acute": {"chat_study": "talk"}},
}


@pytest.mark.parametrize("kind", sorted(OTHER_KINDS))
def test_a_study_of_a_kind_without_decisions_is_refused_the_table_naming_its_kind(kind):
    """Their monitoring reads Likert ratings and A/B judgments: the table would never close the study nor show a
    state."""
    with pytest.raises(StudyFileError) as refused:
        parse_study({**OTHER_KINDS[kind], "decisions": {"stop_when_decided": True}}, "s.toml")
    assert refused.value.field_path == "decisions"
    assert (f"is for Likert and pairwise (A/B) studies only (this study's kind is {kind!r})"
            in refused.value.reason)


PAIRWISE = {**BASE, "kind": "pairwise", "systems": {"names": ["gold", "moel", "mime"], "anchor": "moel"}}


def _parse_pairwise(decisions, **systems):
    data = {**PAIRWISE, "decisions": decisions}
    if systems:
        data["systems"] = {"names": ["gold", "moel", "mime"], **systems}
    return parse_study(data, "ab.toml")


def test_a_pairwise_study_compares_the_pairs_its_design_judges_by_default_anchor_first():
    d = _parse_pairwise({"margin": 0.1, "stop_when_decided": True}).decisions
    assert d.comparisons == tuple(Comparison("moel", other, c) for c in ("empathy", "relevance", "fluency")
                                  for other in ("gold", "mime"))
    assert d.margin == 0.1 and d.stop_when_decided
    every_pair = _parse_pairwise({}, pairs=[["mime", "gold"], ["gold", "moel"]]).decisions.comparisons
    assert [c.describe() for c in every_pair[:2]] == ["mime vs gold on empathy", "gold vs moel on empathy"]


def test_a_pairwise_comparison_names_a_judged_pair_in_either_order_and_round_trips_through_the_store():
    config = _parse_pairwise({"comparisons": ["gold vs moel on empathy", "moel vs mime"], "margin": 0.2})
    assert config.decisions.comparisons[0] == Comparison("gold", "moel", "empathy")
    assert len(config.decisions.comparisons) == 1 + 3
    assert StudyConfig.from_json(config.to_json(), study="p") == config


@pytest.mark.parametrize(("decisions", "field", "says"), [
    ({"comparisons": ["gold vs mime"]}, "decisions.comparisons[0]",
     "gold vs mime is a pair the study's design never judges; its pairs are moel vs gold, moel vs mime"),
    ({"comparisons": ["moel vs gold", "mime vs gold on fluency"]}, "decisions.comparisons[1]",
     "mime vs gold is a pair the study's design never judges"),
    ({"margin": 1}, "decisions.margin", "must be below 1 (net preference: A's share of wins minus B's, between -1 "
                                        "and 1), got 1"),
    ({"margin": 2.5}, "decisions.margin", "must be below 1"),
    ({"margin": 0}, "decisions.margin", "must be above 0 (net preference"),
])
def test_a_pairwise_study_refuses_a_pair_it_does_not_judge_and_a_margin_out_of_range(decisions, field, says):
    _refused(_parse_pairwise, "ab.toml", decisions, field, says)


def test_a_likert_margin_keeps_scale_points_and_no_upper_bound_of_one():
    assert _parse({"margin": 1.5}).decisions.margin == 1.5
    with pytest.raises(StudyFileError, match=r"must be above 0 \(scale points\)"):
        _parse({"margin": 0})
