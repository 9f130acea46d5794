"""How many of the fine-tuned bi-encoder's candidates should CoBERT rerank? P@1,100 (= R@1), R@10, R@50 and MRR
of the `cobert` system over one shared candidate set per context (the gold reply + 99 seeded other references
of the split, `empeval.server.backend.metrics.draw_candidates`, seed 0, as `empeval metrics` draws them), for each
rerank depth K in --ks, beside the bi-encoder alone (K = 0). CoBERT scores only the bi-encoder's top max(K)
of each set once; every smaller K reuses those scores.

    python -m benchmarks cobert_rerank --database-url sqlite:///ed.db --cache-dir ~/.cache/empeval \\
        --split valid --contexts 300 --ks 5,10,20,50,100

Needs finished `empeval train retrieval` and `empeval train cobert` runs in the cache directory. No goal: after the
table, each row's P@1,100 is printed as a figure (benchmarks/figures.py) too.
"""
from __future__ import annotations

import argparse
import os
import random
import sys
import time
from pathlib import Path

import numpy as np
import torch

from empeval.server.backend.cobert import CoBERTModel
from empeval.server.backend.contexts import ED_DATASET, load_contexts
from empeval.server.backend.metrics import draw_candidates, rank_metrics
from empeval.server.backend.resources import BackendResources
from empeval.server.store import make_engine
from empeval.server.store.engine import unit_of_work

if not __package__:  # run as a file (python benchmarks/NAME.py): the benchmarks package is in the repository root
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks.figures import Figure  # noqa: E402
from benchmarks.session import report, run_script  # noqa: E402


def load() -> str:
    return "load {:.1f} / {:.1f} / {:.1f}".format(*os.getloadavg())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--database-url", required=True)
    parser.add_argument("--cache-dir", type=Path, required=True)
    parser.add_argument("--dataset", default=ED_DATASET)
    parser.add_argument("--split", default="valid")
    parser.add_argument("--contexts", type=int, default=None, help="A seeded subset of this many contexts.")
    parser.add_argument("--ks", default="5,10,20,50,100")
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    ks = sorted({int(k) for k in args.ks.split(",")})
    engine = make_engine(args.database_url)
    with unit_of_work(engine) as session:
        contexts = [c for c in load_contexts(session, dataset=args.dataset, split=args.split) if c.reference]
    if args.contexts is not None and args.contexts < len(contexts):
        chosen = sorted(random.Random(0).sample(range(len(contexts)), args.contexts))
        contexts = [contexts[i] for i in chosen]
    candidates = draw_candidates(contexts, dataset=args.dataset, split=args.split, seed=0)
    resources = BackendResources(engine=engine, dataset=args.dataset, cache_dir=args.cache_dir, show_progress=True)
    system = CoBERTModel("cobert", {"rerank_k": max(ks)}, resources)
    print(f"{time.strftime('%H:%M:%S', time.gmtime())} UTC, {load()}: {len(contexts):,} {args.split} contexts; "
          f"cobert {system.key} over retrieval-ft {system.encoder_key}", flush=True)
    references = list(candidates.references)
    start = time.perf_counter()
    queries = system._embed(system.query_texts(contexts), label="queries")
    embedded = system._embed(references, label="references")
    index = torch.from_numpy(candidates.sets)
    first = torch.einsum("nd,nkd->nk", queries, embedded[index]).double()
    bi_seconds = time.perf_counter() - start
    depth = min(max(ks), index.shape[1])
    order = first.argsort(dim=1, descending=True)[:, :depth]
    texts = [[references[int(index[row, j])] for j in order[row]] for row in range(len(contexts))]
    start = time.perf_counter()
    selector = system.selector.score_candidates(system.query_texts(contexts), texts, show_progress=True,
                                                description=f"CoBERT on the top {depth}").double()
    cobert_seconds = time.perf_counter() - start
    print(f"{'system':<26}{'P@1,100':>9}{'R@10':>8}{'R@50':>8}{'MRR':>8}")
    rows = [("retrieval-ft (bi-encoder)", first.numpy())]
    for k in ks:
        scores = first - 1e6
        scores.scatter_(1, order[:, :k], selector[:, :k])
        rows.append((f"cobert, rerank top {k}", scores.numpy()))
    p_at_1 = {}
    for name, scores in rows:
        figures = rank_metrics(scores)
        print(f"{name:<26}{figures['r@1'] * 100:>9.2f}{figures['r@10'] * 100:>8.2f}{figures['r@50'] * 100:>8.2f}"
              f"{figures['mrr'] * 100:>8.2f}", flush=True)
        p_at_1[name] = figures["r@1"] * 100
    for name, value in p_at_1.items():
        report(Figure(f"{args.split} P@1,100, {name}", value, fmt=".2f", note=f"{len(contexts):,} contexts"))
    print(f"bi-encoder {bi_seconds:.0f} s, CoBERT on the top {depth}: {cobert_seconds:.0f} s "
          f"({len(contexts) * depth:,} pairs); {load()}; end {time.strftime('%H:%M:%S', time.gmtime())} UTC")
    np.save(args.cache_dir / f"cobert-{args.split}-scores.npy", selector.numpy())


if __name__ == "__main__":
    run_script(__file__, main)
