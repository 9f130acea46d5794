"""`pairwise-http-judge`: an LLM behind any OpenAI-compatible chat endpoint, asked which of two systems' responses
to one context is better on a criterion, in both orders, as a judge of differences.

Parameters: those of `http-judge` (`base_url`, `model`, `api_key_env`, `timeout`, `retries`, `backoff`,
`max_tokens`, `concurrency`, `version`; see ``empeval.server.backend.judges.http_judge``), and `points_per_step`
(default 1.0): the points of the study's scale one step of preference is worth.

For the pair (A, B) the judge is asked twice, A shown first and then B shown first
(``empeval.server.backend.judges.pairwise_prompt``), each time for a graded preference from 1 (Response 1 much
better) to 5 (Response 2 much better). Each answer is turned into A's advantage in steps: 3 - answer when A was
shown first, answer - 3 when B was. The verdict is their mean times `points_per_step`:

    score = points_per_step * (p_AB + p_BA) / 2,   in {-2, -1.5, ..., 2} * points_per_step,

the judge's estimate of A's rating minus B's. A judge that favours whichever response it reads first by c steps
adds +c to p_AB and -c to p_BA: the mean cancels it (the details keep c = (p_AB - p_BA) / 2, the position effect
seen on that pair). The scale factor need not be right: prediction-powered inference tunes the judge's weight
(``empeval.analysis.stats.ppi.differences``), and the default makes "much better" in both orders two points.

Both raw answers are kept (JSON {"ab": ..., "ba": ...}); a pair whose either answer failed (as `http-judge` fails
an item: a timeout after the retries, a 4xx, a body that is not JSON or has no choices, an answer that is not one
whole number from 1 to 5) is stored as an error with what was answered, and asked again on the next run.
"""
from __future__ import annotations

import json
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor

from empeval.server.backend.judges import pairwise_prompt
from empeval.server.backend.judges.base import JudgedPair, PairJudge, PairVerdict
from empeval.server.backend.judges.http_judge import RAW_LIMIT, HttpJudge, _ItemFailed
from empeval.server.backend.judges.rubric import AnswerRejected
from empeval.server.store.kinds.likert import Scale
from empeval.server.store.study_parts import Criterion

ORDERS = ("ab", "ba")


class PairwiseHttpJudge(HttpJudge, PairJudge):
    kind = "pairwise-http-judge"

    def __init__(self, name, parameters=None, resources=None):
        parameters = {"points_per_step": 1.0, **(parameters or {})}
        step = parameters["points_per_step"]
        if isinstance(step, bool) or not isinstance(step, (int, float)) or not step > 0:
            raise ValueError(f"pairwise-http-judge {name!r}: points_per_step must be a positive number, got {step!r}")
        super().__init__(name, parameters, resources)

    score_batch = PairJudge.score_batch  # HttpJudge's would score single items

    def base_version(self) -> str:
        remote = self.parameters.get("version") or f"{self.parameters['model']}@{self.parameters['base_url']}"
        return f"{remote}-{pairwise_prompt.TEMPLATE_VERSION}"

    def pair_body(self, pair: JudgedPair, order: str, criterion: Criterion) -> dict:
        first, second = (pair.first, pair.second) if order == "ab" else (pair.second, pair.first)
        return {"model": self.parameters["model"], "temperature": 0, "max_tokens": int(self.parameters["max_tokens"]),
                "messages": pairwise_prompt.messages(pair.first.context, first.response, second.response, criterion)}

    def score_pair(self, pair: JudgedPair, criterion: Criterion) -> PairVerdict:
        prompt = pairwise_prompt.prompt_hash(criterion)
        start = time.perf_counter()
        raw: dict[str, str | None] = {}
        advantage: dict[str, int] = {}
        details = {"endpoint": self.endpoint, "attempts": 0, "points_per_step": self.parameters["points_per_step"]}
        for order in ORDERS:
            try:
                content, attempts = self._ask(self.pair_body(pair, order, criterion))
            except _ItemFailed as failure:
                raw[order] = failure.raw
                details["attempts"] += failure.attempts
                return self._failed(pair, raw, start, prompt, f"{order.upper()} order: {failure}", details)
            details["attempts"] += attempts
            raw[order] = content[:RAW_LIMIT]
            try:
                steps = pairwise_prompt.preference(content)
            except AnswerRejected as rejected:
                return self._failed(pair, raw, start, prompt, f"{order.upper()} order: {rejected}", details)
            advantage[order] = steps if order == "ab" else -steps
        mean = (advantage["ab"] + advantage["ba"]) / 2
        details.update(ab=advantage["ab"], ba=advantage["ba"], position_effect=(advantage["ab"] - advantage["ba"]) / 2)
        return PairVerdict(pair.first.response_id, pair.second.response_id,
                           float(mean * self.parameters["points_per_step"]), json.dumps(raw),
                           (time.perf_counter() - start) * 1000, prompt, details=details)

    def _failed(self, pair: JudgedPair, raw: dict, start: float, prompt: str, error: str, details: dict) -> PairVerdict:
        return PairVerdict(pair.first.response_id, pair.second.response_id, None, json.dumps(raw),
                           (time.perf_counter() - start) * 1000, prompt, error=error, details=details)

    def score_pairs(self, pairs: Sequence[JudgedPair], criterion: Criterion, scale: Scale) -> list[PairVerdict]:
        workers = max(1, int(self.parameters["concurrency"]))
        if workers == 1 or len(pairs) <= 1:
            return [self.score_pair(pair, criterion) for pair in pairs]
        with ThreadPoolExecutor(max_workers=workers) as pool:
            return list(pool.map(lambda pair: self.score_pair(pair, criterion), pairs))
