"""The controls fail exactly one criterion each, deterministically given a seed."""
from __future__ import annotations

import random
from collections import Counter

from hypothesis import given
from hypothesis import strategies as st

from empeval.server.backend.contexts import load_contexts
from empeval.server.backend.controls import GENERIC_REPLIES, scramble_words
from empeval.server.store.engine import unit_of_work


def some_contexts(engine, limit=60):
    with unit_of_work(engine) as session:
        return load_contexts(session, split="test", limit=limit)


def test_scrambled_keeps_the_multiset_of_words_and_changes_the_order(registry, sample_engine):
    contexts = some_contexts(sample_engine)
    outcomes = registry.get("control-scrambled").respond_batch(contexts)
    for context, outcome in zip(contexts, outcomes, strict=True):
        assert outcome.ok
        assert Counter(outcome.text.split()) == Counter(context.reference.split())
        if len(set(context.reference.split())) >= 2:
            assert outcome.text.split() != context.reference.split()
        assert outcome.provenance["control_target"] == "fluency"


@given(st.lists(st.sampled_from(["a", "b", "c", "sad", "."]), max_size=12), st.integers(0, 2**32))
def test_scramble_words_is_a_permutation_that_differs_when_it_can(words, seed):
    text = " ".join(words)
    scrambled = scramble_words(text, random.Random(seed))
    assert sorted(scrambled.split()) == sorted(words)
    if len(set(words)) >= 2:
        assert scrambled.split() != words


def test_mismatched_is_another_dialogues_gold_reply_with_a_different_emotion(registry, sample_engine):
    contexts = some_contexts(sample_engine)
    model = registry.get("control-mismatched")
    pool = {row[3]: row for row in model.pool("test")}
    for context, outcome in zip(contexts, model.respond_batch(contexts), strict=True):
        source = pool[outcome.provenance["source_turn_id"]]
        assert outcome.text == source[4]
        assert source[0] != context.dialogue_id
        assert source[2] != context.emotion
        assert outcome.provenance["source_emotion"] == source[2]
        assert outcome.provenance["control_target"] == "relevance"


def test_generic_is_a_stock_reply(registry, sample_engine):
    outcomes = registry.get("control-generic").respond_batch(some_contexts(sample_engine))
    assert {o.text for o in outcomes} <= set(GENERIC_REPLIES)
    assert len({o.text for o in outcomes}) > 1
    assert all(o.provenance["control_target"] == "empathy" for o in outcomes)


def test_controls_are_deterministic_given_the_seed_and_change_with_it(resources, sample_engine):
    from empeval.server.backend.controls import MismatchedControl, ScrambledControl

    contexts = some_contexts(sample_engine)
    for control in (MismatchedControl, ScrambledControl):
        first = [o.text for o in control("c", {"seed": 1}, resources).respond_batch(contexts)]
        again = [o.text for o in control("c", {"seed": 1}, resources).respond_batch(contexts[::-1])][::-1]
        other = [o.text for o in control("c", {"seed": 2}, resources).respond_batch(contexts)]
        assert first == again  # independent of batch order and of the instance
        assert first != other
