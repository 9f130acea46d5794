"""design.human_share (model-assisted evaluation): the study-file option is refused with the option named when it
cannot work; the sample of contexts people rate is seeded and uniform; a study created with it keeps every
context's items for the judges, hands out only the sampled contexts (every system's item on each, controls
included) and records the sample in study_context, which `human_sample` reads back."""
from __future__ import annotations

import dataclasses
import math
from collections import Counter
from pathlib import Path

import pytest
from scipy.stats import chisquare
from sqlalchemy import delete, func, select

from empeval.server.backend.judges.scores import human_sample
from empeval.server.backend.judges.study_items import load_judged_study
from empeval.server.errors import BadInput
from empeval.server.store import unit_of_work
from empeval.server.store.kinds.likert import AssignmentItem, StudyContext, StudyItem
from empeval.server.store.models import Assignment, Context, Dialogue, Response, Study
from empeval.server.store.study_config import StudyConfig
from empeval.tasks.kind_parts import StudyFileError, StudySetupError
from empeval.tasks.kinds.likert_human_share import draw_human_sample, human_share_problem
from empeval.tasks.study_create import create_study
from empeval.tasks.study_file import STUDIES_DIR, load_study_file, parse_study
from tests.annotation.conftest import CONTROLS, SYSTEMS, add_responses


def study(count=20, pairwise=False, **design):
    data = {"name": "judged", "seed": 5, "contexts": {"count": count},
            "systems": {"names": ["gold", "moel"]}, "design": design}
    if pairwise:
        data["kind"] = "pairwise"
    return data


@pytest.mark.parametrize("share, says", [
    (0, "must be strictly between 0 and 1, got 0"),
    (1, "must be strictly between 0 and 1, got 1"),
    (0.0, "must be strictly between 0 and 1, got 0.0"),
    (-0.2, "must be strictly between 0 and 1, got -0.2"),
    (float("nan"), "must be a number strictly between 0 and 1 (the share of contexts people rate), got nan"),
    (float("inf"), "got inf"),
    ("0.5", "got '0.5'"),
    (True, "got True"),
    (0.05, "0.05 of 20 contexts is 1 context rated by people"),
    (0.99, "0.99 of 20 contexts is 20 (round(0.99 x 20)): people would rate every context"),
])
def test_a_share_that_cannot_work_is_refused_naming_the_option(share, says):
    with pytest.raises(StudyFileError) as refused:
        parse_study(study(human_share=share), "judged.toml")
    assert refused.value.field_path == "design.human_share"
    assert str(refused.value).startswith("judged.toml: design.human_share: ")
    assert says in str(refused.value)


def test_fewer_than_two_rated_contexts_is_refused_with_the_numbers_and_two_is_taken():
    with pytest.raises(StudyFileError, match=r"0\.1 of 10 contexts is 1 context .* at least 2 per system: raise "
                                             r"design\.human_share to 0\.2 or more"):
        parse_study(study(count=10, human_share=0.1))
    assert parse_study(study(count=10, human_share=0.2)).setup.human_share == 0.2
    # listed contexts count as well as a drawn count
    listed = study(human_share=0.9)
    listed["contexts"] = {"ids": ["hit:1_conv:1#1", "hit:2_conv:2#1", "hit:3_conv:3#1"]}
    with pytest.raises(StudyFileError, match=r"0\.9 of 3 contexts is 3 \(round"):
        parse_study(listed)
    listed["design"]["human_share"] = 0.5
    assert parse_study(listed).setup.human_share == 0.5  # round(1.5) = 2 of 3


def test_the_share_is_refused_for_a_kind_without_it_and_its_seed_without_it():
    best_worst = study(human_share=0.5)
    best_worst.update(kind="best_worst")
    best_worst["systems"]["names"] = ["gold", "moel", "mime"]
    with pytest.raises(StudyFileError, match=r"design\.human_share: is for likert and pairwise studies only"):
        parse_study(best_worst)
    assert parse_study(study(pairwise=True, human_share=0.5)).setup.human_share == 0.5  # the A/B human share
    with pytest.raises(StudyFileError, match=r"design\.human_share_seed: is the seed of design\.human_share"):
        parse_study(study(human_share_seed=3))
    with pytest.raises(StudyFileError, match=r"design\.human_share_seed: must be an integer"):
        parse_study(study(human_share=0.5, human_share_seed="3"))


