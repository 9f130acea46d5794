"""A study as the judges see it, read from the store: its items (controls left out), its criteria and scale
from the stored study configuration, and its human ratings so far."""
from __future__ import annotations

from collections.abc import Callable, Sequence

import pandas as pd
from sqlalchemy import Engine, select
from sqlalchemy.orm import Session, aliased

from empeval.server.backend.contexts import load_contexts
from empeval.server.backend.judges.base import JudgedItem, JudgedPair, JudgedStudy
from empeval.server.errors import BadInput
from empeval.server.store.engine import unit_of_work
from empeval.server.store.kinds.likert import LikertSetup, Rating, Scale, StudyItem
from empeval.server.store.kinds.pairwise import PairItem, PairwiseSetup
from empeval.server.store.models import Annotator, Response, System
from empeval.server.store.queries import study_by_name
from empeval.server.store.study_parts import Criterion

RATING_COLUMNS = ["context_id", "system", "criterion", "annotator", "score"]


def load_judged_study(
    engine: Engine,
    study: str,
    *,
    criteria: Sequence[str] | None = None,
    cross_fit: Callable[..., pd.DataFrame] | None = None,
    cross_fit_differences: Callable[..., pd.DataFrame] | None = None,
) -> JudgedStudy:
    """The study called `study` (NotFound if there is none) with the `criteria` chosen (default: all of the
    study's; an unknown key is refused, listing the study's). Studies of kinds other than Likert and A/B are
    refused. `cross_fit` and `cross_fit_differences` are the learned judges' fitting functions
    (``JudgedStudy``). An A/B study is read as its pairs (``JudgedStudy.pairs``), for a judge of differences."""
    with unit_of_work(engine) as session:
        row = study_by_name(session, study)
        config = row.config
        setup = config.setup
        if not isinstance(setup, (LikertSetup, PairwiseSetup)):  # the kinds with a model-assisted evaluation
            raise BadInput(f"study {study!r} is a {setup.label} study; judges score the items of a Likert study "
                           "and compare the pairs of an A/B study")
        known = config.criterion_keys
        chosen = list(known) if not criteria else list(dict.fromkeys(criteria))
        unknown = [key for key in chosen if key not in known]
        if unknown:
            raise BadInput(f"study {study!r} has no criterion {', '.join(map(repr, unknown))}; its criteria are "
                           f"{', '.join(known)}: choose among them with --criteria")
        if isinstance(setup, PairwiseSetup):
            return _pairwise_study(session, row.id, study, criteria=tuple(c for c in config.criteria
                                                                          if c.key in chosen),
                                   study_criteria=config.criteria)
        items = session.execute(
            select(Response.id, Response.context_id, Response.text, System.name)
            .join(StudyItem, StudyItem.response_id == Response.id).join(System, System.id == Response.system_id)
            .where(StudyItem.study_id == row.id, StudyItem.is_control.is_(False))
            .order_by(Response.context_id, System.name)).all()
        contexts = {c.context_id: c for c in load_contexts(session, dataset=None,
                                                           context_ids=sorted({i.context_id for i in items}))}
        ratings = session.execute(
            select(Response.context_id, System.name, Rating.criterion, Annotator.pseudonym, Rating.score)
            .join(StudyItem, StudyItem.id == Rating.item_id).join(Response, Response.id == StudyItem.response_id)
            .join(System, System.id == Response.system_id).join(Annotator, Annotator.id == Rating.annotator_id)
            .where(StudyItem.study_id == row.id, StudyItem.is_control.is_(False))).all()
    return JudgedStudy(
        name=study,
        items=tuple(JudgedItem(response_id, contexts[context_id], text, system)
                    for response_id, context_id, text, system in items),
        criteria=tuple(c for c in config.criteria if c.key in chosen),
        scale=setup.scale,
        human_ratings=pd.DataFrame([tuple(r) for r in ratings], columns=RATING_COLUMNS),
        cross_fit=cross_fit,
        study_criteria=config.criteria,
        cross_fit_differences=cross_fit_differences,
    )


def _pairwise_study(session: Session, study_id: int, name: str, *, criteria: tuple[Criterion, ...],
                    study_criteria: tuple[Criterion, ...]) -> JudgedStudy:
    """An A/B study as a judge of differences sees it: the pairs its people compare (controls left out; with a
    human share, the pairs of every context of the study, judged by people or not), each response once as an item.
    It has no scale (the judge's preference is in its own steps, which prediction-powered inference weighs) and no
    ratings: its people choose."""
    response_a, response_b = aliased(Response), aliased(Response)
    system_a, system_b = aliased(System), aliased(System)
    rows = session.execute(
        select(PairItem.context_id, response_a.id, response_a.text, system_a.name, response_b.id, response_b.text,
               system_b.name)
        .join(response_a, response_a.id == PairItem.response_a_id).join(system_a, system_a.id == response_a.system_id)
        .join(response_b, response_b.id == PairItem.response_b_id).join(system_b, system_b.id == response_b.system_id)
        .where(PairItem.study_id == study_id, PairItem.is_control.is_(False))
        .order_by(PairItem.context_id, response_a.id, response_b.id)).all()
    contexts = {c.context_id: c for c in load_contexts(session, dataset=None,
                                                       context_ids=sorted({r[0] for r in rows}))}
    items: dict[int, JudgedItem] = {}
    pairs = []
    for context_id, id_a, text_a, name_a, id_b, text_b, name_b in rows:
        first = items.setdefault(id_a, JudgedItem(id_a, contexts[context_id], text_a, name_a))
        second = items.setdefault(id_b, JudgedItem(id_b, contexts[context_id], text_b, name_b))
        pairs.append(JudgedPair(first, second))
    return JudgedStudy(name=name, items=tuple(items.values()), criteria=criteria, scale=Scale(),
                       human_ratings=pd.DataFrame(columns=RATING_COLUMNS), study_criteria=study_criteria,
                       pairs=tuple(pairs))
