"""`retrieval`: the "ED candidates" retrieval set-up of Rashkin et al. (2019), with an off-the-shelf encoder.

The candidates are the ED train listener turns in the store (the full train split when imported, else the
bundled sample's). The context is the last `max_history` turns (4, as the paper truncates the history)
joined by spaces; both sides are encoded with all-MiniLM-L6-v2 and the candidate with the highest cosine
similarity is the response. When the context is itself a train context, its own reference turn is
excluded (it would otherwise be retrieved verbatim). Candidate embeddings are built once and cached on
disk, keyed by model and a hash of the candidate texts.

Unlike the paper, the encoder is not trained on ED (the paper fine-tuned BERT/Transformer bi-encoders);
see METRICS.md for what this does to P@1,100.
"""
from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

from empeval.server.backend.base import DialogueContext, Outcome, ResponseModel
from empeval.server.backend.contexts import load_listener_turns
from empeval.server.backend.encoder import texts_hash
from empeval.server.backend.resources import BackendResources
from empeval.server.store.engine import unit_of_work

DEFAULT_MAX_HISTORY = 4
# Query batches at least this large are kept in the embedding cache (see RetrievalModel.encode_queries).
CACHED_QUERY_BATCH = 16


def history_text(context: DialogueContext, max_history: int = DEFAULT_MAX_HISTORY) -> str:
    """The last `max_history` turns of the context, joined by single spaces."""
    return " ".join(turn.text.strip() for turn in context.turns[-max_history:])


@dataclass
class CandidatePool:
    """The texts a retrieval system may answer with, and (once built) their embeddings."""

    turn_ids: np.ndarray
    texts: list[str]
    emotions: list[str | None]
    conv_ids: list[str]
    data_hash: str
    embeddings: torch.Tensor | None = None

    def __post_init__(self):
        self.position = {int(turn_id): i for i, turn_id in enumerate(self.turn_ids)}
        self.emotion_array = np.array([e or "" for e in self.emotions], dtype=str)


def candidate_pool(resources: BackendResources, split: str = "train") -> CandidatePool:
    """The listener turns of `split` in the store (texts only; see `pool_embeddings`), shared per process."""

    def build() -> CandidatePool:
        with unit_of_work(resources.engine) as session:
            rows = load_listener_turns(session, dataset=resources.dataset, split=split)
        if not rows:
            raise RuntimeError(f"no {split} listener turns in dataset {resources.dataset!r}: import ED first "
                               f"(`empeval data import-sample` or `empeval data import-ed PATH`)")
        texts = [row[1] for row in rows]
        return CandidatePool(np.array([row[0] for row in rows]), texts, [row[2] for row in rows],
                             [row[3] for row in rows], texts_hash(texts))

    return resources.get_or_build(f"pool:{resources.dataset}:{split}", build)


def pool_embeddings(resources: BackendResources, pool: CandidatePool) -> torch.Tensor:
    with resources.lock:
        if pool.embeddings is None:
            array = resources.encoder().encode_cached(pool.texts, label="candidates",
                                                      description=f"encoding {len(pool.texts):,} candidates")
            pool.embeddings = torch.from_numpy(array)
        return pool.embeddings


