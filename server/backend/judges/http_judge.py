"""`http-judge`: an LLM behind any OpenAI-compatible chat endpoint, asked the study's rubric per criterion.

Parameters: `base_url` (the API root; the judge POSTs to {base_url}/chat/completions), `model`, and
optionally `api_key_env` (the name of the environment variable holding the API key, sent as
`Authorization: Bearer ...`; the key itself is never stored or shown), `timeout` (seconds, default 30),
`retries` (default 2), `backoff` (seconds, default 0.5, doubled each retry), `max_tokens` (default 8),
`concurrency` (parallel requests, default 1), `version` (what to call the remote model's version; default the
model name at the endpoint).

Each request is {"model": MODEL, "messages": [rubric, item], "temperature": 0, "max_tokens": N} (see
``empeval.server.backend.judges.rubric``); the answer is choices[0].message.content, accepted only when it is exactly
one whole number on the scale. As for `http` systems, timeouts, connection errors and 5xx answers are retried
up to `retries` times with backoff; 4xx answers, bodies that are not JSON, bodies without choices and answers
that are not a number on the scale are failures of that item at once. A failure is stored as an error with the
raw answer, never as a score.

The judge's version names the model, the endpoint, the rubric template and the parameters that can change an
answer (`model`, `max_tokens`, `version`, ...), not `timeout`, `retries`, `backoff`, `concurrency` or
`api_key_env`: asking more patiently does not make the stored scores stale.
"""
from __future__ import annotations

import os
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor

import requests

from empeval.server.backend.judges import rubric
from empeval.server.backend.judges.base import Judge, JudgedItem, JudgedStudy, Verdict
from empeval.server.errors import BadInput, Unavailable
from empeval.server.store.kinds.likert import Scale
from empeval.server.store.study_parts import Criterion

DEFAULTS = {"timeout": 30.0, "retries": 2, "backoff": 0.5, "max_tokens": 8, "concurrency": 1}
RAW_LIMIT = 2000  # characters of a raw answer kept
OPERATIONAL = ("api_key_env", "timeout", "retries", "backoff", "concurrency")


class _ItemFailed(Unavailable):
    """The endpoint failed on one item (after the retries it deserved); kept as that item's error."""

    def __init__(self, message: str, raw: str | None, attempts: int):
        super().__init__(message)
        self.raw, self.attempts = raw, attempts


