"""Reading a judge's stored scores of a study, and which of its contexts people rate by design, as the tidy
tables ``empeval.analysis.stats.ppi`` takes."""
from __future__ import annotations

import json
from typing import Any

import numpy as np
import pandas as pd
from sqlalchemy import Engine, func, select

from empeval.server.errors import BadInput
from empeval.server.store.engine import unit_of_work
from empeval.server.store.kinds.likert import ACTIVE_SAMPLING, StudyContext, StudyItem
from empeval.server.store.models import JudgeScore, Response, System
from empeval.server.store.queries import study_by_name

SCORE_COLUMNS = ["context_id", "system", "criterion", "judge_score", "error"]
SAMPLE_COLUMNS = ["context_id", "sampled"]


def judge_scores(engine: Engine, study: str, judge: str, *, version: str | None = None,
                 folds: bool = False) -> pd.DataFrame:
    """The scores `judge` gave the items of `study` (controls left out), one row per item and criterion
    scored: ``context_id`` (the export's context id), ``system``, ``criterion``, ``judge_score`` (float; NaN
    where the judge failed) and ``error`` (the failure's message, else None). Items the judge never scored
    have no row (``empeval.analysis.stats.ppi.tables.judge_failures`` lists them against the human ratings).

    `version` picks a judge version; by default the one that scored this study's items most recently (a
    judge changed since, or a learned judge fitted on more ratings, has a newer version). NotFound when the
    study does not exist; BadInput when the judge has no score of it, or not at that version.

    With `folds` (a learned judge only), two more kinds of column, what cross-prediction-powered inference
    (``analysis.stats.ppi.crossfit.crossppi_system_means``, with a ``label`` column added) needs: ``fold`` (the fold
    of a human-rated item's context, -1 for an unrated item) and ``fold_score_0`` ... ``fold_score_{K-1}``
    (each fold model's score of an unrated item; NaN for rated ones).
    """
    with unit_of_work(engine) as session:
        row = study_by_name(session, study)
        in_study = (select(StudyItem.response_id)
                    .where(StudyItem.study_id == row.id, StudyItem.is_control.is_(False)).scalar_subquery())
        of_judge = (JudgeScore.judge == judge, JudgeScore.response_id.in_(in_study))
        versions = dict(session.execute(select(JudgeScore.judge_version, func.max(JudgeScore.created_at))
                                        .where(*of_judge).group_by(JudgeScore.judge_version)).all())
        if not versions:
            raise BadInput(f"judge {judge!r} has scored no item of study {study!r}: run "
                           f"`empeval judge {study} --judges {judge}` first")
        if version is None:
            version = max(versions, key=lambda v: (versions[v], v))
        elif version not in versions:
            raise BadInput(f"judge {judge!r} has no score of study {study!r} at version {version!r}; it has "
                           f"{', '.join(sorted(versions))}")
        rows = session.execute(
            select(Response.context_id, System.name, JudgeScore.criterion, JudgeScore.score, JudgeScore.error,
                   JudgeScore.judge_kind, JudgeScore.raw_output)
            .join(Response, Response.id == JudgeScore.response_id).join(System, System.id == Response.system_id)
            .where(*of_judge, JudgeScore.judge_version == version)
            .order_by(JudgeScore.criterion, System.name, Response.context_id)).all()
    table = pd.DataFrame([tuple(r) for r in rows], columns=SCORE_COLUMNS + ["kind", "raw_output"])
    table["judge_score"] = table["judge_score"].astype(float)
    if folds:
        table = _with_folds(table, judge)
    return table.drop(columns=["kind", "raw_output"])


def study_judges(engine: Engine, study: str) -> list[str]:
    """The judges with at least one score (or failure) of an item of `study`, by name (NotFound: no such study)."""
    with unit_of_work(engine) as session:
        row = study_by_name(session, study)
        in_study = select(StudyItem.response_id).where(StudyItem.study_id == row.id).scalar_subquery()
        return sorted(session.scalars(select(JudgeScore.judge).where(JudgeScore.response_id.in_(in_study))
                                      .distinct()))


