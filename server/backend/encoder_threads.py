"""The torch threads of the sentence encoder's large calls: chosen once per machine, kept in the cache folder.

A large call (encoder.SMALL_CALL texts or more: a candidate index, a `generate` batch) may run one torch thread or
one per usable core. Which is better is a property of the machine (its cores, the torch build, the precision), so it
is measured once and written to `<cache dir>/encoder-threads/<machine>.json` ($EMPEVAL_CACHE_DIR or
~/.cache/empeval, the embedding cache's folder); every later process on that machine reads the file instead.

- **CPU time, not wall time.** The probe encodes a fixed batch with 1 thread and with one per usable core,
  alternating, twice each, and compares the process's CPU time per text (best of two). Waiting for a core that
  another process holds costs wall time but no CPU time, so a busy moment no longer reads as "several threads
  are slow" (at load 12 the wall-time probe measured 112.6 texts/s with 1 thread against 13.3 with 2, METRICS.md;
  cached, such a reading would have stuck for good). Several threads are kept when they cost at most
  CPU_MARGIN times the CPU of one: their parallel overhead is small, so on free cores N threads finish about
  N / (that ratio) times sooner, and on busy ones they take little more CPU than one.
- **Never on a request path.** `SentenceEncoder.choose_threads()` runs the probe when the machine has no choice
  yet; it is called where work is prepared ahead of requests (`RetrievalModel.prepare()`, which `empeval
  generate` and the benchmarks call; `empeval serve` may call it at start-up). An encoder only reads the file;
  without one, large calls run 1 thread (the safe choice on a shared machine) until a probe has run. Small
  calls (a chat turn, a single API request) always run 1 thread in auto mode: there a second thread cost 52 ms
  of CPU per context against 27 ms for no gain in latency (2-core AMD EPYC, idle), and a server runs several
  such calls at once anyway.
- **Overrides.** EMPEVAL_ENCODER_THREADS=N (or `EncoderSettings(threads=N)`) is used for every call as given;
  nothing is read or measured. Deleting the file makes the next `choose_threads()` measure again.
"""
from __future__ import annotations

import hashlib
import json
import os
import platform
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

# Several threads are kept when their CPU time per text is at most this many times one thread's.
CPU_MARGIN = 1.25
# The probe's texts: ED-like listener turns of 9 to 31 words, cycled to PROBE_SIZE texts (one batch, longest first).
PROBE_SIZE = 32
PROBE_SENTENCES = (
    "Oh no, I am so sorry to hear that. Losing a pet is like losing a member of the family, and it takes a long "
    "time to feel normal again.",
    "That is wonderful news! You must be so proud of yourself after all the work you put into it this year.",
    "I would be nervous too. Did you get a chance to talk to your manager about it before the meeting?",
    "That sounds really scary. I am glad nobody was hurt in the end.",
    "Wow, congratulations! How long have the two of you been together?",
    "I know how you feel, my brother did the same thing to me once.",
    "Have you tried talking to her about it?",
    "That must have been a great trip.",
)
FOLDER = "encoder-threads"


def usable_cpus() -> int:
    """CPUs this process may run on (its affinity mask where the OS has one)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def probe_texts() -> list[str]:
    texts = [PROBE_SENTENCES[i % len(PROBE_SENTENCES)] for i in range(PROBE_SIZE)]
    return sorted(texts, key=len, reverse=True)


def cpu_model(cpuinfo: Path = Path("/proc/cpuinfo")) -> str:
    """The first CPU's model name (platform.processor() where there is no /proc/cpuinfo)."""
    try:
        for line in cpuinfo.read_text().splitlines():
            key, _, value = line.partition(":")
            if key.strip() == "model name":
                return value.strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def machine(precision: str) -> dict[str, str | int]:
    """What the choice depends on: the host, its CPU model and the CPUs this process may use, the torch build and
    the encoder's precision (bf16 and fp32 run other kernels)."""
    import torch

    return {"host": platform.node(), "cpu": cpu_model(), "usable_cpus": usable_cpus(), "torch": torch.__version__,
            "precision": precision}


def choice_path(cache_dir: Path, precision: str) -> Path:
    """The file of this machine's choice under `cache_dir`."""
    key = json.dumps(machine(precision), sort_keys=True)
    return Path(cache_dir) / FOLDER / f"{hashlib.sha256(key.encode()).hexdigest()[:16]}.json"


