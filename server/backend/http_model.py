"""`http`: any external model behind HTTP, one request per context.

Two protocols (parameter `protocol`):

- `openai`: an OpenAI-compatible chat endpoint. POST {url}/v1/chat/completions (or `url` itself when it
  already ends with /chat/completions) with
  {"model": MODEL, "messages": [{"role": "system", "content": SYSTEM_PROMPT},
   {"role": "user", "content": <speaker turn>}, {"role": "assistant", "content": <listener turn>}, ...],
   "temperature": T, "max_tokens": N}; the response is choices[0].message.content. The model plays the
  Listener, so Speaker turns are `user` and Listener turns `assistant`.
- `json`: a plain JSON endpoint. POST url with
  {"context": [{"role": "speaker"|"listener", "text": "..."}, ...], "emotion": "sad"|null,
   "situation": "..."|null}
  and answer 200 with {"response": "..."} (a non-empty string).

Every request has a timeout (`timeout`, seconds). Timeouts, connection errors and 5xx answers are retried
up to `retries` times with exponential backoff (`backoff` seconds, doubled each time); 4xx answers and
malformed bodies are not retried. A failure is an error outcome for that context, with the reason and
the number of attempts; it is never stored as a response. Optional `headers` are sent with every request
(e.g. an Authorization header; its value may be given as "env:NAME" to read it from the environment).
"""
from __future__ import annotations

import os
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor

import requests

from empeval.server.backend.base import (
    DialogueContext,
    Outcome,
    Reply,
    ResponseModel,
    ResponseUnavailable,
    parameters_hash,
)

DEFAULTS = {"protocol": "json", "timeout": 30.0, "retries": 2, "backoff": 0.5, "concurrency": 1}


class HttpModel(ResponseModel):
    kind = "http"

    def __init__(self, name, parameters=None, resources=None):
        parameters = {**DEFAULTS, **(parameters or {})}
        if not parameters.get("url"):
            raise ValueError(f"http system {name!r}: parameter `url` is required")
        if parameters["protocol"] not in ("json", "openai"):
            raise ValueError(f"http system {name!r}: protocol must be 'json' or 'openai', "
                             f"not {parameters['protocol']!r}")
        super().__init__(name, parameters)
        self.session = requests.Session()

    def data_version(self) -> str:
        # We cannot see the remote weights: the researcher names the version, else it is the endpoint itself.
        return str(self.parameters.get("version") or f"{self.parameters['protocol']}:{self.parameters['url']}")

    @property
    def version(self) -> str:
        # Headers may hold secrets and change without changing the model: keep them out of the version hash.
        public = {k: v for k, v in self.parameters.items() if k != "headers"}
        return f"{self.data_version()}-p{parameters_hash(public)}"

    def describe(self) -> dict:
        described = super().describe()
        described["parameters"] = {k: v for k, v in self.parameters.items() if k != "headers"}
        return described

    def provenance(self, latency_ms, details=None):
        record = super().provenance(latency_ms, details)
        record["parameters"] = {k: v for k, v in self.parameters.items() if k != "headers"}
        return record

    def _endpoint(self) -> str:
        url = self.parameters["url"].rstrip("/")
        if self.parameters["protocol"] == "openai" and not url.endswith("/chat/completions"):
            url += "/v1/chat/completions"
        return url

    def _headers(self) -> dict[str, str]:
        headers = {}
        for key, value in (self.parameters.get("headers") or {}).items():
            value = str(value)
            headers[key] = os.environ.get(value[4:], "") if value.startswith("env:") else value
        return headers

    def request_body(self, context: DialogueContext) -> dict:
        if self.parameters["protocol"] == "json":
            return {"context": [{"role": t.role, "text": t.text} for t in context.turns],
                    "emotion": context.emotion, "situation": context.situation}
        messages = []
        if self.parameters.get("system_prompt"):
            messages.append({"role": "system", "content": self.parameters["system_prompt"]})
        messages += [{"role": "user" if t.role == "speaker" else "assistant", "content": t.text}
                     for t in context.turns]
        body = {"model": self.parameters.get("model", ""), "messages": messages}
        for key in ("temperature", "max_tokens", "top_p", "seed"):
            if key in self.parameters:
                body[key] = self.parameters[key]
        return body

    def parse_body(self, body) -> str:
        try:
            if self.parameters["protocol"] == "json":
                text = body["response"]
            else:
                text = body["choices"][0]["message"]["content"]
        except (KeyError, IndexError, TypeError):
            expected = ('{"response": "..."}' if self.parameters["protocol"] == "json"
                        else '{"choices": [{"message": {"content": "..."}}]}')
            raise ResponseUnavailable(f"malformed answer from {self._endpoint()}: expected {expected}, got "
                                      f"{str(body)[:200]}", kind="upstream") from None
        if not isinstance(text, str) or not text.strip():
            raise ResponseUnavailable(f"empty or non-text response from {self._endpoint()}: {text!r}"[:300],
                                      kind="upstream")
        return text.strip()

    def respond_one(self, context: DialogueContext) -> Reply:
        url, retries = self._endpoint(), int(self.parameters["retries"])
        last_error = ""
        for attempt in range(1, retries + 2):
            if attempt > 1:
                time.sleep(float(self.parameters["backoff"]) * 2 ** (attempt - 2))
            try:
                answer = self.session.post(url, json=self.request_body(context), headers=self._headers(),
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
                # The request itself is wrong; sending it again would give the same answer.
                raise ResponseUnavailable(f"{url} refused the request: HTTP {answer.status_code}: "
                                          f"{answer.text[:200]}", kind="upstream", details={"attempts": attempt})
            try:
                body = answer.json()
            except ValueError:
                raise ResponseUnavailable(f"{url} answered HTTP {answer.status_code} with a body that is not "
                                          f"JSON: {answer.text[:200]!r}", kind="upstream",
                                          details={"attempts": attempt}) from None
            return Reply(self.parse_body(body), {"attempts": attempt, "endpoint": url})
        raise ResponseUnavailable(f"{url}: {last_error} (gave up after {retries + 1} attempts)", kind="upstream",
                                  details={"attempts": retries + 1})

    def respond_batch(self, contexts: Sequence[DialogueContext]) -> list[Outcome]:
        workers = max(1, int(self.parameters["concurrency"]))
        if workers == 1 or len(contexts) <= 1:
            return super().respond_batch(contexts)
        with ThreadPoolExecutor(max_workers=workers) as pool:
            parts = list(pool.map(lambda c: super(HttpModel, self).respond_batch([c])[0], contexts))
        return parts
