"""The best-worst design's promises (tasks.kinds.best_worst_design), for many seeds and shapes: every context's tuple
judged exactly k times in k different assignments, no assignment holding a context twice, the tuples rotated over
every subset of the systems as evenly as the numbers allow, the order shown rotated so that no response is shown
twice at one place (k <= size) and every system shown at every place about equally often, control tuples on
contexts the assignment does not hold, and the study file's refusals."""
from __future__ import annotations

from collections import Counter
from itertools import combinations

import pytest

from empeval.tasks.kind_parts import StudyFileError
from empeval.tasks.kinds.best_worst_design import plan_best_worst, shown_at, tuples_for_contexts
from empeval.tasks.study_file import parse_study

SYSTEMS = ["gold", "kemp", "mime", "moel", "retrieval"]
SHAPES = [  # (contexts, systems, size, k, items per assignment, control rate)
    (30, 5, 4, 3, 10, 0.1), (12, 4, 4, 4, 6, 0.0), (17, 5, 3, 2, 5, 0.2), (9, 6, 5, 5, 4, 0.0), (40, 5, 4, 1, 11, 0.0),
]


def plans(contexts, n_systems, size, k, per, rate, seeds=range(6)):
    systems = SYSTEMS[:n_systems] if n_systems <= 5 else [*SYSTEMS, "extra"]
    controls = {"control-generic": list(range(contexts)), "control-scrambled": list(range(0, contexts, 2))}
    for seed in seeds:
        yield systems, plan_best_worst(list(range(contexts)), systems, size=size, judgments_per_tuple=k,
                                       items_per_assignment=per, control_rate=rate,
                                       controls=controls if rate else None, seed=seed)


@pytest.mark.parametrize("shape", SHAPES, ids=[f"{c}x{s}-m{m}-k{k}" for c, s, m, k, *_ in SHAPES])
def test_each_tuple_is_judged_k_times_in_k_assignments_and_no_assignment_repeats_a_context(shape):
    contexts, _, size, k, per, rate = shape
    for _, plan in plans(*shape):
        real = Counter()
        for assignment in plan:
            assert len(assignment.items) == len(assignment.contexts), "an assignment holds a context twice"
            assert len(assignment.items) <= per
            for item in assignment.items:
                assert len(item.systems) == size and sorted(item.shown) == list(range(size))
                if item.control is None:
                    real[item.context] += 1
        assert real == Counter({context: k for context in range(contexts)})
        rounds = Counter((a.round, item.context) for a in plan for item in a.items if item.control is None)
        assert set(rounds.values()) == {1}, "a tuple judged twice in one round"


@pytest.mark.parametrize("shape", SHAPES, ids=[f"{c}x{s}-m{m}-k{k}" for c, s, m, k, *_ in SHAPES])
def test_the_tuples_rotate_over_every_subset_as_evenly_as_the_numbers_allow(shape):
    contexts, n_systems, size, *_ = shape
    systems = SYSTEMS[:n_systems] if n_systems <= 5 else [*SYSTEMS, "extra"]
    for seed in range(6):
        shown = tuples_for_contexts(list(range(contexts)), systems, size, seed)
        uses = Counter(shown.values())
        subsets = len(list(combinations(systems, size)))
        assert max(uses.values()) - (min(uses.values()) if len(uses) == subsets else 0) <= 1
        assert all(tuple(sorted(t)) == t for t in uses)


@pytest.mark.parametrize("shape", SHAPES, ids=[f"{c}x{s}-m{m}-k{k}" for c, s, m, k, *_ in SHAPES])
def test_the_order_shown_rotates_so_no_response_is_shown_twice_at_one_place(shape):
    *_, size, k, _, _ = shape
    for _, plan in plans(*shape):
        places: dict[tuple[int, str], list[int]] = {}
        for assignment in plan:
            for item in assignment.items:
                if item.control is None:
                    for place, system in enumerate(item.shown_systems):
                        places.setdefault((item.context, system), []).append(place)
        for where in places.values():
            assert len(set(where)) == min(k, size)


def test_over_a_study_every_system_is_shown_at_every_place_about_equally_often():
    """30 contexts x 4 of 5 systems x k = 3: each system shown 72 times, 18 per place if perfectly even; the seeded
    rotation keeps every count within a binomial spread of it."""
    for seed in range(5):
        plan = plan_best_worst(list(range(30)), SYSTEMS, size=4, judgments_per_tuple=3, items_per_assignment=10,
                               seed=seed)
        for system, counts in shown_at(plan).items():
            assert sum(counts.values()) == 72 and set(counts) == {0, 1, 2, 3}
            assert max(counts.values()) - min(counts.values()) <= 14, (seed, system, counts)


