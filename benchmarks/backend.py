"""Benchmark of the model backend on the ED test set (prints figures; asserts nothing).

1. `retrieval` responses for every test context: cold (empty cache: the candidate index is encoded) and
   warm (index loaded from the on-disk cache), each in a fresh set of backend resources.
2. The nearest-neighbour search itself: our normalised matrix product + max vs
   `sentence_transformers.util.semantic_search` on the same embeddings, in the same run; prints the
   time ratio and how often both pick the same candidate.
3. p50/p95 latency of single-context requests through the HTTP API (POST /api/respond, a real local
   HTTP server, the warm index).

Usage: python benchmarks/backend.py --database-url sqlite:////tmp/full.db [--cache-dir DIR] [--requests 200]
The database must hold ED (train and test), e.g. `empeval --database-url ... data import-ed PATH`.
"""
from __future__ import annotations

import argparse
import logging
import os
import random
import shutil
import statistics
import tempfile
import threading
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import requests  # noqa: E402
import torch  # noqa: E402
from sentence_transformers import util  # noqa: E402

from server.backend.contexts import load_contexts  # noqa: E402
from server.backend.resources import BackendResources  # noqa: E402
from server.backend.retrieval import RetrievalModel, pool_embeddings  # noqa: E402
from server.store import ensure_schema, make_engine  # noqa: E402
from server.store.engine import unit_of_work  # noqa: E402


def run_retrieval(engine, cache_dir: Path, contexts, batch_size: int) -> tuple[float, float, RetrievalModel]:
    """(seconds for index build/load, seconds for all responses) in fresh resources."""
    resources = BackendResources(engine=engine, cache_dir=cache_dir, show_progress=False)
    model = RetrievalModel("retrieval", {}, resources)
    start = time.perf_counter()
    model.prepare()
    index_seconds = time.perf_counter() - start
    for i in range(0, len(contexts), batch_size):
        outcomes = model.respond_batch(contexts[i:i + batch_size])
        assert all(o.ok for o in outcomes)
    return index_seconds, time.perf_counter() - start, model


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
    print(f"search only, {len(contexts):,} queries x {candidates.shape[0]:,} candidates (best of {repeats}):")
    print(f"  matmul+max (ours)        {t_ours * 1000:9.1f} ms")
    print(f"  util.semantic_search     {t_st * 1000:9.1f} ms")
    print(f"  ratio semantic_search / ours = {t_st / t_ours:.2f}; same candidate for {agree * 100:.2f}% of queries")


def api_latency(database_url: str, cache_dir: Path, context_ids: list[int], n: int) -> None:
    from werkzeug.serving import make_server

    from server.web.app import create_app

    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # one access-log line per request would drown the figures
    app = create_app({"DATABASE_URL": database_url, "BACKEND_CACHE_DIR": str(cache_dir)})
    server = make_server("127.0.0.1", 0, app, threaded=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{server.server_port}/api/respond"
    session = requests.Session()
    # The backend API is the researcher's: it takes the admin token.
    with app.app_context():
        from server.annotation.secrets import admin_token, secret_key

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
              f"p50 {statistics.median(latencies):.1f} ms, p95 {quantiles[94]:.1f} ms, max {max(latencies):.1f} ms")
    finally:
        server.shutdown()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--database-url", required=True)
    parser.add_argument("--cache-dir", type=Path, default=None,
                        help="Cache folder kept after the run (its candidate embeddings are removed first "
                             "so the cold run is cold); default: a temporary folder.")
    parser.add_argument("--requests", type=int, default=200)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--limit", type=int, default=None, help="Only the first N test contexts.")
    args = parser.parse_args()

    engine = make_engine(args.database_url)
    ensure_schema(engine)
    with unit_of_work(engine) as session:
        contexts = load_contexts(session, split="test", limit=args.limit)
    if not contexts:
        raise SystemExit("no ED test contexts in this database; import ED first")
    scratch = None
    cache_dir = args.cache_dir
    if cache_dir is None:
        scratch = tempfile.mkdtemp(prefix="empeval-bench-")
        cache_dir = Path(scratch)
    for stale in (cache_dir / "embeddings").glob("candidates-*.npy"):
        stale.unlink()
    print(f"torch threads: {torch.get_num_threads()}; contexts: {len(contexts):,} ED test")
    try:
        index_cold, total_cold, _ = run_retrieval(engine, cache_dir, contexts, args.batch_size)
        print(f"retrieval, cold (index built): {total_cold:.1f} s total, of which index {index_cold:.1f} s; "
              f"{len(contexts) / (total_cold - index_cold):.0f} contexts/s after the index")
        index_warm, total_warm, model = run_retrieval(engine, cache_dir, contexts, args.batch_size)
        print(f"retrieval, warm (index cached): {total_warm:.1f} s total, of which index load {index_warm:.2f} s; "
              f"{len(contexts) / (total_warm - index_warm):.0f} contexts/s")
        compare_search(model, contexts)
        api_latency(args.database_url, cache_dir, [c.context_id for c in contexts], args.requests)
    finally:
        if scratch:
            shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
