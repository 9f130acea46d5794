"""The best-worst scaling kind in the tasks room: its study-file fields, its design, its simulated raters, its
crowd parts and its page.

A best-worst scaling study (Kiritchenko & Mohammad, ACL 2017): a rater sees one context with the responses of
`tuple_size` systems, labelled A, B, C, ... in the order shown, and picks, per criterion, the best and the worst.
Its study file adds to the shared fields:

    kind = "best_worst"
    [systems]
    names = ["gold", "retrieval", "moel", "mime", "kemp"]   # at least 3
    controls = ["control-generic"]   # a control tuple: a control's response among real ones, built to be the worst
    [design]
    tuple_size = 4                   # responses per tuple, 3 to 6 and at most the systems (default: 4, or all of
                                     # them when fewer)
    judgments_per_tuple = 3          # k distinct annotators per tuple

Its default criteria ask the paper's three questions as best and worst ("Which response shows the most
understanding ..., and which the least?"); a [[criteria]] question is shown as written, so ask for both. A
best-worst study has no [scale], no pairs and no anchor.

Its design is tasks.kinds.best_worst_design.plan_best_worst: one tuple per context, the tuples rotated over every
subset of the systems, the order shown rotated over a tuple's k placements. The simulated raters perceive each
response as the Likert and A/B ones do (simulate.Rater.perceived, the response's fixed deviation keyed as
pairwise keys it, so the three studies of one demo see the same responses alike) and pick the highest as the best
and the lowest as the worst, the response shown first helped by `position_bias`; random clickers pick two
different letters uniformly, straight-liners always the first as best and the last as worst, and
context-ignorers judge every criterion by fluency.
"""
from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any, ClassVar

from sqlalchemy import Engine, select
from sqlalchemy.orm import Session

from empeval.server.store.bulk import insert_rows
from empeval.server.store.kinds.best_worst import (
    MAX_TUPLE_SIZE,
    MIN_TUPLE_SIZE,
    AssignmentTuple,
    BestWorstSetup,
    TupleItem,
    TupleMember,
)
from empeval.server.store.kinds.likert import StudyItem
from empeval.server.store.models import Response, Study, System
from empeval.server.store.queries import study_by_name
from empeval.server.store.study_config import StudyConfig
from empeval.server.store.study_parts import Design
from empeval.tasks.crowd.contract import Control
from empeval.tasks.kind_parts import ChosenContexts, StudyFileParts, StudyFileReader, StudySummary
from empeval.tasks.kinds import Answer, TaskKind, register
from empeval.tasks.kinds.best_worst_design import plan_best_worst
from empeval.tasks.simulate import CrowdModel, Rater, UnknownItem
from empeval.tasks.study_create import add_assignments, lacking_controls

# The letters the task page labels a tuple's responses with, in the order shown.
LETTERS = "ABCDEF"[:MAX_TUPLE_SIZE]

LISTING = {"title": "Pick the best and the worst reply in conversations about feelings",
           "description": "Read short conversations in which someone shares an experience, and pick the best and the "
                          "worst of a few replies in each for empathy, relevance and fluency.",
           "tags": ["empathy", "dialogue", "best-worst", "conversation", "research"]}


@dataclass(frozen=True)
class ShownTuple:
    """What one placement of a best-worst assignment shows, as only the simulation may know it: the systems in the
    order shown and the keys of their responses' fixed deviations (CrowdModel.response_deviation)."""

    systems: tuple[str, ...]
    keys: tuple[object, ...]


def best_worst_choices(rater: Rater, shown: ShownTuple, criteria: tuple[str, ...], model: CrowdModel,
                       rng: random.Random, seed: int) -> tuple[dict[str, str], dict[str, str]]:
    """A simulated rater's best and worst per criterion among the responses of `shown` (letters A, B, ... in the
    order shown), as the module docstring describes."""
    letters = LETTERS[:len(shown.systems)]
    if rater.behaviour == "random":
        picks = {c: rng.sample(letters, 2) for c in criteria}
        return {c: p[0] for c, p in picks.items()}, {c: p[1] for c, p in picks.items()}
    if rater.behaviour == "straight":
        return {c: letters[0] for c in criteria}, {c: letters[-1] for c in criteria}
    deviations = [model.response_deviation(key, seed, criteria) for key in shown.keys]
    best, worst = {}, {}
    for c in criteria:
        perceived = [rater.perceived(system, c, model, deviation, rng) + (model.position_bias if place == 0 else 0.0)
                     for place, (system, deviation) in enumerate(zip(shown.systems, deviations, strict=True))]
        best[c] = letters[max(range(len(letters)), key=perceived.__getitem__)]
        worst[c] = letters[min(range(len(letters)), key=perceived.__getitem__)]
    return best, worst