class RetrievalModel(ResponseModel):
    kind = "retrieval"

    def __init__(self, name: str, parameters=None, resources: BackendResources | None = None):
        super().__init__(name, {"max_history": DEFAULT_MAX_HISTORY, "candidate_split": "train",
                                **(parameters or {})})
        self.resources = resources

    @property
    def encoder(self):
        return self.resources.encoder()

    @property
    def pool(self) -> CandidatePool:
        return candidate_pool(self.resources, self.parameters["candidate_split"])

    def data_version(self) -> str:
        return f"{self.encoder.model_id}-cands{self.pool.data_hash[:12]}"

    def prepare(self) -> None:
        """Choose the encoder's threads (measured once per machine, see encoder_threads.py) and build (or load from
        the cache) the candidate index now rather than at the first request."""
        self.encoder.choose_threads()
        pool_embeddings(self.resources, self.pool)

    def query_texts(self, contexts: Sequence[DialogueContext]) -> list[str]:
        return [history_text(c, self.parameters["max_history"]) for c in contexts]

    def query_embeddings(self, contexts: Sequence[DialogueContext]) -> tuple[torch.Tensor, list[dict]]:
        """Query embeddings, and what each query's construction decided (for provenance)."""
        return torch.from_numpy(self.encode_queries(self.query_texts(contexts))), [{} for _ in contexts]

    def encode_queries(self, texts: Sequence[str]) -> np.ndarray:
        """Embeddings of query texts. A batch of at least CACHED_QUERY_BATCH texts (a `generate` run, the demo)
        is kept in the embedding cache like the candidates, so running it again loads instead of encoding
        (re-encoding the sample's 668 test contexts was half the demo's CPU); smaller batches, as single API
        requests are, are encoded afresh, since a file per request would only fill the cache."""
        if len(texts) < CACHED_QUERY_BATCH:
            return self.encoder.encode(texts)
        return self.encoder.encode_cached(texts, label="queries", description=f"encoding {len(texts):,} queries")

    def candidate_bonus(self, details: list[dict], candidate_emotions: np.ndarray) -> torch.Tensor | None:
        """Added to the cosine scores; plain retrieval adds nothing. `candidate_emotions` is (n_candidates,)
        shared by every context, or (n_contexts, k)."""
        return None

    def score(self, contexts: Sequence[DialogueContext], candidates: torch.Tensor,
              candidate_emotions: np.ndarray) -> torch.Tensor:
        """Scores of per-context candidate sets: candidates is (n_contexts, k, dim) -> (n_contexts, k)."""
        queries, details = self.query_embeddings(contexts)
        scores = torch.einsum("nd,nkd->nk", queries, candidates)
        bonus = self.candidate_bonus(details, candidate_emotions)
        return scores if bonus is None else scores + bonus

    def score_candidate_sets(self, contexts: Sequence[DialogueContext], references: Sequence[str],
                             emotions: np.ndarray, sets: np.ndarray, *, batch_size: int = 256) -> np.ndarray:
        """Scores (n_contexts, k) of context i against the references of rows `sets[i]` (emotions: each
        reference's dialogue emotion), the method `empeval metrics` scores every retrieval system through: the
        references are encoded once (cached), then scored batch by batch with `score`."""
        embeddings = torch.from_numpy(self.encoder.encode_cached(list(references), label="references",
                                                                 description="encoding references"))
        scores = np.empty(sets.shape, dtype=np.float32)
        for start in range(0, len(contexts), batch_size):
            rows = sets[start:start + batch_size]
            scores[start:start + len(rows)] = self.score(contexts[start:start + batch_size],
                                                         embeddings[torch.from_numpy(rows)], emotions[rows]).numpy()
        return scores

    def respond_batch(self, contexts: Sequence[DialogueContext]) -> list[Outcome]:
        if not contexts:
            return []
        pool = self.pool
        embeddings = pool_embeddings(self.resources, pool)
        start = time.perf_counter()
        with self.encoder.torch_threads_for(len(contexts)):
            queries, details = self.query_embeddings(contexts)
            scores = queries @ embeddings.T
            bonus = self.candidate_bonus(details, pool.emotion_array)
            if bonus is not None:
                scores = scores + bonus
            for row, context in enumerate(contexts):
                own = pool.position.get(context.reference_turn_id) if context.reference_turn_id else None
                if own is not None:
                    scores[row, own] = float("-inf")
            best_scores, best = scores.max(dim=1)
        # One encoder pass serves the whole batch; each context is charged an equal share of it.
        latency = (time.perf_counter() - start) * 1000 / len(contexts)
        outcomes = []
        for row, context in enumerate(contexts):
            index = int(best[row])
            info = {"candidate_turn_id": int(pool.turn_ids[index]), "candidate_conv_id": pool.conv_ids[index],
                    "score": round(float(best_scores[row]), 5), "candidates": len(pool.texts),
                    "latency_basis": "batch-amortised", **details[row]}
            outcomes.append(Outcome(context.key(), pool.texts[index], self.provenance(latency, info), latency))
        return outcomes
