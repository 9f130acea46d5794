"""Benchmark of the model backend on the ED test set (prints goal, measured value and ratio; asserts nothing).

1. Encoder throughput: texts/s of the project's encoder (`SentenceEncoder`, its settings as configured:
   precision, threads, batch size, length sorting) beside `SentenceTransformer.encode()` with the library's
   defaults (batch 32, torch's default threads, fp32) on the same texts, alternating, in the same run.
   Goal: ratio >= 2.5 where the CPU has bf16 instructions (AMX / AVX512-BF16), else reported as measured.
   Also beside our encoder forced to fp32 (same threads and batching), to show what bf16 alone buys.
2. Cold retrieval: `retrieval` responses for every test context, starting from an empty cache (the
   candidate index is encoded), in fresh backend resources. Goal: under 150 s for the 5,259 ED test contexts.
3. Agreement with fp32 on the same contexts: the share of contexts whose nearest candidate is the same
   as with an fp32 encoder (goal >= 97%) and P@1,100 both ways (goal: within 0.5 points). The fp32 side
   uses the kept cache folder (`--cache-dir`), so a second run reuses its fp32 embeddings.
4. Warm retrieval (index loaded from the on-disk cache), the nearest-neighbour search itself (our
   normalised matrix product + max vs `sentence_transformers.util.semantic_search`), and p50/p95 latency of
   single-context requests through the HTTP API (a real local server, the warm index).

The machine's load average is printed beside every figure: on a shared machine absolute times move with
it, ratios measured in the same run much less.

Goals and ratios are printed as figures (benchmarks/figures.py: goal, measured, ratio = measured / goal, verdict).

Usage: python -m benchmarks backend --database-url sqlite:////tmp/full.db [--cache-dir DIR] [--parts ...]
The database must hold ED (train and test), e.g. `empeval --database-url ... data import-ed PATH`.
Encoder settings come from EMPEVAL_ENCODER_PRECISION / _THREADS / _BATCH_SIZE as in the app.
"""
from __future__ import annotations

import argparse
import logging
import os
import random
import shutil
import statistics
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import numpy as np  # noqa: E402
import requests  # noqa: E402
import torch  # noqa: E402
from sentence_transformers import SentenceTransformer, util  # noqa: E402

from empeval.server.backend.contexts import load_contexts  # noqa: E402
from empeval.server.backend.encoder import EncoderSettings, SentenceEncoder, bf16_support  # noqa: E402
from empeval.server.backend.metrics import p_at_1_of_100  # noqa: E402
from empeval.server.backend.resources import BackendResources  # noqa: E402
from empeval.server.backend.retrieval import RetrievalModel, candidate_pool, pool_embeddings  # noqa: E402
from empeval.server.store import ensure_schema, make_engine  # noqa: E402
from empeval.server.store.engine import unit_of_work  # noqa: E402

if not __package__:  # run as a file (python benchmarks/NAME.py): the benchmarks package is in the repository root
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks.figures import Figure, at_least, at_most, below  # noqa: E402
from benchmarks.session import report, run_script  # noqa: E402

PARTS = ("throughput", "cold", "agreement", "warm", "search", "api")
GOAL_RATIO = 2.5
GOAL_COLD_SECONDS = 150.0
GOAL_SAME_NEAREST = 0.97
GOAL_P_AT_1_POINTS = 0.5


def load() -> str:
    return f"load {os.getloadavg()[0]:.2f}"


@dataclass
class RetrievalRun:
    index_seconds: float  # building or loading the candidate index
    total_seconds: float  # index plus every response
    cpu_seconds: float  # process CPU time of the same (all threads)
    model: RetrievalModel
    outcomes: list


def run_retrieval(engine, cache_dir: Path, contexts, batch_size: int,
                  settings: EncoderSettings | None = None) -> RetrievalRun:
    """`retrieval` responses for every context, in fresh backend resources, timed."""
    resources = BackendResources(engine=engine, cache_dir=cache_dir, show_progress=False, encoder_settings=settings)
    model = RetrievalModel("retrieval", {}, resources)
    start, cpu_start = time.perf_counter(), time.process_time()
    model.prepare()
    index_seconds = time.perf_counter() - start
    outcomes = []
    for i in range(0, len(contexts), batch_size):
        outcomes += model.respond_batch(contexts[i:i + batch_size])
    assert all(o.ok for o in outcomes)
    return RetrievalRun(index_seconds, time.perf_counter() - start, time.process_time() - cpu_start, model, outcomes)


