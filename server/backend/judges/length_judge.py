"""`length-judge`: a deliberately weak judge, for tests and as a floor: the score is the scale's minimum
plus one point per `words_per_point` words of the response (default 5), clipped to the scale. A judge that
cannot read still gets valid intervals from PPI (its power-tuned weight goes to about 0); any judge worth using
must beat it."""
from __future__ import annotations

import time
from collections.abc import Sequence

from empeval.server.backend.judges.base import Judge, JudgedItem, Verdict, text_hash
from empeval.server.store.kinds.likert import Scale
from empeval.server.store.study_parts import Criterion


class LengthJudge(Judge):
    kind = "length-judge"

    def __init__(self, name, parameters=None, resources=None):
        parameters = {"words_per_point": 5, **(parameters or {})}
        words = parameters["words_per_point"]
        if isinstance(words, bool) or not isinstance(words, (int, float)) or not words > 0:
            raise ValueError(f"length-judge {name!r}: words_per_point must be a positive number, got {words!r}")
        super().__init__(name, parameters, resources)

    def base_version(self) -> str:
        return "length-v1"

    def score_batch(self, items: Sequence[JudgedItem], criterion: Criterion, scale: Scale) -> list[Verdict]:
        model = text_hash("length-v1", self.parameters, scale.min, scale.max)
        verdicts = []
        for item in items:
            start = time.perf_counter()
            words = len(item.response.split())
            score = min(float(scale.max), max(float(scale.min), scale.min + words / self.parameters["words_per_point"]))
            verdicts.append(Verdict(item.response_id, score, f"{words} words", (time.perf_counter() - start) * 1000,
                                    model))
        return verdicts
