"""`empeval study sample NAME`: the active draw of a Likert or A/B study with design.sampling = "active", wired from
the rooms: the judges' stored scores (server.backend.judges.scores; an A/B study's judges of differences' verdicts,
server.backend.judges.pair_scores), checked complete; each context's uncertainty and probability
(analysis.stats.ppi.active_draw: square-root rule scaled to human_share x contexts, mixed with uniform); the draw
itself, in one transaction (tasks.kinds.likert_active).

An A/B study's uncertainty is its judges of differences' disagreement: each verdict (A's advantage over B, oriented
to the pair's sorted-first system) standardised per judge and criterion, the variance across judges per pair and
criterion, averaged over the context's pairs and criteria (``context_uncertainty`` with a pair in the place of a
system). One judge of differences alone gives uniform probabilities, and says so. The two-phase design is a Likert
study's: ``burn_in`` is refused for an A/B study.

With ``burn_in`` (a share; `empeval study sample --burn-in SHARE`) the draw is the two-phase design of
analysis.stats.ppi.active_phases: the first run draws a uniform burn-in of ``burn_in`` x the budget; once its
ratings are in, the second run fits the residual model on them and draws the rest (``draw_second_phase``); a third
run changes nothing. The residual model's features, per context and over the judges the burn-in named: the square
root of their uncertainty (``context_uncertainty``: their disagreement, or a learned judge's fold spread), per judge
the mean distance of its standardised scores from the middle and their spread across the systems, and the log of the
responses' mean length. Its targets: per criterion the paired differences of the systems' labels (each item's label
on its own with one system), predicted by the same differences of the judges' mean standardised scores. A study
whose burn-in would hold fewer than ``MIN_BURN_IN_CONTEXTS`` contexts (too few for the model) gets the single draw
on the judges' uncertainty, as does ``burn_in=None``, the default: on our simulated studies
(benchmarks/paid_ratings.py, issue 28's note) the residual model saved no paid ratings over the single draw (0-1% at
judge-human difference correlations 0.5-0.9; an oracle that knows each context's error variance saves at most 4%),
while it asks researchers for a second run after the burn-in's ratings. It is there for studies where something
besides the judges' disagreement predicts their errors."""
from __future__ import annotations

import itertools
from collections.abc import Sequence

import numpy as np
import pandas as pd
from sqlalchemy import Engine

from empeval.analysis.stats.ppi.active_draw import DEFAULT_TAU, context_uncertainty, sampling_probabilities
from empeval.analysis.stats.ppi.active_phases import (
    DEFAULT_FOLDS,
    burn_in_probability,
    two_phase_probabilities,
)
from empeval.server.backend.judges.pair_scores import judge_pair_scores, pair_judges
from empeval.server.backend.judges.scores import judge_scores, study_judges
from empeval.server.errors import BadInput
from empeval.tasks.kinds.likert_active import (
    BURN_IN,
    ActiveDesign,
    ActiveDraw,
    BurnIn,
    SecondPhasePlan,
    active_design,
    draw_active_sample,
    draw_second_phase,
    folds_of,
)

#: The fewest contexts an expected burn-in may hold for the two-phase design (each fold's model is fitted on about
#: four fifths of it and needs analysis.stats.ppi.active_phases.MIN_RESIDUAL_CONTEXTS).
MIN_BURN_IN_CONTEXTS = 30