def throughput(engine, contexts, n_texts: int, repeats: int, settings: EncoderSettings) -> None:
    """Texts/s of our encoder vs SentenceTransformer.encode() defaults on the same texts, alternating."""
    resources = BackendResources(engine=engine, show_progress=False)
    pool = candidate_pool(resources)
    rng = random.Random(0)
    # The cold run's mix: candidates and queries in their proportion (about 7.7 : 1 on full ED).
    queries = RetrievalModel("retrieval", {}, resources).query_texts(contexts)
    workload = pool.texts + queries
    texts = rng.sample(workload, min(n_texts, len(workload)))
    default_threads = torch.get_num_threads()
    with tempfile.TemporaryDirectory(prefix="empeval-bench-enc-") as scratch:
        ours = SentenceEncoder(cache_dir=Path(scratch), show_progress=False, settings=settings)
        fp32 = SentenceEncoder(cache_dir=Path(scratch), show_progress=False,
                               settings=EncoderSettings(precision="fp32", threads=settings.threads,
                                                        batch_size=settings.batch_size))
        library = SentenceTransformer(str(ours.model_path), device="cpu")
        # Load the weights and run once outside the timings; this first call of two batches is also where
        # our encoder measures its threads (when they are auto), and fp32 then runs with the same.
        ours.encode(texts[:2 * ours.batch_size])
        fp32.threads = ours.threads
        fp32.encode(texts[:8])
        library.encode(texts[:8])
        rates: dict[str, list[float]] = {"library": [], "ours": [], "ours-fp32": []}
        embeddings = {}
        for _ in range(repeats):
            for name, encode in (("library", library.encode), ("ours", ours.encode), ("ours-fp32", fp32.encode)):
                start = time.perf_counter()
                embeddings[name] = np.asarray(encode(texts), dtype=np.float32)
                rates[name].append(len(texts) / (time.perf_counter() - start))
    median = {name: statistics.median(values) for name, values in rates.items()}
    ratio = median["ours"] / median["library"]
    library_unit = embeddings["library"] / np.linalg.norm(embeddings["library"], axis=1, keepdims=True)
    cosine = (library_unit * embeddings["ours"]).sum(axis=1)
    supported = bf16_support()
    print(f"1. encoder throughput, {len(texts):,} texts drawn from the cold run's workload (candidates + queries), "
          f"{repeats} alternating rounds, median:")
    print(f"   SentenceTransformer.encode() defaults (batch 32, {default_threads} threads, fp32): "
          f"{median['library']:7.1f} texts/s  (rounds: {', '.join(f'{r:.1f}' for r in rates['library'])})")
    print(f"   ours ({ours.precision}, {ours.threads} thread(s), batch {ours.batch_size}, length-sorted): "
          f"{median['ours']:7.1f} texts/s  (rounds: {', '.join(f'{r:.1f}' for r in rates['ours'])}; "
          f"thread probe texts/s: {ours.thread_probe or 'not run (configured)'})")
    print(f"   ours forced to fp32 ({fp32.threads} thread(s), batch {fp32.batch_size}): "
          f"{median['ours-fp32']:7.1f} texts/s; ours / ours-fp32 = {median['ours'] / median['ours-fp32']:.2f}")
    print(f"   cosine(ours, library fp32): min {cosine.min():.5f}, mean {cosine.mean():.6f}")
    report(Figure("encoder throughput, ours / SentenceTransformer.encode() defaults", ratio, "x",
                  goal=at_least(GOAL_RATIO) if supported else None, fmt=".2f",
                  note=f"CPU has {supported}" if supported
                  else "CPU without bf16 instructions: no ratio goal, best fp32 setting reported"))


