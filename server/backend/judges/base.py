"""The `Judge` interface: a study's items in, one verdict (a score, or an error) per item out.

A judge scores one criterion at a time, on the study's own scale. Its version (`Judge.version`) names
everything its scores depend on for that study (the model or endpoint, the parameters, the rubric built from
the study's definitions, or the human ratings a learned judge was fitted on), so the store keeps at most one
score per (response, criterion, judge, version) and a changed judge scores again.
"""
from __future__ import annotations

import hashlib
import json
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

import pandas as pd

from empeval.server.backend.base import DialogueContext, parameters_hash
from empeval.server.store.kinds.likert import Scale
from empeval.server.store.study_parts import Criterion


@dataclass(frozen=True)
class JudgedItem:
    """One response of a study as a judge sees it. `system` is kept for the store and the reader; no judge
    may show it to a model (a judge that knew which system spoke could score the name, not the response)."""

    response_id: int
    context: DialogueContext
    response: str
    system: str


@dataclass(frozen=True)
class JudgedStudy:
    """What a judge may know about the study it scores: its items, the criteria to score (the study's own
    definitions), the scale, and the human ratings so far (``context_id``, ``system``, ``criterion``,
    ``annotator``, ``score``; control items left out, every criterion of the study). `study_criteria` are all
    the study's criteria (default: `criteria`): the judge's version depends on them, not on the ones chosen
    for a run, so scoring one criterion now and the others later is one version.

    `cross_fit` is the cross-fitting function the entry point hands down (``empeval.analysis.stats.ppi.crossfit
    .cross_fit_judge``; the backend does not import the analysis): only the learned judge uses it;
    `cross_fit_differences` (``crossfit.cross_fit_difference_judge``) is the learned difference judge's."""

    name: str
    items: tuple[JudgedItem, ...]
    criteria: tuple[Criterion, ...]
    scale: Scale
    human_ratings: pd.DataFrame
    cross_fit: Callable[..., pd.DataFrame] | None = None
    study_criteria: tuple[Criterion, ...] = ()
    cross_fit_differences: Callable[..., pd.DataFrame] | None = None
    #: Set for a study whose people choose between two responses (A/B): the pairs they compare, A the smaller
    #: response id, which a judge of differences compares instead of every pair of responses to one context. Such
    #: a study has no items to score one at a time and no ratings to learn from (`human_ratings` is empty).
    pairs: tuple[JudgedPair, ...] | None = None
    #: With `pairs`: people's net preference per pair so far (``criterion``, ``context_id``, ``system_a``,
    #: ``system_b`` (the pair's first and second systems), ``label_diff``: the mean over its choices of +1 for A, -1
    #: for B, 0 for a tie), what the learned difference judge learns from.
    pair_labels: pd.DataFrame | None = None

    def pairs_to_compare(self) -> list[JudgedPair]:
        """The pairs a judge of differences compares: `pairs` when set, else every pair of responses to one
        context (``study_pairs``)."""
        return list(self.pairs) if self.pairs is not None else study_pairs(self.items)


@dataclass
class Verdict:
    """A judge's answer for one item: `score` on success, else `error` (never both). `raw_output` is what the
    judge said (kept for failures too, so a malformed answer can be read); `prompt_hash` identifies the prompt
    or the fitted model that produced it."""

    response_id: int
    score: float | None
    raw_output: str | None
    latency_ms: float
    prompt_hash: str
    error: str | None = None
    details: dict[str, Any] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.error is None


def text_hash(*parts: Any) -> str:
    """A short SHA-256 of JSON-serialised parts: what a prompt or a model depends on."""
    payload = json.dumps(parts, sort_keys=True, default=str, ensure_ascii=False)
    return hashlib.sha256(payload.encode()).hexdigest()[:16]


def rubric_hash(criteria: Sequence[Criterion], scale: Scale) -> str:
    """The hash of a study's criterion definitions and scale labels: part of every judge's version, so that two
    studies that define a criterion differently never share a score."""
    return text_hash([[c.key, c.label, c.question, c.definition] for c in criteria],
                     [scale.min, scale.max, list(scale.labels)])


