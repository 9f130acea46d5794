"""Active sampling's draw for a study with design.sampling = "active" (analysis.stats.ppi.active): a Likert study,
or an A/B study (the kinds whose human share is drawn, their setups' `sampling`).

Such a study is created with every context's items (an A/B study's: its pairs), for the judges, and no assignment.
Once the judges have scored every item (an A/B study's judges of differences: compared every pair), `empeval study
sample NAME` (entry: empeval.sampling) computes each context's probability from their uncertainty and hands it
here, where the draw happens in ONE transaction:

* the study row is locked (SELECT ... FOR UPDATE on PostgreSQL; SQLite's BEGIN IMMEDIATE takes the write lock
  up front), and a study already drawn is left as it is: a second run, or a second process at the same moment,
  finds the first draw and changes nothing;
* each context is drawn independently with its probability (Poisson sampling), by
  ``random.Random(f"active-sample:{seed}")`` over the contexts' keys ("conv_id#n_turns") in sorted order, so that
  the same probabilities and seed draw the same contexts in any store;
* every study_context row gets its ``inclusion_probability`` (the estimator weights by its inverse) and
  ``human_rated`` (drawn or not);
* the drawn contexts' units get their assignments, written by the study's kind (TaskKind.write_drawn: a Likert
  study's items k distinct annotators per response, an A/B study's pairs k judgments per (context, pair) with
  left/right counterbalanced; the study's controls interleaved), so the hand-out follows the probabilities by
  construction: only drawn contexts have work;
* the draw is logged in the study's log (event ``active-draw``: counts, seed, the uncertainty's basis, the judges).

The two-phase design (analysis.stats.ppi.active_phases; Likert studies) runs the same way twice. Phase 1
(``BURN_IN``) is an active draw whose probabilities are all p1 (a uniform burn-in of a share of the budget); its log
entry's detail holds ``phase`` 1, the burn-in share, p1 and the number of folds. Phase 2 (``SECOND_PHASE``,
``draw_second_phase``) is one more transaction, once the burn-in's ratings are in: the study row locked as above, a
study whose phase 2 was drawn left as it is; refused while a burn-in item has fewer than k raters; the burn-in's
labels (mean rating per item and criterion) and the responses' lengths read in the same transaction and handed to
the caller's planner, which returns each context's overall probability p1 + (1 - p1) q and phase-2 probability q;
every context not drawn in phase 1 is drawn with its q (``draw_poisson`` on its own stream, "active-sample-2");
every study_context row gets its overall probability (the weight's inverse) and human_rated (drawn in either phase);
the phase-2 contexts' assignments are written after the burn-in's in hand-out order; the log entry has ``phase`` 2,
the phase-2 contexts and the model's basis. Which phase drew a context: the burn-in's contexts are the phase-1
entry's ``drawn``, redrawn by ``draw_poisson`` from the keys, p1 and the seed; the rest of the rated ones are phase
2's (its entry's ``drawn``).
"""
from __future__ import annotations

import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Engine, func, select, update
from sqlalchemy.orm import Session

from empeval.server.annotation.study_log import ACTIVE_DRAW as STUDY_LOG_ACTIVE_DRAW
from empeval.server.errors import BadInput
from empeval.server.store.engine import unit_of_work
from empeval.server.store.kinds.likert import ACTIVE_SAMPLING, LikertSetup, Rating, StudyContext, StudyItem
from empeval.server.store.kinds.pairwise import PairwiseSetup
from empeval.server.store.models import Assignment, Context, Dialogue, Response, Study, StudyLogEntry, utcnow
from empeval.server.store.queries import study_by_name
from empeval.tasks.kinds import task_kind
from empeval.tasks.kinds.likert_human_share import MIN_HUMAN_CONTEXTS

#: The study-log event of an active draw (named once, in the server's study log: the decisions read it too).
ACTIVE_DRAW = STUDY_LOG_ACTIVE_DRAW
#: The phases of the two-phase design, as its log entries record them (a single draw records none: ``SINGLE``).
SINGLE, BURN_IN, SECOND_PHASE = 0, 1, 2


