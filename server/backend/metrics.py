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

import random
import re
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import sacrebleu
import torch
from sqlalchemy import Engine, select

from server.backend.base import DialogueContext
from server.backend.replay_align import MOEL_WORD_PAIRS
from server.backend.retrieval import RetrievalModel
from server.store.engine import unit_of_work
from server.store.models import Context, Dataset, Dialogue, Response, System, Turn

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


def p_at_1_of_100(model: RetrievalModel, contexts: Sequence[DialogueContext], *, n_candidates: int = 100,
                  seed: int = 0, batch_size: int = 256) -> tuple[float, int]:
    """P@1,n_candidates of a retrieval system over `contexts` (their references are the candidate pool)."""
    contexts = [c for c in contexts if c.reference is not None]
    if len(contexts) < n_candidates:
        raise ValueError(f"P@1,{n_candidates} needs at least {n_candidates} contexts with references, "
                         f"got {len(contexts)}")
    references = model.encoder.encode_cached([c.reference for c in contexts], label="references",
                                             description="encoding references")
    references = torch.from_numpy(references)
    emotions = np.array([c.emotion or "" for c in contexts], dtype=str)
    rng = random.Random(seed)
    candidate_sets = []
    for i in range(len(contexts)):
        others = rng.sample(range(len(contexts) - 1), n_candidates - 1)
        candidate_sets.append([i] + [j if j < i else j + 1 for j in others])  # skip i itself
    candidate_sets = np.array(candidate_sets)
    hits = 0
    for start in range(0, len(contexts), batch_size):
        rows = candidate_sets[start:start + batch_size]
        scores = model.score(contexts[start:start + batch_size], references[torch.from_numpy(rows)], emotions[rows])
        hits += int((scores[:, 0] > scores[:, 1:].max(dim=1).values).sum())
    return hits / len(contexts), len(contexts)