def sample_study(engine: Engine, study: str, *, judges: Sequence[str] | None = None, seed: int | None = None,
                 tau: float = DEFAULT_TAU, burn_in: float | None = None) -> ActiveDraw:
    """Draw the active sample of `study` (module docstring) from the scores of `judges` (default: every judge that
    scored it), each at its latest version; `seed` defaults to the design's (phase 2: to the burn-in's). With a
    `burn_in` share (0.3, say) the first call draws the uniform burn-in and the next one phase 2;
    `burn_in` None (the default), or a study too small for a burn-in, draws once on the judges' uncertainty mixed
    with uniform by `tau`. A study drawn before (in full) is returned as it is (``new`` False), whatever the
    judges say now. BadInput, before anything is written, when the study is not actively sampled, when no judge
    scored it, when a judge has not scored every item on every criterion (naming the judge, how many are missing,
    the first, and the command that scores them), or, for phase 2, while the burn-in's ratings are not complete."""
    design = active_design(engine, study)
    if design.drawn is not None:
        if design.drawn.phase == BURN_IN:
            return _second_phase(engine, design, seed)
        return design.drawn
    if design.pairs:
        return _sample_pairs(engine, design, judges=judges, seed=seed, tau=tau, burn_in=burn_in)
    names = list(dict.fromkeys(judges)) if judges else study_judges(engine, study)
    if not names:
        raise BadInput(f"no judge has scored study {study!r}: run `empeval judge {study} --judges NAME,...` first "
                       "(two judges or more, so that their disagreement can guide the draw), then sample again")
    scores = _complete_scores(engine, design, names)
    budget = design.human_share * len(design.contexts)
    if burn_in is not None and burn_in * budget >= MIN_BURN_IN_CONTEXTS:
        p1 = burn_in_probability(budget, len(design.contexts), burn_in)
        return draw_active_sample(
            engine, study, dict.fromkeys(design.contexts, p1), judges=names, tau=tau, seed=seed, phase=BURN_IN,
            basis=f"uniform: the burn-in of the two-phase design ({burn_in:.0%} of the {budget:.1f} expected)",
            detail={"burn_in": burn_in, "p1": p1, "folds": DEFAULT_FOLDS})
    uncertainty = context_uncertainty(scores)
    pi = sampling_probabilities(uncertainty["uncertainty"].to_numpy(), budget, tau=tau)
    probabilities = {int(cid): float(p) for cid, p in zip(uncertainty["context_id"], pi, strict=True)}
    basis = uncertainty.attrs["basis"]
    if burn_in is not None:
        basis += (f"; drawn in one go: a burn-in of {burn_in:.0%} would hold {burn_in * budget:.1f} contexts, the "
                  f"residual model needs {MIN_BURN_IN_CONTEXTS}")
    return draw_active_sample(engine, study, probabilities, basis=basis, judges=names, tau=tau, seed=seed)


def _sample_pairs(engine: Engine, design: ActiveDesign, *, judges: Sequence[str] | None, seed: int | None,
                  tau: float, burn_in: float | None) -> ActiveDraw:
    """An A/B study's draw (module docstring): every named judge of differences' verdicts, checked complete, their
    disagreement per context, the probabilities, the draw."""
    study = design.study
    if burn_in is not None:
        raise BadInput(f"study {study!r} is an A/B study; the two-phase design (--burn-in) is a Likert study's: "
                       "sample it without --burn-in")
    names = list(dict.fromkeys(judges)) if judges else sorted(pair_judges(engine, study))
    if not names:
        raise BadInput(f"no judge of differences has compared the pairs of study {study!r}: run `empeval judge "
                       f"{study} --judges NAME,...` with pairwise-http-judge judges first (two or more, so that "
                       "their disagreement can guide the draw), then sample again")
    tables = []
    for name in names:
        verdicts = judge_pair_scores(engine, study, name)
        _check_pairs_complete(verdicts, design, name)
        flip = verdicts["system_a"] > verdicts["system_b"]
        tables.append(pd.DataFrame({
            "judge": name, "context_id": verdicts["context_id"].astype(int), "criterion": verdicts["criterion"],
            "system": [f"{min(a, b)}|{max(a, b)}" for a, b in zip(verdicts["system_a"], verdicts["system_b"],
                                                                   strict=True)],
            "judge_score": verdicts["judge_diff"].where(~flip, -verdicts["judge_diff"])}))
    uncertainty = context_uncertainty(pd.concat(tables, ignore_index=True))
    pi = sampling_probabilities(uncertainty["uncertainty"].to_numpy(), design.human_share * len(design.contexts),
                                tau=tau)
    probabilities = {int(cid): float(p) for cid, p in zip(uncertainty["context_id"], pi, strict=True)}
    return draw_active_sample(engine, study, probabilities, basis=uncertainty.attrs["basis"], judges=names, tau=tau,
                              seed=seed)