@dataclass(frozen=True)
class ActiveDesign:
    """What an active draw needs to know of a study: its contexts (id -> key "conv_id#n_turns"), systems, criteria,
    the expected share and the draw's default seed; and the draw already made, if any; an A/B study's pairs of
    systems (sorted names; empty for a Likert study)."""

    study: str
    contexts: dict[int, str]
    systems: tuple[str, ...]
    criteria: tuple[str, ...]
    human_share: float
    seed: int
    drawn: ActiveDraw | None
    pairs: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class ActiveDraw:
    """An active draw: whether this call made it (``new``; False: it was made before and nothing changed), the
    contexts, how many were drawn against the expected number, the assignments written, the seed, what the
    probabilities followed and the judges they came from."""

    study: str
    new: bool
    n_contexts: int
    n_drawn: int
    expected: float
    assignments: int
    seed: int
    basis: str
    judges: tuple[str, ...]
    phase: int = SINGLE

    def describe(self) -> str:
        """One sentence for the researcher (two for a burn-in: what comes next).

        >>> print(ActiveDraw("s", True, 30, 11, 12.0, 14, 4, "from the disagreement of judges a, b",
        ...                ("a", "b"))
        ...       .describe())  # doctest: +NORMALIZE_WHITESPACE
        study s: drew 11 of 30 contexts for people (12.0 expected; probabilities from the disagreement of judges a,
        b; seed 4): 14 assignments written
        >>> print(ActiveDraw("s", True, 30, 4, 3.6, 5, 4, "uniform: the burn-in", ("a",), BURN_IN)
        ...       .describe())  # doctest: +NORMALIZE_WHITESPACE
        study s: drew the burn-in, 4 of 30 contexts for people (3.6 expected; probabilities uniform: the burn-in;
        seed 4): 5 assignments written. Once their ratings are in, run `empeval study sample s` again: it fits the
        residual model on them and draws the rest
        >>> print(ActiveDraw("s", True, 30, 5, 12.0, 6, 4, "from a residual model", ("a",), SECOND_PHASE)
        ...       .describe())  # doctest: +NORMALIZE_WHITESPACE
        study s: drew phase 2, 5 more of 30 contexts for people (12.0 expected in both phases; probabilities from a
        residual model; seed 4): 6 assignments written
        """
        label, more, both = {SINGLE: ("", "", ""), BURN_IN: ("the burn-in, ", "", ""),
                             SECOND_PHASE: ("phase 2, ", "more ", " in both phases")}[self.phase]
        what = (f"{label}{self.n_drawn} {more}of {self.n_contexts} contexts for people ({self.expected:.1f} expected"
                f"{both}; probabilities {self.basis}; seed {self.seed})")
        if not self.new:
            return f"study {self.study} was drawn already, nothing changed: {what}, {self.assignments} assignments"
        done = f"study {self.study}: drew {what}: {self.assignments} assignments written"
        if self.phase == BURN_IN:
            return (f"{done}. Once their ratings are in, run `empeval study sample {self.study}` again: it fits the "
                    "residual model on them and draws the rest")
        return done


def active_design(engine: Engine, study: str) -> ActiveDesign:
    """The study's active design, read in one transaction: NotFound for no such study, BadInput when it is not a
    Likert study with design.sampling = "active" (naming what it is and what to do)."""
    with unit_of_work(engine) as session:
        row = study_by_name(session, study)
        setup = _active_setup(row)
        contexts = _context_keys(session, row.id)
        drawn = _previous_draw(session, row, contexts)
        assert setup.human_share is not None
        pairs = tuple((p.first, p.second) if p.first <= p.second else (p.second, p.first)
                      for p in setup.pairs) if isinstance(setup, PairwiseSetup) else ()
        return ActiveDesign(study=study, contexts=contexts, systems=tuple(row.config.systems),
                            criteria=tuple(c.key for c in row.config.criteria),
                            human_share=setup.human_share, seed=_default_seed(row), drawn=drawn,
                            pairs=pairs)