def agreement(engine, cache_dir: Path, contexts, batch_size: int, cold: RetrievalRun) -> None:
    """Same nearest candidate as fp32, and P@1,100 with each precision."""
    model, outcomes = cold.model, cold.outcomes
    settings = model.encoder.settings
    fp32_settings = EncoderSettings(precision="fp32", threads=model.encoder.threads or settings.threads,
                                    batch_size=settings.batch_size)
    fp32 = run_retrieval(engine, cache_dir, contexts, batch_size, fp32_settings)
    fp32_model, fp32_outcomes, fp32_seconds = fp32.model, fp32.outcomes, fp32.total_seconds
    same = sum(a.provenance["candidate_turn_id"] == b.provenance["candidate_turn_id"]
               for a, b in zip(outcomes, fp32_outcomes, strict=True)) / len(outcomes)
    ours_p, n = p_at_1_of_100(model, contexts, seed=0)
    fp32_p, _ = p_at_1_of_100(fp32_model, contexts, seed=0)
    gap = abs(ours_p - fp32_p) * 100
    print(f"3. agreement with fp32 over {len(contexts):,} contexts (fp32 retrieval took {fp32_seconds:.1f} s, "
          f"embeddings from {cache_dir} when cached):")
    report(Figure("same nearest candidate as fp32", same * 100, "%", goal=at_least(GOAL_SAME_NEAREST * 100),
                  fmt=".2f", note=f"{len(contexts):,} contexts"))
    report(Figure("|P@1,100 - fp32's P@1,100|", gap, "points", goal=at_most(GOAL_P_AT_1_POINTS), fmt=".2f",
                  note=f"{model.encoder.precision} {ours_p * 100:.2f} vs fp32 {fp32_p * 100:.2f} over {n:,} contexts"))


def compare_search(model: RetrievalModel, contexts, repeats: int = 3) -> None:
    queries = torch.from_numpy(model.encoder.encode(model.query_texts(contexts)))
    candidates = pool_embeddings(model.resources, model.pool)
    own = torch.tensor([model.pool.position.get(c.reference_turn_id, -1) for c in contexts])

    def ours():
        scores = queries @ candidates.T
        rows = torch.nonzero(own >= 0).squeeze(1)
        scores[rows, own[rows]] = float("-inf")
        return scores.max(dim=1).indices.tolist()

    def theirs():
        # semantic_search cannot exclude a candidate: ask for two and skip the context's own reference.
        hits = util.semantic_search(queries, candidates, top_k=2, score_function=util.dot_score)
        return [next(h["corpus_id"] for h in hit if h["corpus_id"] != int(o)) for hit, o in zip(hits, own, strict=True)]

    timings = {}
    for name, function in (("matmul+max (ours)", ours), ("util.semantic_search", theirs)):
        best = float("inf")
        for _ in range(repeats):
            start = time.perf_counter()
            picks = function()
            best = min(best, time.perf_counter() - start)
        timings[name] = (best, picks)
    (t_ours, p_ours), (t_st, p_st) = timings.values()
    agree = sum(a == b for a, b in zip(p_ours, p_st, strict=True)) / len(p_ours)
    print(f"4. search only, {len(contexts):,} queries x {candidates.shape[0]:,} candidates (best of {repeats}):")
    print(f"  matmul+max (ours)        {t_ours * 1000:9.1f} ms")
    print(f"  util.semantic_search     {t_st * 1000:9.1f} ms")
    report(Figure("search time, util.semantic_search / matmul+max (ours)", t_st / t_ours, "x", fmt=".2f",
                  note=f"same candidate for {agree * 100:.2f}% of queries"))


