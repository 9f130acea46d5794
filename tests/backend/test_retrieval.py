"""retrieval and retrieval-emoprepend on real ED data (the tiny store cut from the bundled sample: 86 candidate
listener turns, 102 test contexts; see conftest.py), with the real MiniLM: candidates, exclusion, cache, the emotion
classifier, P@1,100. How accurate the classifier is and what P@1,100 the systems reach on the whole sample are
benchmark figures (benchmarks/sample_quality.py), not tests."""

from __future__ import annotations

import numpy as np
import pytest

from empeval.server.backend.contexts import load_contexts, load_first_turns
from empeval.server.backend.emotion import accuracy_on_split, emotion_classifier
from empeval.server.backend.metrics import p_at_1_of_100
from empeval.server.backend.resources import BackendResources
from empeval.server.backend.retrieval import RetrievalModel, history_text
from empeval.server.store.engine import unit_of_work

from .conftest import TEST_ENCODER

pytestmark = [
    pytest.mark.slow,
    # The tiny store's 40 train dialogues carry 30 of the 32 emotions: few examples per class is the point here.
    pytest.mark.filterwarnings("ignore:The number of unique classes is greater than 50%:UserWarning"),
]


def contexts_of(engine, split, limit):
    with unit_of_work(engine) as session:
        return load_contexts(session, split=split, limit=limit)


def test_retrieval_answers_with_a_train_listener_turn(tiny_registry, tiny_engine):
    model = tiny_registry.get("retrieval")
    contexts = contexts_of(tiny_engine, "test", 40)
    outcomes = model.respond_batch(contexts)
    pool = model.pool
    for outcome in outcomes:
        assert outcome.ok
        index = pool.position[outcome.provenance["candidate_turn_id"]]
        assert pool.texts[index] == outcome.text
        assert outcome.provenance["version"].startswith("all-MiniLM-L6-v2@")
    assert len(pool.texts) == 86 and len({o.text for o in outcomes}) > 15  # not one canned answer


def test_retrieval_on_train_never_returns_the_contexts_own_reference(tiny_registry, tiny_engine):
    model = tiny_registry.get("retrieval")
    contexts = contexts_of(tiny_engine, "train", 60)
    outcomes = model.respond_batch(contexts)
    assert all(
        o.provenance["candidate_turn_id"] != c.reference_turn_id for c, o in zip(contexts, outcomes, strict=True)
    )
    # Without the exclusion the reference itself would usually win: check it is close to the top.
    references_found = sum(c.reference == o.text for c, o in zip(contexts, outcomes, strict=True))
    assert references_found < len(contexts) // 4  # only where the same text is elsewhere in the pool


def test_history_is_truncated_to_the_last_four_turns(tiny_engine):
    [context] = [c for c in contexts_of(tiny_engine, "test", 200) if len(c.turns) >= 5][:1]
    assert history_text(context) == " ".join(t.text.strip() for t in context.turns[-4:])


def test_candidate_embeddings_are_cached_on_disk_and_reused(tiny_engine, tmp_path, monkeypatch):
    RetrievalModel("retrieval", {}, BackendResources(engine=tiny_engine, cache_dir=tmp_path, show_progress=False,
                                                     encoder_settings=TEST_ENCODER)).prepare()
    cached = list((tmp_path / "embeddings").glob("candidates-*.npy"))
    assert len(cached) == 1
    fresh = BackendResources(engine=tiny_engine, cache_dir=tmp_path, show_progress=False,
                             encoder_settings=TEST_ENCODER)
    model = RetrievalModel("retrieval", {}, fresh)
    monkeypatch.setattr(type(fresh.encoder()), "encode", lambda *a, **k: pytest.fail("re-encoded cached candidates"))
    model.prepare()
    assert model.pool.embeddings.shape == (len(model.pool.texts), 384)


def test_a_generation_batch_of_queries_is_cached_and_a_single_request_is_not(tiny_engine, tmp_path, monkeypatch):
    """A batch as `generate` sends (up to 64 contexts; 16 is the smallest kept) is encoded once: the same batch
    again, in a new process's resources, loads its embeddings and answers the same; one context alone writes no
    cache file."""
    cache_dir = tmp_path
    contexts = contexts_of(tiny_engine, "test", 16)
    resources = BackendResources(engine=tiny_engine, cache_dir=cache_dir, show_progress=False,
                                 encoder_settings=TEST_ENCODER)
    first = RetrievalModel("retrieval", {}, resources).respond_batch(contexts)
    assert len(list((cache_dir / "embeddings").glob("queries-*.npy"))) == 1
    fresh = BackendResources(engine=tiny_engine, cache_dir=cache_dir, show_progress=False,
                             encoder_settings=TEST_ENCODER)
    model = RetrievalModel("retrieval", {}, fresh)
    model.prepare()
    monkeypatch.setattr(type(fresh.encoder()), "encode", lambda *a, **k: pytest.fail("re-encoded cached queries"))
    assert [o.text for o in model.respond_batch(contexts)] == [o.text for o in first]
    monkeypatch.undo()
    before = set((cache_dir / "embeddings").glob("queries-*.npy"))
    model.respond_batch(contexts[:1])
    assert set((cache_dir / "embeddings").glob("queries-*.npy")) == before


