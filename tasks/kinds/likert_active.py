"""Active sampling's draw for a Likert study with design.sampling = "active" (analysis.stats.ppi.active).

Such a study is created with every context's items, for the judges, and no assignment. Once the judges have
scored every item, `empeval study sample NAME` (entry: empeval.sampling) computes each context's probability from
their uncertainty and hands it here, where the draw happens in ONE transaction:

* the study row is locked (SELECT ... FOR UPDATE on PostgreSQL; SQLite's BEGIN IMMEDIATE takes the write lock
  up front), and a study already drawn is left as it is: a second run, or a second process at the same moment,
  finds the first draw and changes nothing;
* each context is drawn independently with its probability (Poisson sampling), by
  ``random.Random(f"active-sample:{seed}")`` over the contexts' keys ("conv_id#n_turns") in sorted order, so that
  the same probabilities and seed draw the same contexts in any store;
* every study_context row gets its ``inclusion_probability`` (the estimator weights by its inverse) and
  ``human_rated`` (drawn or not);
* the drawn contexts' items get their assignments (tasks.kinds.likert.write_assignments: k distinct annotators
  per response, the study's controls interleaved), so the hand-out follows the probabilities by construction:
  only drawn contexts have work;
* the draw is logged in the study's log (event ``active-draw``: counts, seed, the uncertainty's basis, the judges).
"""
from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Engine, select
from sqlalchemy.orm import Session

from empeval.server.errors import BadInput
from empeval.server.store.engine import unit_of_work
from empeval.server.store.kinds.likert import ACTIVE_SAMPLING, LikertSetup, StudyContext, StudyItem
from empeval.server.store.models import Context, Dialogue, Response, Study, StudyLogEntry, System, utcnow
from empeval.server.store.queries import study_by_name
from empeval.tasks.design import Candidate
from empeval.tasks.kinds.likert import write_assignments
from empeval.tasks.kinds.likert_human_share import MIN_HUMAN_CONTEXTS

#: The study-log event of an active draw.
ACTIVE_DRAW = "active-draw"


@dataclass(frozen=True)
class ActiveDesign:
    """What an active draw needs to know of a study: its contexts (id -> key "conv_id#n_turns"), systems, criteria,
    the expected share and the draw's default seed; and the draw already made, if any."""

    study: str
    contexts: dict[int, str]
    systems: tuple[str, ...]
    criteria: tuple[str, ...]
    human_share: float
    seed: int
    drawn: ActiveDraw | None


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

    def describe(self) -> str:
        """One sentence for the researcher.

        >>> print(ActiveDraw("s", True, 30, 11, 12.0, 14, 4, "from the disagreement of judges a, b",
        ...                ("a", "b"))
        ...       .describe())  # doctest: +NORMALIZE_WHITESPACE
        study s: drew 11 of 30 contexts for people (12.0 expected; probabilities from the disagreement of judges a,
        b; seed 4): 14 assignments written
        """
        what = (f"{self.n_drawn} of {self.n_contexts} contexts for people ({self.expected:.1f} expected; "
                f"probabilities {self.basis}; seed {self.seed})")
        if self.new:
            return f"study {self.study}: drew {what}: {self.assignments} assignments written"
        return f"study {self.study} was drawn already, nothing changed: {what}, {self.assignments} assignments"


def active_design(engine: Engine, study: str) -> ActiveDesign:
    """The study's active design, read in one transaction: NotFound for no such study, BadInput when it is not a
    Likert study with design.sampling = "active" (naming what it is and what to do)."""
    with unit_of_work(engine) as session:
        row = study_by_name(session, study)
        setup = _active_setup(row)
        contexts = _context_keys(session, row.id)
        drawn = _previous_draw(session, row, contexts)
        assert setup.human_share is not None
        return ActiveDesign(study=study, contexts=contexts, systems=tuple(row.config.systems),
                            criteria=tuple(c.key for c in row.config.criteria),
                            human_share=setup.human_share, seed=_default_seed(row), drawn=drawn)


def draw_poisson(keys: Sequence[str], probabilities: Sequence[float], seed: int) -> list[bool]:
    """Whether each context (by key, with its probability) is drawn: independently, drawn when the next number of
    ``random.Random(f"active-sample:{seed}")`` over the keys in sorted order is below its probability. The same
    keys, probabilities and seed give the same draw in any order and any store.

    >>> draw_poisson(["b", "a", "c"], [0.5, 0.0, 1.0], seed=1)
    [True, False, True]
    >>> draw_poisson(["a", "b", "c"], [0.0, 0.5, 1.0], seed=1)
    [False, True, True]
    """
    if len(keys) != len(probabilities):
        raise ValueError("one probability per key")
    by_key = dict(zip(keys, probabilities, strict=True))
    rng = random.Random(f"active-sample:{seed}")
    drawn = {key: rng.random() < by_key[key] for key in sorted(by_key)}
    return [drawn[key] for key in keys]


