"""The study file keeps a pairwise study to sizes the pairwise design can balance per rater: an assignment's real
pairs (items less controls) must be even; an odd number is refused naming design.items_per_assignment and
design.control_rate, with sizes nearby that fit; a size left to its default grows to fit. The shipped A/B study
is such a size."""
from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from empeval.tasks.kind_parts import StudyFileError
from empeval.tasks.kinds.pairwise_design import plan_pairwise
from empeval.tasks.study_file import STUDIES_DIR, load_study_file, parse_study


def ab_file(size: int, rate: float | None) -> dict:
    design = {"items_per_assignment": size} | ({"control_rate": rate} if rate is not None else {})
    return {"name": "ab", "kind": "pairwise", "contexts": {"count": 4},
            "systems": {"names": ["moel", "gold", "mime"], "anchor": "moel",
                        "controls": ["control-generic"] if rate else []},
            "design": design}


def test_ten_items_with_one_control_are_refused_naming_both_fields_and_the_sizes_that_fit():
    with pytest.raises(StudyFileError) as refused:
        parse_study(ab_file(10, 0.1), "ab.toml")
    assert refused.value.field_path == "design.items_per_assignment"
    assert refused.value.reason == (
        "10 items with 1 control (design.control_rate = 0.1) leave 9 pair judgments per assignment, an odd number; "
        "use 9 or 11 items (or another design.control_rate) so that each rater sees every pair's two orders "
        "equally often")


def test_without_controls_an_odd_size_is_refused_naming_the_even_sizes_beside_it():
    with pytest.raises(StudyFileError, match=r"design\.items_per_assignment: 7 items with no control leave 7 pair "
                                             r"judgments per assignment, an odd number; use 6 or 8 items so that"):
        parse_study(ab_file(7, None), "ab.toml")


@pytest.mark.parametrize(("rate", "size"), [(None, 10), (0.1, 11), (0.2, 10)])
def test_a_size_left_to_its_default_grows_to_the_next_that_leaves_an_even_number_of_pairs(rate, size):
    data = ab_file(0, rate)
    del data["design"]["items_per_assignment"]
    assert parse_study(data).design.items_per_assignment == size


def test_a_likert_study_may_have_an_odd_number_of_items():
    config = parse_study({**ab_file(10, 0.1), "kind": "likert", "systems": {
        "names": ["moel", "gold"], "controls": ["control-generic"]}})
    assert config.design.items_per_assignment == 10


@settings(max_examples=80, deadline=None)
@given(st.integers(1, 40), st.sampled_from([None, 0.1, 0.2, 0.25, 0.5]))
def test_the_file_accepts_a_size_exactly_when_the_design_can_plan_it_and_suggests_sizes_it_can(size, rate):
    """Whatever the file accepts, plan_pairwise plans; whatever it refuses for parity, it refuses too, and every
    size the message suggests is accepted."""
    with_controls = bool(rate)

    def plan(n: int) -> None:
        plan_pairwise(list(range(4)), [("moel", "gold")], judgments_per_pair=1, items_per_assignment=n,
                      control_rate=rate or 0.0, controls={"control-generic": [0, 1, 2, 3]} if with_controls else {},
                      seed=0)

    try:
        parse_study(ab_file(size, rate))
    except StudyFileError as refused:
        if refused.field_path == "design.control_rate":  # no room for real pairs at all
            return
        assert refused.field_path == "design.items_per_assignment" and "odd number" in refused.reason
        assert ("design.control_rate" in refused.reason) == with_controls
        with pytest.raises(ValueError, match="even number"):
            plan(size)
        suggested = [int(n) for n in refused.reason.split("use ")[1].split(" items")[0].split(" or ")]
        assert suggested and all(abs(n - size) <= 3 for n in suggested)
        for n in suggested:
            parse_study(ab_file(n, rate))
            plan(n)
    else:
        plan(size)


def test_the_shipped_ab_study_has_an_even_number_of_pair_judgments_per_assignment():
    config = load_study_file(STUDIES_DIR / "demo_ab.toml")
    n_controls = round(config.design.items_per_assignment * config.design.control_rate) if config.controls else 0
    assert (config.design.items_per_assignment - n_controls) % 2 == 0