def draw_poisson(keys: Sequence[str], probabilities: Sequence[float], seed: int, *,
                 stream: str = "active-sample") -> list[bool]:
    """Whether each context (by key, with its probability) is drawn: independently, drawn when the next number of
    ``random.Random(f"{stream}:{seed}")`` over the keys in sorted order is below its probability. The same
    keys, probabilities and seed give the same draw in any order and any store (a second phase draws on its own
    ``stream``).

    >>> draw_poisson(["b", "a", "c"], [0.5, 0.0, 1.0], seed=1)
    [True, False, True]
    >>> draw_poisson(["a", "b", "c"], [0.0, 0.5, 1.0], seed=1)
    [False, True, True]
    """
    if len(keys) != len(probabilities):
        raise ValueError("one probability per key")
    by_key = dict(zip(keys, probabilities, strict=True))
    rng = random.Random(f"{stream}:{seed}")
    drawn = {key: rng.random() < by_key[key] for key in sorted(by_key)}
    return [drawn[key] for key in keys]


def folds_of(keys: Sequence[str], seed: int, n_folds: int) -> list[int]:
    """Each context's fold (0..n_folds-1) for the two-phase design's residual model: the keys in sorted order
    shuffled by ``random.Random(f"active-folds:{seed}")`` and dealt round. A function of the keys and the seed
    alone, so fixed before the burn-in is drawn.

    >>> folds_of(["c", "a", "b", "d"], seed=1, n_folds=2)
    [1, 0, 0, 1]
    """
    order = sorted(keys)
    random.Random(f"active-folds:{seed}").shuffle(order)
    fold = {key: position % n_folds for position, key in enumerate(order)}
    return [fold[key] for key in keys]


def draw_active_sample(engine: Engine, study: str, probabilities: Mapping[int, float], *, basis: str,
                       judges: Sequence[str], tau: float, seed: int | None = None, phase: int = SINGLE,
                       detail: Mapping[str, Any] | None = None) -> ActiveDraw:
    """Draw the study's active sample with ``probabilities`` (context id -> probability, one for every context of
    the study, in (0, 1]) in one transaction, as the module docstring says; ``seed`` defaults to the design's
    (design.human_share_seed, else the study's). ``phase`` ``BURN_IN`` marks it as the two-phase design's uniform
    burn-in, and ``detail`` adds to the log entry's. Returns the draw; a study drawn before is returned unchanged
    (``new`` False). BadInput when the study is not actively sampled, when the probabilities do not match its
    contexts, or when the draw holds fewer than two contexts or all of them (nothing is written then)."""
    with unit_of_work(engine) as session:
        row = session.scalar(select(Study).where(Study.name == study).with_for_update())
        if row is None:
            study_by_name(session, study)  # NotFound, in the store's words
        assert row is not None
        setup = _active_setup(row)
        contexts = _context_keys(session, row.id)
        previous = _previous_draw(session, row, contexts)
        if previous is not None:
            return previous
        if set(probabilities) != set(contexts):
            raise BadInput(f"study {study!r}: the probabilities name {len(probabilities)} contexts, the study has "
                           f"{len(contexts)} (missing: {len(set(contexts) - set(probabilities))}, unknown: "
                           f"{len(set(probabilities) - set(contexts))})")
        bad = [cid for cid, p in probabilities.items() if not 0 < p <= 1]
        if bad:
            raise BadInput(f"study {study!r}: context {bad[0]}'s probability {probabilities[bad[0]]!r} is not in "
                           "(0, 1]: every context must have a chance of being drawn")
        seed = _default_seed(row) if seed is None else seed
        ids = sorted(contexts)
        chosen = draw_poisson([contexts[cid] for cid in ids], [probabilities[cid] for cid in ids], seed)
        drawn = {cid for cid, is_drawn in zip(ids, chosen, strict=True) if is_drawn}
        expected = float(sum(probabilities.values()))
        if not MIN_HUMAN_CONTEXTS <= len(drawn) < len(ids):
            raise BadInput(f"study {study!r}: the draw with seed {seed} holds {len(drawn)} of {len(ids)} contexts "
                           f"({expected:.1f} expected); prediction-powered inference needs at least "
                           f"{MIN_HUMAN_CONTEXTS} and at least one left to the judges alone: draw again with "
                           "another seed (`empeval study sample NAME --seed N`; nothing was written), or create the "
                           "study with another design.human_share")
        for context in session.scalars(select(StudyContext).where(StudyContext.study_id == row.id)):
            context.human_rated = context.context_id in drawn
            context.inclusion_probability = float(probabilities[context.context_id])
        written = task_kind(setup.kind).write_drawn(session, row, drawn)
        logged = {"n_contexts": len(ids), "n_drawn": len(drawn), "expected": round(expected, 6),
                  "assignments": written, "seed": seed, "tau": tau, "basis": basis, "judges": list(judges),
                  **({"phase": phase, "drawn": sorted(drawn)} if phase != SINGLE else {}), **(detail or {})}
        session.add(StudyLogEntry(study_id=row.id, event=ACTIVE_DRAW, annotator_id=None, at=utcnow(), detail=logged))
        return ActiveDraw(study=study, new=True, n_contexts=len(ids), n_drawn=len(drawn), expected=expected,
                          assignments=written, seed=seed, basis=basis, judges=tuple(judges), phase=phase)


