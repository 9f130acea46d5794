"""Reading a judge of differences' stored verdicts on a study (the `judge_pair_score` table) as the tidy table
``empeval.analysis.stats.ppi.differences`` takes."""
from __future__ import annotations

import pandas as pd
from sqlalchemy import Engine, func, select
from sqlalchemy.orm import aliased

from empeval.server.errors import BadInput
from empeval.server.store.engine import unit_of_work
from empeval.server.store.model_assisted_tables import JudgePairScore
from empeval.server.store.models import Response, System
from empeval.server.store.queries import study_by_name

PAIR_COLUMNS = ["criterion", "context_id", "system_a", "system_b", "judge_diff", "error"]


def pair_judges(engine: Engine, study: str) -> list[str]:
    """The judges with verdicts on pairs of `study`'s responses, the one that compared most recently first."""
    with unit_of_work(engine) as session:
        in_study = _in_study(session, study)
        rows = session.execute(select(JudgePairScore.judge, func.max(JudgePairScore.created_at))
                               .where(JudgePairScore.response_a_id.in_(in_study))
                               .group_by(JudgePairScore.judge)).all()
    return [judge for judge, _ in sorted(rows, key=lambda row: (row[1], row[0]), reverse=True)]


def judge_pair_scores(engine: Engine, study: str, judge: str | None = None, *,
                      version: str | None = None) -> pd.DataFrame:
    """The verdicts `judge` gave pairs of `study`'s responses (controls left out), one row per pair and criterion:
    ``criterion``, ``context_id`` (the export's context id), ``system_a``, ``system_b`` (the systems of the stored
    A and B responses), ``judge_diff`` (float: A's rating minus B's in scale points; NaN where the judge failed)
    and ``error`` (the failure's message, else None). The frame's ``attrs`` hold ``judge``, ``version`` and
    ``kind``.

    `judge` defaults to the judge of differences that compared the study's pairs most recently; `version` to the
    version of it that did. NotFound when the study does not exist; BadInput when no judge (or not that one, or
    not at that version) compared its pairs.
    """
    with unit_of_work(engine) as session:
        in_study = _in_study(session, study)
        if judge is None:
            latest = session.execute(select(JudgePairScore.judge).where(JudgePairScore.response_a_id.in_(in_study))
                                     .order_by(JudgePairScore.created_at.desc(), JudgePairScore.id.desc())
                                     .limit(1)).scalar()
            if latest is None:
                raise BadInput(f"no judge of differences has compared pairs of study {study!r}: run `empeval judge "
                               f"{study} --judges NAME` with a pairwise-http-judge or learned-difference-judge")
            judge = latest
        of_judge = (JudgePairScore.judge == judge, JudgePairScore.response_a_id.in_(in_study))
        versions = dict(session.execute(select(JudgePairScore.judge_version, func.max(JudgePairScore.created_at))
                                        .where(*of_judge).group_by(JudgePairScore.judge_version)).all())
        if not versions:
            raise BadInput(f"judge {judge!r} has compared no pair of study {study!r}: run "
                           f"`empeval judge {study} --judges {judge}` first")
        if version is None:
            version = max(versions, key=lambda v: (versions[v], v))
        elif version not in versions:
            raise BadInput(f"judge {judge!r} has no verdict on study {study!r} at version {version!r}; it has "
                           f"{', '.join(sorted(versions))}")
        response_a, response_b = aliased(Response), aliased(Response)
        system_a, system_b = aliased(System), aliased(System)
        rows = session.execute(
            select(JudgePairScore.criterion, response_a.context_id, system_a.name, system_b.name,
                   JudgePairScore.score, JudgePairScore.error, JudgePairScore.judge_kind)
            .join(response_a, response_a.id == JudgePairScore.response_a_id)
            .join(response_b, response_b.id == JudgePairScore.response_b_id)
            .join(system_a, system_a.id == response_a.system_id).join(system_b, system_b.id == response_b.system_id)
            .where(*of_judge, JudgePairScore.judge_version == version,
                   JudgePairScore.response_b_id.in_(in_study))
            .order_by(JudgePairScore.criterion, response_a.context_id, system_a.name, system_b.name)).all()
    table = pd.DataFrame([tuple(r[:6]) for r in rows], columns=PAIR_COLUMNS)
    table["judge_diff"] = table["judge_diff"].astype(float)
    table.attrs.update(judge=judge, version=version, kind=", ".join(sorted({r[6] for r in rows})))
    return table


def _in_study(session, study: str):
    """The study's responses a judge sees (``StudySetup.judged_responses``: a Likert study's items', an A/B study's
    pairs'), as a subquery; BadInput for a study of a kind judges do not judge."""
    row = study_by_name(session, study)
    setup = row.config.setup
    if not setup.judged:
        raise BadInput(f"study {study!r} is a {setup.label} study; judges of differences compare the responses of "
                       "Likert and A/B studies")
    return setup.judged_responses(row.id).scalar_subquery()
