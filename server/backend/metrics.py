"""Automatic metrics, as a sanity check against the papers (not as a substitute for the human study).

- P@1,100 (Rashkin et al., 2019): for each test context, the reference is ranked among itself and 99
  other test references drawn at random (seeded); P@1,100 is the share of contexts whose reference
  scores strictly highest under the retrieval system's own scoring.
- Corpus BLEU (sacrebleu.corpus_bleu) of each system's stored responses against the gold reference,
  twice: `bleu` is sacreBLEU's default (BLEU-4, 13a tokenisation, cased) on the raw texts; `bleu_norm`
  first puts both sides through MoEL's preprocessing (lower-case, contractions expanded, "n't" and
  punctuation split off), the form the published outputs are in, so replayed and retrieved systems are
  compared on equal terms.
"""
from __future__ import annotations

import json
import os
import random
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import sacrebleu
from sqlalchemy import Engine, select

from empeval.server.backend.base import DialogueContext
from empeval.server.backend.encoder import texts_hash
from empeval.server.backend.replay_align import MOEL_WORD_PAIRS
from empeval.server.backend.retrieval import RetrievalModel
from empeval.server.errors import BadInput
from empeval.server.store.engine import unit_of_work
from empeval.server.store.models import Context, Dataset, Dialogue, Response, System, Turn

_TOKEN = re.compile(r"n't|\w+|[^\w\s]")


def moel_tokenise(text: str) -> str:
    """MoEL-style preprocessing: lower-case, contractions expanded, 'n't' and punctuation split off."""
    text = text.replace("_comma_", ",").lower()
    for short, long in MOEL_WORD_PAIRS.items():
        text = text.replace(short, long)
    text = re.sub(r"n't\b", " n't", text)
    return " ".join(_TOKEN.findall(text))


def corpus_bleu(hypotheses: Sequence[str], references: Sequence[str], *, normalised: bool) -> float:
    if normalised:
        return sacrebleu.corpus_bleu([moel_tokenise(h) for h in hypotheses],
                                     [[moel_tokenise(r) for r in references]], tokenize="none", force=True).score
    # force: published outputs are tokenised on purpose; sacrebleu would otherwise warn about it.
    return sacrebleu.corpus_bleu(list(hypotheses), [list(references)], force=True).score


@dataclass
class BleuRow:
    system: str
    kind: str
    version: str
    n: int
    bleu: float
    bleu_norm: float


def bleu_by_system(engine: Engine, *, dataset: str, split: str, systems: Sequence[str] | None = None) -> list[BleuRow]:
    """One row per stored System version that has responses for contexts of `split`."""
    with unit_of_work(engine) as session:
        query = (select(System.name, System.kind, System.version, Response.text, Turn.text)
                 .join(Response, Response.system_id == System.id)
                 .join(Context, Response.context_id == Context.id)
                 .join(Turn, Context.reference_turn_id == Turn.id)
                 .join(Dialogue, Context.dialogue_id == Dialogue.id)
                 .join(Dataset, Dialogue.dataset_id == Dataset.id)
                 .where(Dataset.name == dataset, Dialogue.split == split)
                 .order_by(System.id, Context.id))
        if systems:
            query = query.where(System.name.in_(list(systems)))
        rows = session.execute(query).all()
    grouped: dict[tuple[str, str, str], tuple[list[str], list[str]]] = {}
    for name, kind, version, hypothesis, reference in rows:
        hyps, refs = grouped.setdefault((name, kind, version), ([], []))
        hyps.append(hypothesis)
        refs.append(reference)
    return [BleuRow(name, kind, version, len(hyps), corpus_bleu(hyps, refs, normalised=False),
                    corpus_bleu(hyps, refs, normalised=True))
            for (name, kind, version), (hyps, refs) in grouped.items()]


