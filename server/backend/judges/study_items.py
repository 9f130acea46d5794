"""A study as the judges see it, read from the store: its items (controls left out), its criteria and scale
from the stored study configuration, and its human ratings so far."""
from __future__ import annotations

from collections.abc import Callable, Sequence

import pandas as pd
from sqlalchemy import Engine, select

from empeval.server.backend.contexts import load_contexts
from empeval.server.backend.judges.base import JudgedItem, JudgedPair, JudgedStudy
from empeval.server.errors import BadInput
from empeval.server.store.engine import unit_of_work
from empeval.server.store.kinds.likert import LikertSetup, Rating, Scale, StudyItem
from empeval.server.store.models import Annotator, Response, System
from empeval.server.store.queries import study_by_name

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
    study's; an unknown key is refused, listing the study's). Studies of a kind judges do not judge
    (``StudySetup.judged``) are refused. `cross_fit` and `cross_fit_differences` are the learned judges' fitting
    functions (``JudgedStudy``). A study whose people compare two responses (A/B: ``StudySetup.compared_pairs``)
    is read with its pairs (``JudgedStudy.pairs``), for a judge of differences; it has no scale (the study's default
    1-5 is given: a judge of differences answers in steps of its own) and no ratings."""
    with unit_of_work(engine) as session:
        row = study_by_name(session, study)
        config = row.config
        setup = config.setup
        if not setup.judged:
            raise BadInput(f"study {study!r} is a {setup.label} study; judges score the items of a Likert study "
                           "and compare the pairs of an A/B study")
        known = config.criterion_keys
        chosen = list(known) if not criteria else list(dict.fromkeys(criteria))
        unknown = [key for key in chosen if key not in known]
        if unknown:
            raise BadInput(f"study {study!r} has no criterion {', '.join(map(repr, unknown))}; its criteria are "
                           f"{', '.join(known)}: choose among them with --criteria")
        items = session.execute(
            select(Response.id, Response.context_id, Response.text, System.name)
            .join(System, System.id == Response.system_id)
            .where(Response.id.in_(setup.judged_responses(row.id)))
            .order_by(Response.context_id, System.name)).all()
        contexts = {c.context_id: c for c in load_contexts(session, dataset=None,
                                                           context_ids=sorted({i.context_id for i in items}))}
        judged = {response_id: JudgedItem(response_id, contexts[context_id], text, system)
                  for response_id, context_id, text, system in items}
        compared = setup.compared_pairs(row.id)
        pairs = (None if compared is None else
                 tuple(JudgedPair(judged[a], judged[b]) for _, a, b in session.execute(compared)))
        choices = setup.compared_choices(row.id)
        pair_labels = None if choices is None else _net_preferences(session.execute(choices).all(), judged)
        ratings = session.execute(
            select(Response.context_id, System.name, Rating.criterion, Annotator.pseudonym, Rating.score)
            .join(StudyItem, StudyItem.id == Rating.item_id).join(Response, Response.id == StudyItem.response_id)
            .join(System, System.id == Response.system_id).join(Annotator, Annotator.id == Rating.annotator_id)
            .where(StudyItem.study_id == row.id, StudyItem.is_control.is_(False))).all()
    return JudgedStudy(
        name=study,
        items=tuple(judged.values()),
        criteria=tuple(c for c in config.criteria if c.key in chosen),
        scale=setup.scale if isinstance(setup, LikertSetup) else Scale(),
        human_ratings=pd.DataFrame([tuple(r) for r in ratings], columns=RATING_COLUMNS),
        cross_fit=cross_fit,
        study_criteria=config.criteria,
        cross_fit_differences=cross_fit_differences,
        pairs=pairs,
        pair_labels=pair_labels,
    )


PAIR_LABEL_COLUMNS = ["criterion", "context_id", "system_a", "system_b", "label_diff"]


def _net_preferences(choices, judged: dict[int, JudgedItem]) -> pd.DataFrame:
    """Each compared pair's net preference for its first response per criterion (the mean of the choices' values,
    ``StudySetup.compared_choices``), with the two responses' systems."""
    table = pd.DataFrame([tuple(c) for c in choices],
                         columns=["criterion", "context_id", "response_a", "response_b", "value"])
    if table.empty:
        return pd.DataFrame(columns=PAIR_LABEL_COLUMNS)
    means = table.groupby(["criterion", "context_id", "response_a", "response_b"], as_index=False)["value"].mean()
    return pd.DataFrame({"criterion": means["criterion"], "context_id": means["context_id"],
                         "system_a": [judged[r].system for r in means["response_a"]],
                         "system_b": [judged[r].system for r in means["response_b"]],
                         "label_diff": means["value"].astype(float)})
