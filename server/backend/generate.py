"""Filling the response table: one system, the chosen contexts, batched, resumable, one transaction per batch."""
from __future__ import annotations

from collections.abc import Callable, Collection
from dataclasses import dataclass, field

from sqlalchemy import Engine, select

from empeval.server.backend.base import ResponseModel
from empeval.server.backend.contexts import load_contexts
from empeval.server.store.engine import unit_of_work
from empeval.server.store.models import Response, System


@dataclass
class GenerationReport:
    system: str
    version: str
    contexts: int = 0
    skipped: int = 0  # already had a response from this system version
    stored: int = 0
    errors: list[tuple[str, str]] = field(default_factory=list)  # (context key, message)
    upstream_errors: int = 0  # of `errors`: a remote model failed (as opposed to "cannot answer this context")

    def describe(self, max_errors: int = 3) -> str:
        line = (f"{self.system} ({self.version}): {self.stored} stored, {self.skipped} already present, "
                f"{len(self.errors)} errors, of {self.contexts} contexts")
        for key, message in self.errors[:max_errors]:
            line += f"\n  error {key}: {message}"
        if len(self.errors) > max_errors:
            line += f"\n  ... and {len(self.errors) - max_errors} more errors"
        return line


def system_row(engine: Engine, model: ResponseModel) -> int:
    """The id of the System row for this name and version, created when new."""
    described = model.describe()
    with unit_of_work(engine) as session:
        row = session.scalar(select(System).where(System.name == model.name, System.version == described["version"]))
        if row is None:
            row = System(name=model.name, kind=model.kind, version=described["version"],
                         parameters=described["parameters"])
            session.add(row)
            session.flush()
        return row.id


def generate_responses(
    engine: Engine,
    model: ResponseModel,
    *,
    dataset: str,
    split: str,
    limit: int | None = None,
    context_ids: Collection[int] | None = None,
    batch_size: int = 64,
    on_batch: Callable[[int], None] | None = None,
    on_total: Callable[[int], None] | None = None,
) -> GenerationReport:
    """Responses of `model` for the first `limit` contexts of `split` (of those in `context_ids`, when given),
    skipping those this system version already answered. Each batch's responses are written in one transaction,
    so an interrupted run keeps every finished batch and the next run resumes after it. Errors are reported, never
    stored."""
    system_id = system_row(engine, model)
    report = GenerationReport(model.name, model.version)
    with unit_of_work(engine) as session:
        contexts = load_contexts(session, dataset=dataset, split=split, limit=limit,
                                 context_ids=None if context_ids is None else sorted(context_ids))
        done = set(session.scalars(select(Response.context_id).where(Response.system_id == system_id)))
    report.contexts = len(contexts)
    todo = [c for c in contexts if c.context_id not in done]
    report.skipped = len(contexts) - len(todo)
    if on_total:
        on_total(len(todo))
    for start in range(0, len(todo), batch_size):
        batch = todo[start:start + batch_size]
        outcomes = model.respond_batch(batch)
        with unit_of_work(engine) as session:
            for context, outcome in zip(batch, outcomes, strict=True):
                if outcome.ok:
                    session.add(Response(context_id=context.context_id, system_id=system_id, text=outcome.text,
                                         provenance=outcome.provenance, latency_ms=outcome.latency_ms))
                    report.stored += 1
                else:
                    report.errors.append((outcome.context_key, outcome.error))
                    report.upstream_errors += outcome.upstream_failed
        if on_batch:
            on_batch(len(batch))
    return report
