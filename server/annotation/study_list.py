"""Every study at a glance (`empeval study list`): kind, open or closed, assignments done of total, annotators."""
from __future__ import annotations

from datetime import datetime
from typing import NamedTuple

from sqlalchemy import Engine, distinct, func, select
from sqlalchemy.orm import Session

from empeval.server.store.models import Assignment, Study
from empeval.server.store.queries import as_utc
from empeval.server.store.statuses import AssignmentStatus


class StudySummary(NamedTuple):
    name: str
    kind: str  # the study's kind: likert, pairwise, ...
    status: str  # open or closed
    done: int  # assignments submitted
    total: int  # assignments of the design: an expired one is counted once, by the copy that replaced it
    annotators: int  # distinct annotators ever handed an assignment
    created_at: datetime


def study_summaries(engine: Engine) -> list[StudySummary]:
    """One summary per study, oldest first: two statements whatever the number of studies (the studies, and one
    grouped count of their assignments)."""
    with Session(engine) as session:
        studies = session.scalars(select(Study).order_by(Study.created_at, Study.id)).all()
        counts = {row.study_id: row for row in session.execute(
            select(Assignment.study_id,
                   func.count().filter(Assignment.status == AssignmentStatus.SUBMITTED).label("done"),
                   func.count().filter(Assignment.status != AssignmentStatus.EXPIRED).label("total"),
                   func.count(distinct(Assignment.annotator_id)).label("annotators"))
            .group_by(Assignment.study_id)).all()}
        summaries = []
        for study in studies:
            row = counts.get(study.id)
            summaries.append(StudySummary(
                study.name, study.config.kind, study.status,
                row.done if row else 0, row.total if row else 0, row.annotators if row else 0,
                as_utc(study.created_at)))
        return summaries
