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
    .cross_fit_judge``; the backend does not import the analysis): only the learned judge uses it."""

    name: str
    items: tuple[JudgedItem, ...]
    criteria: tuple[Criterion, ...]
    scale: Scale
    human_ratings: pd.DataFrame
    cross_fit: Callable[..., pd.DataFrame] | None = None
    study_criteria: tuple[Criterion, ...] = ()


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


class Judge(ABC):
    """An automatic judge. Subclasses set `kind` and implement `base_version` and `score_batch`; a judge that
    must learn from the study first (the learned judge) does so in `prepare`."""

    kind: ClassVar[str]

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