@dataclass(frozen=True)
class BurnIn:
    """What phase 2's planner gets, read in the draw's transaction: the study's contexts (id -> key), the burn-in's
    contexts, its labels ((context id, system, criterion, label) tuples, the label the item's mean rating), each
    context's mean response length in characters (the study's real items), and the phase-1 log entry's detail
    (``burn_in``, ``p1``, ``folds``, ``seed``, ``judges``, ``tau``)."""

    study: str
    contexts: dict[int, str]
    burnt: frozenset[int]
    labels: list[tuple[int, str, str, float]]
    lengths: dict[int, float]
    phase_one: dict[str, Any]


@dataclass(frozen=True)
class SecondPhasePlan:
    """The planner's answer: each context's overall probability (the weight's inverse, p1 + (1 - p1) q) and its
    phase-2 probability q, and what they came from, in words; ``detail`` goes to the log entry."""

    probability: dict[int, float]
    phase_two: dict[int, float]
    basis: str
    detail: dict[str, Any]


def draw_second_phase(engine: Engine, study: str, planner: Callable[[BurnIn], SecondPhasePlan], *,
                      seed: int | None = None) -> ActiveDraw:
    """Phase 2 of the two-phase design in one transaction (module docstring): ``planner`` gets the burn-in's labels
    and returns the probabilities; ``seed`` defaults to the burn-in's. Returns the draw; a study whose phase 2 was
    drawn (or drawn in one go) is returned unchanged (``new`` False). BadInput, before anything is written, when
    the study has no burn-in, or when a burn-in item has fewer ratings than the design's k (naming how many, the
    first, and what to do)."""
    with unit_of_work(engine) as session:
        row = session.scalar(select(Study).where(Study.name == study).with_for_update())
        if row is None:
            study_by_name(session, study)
        assert row is not None
        setup = _active_setup(row)
        if not isinstance(setup, LikertSetup):
            raise BadInput(f"study {study!r} is a {setup.label} study; the two-phase design is a Likert study's")
        contexts = _context_keys(session, row.id)
        previous = _previous_draw(session, row, contexts)
        if previous is None:
            raise BadInput(f"study {study!r} has no burn-in yet: `empeval study sample {study}` draws it first")
        if previous.phase != BURN_IN:
            return previous
        entry = _last_draw_entry(session, row)
        assert entry is not None
        phase_one: dict[str, Any] = dict(entry.detail)
        burnt = frozenset(session.scalars(select(StudyContext.context_id).where(
            StudyContext.study_id == row.id, StudyContext.human_rated.is_(True))))
        labels = _burn_in_labels(session, row, setup, burnt, contexts)
        lengths = {cid: float(length) for cid, length in session.execute(
            select(Response.context_id, func.avg(func.length(Response.text)))
            .join(StudyItem, StudyItem.response_id == Response.id)
            .where(StudyItem.study_id == row.id, StudyItem.is_control.is_(False))
            .group_by(Response.context_id)).all()}
        plan = planner(BurnIn(study=study, contexts=contexts, burnt=burnt, labels=labels, lengths=lengths,
                              phase_one=phase_one))
        if set(plan.probability) != set(contexts) or set(plan.phase_two) != set(contexts):
            raise BadInput(f"study {study!r}: phase 2's probabilities must name every one of its {len(contexts)} "
                           "contexts")
        seed = int(phase_one.get("seed", _default_seed(row))) if seed is None else seed
        rest = sorted(set(contexts) - burnt)
        chosen = draw_poisson([contexts[cid] for cid in rest], [plan.phase_two[cid] for cid in rest], seed,
                              stream="active-sample-2")
        drawn = {cid for cid, is_drawn in zip(rest, chosen, strict=True) if is_drawn}
        for context in session.scalars(select(StudyContext).where(StudyContext.study_id == row.id)):
            context.human_rated = context.context_id in burnt or context.context_id in drawn
            context.inclusion_probability = float(plan.probability[context.context_id])
        # Phase 2's assignments come after the burn-in's in hand-out order.
        last_index = session.scalar(select(func.max(Assignment.design_index)).where(Assignment.study_id == row.id))
        last_id = session.scalar(select(func.max(Assignment.id)).where(Assignment.study_id == row.id))
        plan_written = task_kind(setup.kind).write_drawn(session, row, drawn)
        if last_id is not None and plan_written:
            session.execute(update(Assignment).where(Assignment.study_id == row.id, Assignment.id > last_id)
                            .values(design_index=Assignment.design_index + (last_index or 0) + 1))
        expected = float(sum(plan.probability.values()))
        judges = tuple(phase_one.get("judges", ()))
        logged = {"n_contexts": len(contexts), "n_drawn": len(drawn), "n_rated": len(burnt) + len(drawn),
                  "expected": round(expected, 6), "assignments": plan_written, "seed": seed, "basis": plan.basis,
                  "judges": list(judges), "phase": SECOND_PHASE, "drawn": sorted(drawn), **plan.detail}
        session.add(StudyLogEntry(study_id=row.id, event=ACTIVE_DRAW, annotator_id=None, at=utcnow(), detail=logged))
        return ActiveDraw(study=study, new=True, n_contexts=len(contexts), n_drawn=len(drawn), expected=expected,
                          assignments=plan_written, seed=seed, basis=plan.basis, judges=judges,
                          phase=SECOND_PHASE)