def test_the_seed_defaults_to_the_studys_and_both_survive_the_stored_json():
    config = parse_study(study(human_share=0.25))
    assert (config.setup.human_share, config.setup.human_share_seed) == (0.25, 5)
    assert parse_study(study(human_share=0.25, human_share_seed=11)).setup.human_share_seed == 11
    assert StudyConfig.from_json(config.to_json(), study="judged") == config
    # a study without the option stores the JSON it always did
    assert "human_share" not in parse_study(study()).to_json()["design"]


def test_every_shipped_study_file_is_valid_and_the_judged_demo_samples_twelve_of_thirty():
    files = sorted(STUDIES_DIR.glob("*.toml"))
    assert {p.name for p in files} >= {"demo.toml", "demo_ab.toml", "demo_judged.toml", "demo_ab_judged.toml"}
    configs = {p.name: load_study_file(p) for p in files}
    design = configs["demo_judged.toml"].setup
    assert (design.human_share, design.human_share_seed, configs["demo_judged.toml"].contexts.count) == (0.4, 15, 30)
    assert human_share_problem(design.human_share, 30) is None
    ab = configs["demo_ab_judged.toml"]  # the A/B study file with a human share and [decisions]
    assert (ab.kind, ab.setup.human_share, ab.setup.human_share_seed) == ("pairwise", 0.5, 15)
    assert ab.decisions is not None and ab.decisions.stop_when_decided


KEYS = [f"hit:{i}_conv:{i}#1" for i in range(10)]


def test_the_sample_is_seeded_whatever_the_order_the_contexts_come_in():
    first = draw_human_sample(KEYS, 0.3, seed=4)
    assert first == draw_human_sample(list(reversed(KEYS)), 0.3, seed=4)
    assert len(first) == 3 and set(first) <= set(KEYS)
    others = {tuple(draw_human_sample(KEYS, 0.3, seed=s)) for s in range(5, 15)}
    assert len(others | {tuple(first)}) > 5  # another seed, another sample (almost always)
    assert draw_human_sample(KEYS, 0.3, seed=5) != first


def test_the_sample_is_uniform_over_contexts_and_over_subsets():
    """Over 3,000 seeds each context is drawn as often as the others (chi-square, 9 df) and each of the C(5, 2)
    pairs of a five-context study is the sample about equally often (chi-square, 9 df)."""
    counts = Counter(key for seed in range(3000) for key in draw_human_sample(KEYS, 0.3, seed=seed))
    assert sum(counts.values()) == 9000 and set(counts) == set(KEYS)
    assert chisquare([counts[k] for k in KEYS]).pvalue > 0.001
    subsets = Counter(tuple(draw_human_sample(KEYS[:5], 0.4, seed=seed)) for seed in range(3000))
    assert len(subsets) == math.comb(5, 2)
    assert chisquare(list(subsets.values())).pvalue > 0.001


def judged_spec(*, share=0.5, seed=None, count=12, controls=CONTROLS, name="judged") -> StudyConfig:
    design = {"ratings_per_response": 2, "items_per_assignment": 5, "control_rate": 0.2 if controls else 0.0,
              "human_share": share}
    if seed is not None:
        design["human_share_seed"] = seed
    return parse_study({"name": name, "seed": 3, "contexts": {"split": "test", "count": count},
                        "systems": {"names": SYSTEMS, "controls": list(controls)}, "design": design})


@pytest.fixture
def answered(sample_engine):
    add_responses(sample_engine, SYSTEMS + CONTROLS, 40)
    return sample_engine


def contexts_of(session, study_id: int, *, in_assignments: bool) -> dict[int, set[str]]:
    """context id -> the systems of its items: all the study's real items, or those some assignment holds."""
    query = (select(Response.context_id, StudyItem.design, StudyItem.is_control)
             .join(StudyItem, StudyItem.response_id == Response.id).where(StudyItem.study_id == study_id))
    if in_assignments:
        query = query.join(AssignmentItem, AssignmentItem.item_id == StudyItem.id)
    found: dict[int, set[str]] = {}
    for context_id, design, is_control in session.execute(query).all():
        found.setdefault(context_id, set()).add(("control:" if is_control else "") + design["system"])
    return found


