"""Quality figures of the trained and encoding systems on the bundled ED sample (prints goal and measured value;
asserts nothing). They were test assertions until the tests moved to tiny fixtures (tests/backend/conftest.py):
what a short run on the whole sample reaches needs minutes of CPU, not a test.

Parts (`--parts`, all by default), on a fresh SQLite store holding the sample (1,600 train dialogues, 3,335 train
pairs; 320 test dialogues, 668 test contexts) and a fresh cache directory (the embedding cache shared by the parts;
`cobert` has one of its own, so that its stand-in encoder is the only `retrieval-ft` run it sees):

- `emotion`: the emotion classifier of `retrieval-emoprepend` (logistic regression on MiniLM embeddings of
  situation + first turn) fitted on the 1,600 train dialogues; accuracy on the 320 test dialogues. Goal: > 25%
  (chance 1/32 = 3.1%).
- `retrieval`: P@1,100, R@10, R@50 and MRR of the zero-shot `retrieval` and `retrieval-emoprepend` over the 668
  test contexts (shared candidate sets, seed 0). Goal: P@1,100 > 15 (chance 1).
- `retrieval-ft`: `empeval train retrieval`'s bounded run, 20 steps of 32 pairs (lr 5e-5, texts cut at 64 word
  pieces; model selection P@1,100 on 100 contexts of the held-out 10% of the train dialogues at steps 10 and 20),
  then P@1,100 of `retrieval-ft` and of the zero-shot `retrieval` over the 668 test contexts, same candidate sets.
  Goal: fine-tuned >= zero-shot + 1.5 points. Also the MultipleNegativesRankingLoss of 8 fixed batches of 32 train
  pairs before and after (goal: at least 0.05 lower).
- `cobert`: `empeval train cobert` on the first 128 train pairs (3 epochs of B=16, 24 steps, lr 1e-4, 2 warm-up
  steps; model selection P@1,100 on 100 held-out contexts at the end), over the packaged all-MiniLM-L6-v2 standing
  in for the fine-tuned bi-encoder; then P@1,100 over the first 300 test contexts (gold + 99 seeded other test
  references each) of the bi-encoder alone and of `cobert` reranking its top 20. Goal: cobert >= bi-encoder - 2
  points (a run this short is not expected to win).

bf16 autocast (training and encoding) where the CPU has bf16 instructions, fp32 elsewhere (`--precision` to force
one); the load average is printed beside every figure, since the shared 2-core machine's load moves the times.

Each goal is printed as a figure (benchmarks/figures.py: goal, measured, ratio, verdict).

Usage: python -m benchmarks sample_quality [--parts emotion,retrieval,retrieval-ft,cobert] [--threads 1]
    [--precision auto|bf16|fp32] [--keep FOLDER]
"""
from __future__ import annotations

import argparse
import dataclasses
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import numpy as np  # noqa: E402

from empeval.server.backend.checkpoints import MODEL_DIR, run_dir, write_manifest  # noqa: E402
from empeval.server.backend.contexts import load_contexts  # noqa: E402
from empeval.server.backend.encoder import EncoderSettings, resolve_precision  # noqa: E402
from empeval.server.backend.metrics import candidate_sets, draw_candidates, rank_metrics, score_shared  # noqa: E402
from empeval.server.backend.registry import Registry  # noqa: E402
from empeval.server.backend.resources import BackendResources  # noqa: E402
from empeval.server.datasets.importer import import_dialogues  # noqa: E402
from empeval.server.datasets.sample import ED_DATASET, ED_LICENSE, SAMPLE_SOURCE, bundled_sample_dialogues  # noqa: E402
from empeval.server.store import ensure_schema, make_engine  # noqa: E402
from empeval.server.store.engine import unit_of_work  # noqa: E402

if not __package__:  # run as a file (python benchmarks/NAME.py): the benchmarks package is in the repository root
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks.figures import Figure, above, at_least  # noqa: E402
from benchmarks.session import report, run_script  # noqa: E402