def test_control_tuples_hold_one_control_beside_real_systems_on_contexts_the_assignment_does_not_hold():
    for systems, plan in plans(30, 5, 4, 3, 10, 0.1):
        controls = [(a, item) for a in plan for item in a.items if item.control is not None]
        assert all(sum(item.control is not None for item in a.items) == 1 for a in plan)  # round(10 x 0.1)
        by_key: dict[tuple, tuple[str, ...]] = {}
        for assignment, item in controls:
            others = [s for s in item.systems if s != item.control]
            assert item.control.startswith("control-") and len(others) == 3 and set(others) <= set(systems)
            real_contexts = [i.context for i in assignment.items if i is not item]
            assert item.context not in real_contexts
            assert by_key.setdefault((item.context, item.control), item.systems) == item.systems


def test_the_same_seed_gives_the_same_plan_and_another_seed_another():
    first = plan_best_worst(list(range(12)), SYSTEMS, size=4, judgments_per_tuple=2, items_per_assignment=4, seed=7)
    again = plan_best_worst(list(range(12)), SYSTEMS, size=4, judgments_per_tuple=2, items_per_assignment=4, seed=7)
    other = plan_best_worst(list(range(12)), SYSTEMS, size=4, judgments_per_tuple=2, items_per_assignment=4, seed=8)
    assert first == again and first != other


@pytest.mark.parametrize("call, message", [
    (dict(contexts=[1, 1]), "a context is listed twice"),
    (dict(systems=["a", "a", "b"]), "a system is listed twice"),
    (dict(size=6), "a tuple of 6 needs at least 6 systems"),
    (dict(judgments_per_tuple=0), "judgments_per_tuple and items_per_assignment must be at least 1"),
    (dict(controls={"gold": [0]}), "a system is listed as a control too"),
])
def test_the_planner_refuses_what_it_cannot_design(call, message):
    arguments = dict(contexts=[0, 1, 2], systems=SYSTEMS, size=4, judgments_per_tuple=2, items_per_assignment=3,
                     seed=0)
    arguments.update(call)
    contexts, systems = arguments.pop("contexts"), arguments.pop("systems")
    with pytest.raises(ValueError, match=message):
        plan_best_worst(contexts, systems, **arguments)


def study(**changes) -> dict:
    data = {"name": "bws", "kind": "best_worst", "seed": 1, "contexts": {"split": "test", "count": 10},
            "systems": {"names": ["a", "b", "c", "d"]}, "design": {"judgments_per_tuple": 2}}
    for key, value in changes.items():
        data[key] = {**data.get(key, {}), **value} if isinstance(value, dict) else value
    return data


def test_a_study_file_reads_its_tuple_size_and_k_with_their_defaults():
    spec = parse_study(study())
    assert (spec.kind, spec.setup.tuple_size, spec.setup.judgments_per_tuple) == ("best_worst", 4, 2)
    assert parse_study(study(systems={"names": ["a", "b", "c"]})).setup.tuple_size == 3  # all of them when fewer
    assert parse_study(study(design={"tuple_size": 3})).setup.tuple_size == 3
    assert [c.key for c in spec.criteria] == ["empathy", "relevance", "fluency"]
    assert "and which the least?" in spec.criteria[0].question


@pytest.mark.parametrize("changes, path, reason", [
    (dict(systems={"names": ["a", "b"]}), "systems.names",
     'a best-worst study compares at least 3 systems, got 2; to compare two, use kind = "pairwise"'),
    (dict(design={"tuple_size": 5}), "design.tuple_size",
     "a tuple of 5 responses needs at least 5 systems; systems.names lists 4"),
    (dict(design={"tuple_size": 2}), "design.tuple_size", "must be an integer >= 3, got 2"),
    (dict(design={"tuple_size": 7}), "design.tuple_size", "must be an integer <= 6, got 7"),
    (dict(design={"tuple_size": "4"}), "design.tuple_size", "must be an integer, got '4'"),
    (dict(design={"judgments_per_tuple": 0}), "design.judgments_per_tuple", "must be an integer >= 1, got 0"),
    (dict(design={"ratings_per_response": 3}), "design.ratings_per_response",
     "a best-worst study counts judgments per tuple: use design.judgments_per_tuple"),
    (dict(design={"ties": True}), "design.ties",
     "a best-worst study has no ties: raters pick one best and one worst response"),
    (dict(systems={"anchor": "a"}), "systems.anchor",
     "a best-worst study ranks every system against every other; it has no anchor"),
    (dict(scale={"min": 1, "max": 5}), "scale", "a best-worst study has no scale: raters pick the best and the "
                                                "worst response"),
])
def test_a_study_file_of_the_wrong_shape_is_refused_naming_the_field(changes, path, reason):
    with pytest.raises(StudyFileError) as refused:
        parse_study(study(**changes))
    assert (refused.value.field_path, refused.value.reason) == (path, reason)


def test_the_kind_s_fields_are_refused_in_a_study_of_another_kind():
    likert = study(kind="likert", design={"judgments_per_tuple": None})
    likert["design"] = {"tuple_size": 4}
    with pytest.raises(StudyFileError) as refused:
        parse_study(likert)
    assert (refused.value.field_path, refused.value.reason) == (
        "design.tuple_size", 'is for best_worst studies only (kind = "best_worst")')
