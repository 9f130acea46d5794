"""`retrieval-ft`: the `retrieval` system with the encoder fine-tuned on ED by `empeval train retrieval`.

Rashkin et al.'s (2019) fine-tuned retrieval rows: the same candidates (ED train listener turns), the same
query (the last 4 turns), the encoder trained on ED's (context, listener turn) pairs with in-batch negatives
(training/retrieval.py). The checkpoint is the most recently trained one in the cache
directory (`<cache_dir>/trained/retrieval-ft-<key>/model`), or the one whose key the `checkpoint` parameter
pins. Its key and weights hash are in the encoder's `model_id`, hence in the system's version (provenance)
and in the names of its embedding cache files, so zero-shot and fine-tuned embeddings never mix. With no
checkpoint the system refuses to build (naming the train command), never falling back to the zero-shot encoder.
"""
from __future__ import annotations

from pathlib import Path

from empeval.server.backend.checkpoints import checkpoint_key, find_checkpoint
from empeval.server.backend.resources import BackendResources
from empeval.server.backend.retrieval import RetrievalModel

KIND = "retrieval-ft"


def fine_tuned_checkpoint(cache_dir: Path, key: str | None = None) -> Path:
    """The `model/` folder of the fine-tuned retrieval encoder (MissingCheckpoint naming
    `empeval train retrieval` when there is none)."""
    return find_checkpoint(cache_dir, KIND, key)


def fine_tuned_encoder(resources: BackendResources, key: str | None = None):
    """A SentenceEncoder over the fine-tuned checkpoint, shared per process and checkpoint."""
    from empeval.server.backend.encoder import EncoderSettings, SentenceEncoder

    path = fine_tuned_checkpoint(resources.cache_dir, key)

    def build():
        settings = resources.encoder_settings or EncoderSettings.from_environment()
        return SentenceEncoder(cache_dir=resources.cache_dir, show_progress=resources.show_progress,
                               settings=settings, model_path=path, model_name=f"{KIND}-{checkpoint_key(path)}")

    return resources.get_or_build(f"encoder:{path}", build)


class FineTunedRetrievalModel(RetrievalModel):
    kind = KIND

    def __init__(self, name: str, parameters=None, resources: BackendResources | None = None):
        super().__init__(name, parameters, resources)
        assert resources is not None
        # Fail at build time (`empeval generate` names the system), not at the first request.
        self.checkpoint = fine_tuned_checkpoint(resources.cache_dir, self.parameters.get("checkpoint"))

    @property
    def encoder(self):
        assert self.resources is not None
        return fine_tuned_encoder(self.resources, self.parameters.get("checkpoint"))