def _check_pairs_complete(verdicts: pd.DataFrame, design: ActiveDesign, judge: str) -> None:
    """BadInput unless `judge` has a verdict on every (context, pair, criterion) of the design."""
    def key(row) -> tuple[int, tuple[str, str], str]:
        a, b = row.system_a, row.system_b
        return int(row.context_id), (a, b) if a <= b else (b, a), row.criterion

    gap = _first_gap({key(row) for row in verdicts.itertuples() if pd.notna(row.judge_diff)},
                     {key(row) for row in verdicts.itertuples() if pd.isna(row.judge_diff)}, design, design.pairs)
    if gap is not None:
        missing, total, (cid, pair, criterion), failed = gap
        why = "the judge failed on it" if failed else "the judge never compared it"
        raise BadInput(f"judge {judge!r} has not compared every pair of study {design.study!r}: {missing} of "
                       f"{total} pair-criterion verdicts are missing (first: {pair[0]} vs {pair[1]}, context "
                       f"{design.contexts[cid]}, criterion {criterion!r}: {why}); the draw's probabilities need "
                       f"every pair compared: run `empeval judge {design.study} --judges {judge}` (it retries "
                       "failures), then sample again")


def _complete_scores(engine: Engine, design: ActiveDesign, names: Sequence[str]) -> pd.DataFrame:
    """Every named judge's scores of the study, with a ``judge`` column; BadInput unless each is complete."""
    tables = []
    for name in names:
        scores = judge_scores(engine, design.study, name)
        _check_complete(scores, design, name)
        tables.append(scores.assign(judge=name))
    return pd.concat(tables, ignore_index=True)


def _second_phase(engine: Engine, design: ActiveDesign, seed: int | None) -> ActiveDraw:
    """Phase 2: the judges of the burn-in, read before the draw's transaction; the residual model inside it."""
    assert design.drawn is not None
    names = list(design.drawn.judges) or study_judges(engine, design.study)
    scores = _complete_scores(engine, design, names)

    def planner(burn: BurnIn) -> SecondPhasePlan:
        ids = sorted(burn.contexts)
        features, names_of_features = _context_features(scores, ids, burn.lengths)
        labels, judged = _targets(burn.labels, scores, ids, design)
        p1 = float(burn.phase_one["p1"])
        n_folds = int(burn.phase_one.get("folds", DEFAULT_FOLDS))
        folds = np.asarray(folds_of([burn.contexts[cid] for cid in ids], int(burn.phase_one["seed"]), n_folds))
        try:
            result = two_phase_probabilities(features, labels, judged, folds, burn_in_probability=p1,
                                             budget=design.human_share * len(ids))
        except ValueError as error:
            raise BadInput(f"study {design.study!r}: phase 2's probabilities cannot be computed: {error}") from None
        return SecondPhasePlan(
            probability={cid: float(p) for cid, p in zip(ids, result.probability, strict=True)},
            phase_two={cid: float(q) for cid, q in zip(ids, result.phase_two, strict=True)},
            basis=result.basis, detail={"p1": p1, "taus": list(result.taus), "features": names_of_features})

    return draw_second_phase(engine, design.study, planner, seed=seed)


def _standardised(scores: pd.DataFrame) -> pd.DataFrame:
    """The scores with ``z``: standardised per judge and criterion (0 where a judge's scores do not vary)."""
    table = scores.loc[scores["judge_score"].notna()].copy()
    table["context_id"] = table["context_id"].astype(int)
    grouped = table.groupby(["judge", "criterion"], observed=True)["judge_score"]
    sd = grouped.transform(lambda s: s.std(ddof=1))
    table["z"] = ((table["judge_score"] - grouped.transform("mean")) / sd.where(sd > 0)).fillna(0.0)
    return table