def tuple_placements(engine: Engine, study: str) -> dict[tuple[int, int], ShownTuple]:
    """(assignment id, tuple item id) -> ShownTuple for every placement of a best-worst study: the truth the
    simulation needs (the API hides it). A response that the study's linked Likert study (`compare_with`) rates is
    keyed by that study item's id, the key its Likert raters' deviation was drawn from; any other by
    "response-ID". Read once: an assignment copied on expiry later has placements this map does not hold."""
    with Session(engine) as session:
        found = study_by_name(session, study)
        likert_item: dict[int, int] = {}
        if found.config.compare_with:
            items = session.execute(select(StudyItem.response_id, StudyItem.id)
                                    .join(Study, Study.id == StudyItem.study_id)
                                    .where(Study.name == found.config.compare_with)
                                    .order_by(StudyItem.id.desc())).all()
            likert_item = {response_id: item_id for response_id, item_id in items}  # a response's lowest item id
        members: dict[int, dict[int, tuple[str, int]]] = {}
        for tuple_id, slot, system, response_id in session.execute(
                select(TupleMember.tuple_item_id, TupleMember.slot, System.name, TupleMember.response_id)
                .join(TupleItem, TupleItem.id == TupleMember.tuple_item_id)
                .join(Response, Response.id == TupleMember.response_id)
                .join(System, System.id == Response.system_id)
                .where(TupleItem.study_id == found.id)):
            members.setdefault(tuple_id, {})[slot] = (system, response_id)
        placements = {}
        for assignment_id, tuple_id, shown_order in session.execute(
                select(AssignmentTuple.assignment_id, AssignmentTuple.tuple_item_id, AssignmentTuple.shown_order)
                .join(TupleItem, TupleItem.id == AssignmentTuple.tuple_item_id)
                .where(TupleItem.study_id == found.id)):
            shown = [members[tuple_id][int(slot)] for slot in shown_order]
            placements[assignment_id, tuple_id] = ShownTuple(
                tuple(system for system, _ in shown),
                tuple(likert_item.get(response_id, f"response-{response_id}") for _, response_id in shown))
    return placements