@dataclass(frozen=True)
class ThreadChoice:
    """A measured choice: `threads`, and the CPU milliseconds per probe text of each number of threads tried."""

    threads: int
    cpu_ms_per_text: dict[int, float]
    machine: dict[str, str | int] = field(default_factory=dict)
    measured_at: str = ""
    load_average: tuple[float, ...] = ()


def read_choice(cache_dir: Path, precision: str) -> ThreadChoice | None:
    """This machine's cached choice, or None (no file, or one that is unreadable: it is measured again)."""
    path = choice_path(cache_dir, precision)
    try:
        stored = json.loads(path.read_text())
        threads = int(stored["threads"])
        cpu = {int(k): float(v) for k, v in stored.get("cpu_ms_per_text", {}).items()}
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None
    if threads < 1:
        return None
    return ThreadChoice(threads, cpu, stored.get("machine", {}), stored.get("measured_at", ""),
                        tuple(stored.get("load_average", ())))


def write_choice(cache_dir: Path, precision: str, choice: ThreadChoice) -> Path:
    """Store the choice for this machine (write then rename: a concurrent reader never sees half a file)."""
    path = choice_path(cache_dir, precision)
    path.parent.mkdir(parents=True, exist_ok=True)
    scratch = path.with_suffix(f".{os.getpid()}.tmp")
    scratch.write_text(json.dumps({"threads": choice.threads,
                                   "cpu_ms_per_text": {str(k): v for k, v in choice.cpu_ms_per_text.items()},
                                   "machine": choice.machine, "measured_at": choice.measured_at,
                                   "load_average": list(choice.load_average)}, indent=1))
    scratch.replace(path)
    return path


def pick_threads(cpu_ms_per_text: Mapping[int, float]) -> int:
    """The most threads whose CPU time per text is within CPU_MARGIN of one thread's; 1 when only 1 was tried."""
    one = cpu_ms_per_text[1]
    return max(threads for threads, cpu in cpu_ms_per_text.items() if cpu <= CPU_MARGIN * one)


def measure_cpu(encode_with: Callable[[int], None], options: Sequence[int], *, texts: int,
                rounds: int = 2) -> dict[int, float]:
    """Process CPU milliseconds per text of `encode_with(threads)` (which encodes `texts` texts) for each of
    `options`, the options alternating `rounds` times and the least of each kept: CPU time of every thread of the
    process, so time spent waiting for a busy core is not counted."""
    encode_with(options[0])  # warms the model up (its first forward pass pays one-off costs)
    best = {threads: float("inf") for threads in options}
    for _ in range(rounds):
        for threads in options:
            before = time.process_time()
            encode_with(threads)
            best[threads] = min(best[threads], (time.process_time() - before) * 1000 / texts)
    return best


def probe(encode_with: Callable[[int], None], precision: str) -> ThreadChoice:
    """Measure 1 thread against one per usable CPU (`encode_with(threads)` encodes probe_texts()) and choose."""
    many = usable_cpus()
    if many == 1:
        return ThreadChoice(1, {}, machine(precision), _now(), _load())
    cpu = measure_cpu(encode_with, [1, many], texts=PROBE_SIZE)
    return ThreadChoice(pick_threads(cpu), cpu, machine(precision), _now(), _load())


def measured_busy(choice: ThreadChoice, load_now: tuple[float, ...] | None = None) -> bool:
    """Whether `choice` kept 1 thread while every usable CPU was busy (its 1-minute load at or above their count)
    and the machine is quieter now (`load_now`, default the current load average, below it). A busy machine's extra
    OpenMP threads spin while they wait for a core, so the probe then keeps 1 thread where a quiet machine would
    keep several; such a choice is measured again where work is prepared (SentenceEncoder.choose_threads)."""
    cpus = usable_cpus()
    now = _load() if load_now is None else load_now
    return (choice.threads == 1 and cpus > 1 and bool(choice.load_average) and bool(now)
            and choice.load_average[0] >= cpus and now[0] < cpus)


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _load() -> tuple[float, ...]:
    try:
        return tuple(round(x, 2) for x in os.getloadavg())
    except OSError:
        return ()
