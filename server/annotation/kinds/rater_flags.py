"""The raters a study's quality rules flag so far, for the dashboard's item browser: the report's own rules and
thresholds (analysis' kind part, as `empeval annotators list` and the report use them), run on the study's export.
A kind's part may read analysis' kind parts (the import contract's edge for server.annotation.kinds), so the flags
are computed once, in analysis, not copied here.

The check reads every answer (about 2 s at 17,000 ratings), so each server process keeps the last result per study
and store, and computes it again only when the study's assignments have changed (one small statement tells)."""
from __future__ import annotations

import threading
from typing import Any

import pandas as pd
from sqlalchemy import Engine, func, select
from sqlalchemy.orm import Session

from empeval.analysis.kinds.likert.part import LikertAnalysisKind
from empeval.server.annotation.export import report_inputs
from empeval.server.store.models import Assignment
from empeval.server.store.queries import study_by_name

_KEPT: dict[tuple[str, str], tuple[Any, set[str] | None]] = {}
_LOCK = threading.Lock()


def flagged_pseudonyms(engine: Engine, study: str) -> set[str] | None:
    """The pseudonyms the report's quality rules flag from a Likert study's answers so far (None for another kind):
    kept while the study's assignments (their number by status, the last submission) stay as they were."""
    key = (engine.url.render_as_string(hide_password=True), study)
    stamp = _assignments_stamp(engine, study)
    with _LOCK:
        kept = _KEPT.get(key)
    if kept is not None and kept[0] == stamp:
        return set(kept[1]) if kept[1] is not None else None
    flagged = _flagged_now(engine, study)
    with _LOCK:
        _KEPT[key] = (stamp, flagged)
    return set(flagged) if flagged is not None else None


def _assignments_stamp(engine: Engine, study: str) -> Any:
    """What changes when answers are added or withdrawn: the study's assignments counted by status, with the
    latest submission time and the highest assignment id."""
    with Session(engine) as session:
        study_id = study_by_name(session, study).id
        return tuple(session.execute(
            select(Assignment.status, func.count(), func.max(Assignment.submitted_at), func.max(Assignment.id))
            .where(Assignment.study_id == study_id).group_by(Assignment.status).order_by(Assignment.status)).all())


def _flagged_now(engine: Engine, study: str) -> set[str] | None:
    """The Likert part's flags (the kind the browser filters; None for another kind: the contract lets a kind's part
    read analysis' kind parts, not their registry)."""
    inputs = report_inputs(engine, study)
    if inputs.kind != LikertAnalysisKind.name:
        return None
    return LikertAnalysisKind().flagged_raters(pd.DataFrame(inputs.rows), {"name": study, **inputs.meta})
