"""An emotion classifier over the 32 ED labels, for `retrieval-emoprepend` (the paper's EmoPrepend-1).

Logistic regression (scikit-learn) on MiniLM embeddings of "situation + first turn" of every ED train
dialogue in the store. Test accuracy is measured on the same kind of input from the test split.
The fitted classifier is cached on disk next to the embeddings, keyed by model and data hash.
"""
from __future__ import annotations

import pickle
from dataclasses import dataclass

import numpy as np
from sklearn.linear_model import LogisticRegression

from empeval.server.backend.contexts import load_first_turns
from empeval.server.backend.encoder import texts_hash
from empeval.server.backend.resources import BackendResources
from empeval.server.store.engine import unit_of_work


def classifier_input(situation: str | None, first_turn: str) -> str:
    return f"{situation or ''} {first_turn}".strip()


@dataclass
class EmotionClassifier:
    model: LogisticRegression
    data_hash: str
    n_train: int

    @property
    def labels(self) -> list[str]:
        return list(self.model.classes_)

    def predict(self, embeddings: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Top label and its probability for each embedding row."""
        probabilities = self.model.predict_proba(embeddings)
        best = probabilities.argmax(axis=1)
        return self.model.classes_[best], probabilities[np.arange(len(best)), best]


def _labelled_inputs(resources: BackendResources, split: str) -> tuple[list[str], list[str]]:
    with unit_of_work(resources.engine) as session:
        rows = load_first_turns(session, dataset=resources.dataset, split=split)
    return [classifier_input(situation, first) for _, situation, first, _ in rows], [row[3] for row in rows]


def training_data_hash(resources: BackendResources) -> str:
    """Hash of the classifier's training inputs and labels (cheap: no model is run)."""

    def build() -> str:
        texts, labels = _labelled_inputs(resources, "train")
        return texts_hash([f"{t}\x01{label}" for t, label in zip(texts, labels, strict=True)])

    return resources.get_or_build(f"emotion-data-hash:{resources.dataset}", build)


def emotion_classifier(resources: BackendResources) -> EmotionClassifier:
    """The classifier trained on the store's train split, built once per process and cached on disk."""

    def build() -> EmotionClassifier:
        texts, labels = _labelled_inputs(resources, "train")
        if len(set(labels)) < 2:
            raise RuntimeError(f"the emotion classifier needs labelled train dialogues in dataset "
                               f"{resources.dataset!r}; import ED first")
        encoder = resources.encoder()
        data_hash = texts_hash([f"{t}\x01{label}" for t, label in zip(texts, labels, strict=True)])
        path = resources.cache_dir / "classifiers" / f"emotion-{encoder.model_id}-{data_hash[:16]}.pkl"
        if path.exists():
            with open(path, "rb") as handle:  # our own cache file, written below
                return pickle.load(handle)
        embeddings = encoder.encode_cached(texts, label="emotion-train",
                                           description=f"encoding {len(texts):,} train situations")
        model = LogisticRegression(max_iter=1000, C=4.0)
        model.fit(embeddings, labels)
        classifier = EmotionClassifier(model, data_hash, len(texts))
        path.parent.mkdir(parents=True, exist_ok=True)
        scratch = path.with_suffix(".tmp")
        with open(scratch, "wb") as handle:
            pickle.dump(classifier, handle)
        scratch.replace(path)
        return classifier

    return resources.get_or_build(f"emotion-classifier:{resources.dataset}", build)


def accuracy_on_split(resources: BackendResources, classifier: EmotionClassifier,
                      split: str = "test") -> tuple[float, int]:
    """Accuracy on "situation + first turn" of the split's dialogues, and how many there were."""
    texts, labels = _labelled_inputs(resources, split)
    if not texts:
        return float("nan"), 0
    embeddings = resources.encoder().encode_cached(texts, label=f"emotion-{split}")
    predicted, _ = classifier.predict(embeddings)
    return float(np.mean(predicted == np.array(labels))), len(texts)