@register
class BestWorstTasks(TaskKind):
    name: ClassVar[str] = "best_worst"
    setup = BestWorstSetup
    fields: ClassVar[dict[str, frozenset[str]]] = {"design": frozenset({"judgments_per_tuple", "tuple_size"})}
    foreign_hints: ClassVar[dict[str, str]] = {
        "design.ratings_per_response": "a best-worst study counts judgments per tuple: use "
                                       "design.judgments_per_tuple",
        "design.judgments_per_pair": "a best-worst study counts judgments per tuple: use design.judgments_per_tuple",
        "design.ties": "a best-worst study has no ties: raters pick one best and one worst response",
        "systems.pairs": "a best-worst study shows tuples of design.tuple_size systems, not pairs",
        "systems.anchor": "a best-worst study ranks every system against every other; it has no anchor",
        "scale": "a best-worst study has no scale: raters pick the best and the worst response"}
    listing: ClassVar[dict[str, Any]] = LISTING
    ui_page: ClassVar[str] = "best_worst"

    def parse(self, reader: StudyFileReader, data: dict[str, Any], parts: StudyFileParts) -> tuple[BestWorstSetup,
                                                                                                  Design]:
        d = data.get("design", {})
        n_systems = len(parts.systems)
        if n_systems < MIN_TUPLE_SIZE:
            raise reader.error("systems.names", f"a best-worst study compares at least {MIN_TUPLE_SIZE} systems, got "
                               f"{n_systems}; to compare two, use kind = \"pairwise\"")
        size = reader.integer(d, "tuple_size", "design.tuple_size", min(BestWorstSetup.tuple_size, n_systems),
                              minimum=MIN_TUPLE_SIZE, maximum=MAX_TUPLE_SIZE)
        assert size is not None
        if size > n_systems:
            raise reader.error("design.tuple_size", f"a tuple of {size} responses needs at least {size} systems; "
                               f"systems.names lists {n_systems}")
        k = reader.integer(d, "judgments_per_tuple", "design.judgments_per_tuple",
                           BestWorstSetup.judgments_per_tuple, minimum=1, maximum=50)
        return BestWorstSetup(judgments_per_tuple=k or 1, tuple_size=size), parts.design

    def system_role(self, spec: StudyConfig, system: str) -> str:
        setup = spec.setup
        assert isinstance(setup, BestWorstSetup)
        return f" (shown in tuples of {setup.tuple_size})" if system in spec.systems else ""

    def create(self, session: Session, spec: StudyConfig, study: Study, chosen: ChosenContexts) -> StudySummary:
        """Plan the study over the chosen contexts and write its tuples (each tuple's members by slot, in the order
        of the design's systems) and placements (each with the order its members are shown in)."""
        setup = spec.setup
        assert isinstance(setup, BestWorstSetup)
        lacking_controls(spec, chosen, chosen.ids)
        control_contexts = {name: [cid for cid in chosen.ids if chosen.response(cid, name)] for name in spec.controls}
        plan = plan_best_worst(chosen.ids, spec.systems, size=setup.tuple_size,
                               judgments_per_tuple=setup.judgments_per_tuple,
                               items_per_assignment=spec.design.items_per_assignment,
                               control_rate=spec.design.control_rate if spec.controls else 0.0,
                               controls=control_contexts, seed=spec.seed)
        tuples: dict[tuple[int, str | None], tuple[TupleItem, tuple[str, ...]]] = {}
        for planned in plan:
            for placed in planned.items:
                key = (placed.context, placed.control)
                if key in tuples:
                    continue
                control_slot = placed.systems.index(placed.control) if placed.control is not None else None
                tuples[key] = (TupleItem(study_id=study.id, context_id=placed.context,
                                         is_control=placed.control is not None,
                                         control_target=spec.control_targets[placed.control] if placed.control
                                         else None,
                                         control_slot=control_slot, design={"systems": list(placed.systems)}),
                               placed.systems)
        session.add_all(item for item, _ in tuples.values())
        session.flush()
        session.add_all(TupleMember(tuple_item_id=item.id, slot=slot, context_id=item.context_id,
                                    response_id=chosen.response(item.context_id, system))
                        for item, systems in tuples.values() for slot, system in enumerate(systems))
        session.flush()
        insert_rows(session, AssignmentTuple, [
            {"assignment_id": assignment_id, "tuple_item_id": tuples[placed.context, placed.control][0].id,
             "position": position, "shown_order": "".join(map(str, placed.shown))}
            for assignment_id, planned in zip(add_assignments(session, study, plan), plan, strict=True)
            for position, placed in enumerate(planned.items)])

        n_slots = sum(len(a.items) for a in plan)
        expected = n_slots * len(spec.criteria)
        cost = spec.pay.cost(len(plan))
        real = sum(1 for item, _ in tuples.values() if not item.is_control)
        controls = len(tuples) - real
        return StudySummary(
            name=spec.name, kind=self.name, contexts=len(chosen.ids), systems=list(spec.systems), items=real,
            control_items=controls, assignments=len(plan), per_unit=setup.judgments_per_tuple,
            expected_answers=expected, cost=cost, currency=spec.pay.currency if cost is not None else None,
            sentence=(f"best-worst study {spec.name!r}: {len(chosen.ids)} contexts, each with a tuple of "
                      f"{setup.tuple_size} of the {len(spec.systems)} systems = {real} tuples (+{controls} control "
                      f"tuples), {len(plan)} assignments, k={setup.judgments_per_tuple} judgments per tuple, "
                      f"{expected} best-worst choices expected"))

    def simulated_answers(self, engine: Engine, study: str, model: CrowdModel, seed: int) -> Answer:
        """A best and a worst per tuple and criterion (best_worst_choices) from the placement's systems in the order
        shown, each response with the deviation drawn from its key (tuple_placements) and `seed`."""
        placements = tuple_placements(engine, study)

        def judge(rater: Rater, rng: random.Random, assignment: dict) -> dict:
            criteria = tuple(c["key"] for c in assignment["criteria"])
            entries = []
            for item in assignment["items"]:
                shown = placements.get((assignment["assignment_id"], item["item_id"]))
                if shown is None:
                    raise UnknownItem(f"tuple {item['item_id']} of assignment {assignment['assignment_id']} is not "
                                      "among the placements the simulation was given")
                seconds = rater.seconds(model, rng)
                best, worst = best_worst_choices(rater, shown, criteria, model, rng, seed)
                entries.append({"item_id": item["item_id"], "seconds": seconds, "best": best, "worst": worst})
            return {"best_worst": entries}

        return judge

    def crowd_controls(self, session: Session, assignment_id: int) -> tuple[list[int], list[Control]]:
        """Its contexts, and each control tuple scored by the rule of analysis.kinds.best_worst.tables.
        control_scores: it passes when the worker marked the control's response (the letter it was shown under)
        the worst on the control's target criterion."""
        rows = session.execute(
            select(TupleItem.id, TupleItem.context_id, TupleItem.is_control, TupleItem.control_target,
                   TupleItem.control_slot, AssignmentTuple.shown_order)
            .join(AssignmentTuple, AssignmentTuple.tuple_item_id == TupleItem.id)
            .where(AssignmentTuple.assignment_id == assignment_id)
        ).all()
        return (sorted({context_id for _, context_id, *_ in rows}),
                [Control(item_id=item_id, target=target, rule="one-of", entries="best_worst", field="worst",
                         passing=(LETTERS[shown_order.index(str(slot))],))
                 for item_id, _, is_control, target, slot, shown_order in rows if is_control])