class HttpJudge(Judge):
    kind = "http-judge"

    def __init__(self, name, parameters=None, resources=None):
        parameters = {**DEFAULTS, **(parameters or {})}
        for required in ("base_url", "model"):
            if not str(parameters.get(required) or "").strip():
                raise ValueError(f"http-judge {name!r}: parameter `{required}` is required")
        if "headers" in parameters or "api_key" in parameters:
            raise ValueError(f"http-judge {name!r}: give the API key's environment variable as `api_key_env`, "
                             "never the key itself")
        super().__init__(name, parameters, resources)
        self.session = requests.Session()

    @property
    def endpoint(self) -> str:
        return str(self.parameters["base_url"]).rstrip("/") + "/chat/completions"

    def base_version(self) -> str:
        remote = self.parameters.get("version") or f"{self.parameters['model']}@{self.parameters['base_url']}"
        return f"{remote}-{rubric.TEMPLATE_VERSION}"

    def public_parameters(self):
        # What changes no answer is not part of the version: where the key is kept, and how patiently and how
        # many at a time the endpoint is asked (a longer timeout must not make every stored score stale).
        return {k: v for k, v in self.parameters.items() if k not in OPERATIONAL}

    def prepare(self, study: JudgedStudy) -> None:
        variable = self.parameters.get("api_key_env")
        if variable and not os.environ.get(str(variable)):
            raise BadInput(f"judge {self.name!r} reads its API key from the environment variable {variable}, "
                           f"which is not set: export {variable}=... and run again")

    def _headers(self) -> dict[str, str]:
        variable = self.parameters.get("api_key_env")
        return {"Authorization": f"Bearer {os.environ.get(str(variable), '')}"} if variable else {}

    def request_body(self, item: JudgedItem, criterion: Criterion, scale: Scale) -> dict:
        return {"model": self.parameters["model"], "temperature": 0,
                "max_tokens": int(self.parameters["max_tokens"]),
                "messages": rubric.messages(item.context, item.response, criterion, scale)}

    def _ask(self, body: dict) -> tuple[str, int]:
        """The answer's content and the attempts it took, or _ItemFailed."""
        retries = int(self.parameters["retries"])
        last_error = ""
        for attempt in range(1, retries + 2):
            if attempt > 1:
                time.sleep(float(self.parameters["backoff"]) * 2 ** (attempt - 2))
            try:
                answer = self.session.post(self.endpoint, json=body, headers=self._headers(),
                                           timeout=float(self.parameters["timeout"]))
            except requests.Timeout:
                last_error = f"timed out after {self.parameters['timeout']} s"
                continue
            except requests.ConnectionError as error:
                last_error = f"connection failed: {error.__class__.__name__}: {str(error)[:200]}"
                continue
            if answer.status_code >= 500:
                last_error = f"HTTP {answer.status_code}: {answer.text[:200]}"
                continue
            if answer.status_code >= 400:
                raise _ItemFailed(f"{self.endpoint} refused the request: HTTP {answer.status_code}: "
                                  f"{answer.text[:200]}", answer.text[:RAW_LIMIT], attempt)
            try:
                payload = answer.json()
            except ValueError:
                raise _ItemFailed(f"{self.endpoint} answered a body that is not JSON: {answer.text[:200]!r}",
                                  answer.text[:RAW_LIMIT], attempt) from None
            try:
                content = payload["choices"][0]["message"]["content"]
            except (KeyError, IndexError, TypeError):
                raise _ItemFailed(f"malformed answer from {self.endpoint}: expected "
                                  f'{{"choices": [{{"message": {{"content": "..."}}}}]}}, got {str(payload)[:200]}',
                                  answer.text[:RAW_LIMIT], attempt) from None
            if not isinstance(content, str):
                raise _ItemFailed(f"non-text content from {self.endpoint}: {content!r}"[:300],
                                  answer.text[:RAW_LIMIT], attempt)
            return content, attempt
        raise _ItemFailed(f"{self.endpoint}: {last_error} (gave up after {retries + 1} attempts)", None, retries + 1)

    def score_one(self, item: JudgedItem, criterion: Criterion, scale: Scale) -> Verdict:
        prompt = rubric.prompt_hash(criterion, scale)
        start = time.perf_counter()
        try:
            content, attempts = self._ask(self.request_body(item, criterion, scale))
        except _ItemFailed as failure:
            return Verdict(item.response_id, None, failure.raw, (time.perf_counter() - start) * 1000, prompt,
                           error=str(failure), details={"attempts": failure.attempts, "endpoint": self.endpoint})
        latency = (time.perf_counter() - start) * 1000
        details = {"attempts": attempts, "endpoint": self.endpoint}
        try:
            score = rubric.parse_score(content, scale)
        except rubric.AnswerRejected as rejected:
            return Verdict(item.response_id, None, content[:RAW_LIMIT], latency, prompt, error=str(rejected),
                           details=details)
        return Verdict(item.response_id, float(score), content[:RAW_LIMIT], latency, prompt, details=details)

    def score_batch(self, items: Sequence[JudgedItem], criterion: Criterion, scale: Scale) -> list[Verdict]:
        workers = max(1, int(self.parameters["concurrency"]))
        if workers == 1 or len(items) <= 1:
            return [self.score_one(item, criterion, scale) for item in items]
        with ThreadPoolExecutor(max_workers=workers) as pool:
            return list(pool.map(lambda item: self.score_one(item, criterion, scale), items))