def draw_active_sample(engine: Engine, study: str, probabilities: Mapping[int, float], *, basis: str,
                       judges: Sequence[str], tau: float, seed: int | None = None) -> ActiveDraw:
    """Draw the study's active sample with ``probabilities`` (context id -> probability, one for every context of
    the study, in (0, 1]) in one transaction, as the module docstring says; ``seed`` defaults to the design's
    (design.human_share_seed, else the study's). Returns the draw; a study drawn before is returned unchanged
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
        plan = _write_drawn_assignments(session, row, setup, drawn)
        detail = {"n_contexts": len(ids), "n_drawn": len(drawn), "expected": round(expected, 6),
                  "assignments": len(plan), "seed": seed, "tau": tau, "basis": basis, "judges": list(judges)}
        session.add(StudyLogEntry(study_id=row.id, event=ACTIVE_DRAW, annotator_id=None, at=utcnow(), detail=detail))
        return ActiveDraw(study=study, new=True, n_contexts=len(ids), n_drawn=len(drawn), expected=expected,
                          assignments=len(plan), seed=seed, basis=basis, judges=tuple(judges))


def _active_setup(row: Study) -> LikertSetup:
    setup = row.config.setup
    if not isinstance(setup, LikertSetup):
        raise BadInput(f"study {row.name!r} is a {setup.label} study; active sampling is a Likert study's design "
                       "(design.sampling = \"active\" with design.human_share)")
    if setup.sampling != ACTIVE_SAMPLING or setup.human_share is None:
        raise BadInput(f"study {row.name!r} is not actively sampled (design.sampling is {setup.sampling!r}"
                       + (", with no design.human_share" if setup.human_share is None else
                          ": its uniform sample was drawn when it was created")
                       + "); create a study with design.human_share and design.sampling = \"active\" to draw one")
    return setup


def _default_seed(row: Study) -> int:
    setup = row.config.setup
    assert isinstance(setup, LikertSetup)
    return setup.human_share_seed if setup.human_share_seed is not None else row.seed


def _context_keys(session: Session, study_id: int) -> dict[int, str]:
    rows = session.execute(select(StudyContext.context_id, Dialogue.conv_id, Context.n_turns)
                           .join(Context, Context.id == StudyContext.context_id)
                           .join(Dialogue, Dialogue.id == Context.dialogue_id)
                           .where(StudyContext.study_id == study_id)).all()
    return {cid: f"{conv}#{n}" for cid, conv, n in rows}


def _previous_draw(session: Session, row: Study, contexts: Mapping[int, str]) -> ActiveDraw | None:
    """The draw made before, read from study_context and the study log; None when none was made."""
    recorded: list[tuple[bool, float]] = [(bool(rated), float(p or 0.0)) for rated, p in session.execute(
        select(StudyContext.human_rated, StudyContext.inclusion_probability)
        .where(StudyContext.study_id == row.id, StudyContext.inclusion_probability.is_not(None))).all()]
    if not recorded:
        return None
    entry = session.scalar(select(StudyLogEntry).where(StudyLogEntry.study_id == row.id,
                                                       StudyLogEntry.event == ACTIVE_DRAW)
                           .order_by(StudyLogEntry.id.desc()))
    detail: dict[str, Any] = dict(entry.detail) if entry is not None else {}
    return ActiveDraw(study=row.name, new=False, n_contexts=len(contexts),
                      n_drawn=len([rated for rated, _ in recorded if rated]),
                      expected=float(sum(p for _, p in recorded)), assignments=int(detail.get("assignments", 0)),
                      seed=int(detail.get("seed", _default_seed(row))), basis=str(detail.get("basis", "?")),
                      judges=tuple(detail.get("judges", ())))


def _write_drawn_assignments(session: Session, row: Study, setup: LikertSetup, drawn: set[int]) -> list[Any]:
    """The assignments of the drawn contexts' items (every system's), with the study's controls."""
    spec = row.config
    items = session.execute(select(StudyItem, Response.context_id)
                            .join(Response, Response.id == StudyItem.response_id)
                            .where(StudyItem.study_id == row.id)).all()
    study_items: dict[Any, StudyItem] = {item.response_id: item for item, _ in items}
    rated = [Candidate(key=item.response_id, context=cid, system=item.design["system"])
             for item, cid in items if not item.is_control and cid in drawn]
    rated.sort(key=lambda c: (c.context, spec.systems.index(c.system)))
    control_responses: dict[int, dict[str, int | None]] = {cid: {} for cid in drawn}
    for name in spec.controls:
        system_id = session.scalar(select(System.id).where(System.name == name)
                                   .order_by(System.created_at.desc(), System.id.desc()))
        if system_id is None:
            continue
        for response_id, cid in session.execute(select(Response.id, Response.context_id)
                                                .where(Response.system_id == system_id,
                                                       Response.context_id.in_(drawn))).all():
            control_responses[cid][name] = response_id
    plan, _ = write_assignments(session, spec, row, rated, control_responses, study_items)
    return plan
