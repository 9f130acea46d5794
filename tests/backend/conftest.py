"""Fixtures of the backend tests: a temporary SQLite store with the bundled ED sample, a session-wide
embedding cache (so MiniLM encodes the sample's candidates once per test session), and, when the full ED
data is present next to the repo, a store with the full ED test split."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from empeval.server.backend.registry import Registry  # noqa: E402
from empeval.server.backend.resources import BackendResources  # noqa: E402
from empeval.server.datasets.ed_csv import parse_ed_csv  # noqa: E402
from empeval.server.datasets.importer import import_dialogues  # noqa: E402
from empeval.server.store import make_engine  # noqa: E402
from empeval.server.store.migrate import upgrade  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
SAMPLE = REPO / "server" / "data" / "ed_sample"
FULL_ED = REPO.parent / "shared" / "data" / "empatheticdialogues"
ED = "empatheticdialogues"


def _store(path: Path, files: list[tuple[Path, str]]):
    engine = make_engine(f"sqlite:///{path}")
    upgrade(engine)
    dialogues = [d for file, split in files for d in parse_ed_csv(file, split)]
    import_dialogues(engine, dialogues, dataset=ED, source="test", license="CC BY-NC 4.0")
    return engine


@pytest.fixture(scope="session")
def cache_dir(embedding_cache_dir) -> Path:
    """The session's embedding cache (tests/conftest.py), shared with the demo test."""
    return embedding_cache_dir


@pytest.fixture(scope="session")
def sample_engine(tmp_path_factory):
    """The bundled sample (1,600 train + 320 test conversations), imported once per session."""
    engine = _store(tmp_path_factory.mktemp("sample") / "t.db", [(SAMPLE / "train.csv", "train"),
                                                                  (SAMPLE / "test.csv", "test")])
    yield engine
    engine.dispose()


@pytest.fixture(scope="session")
def resources(sample_engine, cache_dir) -> BackendResources:
    return BackendResources(engine=sample_engine, cache_dir=cache_dir, show_progress=False)


@pytest.fixture(scope="session")
def registry(resources) -> Registry:
    return Registry.from_config(None, resources)


@pytest.fixture(scope="session")
def full_ed() -> Path:
    if not (FULL_ED / "test.csv").exists():
        pytest.skip(f"full EmpatheticDialogues data not found at {FULL_ED} (the fast tests use the bundled sample)")
    return FULL_ED


@pytest.fixture(scope="session")
def full_engine(tmp_path_factory, full_ed):
    """The full ED test split (2,547 conversations) plus the sample's train split as the candidate pool,
    so the retrieval systems reuse the sample's cached candidate embeddings."""
    engine = _store(tmp_path_factory.mktemp("full") / "t.db", [(SAMPLE / "train.csv", "train"),
                                                                (full_ed / "test.csv", "test")])
    yield engine
    engine.dispose()


@pytest.fixture(scope="session")
def full_resources(full_engine, cache_dir) -> BackendResources:
    return BackendResources(engine=full_engine, cache_dir=cache_dir, show_progress=False)


@pytest.fixture()
def fresh_engine(tmp_path):
    """An empty migrated store plus the sample, for tests that write responses."""
    engine = _store(tmp_path / "t.db", [(SAMPLE / "train.csv", "train"), (SAMPLE / "test.csv", "test")])
    yield engine
    engine.dispose()
