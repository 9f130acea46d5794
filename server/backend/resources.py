"""What systems share within one process: the store, the cache folder, and the sentence encoder."""
from __future__ import annotations

import os
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sqlalchemy import Engine

from empeval.server.backend.contexts import ED_DATASET

if TYPE_CHECKING:
    from empeval.server.backend.encoder import EncoderSettings

CACHE_DIR_ENV = "EMPEVAL_CACHE_DIR"


def default_cache_dir() -> Path:
    """$EMPEVAL_CACHE_DIR, else ~/.cache/empeval."""
    env = os.environ.get(CACHE_DIR_ENV)
    return Path(env) if env else Path.home() / ".cache" / "empeval"


@dataclass
class BackendResources:
    """Built once per process (CLI command or web app) and handed to every system the registry builds.

    `shared` holds expensive objects (encoder, candidate pools, classifier) built lazily under `lock`,
    so two systems or two requests never build the same index twice. `encoder_settings` (precision,
    threads, batch size) default to the EMPEVAL_ENCODER_* environment variables (see `encoder.py`).
    """

    engine: Engine | None = None
    dataset: str = ED_DATASET
    cache_dir: Path = field(default_factory=default_cache_dir)
    show_progress: bool = True
    shared: dict[str, Any] = field(default_factory=dict)
    lock: threading.RLock = field(default_factory=threading.RLock)
    encoder_settings: EncoderSettings | None = None

    def get_or_build(self, key: str, build):
        with self.lock:
            if key not in self.shared:
                self.shared[key] = build()
            return self.shared[key]

    def encoder(self):
        from empeval.server.backend.encoder import EncoderSettings, SentenceEncoder

        def build():
            settings = self.encoder_settings or EncoderSettings.from_environment()
            return SentenceEncoder(cache_dir=self.cache_dir, show_progress=self.show_progress, settings=settings)

        return self.get_or_build("encoder", build)
