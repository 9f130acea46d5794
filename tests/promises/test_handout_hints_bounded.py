"""The hand-out's in-memory hints stay bounded however many raters come: the walk hints (handout._walk_hints, one
entry per store and rater, each holding where her last claim was in each study) keep at most WALK_HINTS_KEPT
raters in a process, then are forgotten all at once (a hint lost costs one walk from the start, nothing else).
Driven by real claims on a real store (a SQLite file, then PostgreSQL): many raters, each claiming as `next` does."""
from __future__ import annotations

import pytest

from empeval.server.annotation import handout
from empeval.server.annotation.annotators import invite
from empeval.server.annotation.handout import next_assignment
from tests.annotation.conftest import SYSTEMS, add_responses, make_study

BOUND = 8  # a bound small enough to pass several times over with a few dozen raters
RATERS = 3 * BOUND + 5


@pytest.fixture
def crowded(sample_engine):
    """A study with work for every rater of the tests below: 40 contexts, each rated by as many raters."""
    add_responses(sample_engine, SYSTEMS, 40)
    make_study(sample_engine, name="crowd", count=40, k=RATERS, per_assignment=3, controls=[])
    return sample_engine


@pytest.fixture
def fresh_hints(monkeypatch):
    """The process's hints as a new process has them (the tests before this one may have left some)."""
    monkeypatch.setattr(handout, "_walk_hints", {})


def test_many_raters_claiming_never_hold_more_hints_than_the_bound(crowded, fresh_hints, monkeypatch):
    monkeypatch.setattr(handout, "WALK_HINTS_KEPT", BOUND)
    sizes = []
    for number in range(RATERS):
        rater, _ = invite(crowded, f"rater-{number}", "crowd")
        assert next_assignment(crowded, "crowd", rater.id) is not None
        sizes.append(len(handout._walk_hints))
    assert max(sizes) <= BOUND, sizes
    assert sizes[:BOUND] == list(range(1, BOUND + 1))  # each rater's claim leaves her hint until the bound is met
    assert sizes.count(BOUND) >= 2  # and it was met more than once: forgotten, then filled again


def test_with_the_bound_as_shipped_a_process_full_of_hints_takes_new_raters_without_growing(crowded, fresh_hints):
    # As a long-running server has them after WALK_HINTS_KEPT raters: one hint per rater (here with rater ids no
    # one has in this store, as raters of another store would leave them), then new raters keep coming.
    assert 0 < handout.WALK_HINTS_KEPT <= 1_000_000
    other_store = "sqlite:////elsewhere/another.db"
    handout._walk_hints.update({(other_store, rater): {1: (rater, rater)} for rater in range(handout.WALK_HINTS_KEPT)})
    for number in range(5):
        rater, _ = invite(crowded, f"newcomer-{number}", "crowd")
        assert next_assignment(crowded, "crowd", rater.id) is not None
        held = len(handout._walk_hints)
        assert held <= handout.WALK_HINTS_KEPT, f"{held} hints held, over the bound of {handout.WALK_HINTS_KEPT}"
    assert any(key[1] == rater.id for key in handout._walk_hints)  # the last newcomer's claim is remembered


def test_one_rater_in_several_studies_holds_one_entry_with_one_hint_per_study(crowded, fresh_hints):
    # The inner map grows by study, not by claim: a rater working in three studies holds one entry of three hints.
    for name in ("crowd-2", "crowd-3"):
        make_study(crowded, name=name, count=12, k=1, per_assignment=3, controls=[])
    rater, _ = invite(crowded, "many-studies", "crowd")
    for study in ("crowd", "crowd-2", "crowd-3"):
        invite(crowded, "many-studies", study)
        assert next_assignment(crowded, study, rater.id) is not None
    (hints,) = handout._walk_hints.values()
    assert len(hints) == 3