def candidate_sets(n: int, *, n_candidates: int = 100, seed: int = 0) -> np.ndarray:
    """(n, n_candidates) row indices: row i is i itself (the gold reply) then n_candidates - 1 other rows drawn
    without replacement by `random.Random(seed)` in order, the draw P@1,100 has always made here."""
    if n < n_candidates:
        raise ValueError(f"{n_candidates} candidates per context need at least {n_candidates} contexts with "
                         f"references, got {n}")
    rng = random.Random(seed)
    sets = []
    for i in range(n):
        others = rng.sample(range(n - 1), n_candidates - 1)
        sets.append([i] + [j if j < i else j + 1 for j in others])  # skip i itself
    return np.array(sets, dtype=np.int64).reshape(n, n_candidates)


def gold_ranks(scores: np.ndarray) -> np.ndarray:
    """The rank of the gold candidate (column 0) in each row of `scores`: 1 + the number of other candidates
    scoring at least as high, so a tie counts against the system (R@1 is then "gold strictly highest",
    P@1,100 as it was always computed here)."""
    scores = np.asarray(scores, dtype=np.float64)
    return 1 + (scores[:, 1:] >= scores[:, :1]).sum(axis=1)


def rank_metrics(scores: np.ndarray, *, ks: Sequence[int] = (1, 10, 50)) -> dict[str, float]:
    """R@k (share of rows whose gold rank is at most k) and MRR (mean of 1 / gold rank) over rows of candidate
    scores with the gold reply in column 0, as CoBERT's paper reports them (Zhong et al., EMNLP 2020: R@1, R@10,
    R@50 of 100 candidates and MRR); R@1 over 100 candidates is Rashkin et al.'s P@1,100."""
    ranks = gold_ranks(scores)
    if not len(ranks):
        raise ValueError("rank metrics of no contexts")
    result = {f"r@{k}": float((ranks <= k).mean()) for k in ks}
    result["mrr"] = float((1.0 / ranks).mean())
    return result


@dataclass(frozen=True)
class SharedCandidates:
    """One candidate set per context, shared by every system scored over it: context i's candidates are the
    references of rows `sets[i]` (column 0 is i itself, its gold reply). Keyed by the contexts and their
    references (`data_hash`), the draw's seed and its size."""

    dataset: str
    split: str
    seed: int
    keys: tuple[str, ...]
    references: tuple[str, ...]
    sets: np.ndarray

    @property
    def n_candidates(self) -> int:
        return int(self.sets.shape[1])

    @property
    def data_hash(self) -> str:
        return texts_hash([part for pair in zip(self.keys, self.references, strict=True) for part in pair])

    def file_name(self) -> str:
        return (f"{self.dataset}-{self.split}-n{self.n_candidates}-seed{self.seed}-"
                f"{len(self.keys)}ctx-{self.data_hash[:12]}.json")

    def to_json(self) -> dict:
        return {"format": CANDIDATES_FORMAT, "dataset": self.dataset, "split": self.split, "seed": self.seed,
                "n_candidates": self.n_candidates, "data_hash": self.data_hash,
                "contexts": [{"key": key, "reference": ref} for key, ref in zip(self.keys, self.references,
                                                                                 strict=True)],
                "sets": self.sets.tolist()}


CANDIDATES_FORMAT = "empeval-candidates/1"


class CandidatesFileError(BadInput):
    """A stored candidate-set file is malformed or does not match the contexts in the store."""


def draw_candidates(contexts: Sequence[DialogueContext], *, dataset: str, split: str, seed: int = 0,
                    n_candidates: int = 100) -> SharedCandidates:
    """The shared candidate sets of `contexts` (those with a reference): the gold reply plus n_candidates - 1
    other references of the same contexts drawn with `seed` (`candidate_sets`)."""
    contexts = [c for c in contexts if c.reference is not None]
    sets = candidate_sets(len(contexts), n_candidates=n_candidates, seed=seed)
    return SharedCandidates(dataset, split, seed, tuple(c.key() for c in contexts),
                            tuple(str(c.reference) for c in contexts), sets)