PARTS = ("emotion", "retrieval", "retrieval-ft", "cobert")
RETRIEVAL_FT_MARGIN = 1.5  # points of P@1,100 the bounded run must gain over the zero-shot encoder
COBERT_SLACK = 2.0  # points of P@1,100 the short CoBERT run may lose against the bi-encoder it reranks
EMOTION_GOAL = 25.0  # % test accuracy; chance is 1/32
RETRIEVAL_GOAL = 15.0  # P@1,100 of the zero-shot systems; chance is 1
MNRL_DROP_GOAL = 0.05  # how much lower the training loss of fixed batches must be after the bounded run


def load() -> str:
    return "load average " + " / ".join(f"{x:.1f}" for x in os.getloadavg())


def sample_store(folder: Path):
    engine = make_engine(f"sqlite:///{folder / 'sample.db'}")
    ensure_schema(engine)
    import_dialogues(engine, bundled_sample_dialogues(), dataset=ED_DATASET, source=SAMPLE_SOURCE, license=ED_LICENSE)
    return engine


def sample_test_contexts(engine, limit: int | None = None):
    with unit_of_work(engine) as session:
        return [c for c in load_contexts(session, dataset=ED_DATASET, split="test", limit=limit) if c.reference]


def mean_mnrl_loss(model_path: Path, queries: list[str], replies: list[str], *, max_seq_length: int) -> float:
    """MultipleNegativesRankingLoss of a model over fixed batches of 32 pairs (no training)."""
    import torch
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer.losses import MultipleNegativesRankingLoss

    model = SentenceTransformer(str(model_path), device="cpu")
    model.max_seq_length = max_seq_length
    loss = MultipleNegativesRankingLoss(model)
    values = []
    with torch.no_grad():
        for start in range(0, len(queries), 32):
            features = [model.tokenize(queries[start:start + 32]), model.tokenize(replies[start:start + 32])]
            values.append(float(loss(features, None)))
    return sum(values) / len(values)


def part_retrieval_ft(engine, cache: Path, args) -> None:
    from empeval.training.config import RetrievalTrainingConfig
    from empeval.training.retrieval import base_model_path, train_retrieval, training_data

    config = RetrievalTrainingConfig(batch_size=32, max_steps=20, max_seq_length=64, eval_steps=10, eval_contexts=100,
                                     bf16=args.bf16)
    print(f"\n== retrieval-ft: 20 steps of 32 on the sample ({load()})", flush=True)
    start = time.perf_counter()
    result = train_retrieval(engine, dataset=ED_DATASET, cache_dir=cache, config=config, threads=args.threads,
                             show_progress=False, echo=lambda line: print(line, flush=True))
    print(result.describe())
    print(f"trained in {time.perf_counter() - start:.0f} s ({load()})", flush=True)

    data = training_data(engine, ED_DATASET, config)
    queries, replies = data.queries[:256], data.replies[:256]
    before = mean_mnrl_loss(base_model_path(), queries, replies, max_seq_length=config.max_seq_length)
    after = mean_mnrl_loss(result.run / MODEL_DIR, queries, replies, max_seq_length=config.max_seq_length)
    report(Figure("MNRL loss drop on 8 fixed batches of 32 train pairs, before - after training", before - after,
                  goal=above(MNRL_DROP_GOAL), fmt=".3f", note=f"{before:.3f} before, {after:.3f} after"))

    resources = BackendResources(engine=engine, cache_dir=cache, show_progress=False, encoder_settings=args.encoder)
    registry = Registry.from_config(None, resources)
    contexts = sample_test_contexts(engine)
    candidates = draw_candidates(contexts, dataset=ED_DATASET, split="test", seed=0)
    figures = {}
    for name in ("retrieval", "retrieval-ft"):
        start = time.perf_counter()
        figures[name] = rank_metrics(score_shared(registry.get(name), contexts, candidates))
        print(f"{name:<14} P@1,100 {figures[name]['r@1'] * 100:6.2f}  R@10 {figures[name]['r@10'] * 100:6.2f}  "
              f"MRR {figures[name]['mrr'] * 100:6.2f}  over {len(contexts)} test contexts, scored in "
              f"{time.perf_counter() - start:.0f} s ({load()})", flush=True)
    gain = (figures["retrieval-ft"]["r@1"] - figures["retrieval"]["r@1"]) * 100
    report(Figure("P@1,100 gain, retrieval-ft - zero-shot retrieval", gain, "points",
                  goal=at_least(RETRIEVAL_FT_MARGIN), fmt="+.2f", note=f"{len(contexts)} test contexts"))