def _context_features(scores: pd.DataFrame, ids: list[int], lengths: dict[int, float]) -> tuple[np.ndarray, list]:
    """Per context (rows in `ids` order) the residual model's features (module docstring), and their names."""
    uncertainty = context_uncertainty(scores.assign(context_id=scores["context_id"].astype(int))).set_index(
        "context_id")["uncertainty"].reindex(ids).fillna(0.0)
    columns = {"sqrt uncertainty": np.sqrt(uncertainty.to_numpy(dtype=float))}
    table = _standardised(scores)
    for judge, part in table.groupby("judge", sort=True):
        extremity = part["z"].abs().groupby(part["context_id"]).mean()
        spread = part.groupby(["context_id", "criterion"])["z"].std(ddof=0).groupby(level="context_id").mean()
        columns[f"{judge}: mean |z|"] = extremity.reindex(ids).fillna(0.0).to_numpy(dtype=float)
        columns[f"{judge}: spread over systems"] = spread.reindex(ids).fillna(0.0).to_numpy(dtype=float)
    columns["log length"] = np.log1p(np.array([lengths.get(cid, 0.0) for cid in ids], dtype=float))
    return np.column_stack(list(columns.values())), list(columns)


def _targets(labels: list, scores: pd.DataFrame, ids: list[int], design: ActiveDesign) -> tuple[np.ndarray,
                                                                                                 np.ndarray]:
    """The residual model's target columns (module docstring): labels (NaN where not rated) and the judges' mean
    standardised prediction, contexts in `ids` order."""
    rated = pd.DataFrame(labels, columns=["context_id", "system", "criterion", "label"])
    predicted = _standardised(scores).groupby(["context_id", "system", "criterion"])["z"].mean()
    label = rated.set_index(["context_id", "system", "criterion"])["label"]
    out_labels, out_judged = [], []
    for criterion in design.criteria:
        item_label = {system: label.reindex([(cid, system, criterion) for cid in ids]).to_numpy(dtype=float)
                      for system in design.systems}
        item_judged = {system: predicted.reindex([(cid, system, criterion) for cid in ids]).fillna(0.0)
                       .to_numpy(dtype=float) for system in design.systems}
        pairs: list[tuple[str, str | None]] = [*itertools.combinations(design.systems, 2)] or [
            (system, None) for system in design.systems]
        for a, b in pairs:
            out_labels.append(item_label[a] - (item_label[b] if b else 0.0))
            out_judged.append(item_judged[a] - (item_judged[b] if b else 0.0))
    return np.column_stack(out_labels), np.column_stack(out_judged)


def _check_complete(scores: pd.DataFrame, design: ActiveDesign, judge: str) -> None:
    """BadInput unless `judge` has a score for every (context, system, criterion) of the design."""
    scored, unscored = scores.loc[scores["judge_score"].notna()], scores.loc[scores["judge_score"].isna()]
    gap = _first_gap(set(zip(scored["context_id"].astype(int), scored["system"], scored["criterion"], strict=True)),
                     set(zip(unscored["context_id"].astype(int), unscored["system"], unscored["criterion"],
                             strict=True)), design, design.systems)
    if gap is not None:
        missing, total, (cid, system, criterion), failed = gap
        why = "the judge failed on it" if failed else "the judge never scored it"
        raise BadInput(f"judge {judge!r} has not scored every item of study {design.study!r}: {missing} of "
                       f"{total} item-criterion pairs lack a score (first: system {system!r}, context "
                       f"{design.contexts[cid]}, criterion {criterion!r}: {why}); the draw's probabilities need "
                       f"every item judged: run `empeval judge {design.study} --judges {judge}` (it retries "
                       "failures), then sample again")


def _first_gap(have: set, failed: set, design: ActiveDesign, units: Sequence) -> tuple[int, int, tuple, bool] | None:
    """What a judge lacks of the (context, unit, criterion) triples the design needs (units: its systems, or an A/B
    study's pairs), `have` the ones it gave a value and `failed` the ones it failed on: how many are missing, of how
    many, the first (contexts in id order) and whether the judge failed on it; None when nothing is missing."""
    missing = [(cid, unit, criterion) for cid in sorted(design.contexts) for unit in units
               for criterion in design.criteria if (cid, unit, criterion) not in have]
    if not missing:
        return None
    return len(missing), len(design.contexts) * len(units) * len(design.criteria), missing[0], missing[0] in failed
