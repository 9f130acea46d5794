"""Simulated crowds as the tests run them: a study's own kind answers (its tasks part's simulated_answers) through the
one HTTP loop of tasks.simulate, counting what its receipts count."""
from __future__ import annotations

from empeval.server.annotation.kinds import annotation_kind
from empeval.server.store.engine import unit_of_work
from empeval.server.store.queries import study_by_name
from empeval.tasks.kinds import task_kind
from empeval.tasks.simulate import CrowdModel, SimulationResult, run_crowd_over_http


def run_study_crowd(base: str, invites, raters, engine, study: str, *, model: CrowdModel | None = None,
                    seed: int = 0, **options) -> SimulationResult:
    """`raters` answer the study `study` through the app at `base` as its kind's simulated raters do."""
    with unit_of_work(engine) as session:
        kind = study_by_name(session, study).config.kind
    answer = task_kind(kind).simulated_answers(engine, study, model or CrowdModel(), seed)
    return run_crowd_over_http(base, invites, raters, answer, counted=annotation_kind(kind).counted, seed=seed,
                               **options)