def part_cobert(engine, cache: Path, args) -> None:
    import torch

    from empeval.server.backend.cobert import CoBERTModel, base_encoder_path
    from empeval.server.backend.retrieval import history_text
    from empeval.server.backend.retrieval_ft import fine_tuned_encoder
    from empeval.training.cobert import CoBERTTrainConfig, store_data, train_cobert

    cache = cache.with_name(cache.name + "-cobert")
    stand_in = "5a11e0000000"
    run = run_dir(cache, "retrieval-ft", stand_in)
    shutil.copytree(base_encoder_path(), run / MODEL_DIR)
    write_manifest(run, {"kind": "retrieval-ft", "key": stand_in, "note": "benchmark stand-in: base weights"})
    config = CoBERTTrainConfig(batch_size=16, epochs=3, lr=1e-4, eval_every=1000, eval_contexts=100, warmup_steps=2,
                               bf16=args.bf16)
    data = store_data(engine, dataset=ED_DATASET, config=config)
    data = dataclasses.replace(data, train=data.train[:128])
    print(f"\n== cobert: 24 steps of 16 on 128 sample pairs over the base MiniLM ({load()})", flush=True)
    start = time.perf_counter()
    result = train_cobert(data, cache_dir=cache, config=config, threads=args.threads, show_progress=False,
                          log=lambda line: print(line, flush=True))
    print(f"trained in {time.perf_counter() - start:.0f} s ({load()})", flush=True)

    resources = BackendResources(engine=engine, cache_dir=cache, show_progress=False, encoder_settings=args.encoder)
    system = CoBERTModel("cobert", {}, resources)
    contexts = sample_test_contexts(engine)[:300]
    sets = candidate_sets(len(contexts), n_candidates=100, seed=0)
    references = [c.reference for c in contexts]
    emotions = np.array([c.emotion or "" for c in contexts], dtype=str)
    start = time.perf_counter()
    reranked = system.score_candidate_sets(contexts, references, emotions, sets)
    encoder = fine_tuned_encoder(resources, stand_in)
    queries = torch.from_numpy(encoder.encode([history_text(c) for c in contexts]))
    embedded = torch.from_numpy(encoder.encode(references))
    bi = torch.einsum("nd,nkd->nk", queries, embedded[torch.from_numpy(sets)]).numpy()
    cobert, bi_encoder = rank_metrics(reranked), rank_metrics(bi)
    manifest = result.manifest
    print(f"scored in {time.perf_counter() - start:.0f} s ({load()}); best valid P@1,100 "
          f"{manifest['valid_p_at_1_best'] * 100:.1f} (untrained {manifest['valid_p_at_1_start'] * 100:.1f})")
    for name, figures in (("bi-encoder", bi_encoder), ("cobert top 20", cobert)):
        print(f"{name:<14} P@1,100 {figures['r@1'] * 100:6.2f}  R@10 {figures['r@10'] * 100:6.2f}  "
              f"R@50 {figures['r@50'] * 100:6.2f}  MRR {figures['mrr'] * 100:6.2f}  over {len(contexts)} test contexts")
    difference = (cobert["r@1"] - bi_encoder["r@1"]) * 100
    report(Figure("P@1,100, cobert top 20 - bi-encoder", difference, "points", goal=at_least(-COBERT_SLACK),
                  fmt="+.2f", note=f"{len(contexts)} test contexts"))


