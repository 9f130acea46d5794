"""The `ResponseModel` interface: contexts in, one outcome (a response or an error) per context out.

Every response carries provenance: system name and kind, a version string (a hash of the weights/data and
parameters that produced it), the parameters, the latency, plus what the system itself knows (which
candidate it retrieved, which file a replayed output came from, which seed a control used, ...).
"""
from __future__ import annotations

import hashlib
import json
import time
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

from empeval.server.errors import EmpevalError

ROLES = ("speaker", "listener")


@dataclass(frozen=True)
class ContextTurn:
    role: str  # 'speaker' (who lived the situation) or 'listener'
    text: str


@dataclass(frozen=True)
class DialogueContext:
    """A dialogue prefix to respond to. Store fields are None for raw contexts sent over the API."""

    turns: tuple[ContextTurn, ...]
    emotion: str | None = None
    situation: str | None = None
    context_id: int | None = None
    dialogue_id: int | None = None
    conv_id: str | None = None
    n_turns: int | None = None
    split: str | None = None
    reference: str | None = None
    reference_turn_id: int | None = None

    def key(self) -> str:
        """A stable identity: `conv_id#n_turns` for stored ED contexts, else a hash of the turns."""
        if self.conv_id is not None and self.n_turns is not None:
            return f"{self.conv_id}#{self.n_turns}"
        payload = json.dumps([[t.role, t.text] for t in self.turns], ensure_ascii=False)
        return "raw:" + hashlib.sha256(payload.encode()).hexdigest()[:16]


UPSTREAM = "upstream"  # Outcome.error_kind of a remote model's failure


@dataclass
class Outcome:
    """What a system produced for one context: `text` on success, else `error` (never both)."""

    context_key: str
    text: str | None
    provenance: dict[str, Any]
    latency_ms: float
    error: str | None = None
    # 'unsupported' (this system cannot answer this context) or 'upstream' (a remote model failed).
    error_kind: str | None = None

    @property
    def ok(self) -> bool:
        return self.error is None

    @property
    def upstream_failed(self) -> bool:
        """The error is a remote model's failure (a 502 to the API's caller), not this system's refusal."""
        return self.error_kind == UPSTREAM


class ResponseUnavailable(EmpevalError):
    """A system cannot produce a response for one context; the message says why."""

    def __init__(self, message: str, *, kind: str = "unsupported", details: dict[str, Any] | None = None):
        super().__init__(message)
        self.kind = kind
        self.details = details or {}


@dataclass
class Reply:
    text: str
    details: dict[str, Any] = field(default_factory=dict)


def parameters_hash(parameters: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(parameters, sort_keys=True, default=str).encode()).hexdigest()[:8]


class ResponseModel(ABC):
    """A dialogue system (or control). Subclasses set `kind` and implement `data_version` and either
    `respond_one` or `respond_batch`."""

    kind: ClassVar[str]

    def __init__(self, name: str, parameters: dict[str, Any] | None = None):
        self.name = name
        self.parameters = dict(parameters or {})

    @abstractmethod
    def data_version(self) -> str:
        """What identifies the weights/data behind this system (e.g. a hash of its candidate texts)."""

    @property
    def version(self) -> str:
        # Parameters are part of the version: the same system with other parameters is another System row.
        return f"{self.data_version()}-p{parameters_hash(self.parameters)}"

    def describe(self) -> dict[str, Any]:
        return {"name": self.name, "kind": self.kind, "version": self.version, "parameters": self.parameters}

    def provenance(self, latency_ms: float, details: dict[str, Any] | None = None) -> dict[str, Any]:
        return {"system": self.name, "kind": self.kind, "version": self.version, "parameters": self.parameters,
                "latency_ms": round(latency_ms, 3), **(details or {})}

    def respond_one(self, context: DialogueContext) -> Reply:
        """The response to one context; raise ResponseUnavailable when there is none."""
        raise NotImplementedError

    def respond_batch(self, contexts: Sequence[DialogueContext]) -> list[Outcome]:
        """One outcome per context, in order. Errors are outcomes too, never exceptions."""
        outcomes = []
        for context in contexts:
            start = time.perf_counter()
            try:
                reply = self.respond_one(context)
            except ResponseUnavailable as error:
                latency = (time.perf_counter() - start) * 1000
                outcomes.append(Outcome(context.key(), None, self.provenance(latency, error.details), latency,
                                        error=str(error), error_kind=error.kind))
                continue
            latency = (time.perf_counter() - start) * 1000
            outcomes.append(Outcome(context.key(), reply.text, self.provenance(latency, reply.details), latency))
        return outcomes
