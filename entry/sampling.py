"""`empeval study sample NAME`: the active draw of a Likert study with design.sampling = "active", wired from the
rooms: the judges' stored scores (server.backend.judges.scores), checked complete; each context's uncertainty and
probability (analysis.stats.ppi.active: square-root rule scaled to human_share x contexts, mixed with uniform);
the draw itself, in one transaction (tasks.kinds.likert_active)."""
from __future__ import annotations

from collections.abc import Sequence

import pandas as pd
from sqlalchemy import Engine

from empeval.analysis.stats.ppi.active import DEFAULT_TAU, context_uncertainty, sampling_probabilities
from empeval.server.backend.judges.scores import judge_scores, study_judges
from empeval.server.errors import BadInput
from empeval.tasks.kinds.likert_active import ActiveDesign, ActiveDraw, active_design, draw_active_sample


def sample_study(engine: Engine, study: str, *, judges: Sequence[str] | None = None, seed: int | None = None,
                 tau: float = DEFAULT_TAU) -> ActiveDraw:
    """Draw the active sample of `study` from the scores of `judges` (default: every judge that scored it), each
    at its latest version; `seed` defaults to the design's. A study drawn before is returned as it is (``new``
    False), whatever the judges say now. BadInput, before anything is written, when the study is not actively
    sampled, when no judge scored it, or when a judge has not scored every item on every criterion (naming the
    judge, how many are missing, the first, and the command that scores them)."""
    design = active_design(engine, study)
    if design.drawn is not None:
        return design.drawn
    names = list(dict.fromkeys(judges)) if judges else study_judges(engine, study)
    if not names:
        raise BadInput(f"no judge has scored study {study!r}: run `empeval judge {study} --judges NAME,...` first "
                       "(two judges or more, so that their disagreement can guide the draw), then sample again")
    tables = []
    for name in names:
        scores = judge_scores(engine, study, name)
        _check_complete(scores, design, name)
        tables.append(scores.assign(judge=name))
    uncertainty = context_uncertainty(pd.concat(tables, ignore_index=True))
    budget = design.human_share * len(design.contexts)
    pi = sampling_probabilities(uncertainty["uncertainty"].to_numpy(), budget, tau=tau)
    probabilities = {int(cid): float(p) for cid, p in zip(uncertainty["context_id"], pi, strict=True)}
    return draw_active_sample(engine, study, probabilities, basis=uncertainty.attrs["basis"], judges=names, tau=tau,
                              seed=seed)


def _check_complete(scores: pd.DataFrame, design: ActiveDesign, judge: str) -> None:
    """BadInput unless `judge` has a score for every (context, system, criterion) of the design."""
    scored = scores.loc[scores["judge_score"].notna()]
    have = set(zip(scored["context_id"].astype(int), scored["system"], scored["criterion"], strict=True))
    failed = set(zip(scores.loc[scores["judge_score"].isna(), "context_id"].astype(int),
                     scores.loc[scores["judge_score"].isna(), "system"],
                     scores.loc[scores["judge_score"].isna(), "criterion"], strict=True))
    missing = [(cid, system, criterion) for cid in sorted(design.contexts) for system in design.systems
               for criterion in design.criteria if (cid, system, criterion) not in have]
    if missing:
        cid, system, criterion = missing[0]
        total = len(design.contexts) * len(design.systems) * len(design.criteria)
        why = "the judge failed on it" if (cid, system, criterion) in failed else "the judge never scored it"
        raise BadInput(f"judge {judge!r} has not scored every item of study {design.study!r}: {len(missing)} of "
                       f"{total} item-criterion pairs lack a score (first: system {system!r}, context "
                       f"{design.contexts[cid]}, criterion {criterion!r}: {why}); the draw's probabilities need "
                       f"every item judged: run `empeval judge {design.study} --judges {judge}` (it retries "
                       "failures), then sample again")