def test_people_get_only_the_sampled_contexts_and_judges_every_item(answered):
    summary = create_study(answered, judged_spec())
    assert (summary.contexts, summary.human_contexts, summary.items) == (12, 6, 12 * len(SYSTEMS))
    assert "people rate 6 of the 12 contexts (design.human_share 0.5, seed 3)" in summary.describe()
    with unit_of_work(answered) as session:
        study_id = session.scalar(select(Study.id).where(Study.name == "judged"))
        recorded = dict(session.execute(select(StudyContext.context_id, StudyContext.human_rated)
                                        .where(StudyContext.study_id == study_id)).all())
        every_item = contexts_of(session, study_id, in_assignments=False)
        handed_out = contexts_of(session, study_id, in_assignments=True)
        per_item = Counter(session.scalars(
            select(AssignmentItem.item_id).join(StudyItem, StudyItem.id == AssignmentItem.item_id)
            .where(StudyItem.study_id == study_id, StudyItem.is_control.is_(False))))
    sampled = {cid for cid, rated in recorded.items() if rated}
    assert len(recorded) == 12 and len(sampled) == 6
    # every context of the study has every system's item, for the judges
    real = {cid: {s for s in systems if not s.startswith("control:")} for cid, systems in every_item.items()}
    assert {cid for cid, systems in real.items() if systems} == set(recorded)
    assert all(systems == set(SYSTEMS) for systems in real.values() if systems)
    # no assignment holds an unsampled context, not even as a control; each sampled one has every system, k times
    assert set(handed_out) <= sampled
    assert all(set(SYSTEMS) <= systems for cid, systems in handed_out.items() if cid in sampled)
    assert len(per_item) == 6 * len(SYSTEMS) and set(per_item.values()) == {2}
    judged = load_judged_study(answered, "judged")
    assert len(judged.items) == 12 * len(SYSTEMS)
    assert {item.context.context_id for item in judged.items} == set(recorded)
    table = human_sample(answered, "judged")
    assert list(table.columns) == ["context_id", "sampled"] and table["sampled"].dtype == bool
    assert dict(zip(table["context_id"], table["sampled"], strict=True)) == recorded
    assert table.attrs == {"human_share": 0.5, "human_share_seed": 3}


def test_the_stored_sample_is_the_one_draw_human_sample_gives_from_the_keys(answered):
    create_study(answered, judged_spec(seed=8))
    with unit_of_work(answered) as session:
        rows = session.execute(select(Dialogue.conv_id, Context.n_turns, StudyContext.human_rated)
                               .join(Context, Context.id == StudyContext.context_id)
                               .join(Dialogue, Dialogue.id == Context.dialogue_id)).all()
    keys = [f"{conv}#{n}" for conv, n, _ in rows]
    assert sorted(f"{conv}#{n}" for conv, n, rated in rows if rated) == draw_human_sample(keys, 0.5, 8)


def test_another_seed_samples_other_contexts_of_the_same_study(answered):
    samples = []
    for seed in (1, 2, 3):
        create_study(answered, judged_spec(seed=seed, name=f"judged-{seed}"))
        table = human_sample(answered, f"judged-{seed}")
        samples.append(frozenset(table.loc[table["sampled"], "context_id"]))
        assert len(table) == 12
    assert len({frozenset(human_sample(answered, f"judged-{s}")["context_id"]) for s in (1, 2, 3)}) == 1
    assert len(set(samples)) > 1


def test_without_a_share_every_context_is_sampled_and_so_for_a_study_older_than_the_record(answered):
    create_study(answered, dataclasses.replace(judged_spec(), setup=dataclasses.replace(
        judged_spec().setup, human_share=None, human_share_seed=None)))
    table = human_sample(answered, "judged")
    assert len(table) == 12 and table["sampled"].all()
    assert table.attrs["human_share"] is None
    with unit_of_work(answered) as session:
        session.execute(delete(StudyContext))
    older = human_sample(answered, "judged")
    assert older.equals(table)