def part_emotion(engine, cache: Path, args) -> None:
    from empeval.server.backend.emotion import accuracy_on_split, emotion_classifier

    resources = BackendResources(engine=engine, cache_dir=cache, show_progress=False, encoder_settings=args.encoder)
    print(f"\n== emotion classifier on the sample ({load()})", flush=True)
    start = time.perf_counter()
    classifier = emotion_classifier(resources)
    accuracy, n = accuracy_on_split(resources, classifier)
    print(f"{len(classifier.labels)} labels, {classifier.n_train:,} train dialogues, {n} test dialogues; "
          f"{time.perf_counter() - start:.0f} s ({load()})", flush=True)
    report(Figure("emotion classifier test accuracy", accuracy * 100, "%", goal=above(EMOTION_GOAL), fmt=".2f",
                  note=f"{n} test dialogues, chance {100 / 32:.1f}%"))


def part_retrieval(engine, cache: Path, args) -> None:
    resources = BackendResources(engine=engine, cache_dir=cache, show_progress=False, encoder_settings=args.encoder)
    registry = Registry.from_config(None, resources)
    contexts = sample_test_contexts(engine)
    candidates = draw_candidates(contexts, dataset=ED_DATASET, split="test", seed=0)
    print(f"\n== zero-shot retrieval on the sample's {len(contexts)} test contexts ({load()})", flush=True)
    for name in ("retrieval", "retrieval-emoprepend"):
        start = time.perf_counter()
        figures = rank_metrics(score_shared(registry.get(name), contexts, candidates))
        print(f"{name:<22} P@1,100 {figures['r@1'] * 100:6.2f}  R@10 {figures['r@10'] * 100:6.2f}  "
              f"R@50 {figures['r@50'] * 100:6.2f}  MRR {figures['mrr'] * 100:6.2f}; "
              f"{time.perf_counter() - start:.0f} s ({load()})", flush=True)
        report(Figure(f"P@1,100, {name} (zero-shot)", figures["r@1"] * 100, goal=above(RETRIEVAL_GOAL), fmt=".2f",
                      note=f"{len(contexts)} test contexts, chance 1"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--parts", default=",".join(PARTS), help=f"comma-separated, of {', '.join(PARTS)}")
    parser.add_argument("--threads", type=int, default=1, help="torch threads (training and encoding)")
    parser.add_argument("--precision", choices=("auto", "bf16", "fp32"), default="auto",
                        help="bf16 autocast or fp32, for training and encoding (auto: bf16 where the CPU has it)")
    parser.add_argument("--keep", type=Path, default=None, help="keep the store and caches in this folder")
    args = parser.parse_args()
    parts = [part.strip() for part in args.parts.split(",") if part.strip()]
    unknown = sorted(set(parts) - set(PARTS))
    if unknown:
        parser.error(f"unknown part(s) {', '.join(unknown)}; expected some of {', '.join(PARTS)}")
    precision = resolve_precision(args.precision)
    args.bf16 = precision == "bf16"
    args.encoder = EncoderSettings(precision=precision, threads=args.threads)
    root = args.keep or Path(tempfile.mkdtemp(prefix="empeval-sample-quality-"))
    print(f"start {time.strftime('%Y-%m-%d %H:%M:%S', time.gmtime())} UTC, {load()}; precision {precision}, "
          f"{args.threads} thread(s); scratch folder {root}", flush=True)
    runners = {"retrieval-ft": part_retrieval_ft, "cobert": part_cobert, "emotion": part_emotion,
               "retrieval": part_retrieval}
    try:
        root.mkdir(parents=True, exist_ok=True)
        engine = sample_store(root)
        for part in parts:
            start = time.perf_counter()
            runners[part](engine, root / "cache", args)
            print(f"({part}: {time.perf_counter() - start:.0f} s in all)", flush=True)
    finally:
        if args.keep is None:
            shutil.rmtree(root, ignore_errors=True)
    print(f"\nend {time.strftime('%H:%M:%S', time.gmtime())} UTC, {load()}")


if __name__ == "__main__":
    run_script(__file__, main)