def test_the_emotion_classifier_learns_its_train_dialogues_and_is_cached_on_disk(tiny_engine, tmp_path,
                                                                                  monkeypatch):
    """Fitted on the real embeddings of the tiny store's 40 train dialogues (30 emotions): it labels its own training
    inputs correctly, which it could not with embeddings that carry nothing of the text, and a new process loads it
    from the cache instead of fitting again. Accuracy on unseen dialogues needs the whole sample:
    benchmarks/sample_quality.py."""
    from empeval.server.backend import emotion

    resources = BackendResources(engine=tiny_engine, cache_dir=tmp_path, show_progress=False,
                                 encoder_settings=TEST_ENCODER)
    classifier = emotion_classifier(resources)
    with unit_of_work(tiny_engine) as session:
        rows = load_first_turns(session, dataset="empatheticdialogues", split="train")
    texts = [emotion.classifier_input(situation, first) for _, situation, first, _ in rows]
    labels = [label for *_, label in rows]
    assert len(texts) == 40 and classifier.n_train == 40 and sorted(classifier.labels) == sorted(set(labels))
    predicted, probability = classifier.predict(resources.encoder().encode(texts))
    assert np.mean(predicted == np.array(labels)) > 0.9 and (probability > 1 / len(classifier.labels)).all()
    accuracy, n = accuracy_on_split(resources, classifier)
    assert n == 50 and 0 <= accuracy <= 1
    assert len(list((tmp_path / "classifiers").glob("emotion-*.pkl"))) == 1
    monkeypatch.setattr(emotion.LogisticRegression, "fit", lambda *a, **k: pytest.fail("fitted the cached classifier"))
    again = emotion_classifier(BackendResources(engine=tiny_engine, cache_dir=tmp_path, show_progress=False,
                                                encoder_settings=TEST_ENCODER))
    assert again.data_hash == classifier.data_hash and again.labels == classifier.labels


def test_emoprepend_conditions_retrieval_on_the_predicted_emotion(tiny_registry, tiny_engine):
    model = tiny_registry.get("retrieval-emoprepend")
    contexts = contexts_of(tiny_engine, "test", 40)
    outcomes = model.respond_batch(contexts)
    plain = tiny_registry.get("retrieval").respond_batch(contexts)
    pool, labels = model.pool, emotion_classifier(model.resources).labels

    def share_with_predicted_emotion(chosen):
        return sum(
            pool.emotions[pool.position[o.provenance["candidate_turn_id"]]] == e.provenance["predicted_emotion"]
            for o, e in zip(chosen, outcomes, strict=True)
        ) / len(outcomes)

    assert all(o.ok and o.provenance["predicted_emotion"] in labels for o in outcomes)
    # The label steers the choice: far more candidates come from dialogues of the predicted emotion.
    assert share_with_predicted_emotion(outcomes) > share_with_predicted_emotion(plain) + 0.15
    assert [o.text for o in outcomes] != [o.text for o in plain]


def test_p_at_1_of_100_is_far_above_chance(tiny_registry, tiny_engine):
    contexts = contexts_of(tiny_engine, "test", None)
    value, n = p_at_1_of_100(tiny_registry.get("retrieval"), contexts, seed=0)
    assert n == 102 and value > 0.1  # chance is 0.01 (the whole sample's 668 contexts: 32.3)
    again, _ = p_at_1_of_100(tiny_registry.get("retrieval"), contexts, seed=0)
    assert again == value


@pytest.mark.full_data
def test_retrieval_systems_on_full_test_contexts(full_resources):
    from empeval.server.backend.registry import Registry

    registry = Registry.from_config(None, full_resources)
    contexts = contexts_of(full_resources.engine, "test", None)[::200]
    assert len(contexts) >= 25
    for name in ("retrieval", "retrieval-emoprepend"):
        outcomes = registry.get(name).respond_batch(contexts)
        assert all(o.ok and o.text for o in outcomes)
        assert np.mean([o.provenance["score"] for o in outcomes]) > 0.2