def test_a_share_that_does_not_fit_the_contexts_is_refused_at_create_and_nothing_is_written(answered):
    spec = judged_spec(count=12)
    too_small = dataclasses.replace(spec, setup=dataclasses.replace(spec.setup, human_share=0.1))
    with pytest.raises(StudySetupError, match=r"design\.human_share: 0\.1 of 12 contexts is 1 context"):
        create_study(answered, too_small)
    with unit_of_work(answered) as session:
        assert session.scalar(select(func.count()).select_from(Study)) == 0
        assert session.scalar(select(func.count()).select_from(StudyContext)) == 0
        assert session.scalar(select(func.count()).select_from(Assignment)) == 0


def test_human_sample_names_a_missing_study_reads_an_ab_one_and_refuses_a_best_worst_one(answered):
    from empeval.server.errors import NotFound

    with pytest.raises(NotFound, match="no study named 'ghost'"):
        human_sample(answered, "ghost")
    spec = parse_study({"name": "ab", "kind": "pairwise", "seed": 1, "contexts": {"count": 4},
                        "systems": {"names": SYSTEMS[:2]}, "design": {"items_per_assignment": 4}})
    create_study(answered, spec)
    sample = human_sample(answered, "ab")  # no human share: people judge each of its 4 contexts
    assert len(sample) == 4 and sample["sampled"].all() and sample.attrs["human_share"] is None
    create_study(answered, parse_study({"name": "bw", "kind": "best_worst", "seed": 1, "contexts": {"count": 4},
                                        "systems": {"names": SYSTEMS}}))
    with pytest.raises(BadInput, match="'bw' is a best-worst"):
        human_sample(answered, "bw")


def test_the_judged_demo_study_file_creates_its_sample(answered, tmp_path: Path):
    text = (STUDIES_DIR / "demo_judged.toml").read_text(encoding="utf-8")
    text = text.replace('["gold", "retrieval", "moel", "mime", "kemp"]', str(SYSTEMS).replace("'", '"'))
    path = tmp_path / "demo_judged.toml"
    path.write_text(text, encoding="utf-8")
    spec = load_study_file(path)
    summary = create_study(answered, spec)
    assert (summary.contexts, summary.human_contexts, spec.setup.human_share_seed) == (30, 12, 15)
    assert "seed 15" in summary.describe()
    assert human_sample(answered, "demo-judged")["sampled"].sum() == 12


def test_the_ab_judged_demo_study_file_creates_its_sample_and_its_decisions(answered, tmp_path: Path):
    text = (STUDIES_DIR / "demo_ab_judged.toml").read_text(encoding="utf-8")
    for demo, ours in {"moel": SYSTEMS[0], "gold": SYSTEMS[1], "kemp": SYSTEMS[2]}.items():
        text = text.replace(f'"{demo}', f'"{ours}').replace(f"vs {demo} ", f"vs {ours} ")
    text = text.replace('"retrieval", "mime", ', "")
    path = tmp_path / "demo_ab_judged.toml"
    path.write_text(text, encoding="utf-8")
    summary = create_study(answered, load_study_file(path))
    assert "people judge the pairs of 15 of the 30 contexts (design.human_share 0.5, seed 15)" in summary.sentence
    assert human_sample(answered, "demo-ab-judged")["sampled"].sum() == 15


def test_a_one_system_study_samples_its_contexts_like_any_other(answered):
    """Degenerate: one system, no controls. There is nothing to difference, but the sample, the items and the
    hand-out follow the same rules as with several systems."""
    spec = parse_study({"name": "solo", "seed": 3, "contexts": {"split": "test", "count": 12},
                        "systems": {"names": SYSTEMS[:1]},
                        "design": {"ratings_per_response": 2, "items_per_assignment": 3, "control_rate": 0.0,
                                   "human_share": 0.5}})
    summary = create_study(answered, spec)
    assert (summary.contexts, summary.human_contexts, summary.items) == (12, 6, 12)
    sample = human_sample(answered, "solo")
    with unit_of_work(answered) as session:
        study_id = session.scalar(select(Study.id).where(Study.name == "solo"))
        handed_out = contexts_of(session, study_id, in_assignments=True)
        held = session.scalar(select(func.count()).select_from(AssignmentItem).join(
            StudyItem, StudyItem.id == AssignmentItem.item_id).where(StudyItem.study_id == study_id))
    assert set(handed_out) == set(sample.loc[sample["sampled"], "context_id"]) and len(handed_out) == 6
    assert held == 6 * 2  # each sampled context's one item, k = 2 times