def _burn_in_labels(session: Session, row: Study, setup: LikertSetup, burnt: frozenset[int],
                    contexts: Mapping[int, str]) -> list[tuple[int, str, str, float]]:
    """The burn-in's labels, (context id, system, criterion, mean rating) per item and criterion; BadInput when an
    item of a burn-in context has fewer than k raters."""
    rows = session.execute(
        select(Response.context_id, StudyItem.design, Rating.criterion, Rating.annotator_id, Rating.score)
        .join(StudyItem, StudyItem.id == Rating.item_id).join(Response, Response.id == StudyItem.response_id)
        .where(StudyItem.study_id == row.id, StudyItem.is_control.is_(False), Response.context_id.in_(burnt))).all()
    raters: dict[tuple[int, str], set[int]] = {}
    scores: dict[tuple[int, str, str], list[int]] = {}
    for cid, design, criterion, annotator, score in rows:
        raters.setdefault((cid, design["system"]), set()).add(annotator)
        scores.setdefault((cid, design["system"], criterion), []).append(score)
    k = setup.ratings_per_response
    short = [(cid, system, len(raters.get((cid, system), ()))) for cid in sorted(burnt)
             for system in row.config.systems if len(raters.get((cid, system), ())) < k]
    if short:
        cid, system, have = short[0]
        total = len(burnt) * len(row.config.systems)
        raise BadInput(f"study {row.name!r}: the burn-in's ratings are not complete: {len(short)} of its {total} "
                       f"items have fewer than the design's {k} raters (first: context {contexts[cid]}, system "
                       f"{system!r}: {have} of {k}); phase 2's residual model learns from every burn-in item: "
                       "let the raters finish them (`empeval study status`), then sample again")
    return [(cid, system, criterion, sum(values) / len(values))
            for (cid, system, criterion), values in sorted(scores.items())]


