"""`retrieval-emoprepend`: retrieval conditioned on the top label of an emotion classifier (EmoPrepend-1).

As in the paper, the top predicted emotion label is prepended to the context ("sad: <context>") before it
is encoded. The paper then fine-tunes the encoder so that it learns to use that prefix; our encoder is not
fine-tuned, and a one-word prefix barely moves a MiniLM embedding, so the label also adds
`emotion_bonus` to the score of candidates from train dialogues labelled with that emotion. The classifier
reads the same context text the retriever does (the last 4 turns).
"""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch

from empeval.server.backend.base import DialogueContext
from empeval.server.backend.emotion import emotion_classifier, training_data_hash
from empeval.server.backend.retrieval import RetrievalModel


class EmoPrependRetrievalModel(RetrievalModel):
    kind = "retrieval-emoprepend"

    def __init__(self, name, parameters=None, resources=None):
        super().__init__(name, {"emotion_bonus": 0.05, **(parameters or {})}, resources)

    @property
    def classifier(self):
        return emotion_classifier(self.resources)

    def data_version(self) -> str:
        return f"{super().data_version()}-emo{training_data_hash(self.resources)[:12]}"

    def prepare(self) -> None:
        super().prepare()
        self.classifier  # noqa: B018  (build or load it now, not at the first request)

    def query_embeddings(self, contexts: Sequence[DialogueContext]) -> tuple[torch.Tensor, list[dict]]:
        texts = self.query_texts(contexts)
        plain = self.encode_queries(texts)
        labels, probabilities = self.classifier.predict(plain)
        prepended = self.encode_queries([f"{label}: {text}" for label, text in zip(labels, texts, strict=True)])
        details = [{"predicted_emotion": str(label), "emotion_probability": round(float(p), 4)}
                   for label, p in zip(labels, probabilities, strict=True)]
        return torch.from_numpy(prepended), details

    def candidate_bonus(self, details: list[dict], candidate_emotions: np.ndarray) -> torch.Tensor | None:
        predicted = np.array([d["predicted_emotion"] for d in details], dtype=str)[:, None]
        same = (candidate_emotions[None, :] == predicted if candidate_emotions.ndim == 1
                else candidate_emotions == predicted)
        return torch.from_numpy(same.astype(np.float32)) * float(self.parameters["emotion_bonus"])
