"""Fixtures of the backend tests: a temporary SQLite store with the bundled ED sample, tiny stores cut from it for
the tests that run MiniLM (encoding or training), a session-wide embedding cache, and, when the full ED data is
present next to the repo, a store with the full ED test split.

The tests that encode or train run the real parts (the packaged all-MiniLM-L6-v2, sentence-transformers' trainer,
real checkpoints) on the tiny stores, so that the whole of tests/backend stays within minutes on a 2-core machine;
the figures that need the whole sample or many steps (P@1,100 gains, classifier accuracy) are printed by
benchmarks/sample_quality.py instead."""
from __future__ import annotations

import dataclasses
import os
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from empeval.server.backend.encoder import EncoderSettings  # noqa: E402
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
    return _store_of(path, [d for file, split in files for d in parse_ed_csv(file, split)])


def _store_of(path: Path, dialogues):
    engine = make_engine(f"sqlite:///{path}")
    upgrade(engine)
    import_dialogues(engine, dialogues, dataset=ED, source="test", license="CC BY-NC 4.0")
    return engine


def _sample_slice(split: str, start: int, stop: int, *, as_split: str | None = None):
    """Dialogues start..stop of the sample's `split` file, in file order, filed under `as_split` when given (the
    sample has no valid split; the tiny stores take one from test dialogues no other split of theirs holds)."""
    dialogues = parse_ed_csv(SAMPLE / f"{split}.csv", split)[start:stop]
    return [dataclasses.replace(d, split=as_split) for d in dialogues] if as_split else dialogues


# The encoder of the tests' backend resources: production's (auto precision, batches of 64) but one torch thread, as
# the training tests use: the probe that would otherwise pick the threads at the first call costs seconds per worker
# (test_encoder.py tests it), and make test's two workers share two cores.
TEST_ENCODER = EncoderSettings(threads=1)

# The tiny store: 40 train dialogues (86 contexts, so 86 candidate listener turns, 30 of the 32 emotions) and 50
# test dialogues (102 contexts: P@1,100 needs 100).
TINY_TRAIN_DIALOGUES = 40
TINY_TEST_DIALOGUES = 50
# The handful store, for the training tests: 8 train dialogues (18 pairs), 10 valid (20 contexts, taken from the
# sample's test dialogues 50-59) and 8 test (16 contexts, the sample's first test dialogues).
HANDFUL_TRAIN_DIALOGUES = 8
HANDFUL_VALID_FROM_TEST = (50, 60)
HANDFUL_TEST_DIALOGUES = 8


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
def tiny_engine(tmp_path_factory):
    """A tiny ED store cut from the sample (see TINY_*): what the retrieval systems answer from in the tests."""
    engine = _store_of(tmp_path_factory.mktemp("tiny") / "t.db",
                       _sample_slice("train", 0, TINY_TRAIN_DIALOGUES) + _sample_slice("test", 0, TINY_TEST_DIALOGUES))
    yield engine
    engine.dispose()


@pytest.fixture(scope="session")
def tiny_resources(tiny_engine, cache_dir) -> BackendResources:
    return BackendResources(engine=tiny_engine, cache_dir=cache_dir, show_progress=False,
                            encoder_settings=TEST_ENCODER)


@pytest.fixture(scope="session")
def tiny_registry(tiny_resources) -> Registry:
    return Registry.from_config(None, tiny_resources)


@pytest.fixture(scope="session")
def handful_engine(tmp_path_factory):
    """A handful of train pairs with a valid split of their own (see HANDFUL_*), for real training runs of a few
    steps that can overfit them."""
    engine = _store_of(tmp_path_factory.mktemp("handful") / "t.db",
                       _sample_slice("train", 0, HANDFUL_TRAIN_DIALOGUES)
                       + _sample_slice("test", *HANDFUL_VALID_FROM_TEST, as_split="valid")
                       + _sample_slice("test", 0, HANDFUL_TEST_DIALOGUES))
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
    """The full ED test split (2,547 conversations) plus the tiny store's 40 train dialogues as the candidate pool
    (and the emotion classifier's training set), so that no test encodes the sample's 3,335 candidates."""
    engine = _store_of(tmp_path_factory.mktemp("full") / "t.db",
                       _sample_slice("train", 0, TINY_TRAIN_DIALOGUES) + parse_ed_csv(full_ed / "test.csv", "test"))
    yield engine
    engine.dispose()


@pytest.fixture(scope="session")
def full_resources(full_engine, cache_dir) -> BackendResources:
    return BackendResources(engine=full_engine, cache_dir=cache_dir, show_progress=False,
                            encoder_settings=TEST_ENCODER)


@pytest.fixture()
def fresh_engine(tmp_path):
    """An empty migrated store plus the sample, for tests that write responses."""
    engine = _store(tmp_path / "t.db", [(SAMPLE / "train.csv", "train"), (SAMPLE / "test.csv", "test")])
    yield engine
    engine.dispose()