def human_sample(engine: Engine, study: str) -> pd.DataFrame:
    """Which contexts of the Likert or A/B study `study` people rate (judge) by design: one row per context of the
    study, ``context_id`` (the export's and ``judge_scores``'s context id) and ``sampled`` (bool: in the human share's
    seeded sample, so in the assignments; False for a context only the judges score), sorted by context id.
    A study with design.sampling = "active" has a third column, ``inclusion_probability``: the probability the
    active draw gave the context (``analysis.stats.ppi.active`` weights by its inverse), NaN for every context
    until the draw (`empeval study sample`), when ``sampled`` is False everywhere; ``attrs["sampling"]`` is then
    "active". A uniform sample's frame keeps its two columns (its probability is the share, for every context).

    A study without ``design.human_share`` has every context sampled (as has one created before migration 0008,
    read from its items). The frame's ``attrs`` say how the sample was drawn: ``human_share`` (None without one)
    and ``human_share_seed`` (tasks.kinds.likert_human_share.draw_human_sample redraws it from the contexts'
    conv_id#n_turns keys).
    NotFound when the study does not exist; BadInput for a study of another kind (no human share).
    """
    with unit_of_work(engine) as session:
        row = study_by_name(session, study)
        config = row.config
        setup = config.setup
        if not setup.judged:  # the kinds with a human share are those judges judge
            raise BadInput(f"study {study!r} is a {setup.label} study; the human share is a Likert or A/B study's "
                           "design")
        rows: list[Any] = session.execute(
            select(StudyContext.context_id, StudyContext.human_rated, StudyContext.inclusion_probability)
            .where(StudyContext.study_id == row.id).order_by(StudyContext.context_id)).all()
        if not rows:  # no human share (or created before the design recorded it): people judge every context
            rows = [(context_id, True, None) for context_id in session.scalars(
                select(Response.context_id).where(Response.id.in_(setup.judged_responses(row.id)))
                .distinct().order_by(Response.context_id))]
    table = pd.DataFrame([tuple(r) for r in rows], columns=[*SAMPLE_COLUMNS, "inclusion_probability"]).astype(
        {"context_id": int, "sampled": bool, "inclusion_probability": float})
    share, share_seed = setup.human_share_and_seed
    table.attrs.update(human_share=share, human_share_seed=share_seed)
    if setup.actively_sampled:
        table.attrs["sampling"] = ACTIVE_SAMPLING
        return table
    return table.drop(columns=["inclusion_probability"])


def _with_folds(table: pd.DataFrame, judge: str) -> pd.DataFrame:
    """The fold and per-fold scores a learned judge keeps in its raw output, as columns."""
    kinds = set(table["kind"])
    if kinds != {"learned-judge"}:
        raise BadInput(f"judge {judge!r} is a {', '.join(sorted(kinds))}: only a learned judge has folds")
    fitted = [json.loads(raw) if raw else {"fold": -1, "fold_scores": []} for raw in table["raw_output"]]
    n_folds = max(len(f["fold_scores"]) for f in fitted)
    table = table.assign(fold=[int(f["fold"]) for f in fitted])
    for k in range(n_folds):
        table[f"fold_score_{k}"] = [np.nan if k >= len(f["fold_scores"]) or f["fold_scores"][k] is None
                                    else float(f["fold_scores"][k]) for f in fitted]
    return table


def latest_version(engine: Engine, study: str, judge: str) -> str | None:
    """The judge version judge_scores reads by default: the one that scored the study's items most recently."""
    with unit_of_work(engine) as session:
        study_id = study_by_name(session, study).id
        in_study = select(StudyItem.response_id).where(StudyItem.study_id == study_id).scalar_subquery()
        row = session.execute(select(JudgeScore.judge_version, func.max(JudgeScore.created_at).label("latest"))
                              .where(JudgeScore.judge == judge, JudgeScore.response_id.in_(in_study))
                              .group_by(JudgeScore.judge_version)
                              .order_by(func.max(JudgeScore.created_at).desc(), JudgeScore.judge_version.desc())
                              ).first()
    return row[0] if row is not None else None


def latest_judge(engine: Engine, study: str) -> str | None:
    """The judge that scored the study's items most recently, or None when none has (what `study status` and the
    dashboard's decisions take by default)."""
    with unit_of_work(engine) as session:
        study_id = study_by_name(session, study).id
        in_study = select(StudyItem.response_id).where(StudyItem.study_id == study_id).scalar_subquery()
        return session.scalar(select(JudgeScore.judge).where(JudgeScore.response_id.in_(in_study))
                              .group_by(JudgeScore.judge)
                              .order_by(func.max(JudgeScore.created_at).desc(), JudgeScore.judge).limit(1))