@dataclass(frozen=True)
class JudgedPair:
    """Two systems' responses to one context, as a judge of differences sees them: `first` is response A (the
    smaller response id, the order the store keeps), `second` response B."""

    first: JudgedItem
    second: JudgedItem


@dataclass
class PairVerdict:
    """A judge of differences' answer for one pair: `score` is its estimate of A's rating minus B's in points of
    the study's scale (A: `response_a_id`), else `error` (never both); `raw_output` keeps what it said (both
    orders' answers for a pairwise judge)."""

    response_a_id: int
    response_b_id: int
    score: float | None
    raw_output: str | None
    latency_ms: float
    prompt_hash: str
    error: str | None = None
    details: dict[str, Any] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.error is None


def study_pairs(items: Sequence[JudgedItem]) -> list[JudgedPair]:
    """Every pair of responses to the same context, A the smaller response id, by context then A then B.

    >>> from empeval.server.backend.base import DialogueContext
    >>> items = [JudgedItem(r, DialogueContext(turns=(), context_id=c), "", s)
    ...          for r, c, s in ((5, 1, "a"), (3, 1, "b"), (4, 2, "a"), (9, 1, "c"))]
    >>> [(p.first.response_id, p.second.response_id) for p in study_pairs(items)]
    [(3, 5), (3, 9), (5, 9)]
    """
    by_context: dict[Any, list[JudgedItem]] = {}
    for item in items:
        by_context.setdefault(item.context.context_id, []).append(item)
    pairs = []
    for context_id in sorted(by_context, key=str):
        responses = sorted(by_context[context_id], key=lambda item: item.response_id)
        pairs += [JudgedPair(a, b) for i, a in enumerate(responses) for b in responses[i + 1:]]
    return pairs


class Judge(ABC):
    """An automatic judge. Subclasses set `kind` and implement `base_version` and `score_batch`; a judge that
    must learn from the study first (the learned judge) does so in `prepare`. A judge of differences
    (`compares_pairs`) scores pairs of responses instead (`PairJudge.score_pairs`) into `judge_pair_score`."""

    kind: ClassVar[str]
    compares_pairs: ClassVar[bool] = False

    def __init__(self, name: str, parameters: dict[str, Any] | None = None, resources: Any = None):
        self.name = name
        self.parameters = dict(parameters or {})
        self.resources = resources

    @abstractmethod
    def base_version(self) -> str:
        """What identifies the judge itself (model, endpoint, prompt template, encoder), before the study."""

    def public_parameters(self) -> dict[str, Any]:
        """The parameters that may be stored and shown (none of them a secret)."""
        return dict(self.parameters)

    def version(self, study: JudgedStudy) -> str:
        """The judge's version for this study: its own version, its parameters and the study's rubric."""
        return (f"{self.base_version()}-p{parameters_hash(self.public_parameters())}"
                f"-r{rubric_hash(study.study_criteria or study.criteria, study.scale)[:8]}")

    def prepare(self, study: JudgedStudy) -> None:  # noqa: B027 - most judges need nothing
        """Get ready to score this study (check the configuration, fit a model); called once before scoring."""

    @abstractmethod
    def score_batch(self, items: Sequence[JudgedItem], criterion: Criterion, scale: Scale) -> list[Verdict]:
        """One verdict per item, in order. Failures are verdicts with an error, never exceptions."""


class PairJudge(Judge):
    """A judge of differences: for two responses to one context it estimates A's rating minus B's, in points of
    the study's scale (``server.backend.judges.pair_run`` stores the verdicts in `judge_pair_score`)."""

    compares_pairs = True

    def score_batch(self, items: Sequence[JudgedItem], criterion: Criterion, scale: Scale) -> list[Verdict]:
        raise TypeError(f"judge {self.name!r} ({self.kind}) compares pairs of responses: call score_pairs")

    @abstractmethod
    def score_pairs(self, pairs: Sequence[JudgedPair], criterion: Criterion, scale: Scale) -> list[PairVerdict]:
        """One verdict per pair, in order. Failures are verdicts with an error, never exceptions."""