def _active_setup(row: Study) -> LikertSetup | PairwiseSetup:
    """The study's setup when it is actively sampled (a Likert or A/B study with design.sampling = "active" and a
    human share); BadInput naming what it is otherwise."""
    setup = row.config.setup
    if not isinstance(setup, LikertSetup | PairwiseSetup):
        raise BadInput(f"study {row.name!r} is a {setup.label} study; active sampling is a Likert or A/B study's "
                       "design (design.sampling = \"active\" with design.human_share)")
    if setup.sampling != ACTIVE_SAMPLING or setup.human_share is None:
        raise BadInput(f"study {row.name!r} is not actively sampled (design.sampling is {setup.sampling!r}"
                       + (", with no design.human_share" if setup.human_share is None else
                          ": its uniform sample was drawn when it was created")
                       + "); create a study with design.human_share and design.sampling = \"active\" to draw one")
    return setup


def _default_seed(row: Study) -> int:
    setup = row.config.setup
    assert isinstance(setup, LikertSetup | PairwiseSetup)
    return setup.human_share_seed if setup.human_share_seed is not None else row.seed


def _context_keys(session: Session, study_id: int) -> dict[int, str]:
    rows = session.execute(select(StudyContext.context_id, Dialogue.conv_id, Context.n_turns)
                           .join(Context, Context.id == StudyContext.context_id)
                           .join(Dialogue, Dialogue.id == Context.dialogue_id)
                           .where(StudyContext.study_id == study_id)).all()
    return {cid: f"{conv}#{n}" for cid, conv, n in rows}


def _last_draw_entry(session: Session, row: Study) -> StudyLogEntry | None:
    return session.scalar(select(StudyLogEntry).where(StudyLogEntry.study_id == row.id,
                                                      StudyLogEntry.event == ACTIVE_DRAW)
                          .order_by(StudyLogEntry.id.desc()))


def _previous_draw(session: Session, row: Study, contexts: Mapping[int, str]) -> ActiveDraw | None:
    """The latest draw made before (its phase: the two-phase design's first or second, or a single draw), read
    from study_context and the study log; None when none was made."""
    recorded: list[tuple[bool, float]] = [(bool(rated), float(p or 0.0)) for rated, p in session.execute(
        select(StudyContext.human_rated, StudyContext.inclusion_probability)
        .where(StudyContext.study_id == row.id, StudyContext.inclusion_probability.is_not(None))).all()]
    if not recorded:
        return None
    entry = _last_draw_entry(session, row)
    detail: dict[str, Any] = dict(entry.detail) if entry is not None else {}
    return ActiveDraw(study=row.name, new=False, n_contexts=len(contexts),
                      n_drawn=int(detail.get("n_drawn", len([rated for rated, _ in recorded if rated]))),
                      expected=float(sum(p for _, p in recorded)), assignments=int(detail.get("assignments", 0)),
                      seed=int(detail.get("seed", _default_seed(row))), basis=str(detail.get("basis", "?")),
                      judges=tuple(detail.get("judges", ())), phase=int(detail.get("phase", SINGLE)))
