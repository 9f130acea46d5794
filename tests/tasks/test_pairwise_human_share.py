"""A pairwise (A/B) study with design.human_share, on a real SQLite file: people judge the pairs of a seeded uniform
sample of the contexts (only those are in assignments, controls included), every context's pairs are stored for a
judge of differences, study_context records the sample, the stored configuration redraws it, a share that does not
fit is refused where it is written, and a study without a share is stored as before."""
from __future__ import annotations

from collections import Counter

import pytest
from sqlalchemy import select

from empeval.server.store import unit_of_work
from empeval.server.store.kinds.likert import StudyContext
from empeval.server.store.kinds.pairwise import PairItem, PairwiseSetup
from empeval.server.store.models import Context, Dialogue
from empeval.server.store.queries import study_by_name
from empeval.tasks.kinds.likert_human_share import draw_human_sample
from empeval.tasks.study_create import create_study
from empeval.tasks.study_file import StudyFileError, parse_study
from tests.annotation.conftest import CONTROLS, SYSTEMS, add_responses
from tests.tasks.test_pairwise_study_create import ab_spec, placements, sqlite_engine  # noqa: F401 - the fixture


def shared_spec(share=0.5, *, count=12, seed=5, **design):
    return parse_study({
        "name": "ab", "kind": "pairwise", "seed": seed, "contexts": {"split": "test", "count": count},
        "systems": {"names": SYSTEMS, "anchor": SYSTEMS[0], "controls": CONTROLS},
        "design": {"judgments_per_pair": 2, "items_per_assignment": 5, "control_rate": 0.2, "human_share": share,
                   **design}})


def test_people_judge_only_the_sampled_contexts_and_every_context_has_its_pairs(sqlite_engine):  # noqa: F811
    add_responses(sqlite_engine, SYSTEMS + CONTROLS, 30)
    spec = shared_spec(0.5)
    summary = create_study(sqlite_engine, spec)
    with unit_of_work(sqlite_engine) as session:
        study = study_by_name(session, "ab")
        rated = dict(session.execute(select(StudyContext.context_id, StudyContext.human_rated)
                                     .where(StudyContext.study_id == study.id)).all())
        items = session.execute(select(PairItem.context_id, PairItem.is_control)
                                .where(PairItem.study_id == study.id)).all()
        setup = study.config.setup
    assert isinstance(setup, PairwiseSetup) and (setup.human_share, setup.human_share_seed) == (0.5, 5)
    assert len(rated) == 12 and sum(rated.values()) == 6
    sampled = {cid for cid, human in rated.items() if human}
    # Every context has its two pairs (for the judge); controls only where people judge.
    real = Counter(cid for cid, control in items if not control)
    assert set(real) == set(rated) and set(real.values()) == {2}
    assert {cid for cid, control in items if control} <= sampled
    # The assignments hold the sampled contexts' pairs only, each judged k = 2 times.
    rows = placements(sqlite_engine, "ab")
    judged = Counter((r["context"], r["pair"]) for r in rows if not r["is_control"])
    assert {c for c, _ in judged} == sampled and set(judged.values()) == {2}
    assert summary.items == 24 and "people judge the pairs of 6 of the 12 contexts" in summary.sentence
    # The stored configuration redraws the sample: its seed and the contexts' keys.
    with unit_of_work(sqlite_engine) as session:
        keys = {f"{conv}#{n}": cid for cid, conv, n in session.execute(
            select(Context.id, Dialogue.conv_id, Context.n_turns).join(Dialogue, Dialogue.id == Context.dialogue_id)
            .where(Context.id.in_(rated)))}
    assert {keys[k] for k in draw_human_sample(list(keys), 0.5, 5)} == sampled


def test_a_study_without_a_share_is_stored_as_before(sqlite_engine):  # noqa: F811
    add_responses(sqlite_engine, SYSTEMS + CONTROLS, 30)
    spec = ab_spec(count=12)
    assert "human_share" not in spec.setup.stored()["pairwise"]
    create_study(sqlite_engine, spec)
    with unit_of_work(sqlite_engine) as session:
        study = study_by_name(session, "ab")
        assert session.scalars(select(StudyContext).where(StudyContext.study_id == study.id)).all() == []


@pytest.mark.parametrize(("design", "path", "words"), [
    ({"human_share": 1.0}, "design.human_share", "strictly between 0 and 1"),
    ({"human_share": 0.05}, "design.human_share", "needs at least 2"),
    ({"human_share": "half"}, "design.human_share", "must be a number"),
    ({"human_share": 0.5, "human_share_seed": -1}, "design.human_share_seed", ""),
    ({"human_share_seed": 3}, "design.human_share_seed", "set design.human_share too"),
    ({"human_share": 0.5, "sampling": "greedy"}, "design.sampling", "must be one of 'uniform', 'active'"),
    ({"sampling": "active"}, "design.sampling", "draws design.human_share's contexts"),
])
def test_a_share_that_does_not_fit_is_refused_where_it_is_written(design, path, words):
    data = {"name": "ab", "kind": "pairwise", "seed": 5, "contexts": {"split": "test", "count": 12},
            "systems": {"names": SYSTEMS, "anchor": SYSTEMS[0]},
            "design": {"judgments_per_pair": 2, "items_per_assignment": 4, **design}}
    with pytest.raises(StudyFileError) as error:
        parse_study(data)
    assert path in str(error.value) and words in str(error.value)