def api_latency(database_url: str, cache_dir: Path, context_ids: list[int], n: int) -> None:
    from werkzeug.serving import make_server

    from empeval.server.web.app import create_app

    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # one access-log line per request would drown the figures
    app = create_app({"DATABASE_URL": database_url, "BACKEND_CACHE_DIR": str(cache_dir)})
    server = make_server("127.0.0.1", 0, app, threaded=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{server.server_port}/api/respond"
    session = requests.Session()
    # The backend API is the researcher's: it takes the admin token.
    with app.app_context():
        from empeval.server.annotation.secrets import admin_token, secret_key

        session.headers["Authorization"] = f"Bearer {admin_token(secret_key(app.extensions['empeval.engine']))}"
    try:
        start = time.perf_counter()
        first = session.post(url, json={"system": "retrieval", "context_id": context_ids[0]}, timeout=600)
        first.raise_for_status()
        print(f"API first request (builds the model, loads the cached index): {(time.perf_counter() - start):.2f} s")
        rng = random.Random(0)
        latencies = []
        for _ in range(n):
            body = {"system": "retrieval", "context_id": rng.choice(context_ids)}
            start = time.perf_counter()
            answer = session.post(url, json=body, timeout=60)
            latencies.append((time.perf_counter() - start) * 1000)
            answer.raise_for_status()
        quantiles = statistics.quantiles(latencies, n=100)
        print(f"API POST /api/respond, retrieval, {n} single-context requests: "
              f"p50 {statistics.median(latencies):.1f} ms, p95 {quantiles[94]:.1f} ms, max {max(latencies):.1f} ms"
              f"  [{load()}]")
    finally:
        server.shutdown()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--database-url", required=True)
    parser.add_argument("--cache-dir", type=Path, default=None,
                        help="Cache folder kept after the run, for the fp32 side of the agreement and the warm "
                             "run (the cold run always starts from an empty folder); default: a temporary one.")
    parser.add_argument("--parts", default=",".join(PARTS),
                        help=f"Comma-separated parts to run, in this order: {','.join(PARTS)} (default all).")
    parser.add_argument("--texts", type=int, default=2048, help="Texts of the throughput comparison.")
    parser.add_argument("--repeats", type=int, default=3, help="Alternating rounds of the throughput comparison.")
    parser.add_argument("--requests", type=int, default=200)
    parser.add_argument("--batch-size", type=int, default=64, help="Contexts per respond_batch call.")
    parser.add_argument("--limit", type=int, default=None, help="Only the first N test contexts.")
    args = parser.parse_args()
    parts = [part.strip() for part in args.parts.split(",") if part.strip()]
    if unknown := sorted(set(parts) - set(PARTS)):
        parser.error(f"--parts: unknown {', '.join(unknown)}; choose from {', '.join(PARTS)}")

    settings = EncoderSettings.from_environment()
    engine = make_engine(args.database_url)
    ensure_schema(engine)
    with unit_of_work(engine) as session:
        contexts = load_contexts(session, split="test", limit=args.limit)
    if not contexts:
        raise SystemExit("no ED test contexts in this database; import ED first")
    scratch = tempfile.mkdtemp(prefix="empeval-bench-")
    cache_dir = args.cache_dir or Path(scratch) / "kept"
    print(f"contexts: {len(contexts):,} ED test; usable CPUs {len(os.sched_getaffinity(0))}; torch default threads "
          f"{torch.get_num_threads()}; bf16 instructions: {bf16_support() or 'none'}; settings {settings}; {load()}")
    try:
        cold = None
        if "throughput" in parts:
            throughput(engine, contexts, args.texts, args.repeats, settings)
        if "cold" in parts or "agreement" in parts:
            cold = run_retrieval(engine, Path(scratch) / "cold", contexts, args.batch_size, settings)
            encoder = cold.model.encoder
            print(f"2. retrieval, cold (empty cache, {len(cold.model.pool.texts):,} candidates encoded; "
                  f"{encoder.precision}, {encoder.threads} thread(s), batch {encoder.batch_size}): "
                  f"index {cold.index_seconds:.1f} s, then {len(contexts):,} contexts in "
                  f"{cold.total_seconds - cold.index_seconds:.1f} s")
            report(Figure(f"cold retrieval over {len(contexts):,} contexts", cold.total_seconds, "s",
                          goal=below(GOAL_COLD_SECONDS), fmt=".1f"))
            print(f"   process CPU time of the cold run: {cold.cpu_seconds:.1f} s (all threads; with one thread, "
                  f"about its wall time on an otherwise idle machine)")
        if "agreement" in parts and cold is not None:
            agreement(engine, cache_dir, contexts, args.batch_size, cold)
        if "warm" in parts or "search" in parts or "api" in parts:
            # Fill the kept cache with our precision's index if the cold run did not (it used its own folder).
            for cached in (Path(scratch) / "cold" / "embeddings").glob("candidates-*.npy"):
                (cache_dir / "embeddings").mkdir(parents=True, exist_ok=True)
                shutil.copy(cached, cache_dir / "embeddings" / cached.name)
            warm = run_retrieval(engine, cache_dir, contexts, args.batch_size, settings)
            if "warm" in parts:
                print(f"4. retrieval, warm (index cached): {warm.total_seconds:.1f} s total, of which index load "
                      f"{warm.index_seconds:.2f} s; "
                      f"{len(contexts) / (warm.total_seconds - warm.index_seconds):.0f} contexts/s  [{load()}]")
            if "search" in parts:
                compare_search(warm.model, contexts)
            if "api" in parts:
                api_latency(args.database_url, cache_dir, [c.context_id for c in contexts], args.requests)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    run_script(__file__, main)