def save_candidates(candidates: SharedCandidates, path: Path) -> Path:
    """Write the candidate sets as JSON (scratch file, then rename: never half a file)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    scratch = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    scratch.write_text(json.dumps(candidates.to_json(), ensure_ascii=False), encoding="utf-8")
    scratch.replace(path)
    return path


def load_candidates(path: Path) -> SharedCandidates:
    """Candidate sets written by `save_candidates`; CandidatesFileError naming the file and what is wrong."""
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except OSError as error:
        raise CandidatesFileError(f"{path}: cannot read the candidate sets: {error.strerror}") from None
    except json.JSONDecodeError as error:
        raise CandidatesFileError(f"{path}: not JSON ({error})") from None
    if not isinstance(raw, dict) or raw.get("format") != CANDIDATES_FORMAT:
        raise CandidatesFileError(f"{path}: not an empeval candidate-set file (expected format {CANDIDATES_FORMAT!r})")
    try:
        contexts = raw["contexts"]
        keys = tuple(str(c["key"]) for c in contexts)
        references = tuple(str(c["reference"]) for c in contexts)
        sets = np.array(raw["sets"], dtype=np.int64)
        candidates = SharedCandidates(str(raw["dataset"]), str(raw["split"]), int(raw["seed"]), keys, references,
                                      sets)
    except (KeyError, TypeError, ValueError) as error:
        raise CandidatesFileError(f"{path}: malformed candidate-set file ({type(error).__name__}: {error})") from None
    n = len(keys)
    if sets.ndim != 2 or sets.shape[0] != n:
        raise CandidatesFileError(f"{path}: `sets` must hold one row per context ({n}), got shape {sets.shape}")
    bad = np.flatnonzero((sets[:, 0] != np.arange(n)) | (sets.min(axis=1) < 0) | (sets.max(axis=1) >= n))
    if len(bad):
        raise CandidatesFileError(f"{path}: set {int(bad[0])} (context {keys[bad[0]]}) must start with its own row and "
                                  f"index only rows 0..{n - 1}")
    if raw.get("data_hash") not in (None, candidates.data_hash):
        raise CandidatesFileError(f"{path}: data_hash does not match its contexts (the file was edited)")
    return candidates


def match_contexts(candidates: SharedCandidates, contexts: Sequence[DialogueContext], *, source: str
                   ) -> list[DialogueContext]:
    """The stored contexts in the candidate file's order; CandidatesFileError when one is missing from the store
    or its reference differs (the numbers would not be over the same candidates)."""
    by_key = {c.key(): c for c in contexts if c.reference is not None}
    ordered = []
    for i, (key, reference) in enumerate(zip(candidates.keys, candidates.references, strict=True)):
        context = by_key.get(key)
        if context is None:
            raise CandidatesFileError(f"{source}: context {i} ({key}) is not among the {len(by_key):,} "
                                      f"{candidates.split} contexts of {candidates.dataset!r} in the store")
        if context.reference != reference:
            raise CandidatesFileError(f"{source}: context {i} ({key}) has another reference in the store than in "
                                      "the file")
        ordered.append(context)
    return ordered


def score_shared(model, contexts: Sequence[DialogueContext], candidates: SharedCandidates, *,
                 batch_size: int = 256) -> np.ndarray:
    """(n_contexts, n_candidates) scores of a system over the shared sets, gold in column 0, through the method
    every retrieval system shares, `score_candidate_sets` (a reranker overrides it)."""
    emotions = np.array([c.emotion or "" for c in contexts], dtype=str)
    return model.score_candidate_sets(contexts, list(candidates.references), emotions, candidates.sets,
                                      batch_size=batch_size)


def p_at_1_of_100(model: RetrievalModel, contexts: Sequence[DialogueContext], *, n_candidates: int = 100,
                  seed: int = 0, batch_size: int = 256) -> tuple[float, int]:
    """P@1,n_candidates of a retrieval system over `contexts` (their references are the candidate pool): the
    share of contexts whose reference scores strictly highest among itself and n_candidates - 1 references of
    other contexts (Rashkin et al. 2019; `candidate_sets` draws them)."""
    contexts = [c for c in contexts if c.reference is not None]
    candidates = draw_candidates(contexts, dataset="", split="", seed=seed, n_candidates=n_candidates)
    scores = score_shared(model, contexts, candidates, batch_size=batch_size)
    return rank_metrics(scores, ks=(1,))["r@1"], len(contexts)
