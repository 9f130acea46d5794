"""The Likert kind in the tasks room: its study-file fields, its design, its simulated raters, its crowd parts and
its page.

A Likert study (the default kind) adds to the shared study-file fields:

    [design]
    ratings_per_response = 3         # k distinct annotators per response
    # human_share = 0.25             # optional (model-assisted evaluation): people rate a seeded uniform sample of
    # human_share_seed = 11          # a quarter of the contexts (every system's response on each), judges score
                                     # every item (`empeval judge`); the seed defaults to the study's
    # sampling = "active"            # optional, with human_share: "uniform" (the default: the seeded sample above,
                                     # drawn at creation) or "active": after the judges scored every item,
                                     # `empeval study sample NAME` draws each context with a probability from the
                                     # judges' uncertainty, human_share x contexts of them expected
                                     # (analysis.stats.ppi.active), and only then are there assignments
    [scale]                          # optional: defaults to 1-5 with every point labelled
    min = 1; max = 5; labels = ["1 - Not at all", ..., "5 - Completely"]

Its gold items, when the study file has a [qualification] (tasks/qualification.py):

    [[qualification.items]]
    context = ["I finally passed my driving test!"]     # the speaker's turn first, ending with hers
    response = "Driving tests are held on weekdays."    # the response rated
    answer = { empathy = [1, 2], relevance = [1, 3], fluency = 5 }   # per criterion: a score or [lowest, highest]
    feedback = "It states a fact and ignores her joy."

Its design (tasks.design.plan_assignments): every response rated by k distinct annotators, the systems rotated over
blocks of contexts, controls interleaved. With a human share every chosen context's items are written, for the
judges, but the assignments hold only the items (and controls) of the contexts people rate, recorded in
study_context with each context's `human_rated`. With active sampling the study is created with every context's
items and no assignment; `empeval study sample` (tasks.kinds.likert_active) writes them for the drawn contexts.
"""
from __future__ import annotations

import random
from collections.abc import Mapping
from dataclasses import replace
from typing import Any, ClassVar

from sqlalchemy import Engine, select
from sqlalchemy.orm import Session

from empeval.server.store.bulk import insert_returning_ids, insert_rows
from empeval.server.store.kinds import StudySetup
from empeval.server.store.kinds.likert import (
    ACTIVE_SAMPLING,
    AssignmentItem,
    LikertSetup,
    Scale,
    StudyContext,
    StudyItem,
)
from empeval.server.store.models import Response, Study, System
from empeval.server.store.qualification import Accepted, GoldItem, GoldRow, Panel, ShownTurn
from empeval.server.store.study_config import StudyConfig
from empeval.server.store.study_parts import Criterion, Design
from empeval.tasks.crowd.contract import DEFAULT_DESCRIPTION, DEFAULT_TAGS, Control
from empeval.tasks.decisions_file import DecisionTerms
from empeval.tasks.design import Candidate, plan_assignments
from empeval.tasks.gold_items import context_panel, gold_answers, gold_context, gold_feedback, gold_fields
from empeval.tasks.kind_parts import ChosenContexts, StudyFileParts, StudyFileReader, StudySetupError, StudySummary
from empeval.tasks.kinds import Answer, TaskKind, register
from empeval.tasks.kinds.likert_human_share import (
    draw_human_sample,
    human_sample_size,
    human_share_problem,
    read_share_and_sampling,
)
from empeval.tasks.simulate import CrowdModel, Rater, UnknownItem
from empeval.tasks.study_create import add_assignments, lacking_controls


def likert_scores(rater: Rater, system: str, criteria: tuple[str, ...], model: CrowdModel, rng: random.Random,
                  deviation: Mapping[str, float] | None = None) -> dict[str, int]:
    """A simulated rater's scores for one response of `system` (whose own deviation from the system's quality is
    `deviation`, per criterion): round(her perceived quality), clipped to the scale. A random clicker scores
    uniformly; a straight-liner gives every criterion her fluency score."""
    low, high = model.scale

    def clip(x: float) -> int:
        return int(min(high, max(low, round(x))))

    if rater.behaviour == "random":
        return {c: rng.randint(low, high) for c in criteria}
    if rater.behaviour == "straight":
        value = clip(rater.perceived(system, "fluency", model, deviation, rng))
        return {c: value for c in criteria}
    return {c: clip(rater.perceived(system, c, model, deviation, rng)) for c in criteria}


def item_systems(engine: Engine, study: str) -> dict[int, str]:
    """item id -> system name for a Likert study: the truth the simulated raters need (the API hides it)."""
    with Session(engine) as session:
        return dict(session.execute(
            select(StudyItem.id, System.name).join(Response, Response.id == StudyItem.response_id)
            .join(System, System.id == Response.system_id).join(Study, Study.id == StudyItem.study_id)
            .where(Study.name == study)).all())


def _describe(spec: StudyConfig, setup: LikertSetup, *, contexts: int, items: int, controls: int, assignments: int,
              expected: int, human_contexts: int | None, share_seed: int | None) -> str:
    if setup.sampling == ACTIVE_SAMPLING:
        return (f"study {spec.name!r}: {contexts} contexts x {len(spec.systems)} systems = {items} items, all for the "
                f"judges; people will rate an active sample of about {human_contexts} of the {contexts} contexts "
                f"(design.human_share {setup.human_share:g} expected, "
                f"design.sampling active, seed {share_seed}), drawn with probabilities from the judges' "
                f"uncertainty once they have scored every item: run `empeval judge {spec.name} --judges NAME,...` "
                f"(two judges or more, so that their disagreement can guide the draw), then `empeval study sample "
                f"{spec.name}`; no assignment exists until then")
    if human_contexts is None:
        return (f"study {spec.name!r}: {contexts} contexts x {len(spec.systems)} systems = {items} items "
                f"(+{controls} control items), {assignments} assignments, k={setup.ratings_per_response} ratings per "
                f"response, {expected} ratings expected")
    return (f"study {spec.name!r}: {contexts} contexts x {len(spec.systems)} systems = {items} items, all for the "
            f"judges (`empeval judge {spec.name} --judges NAME`); people rate {human_contexts} of the {contexts} "
            f"contexts (design.human_share {setup.human_share:g}, seed {share_seed}): "
            f"{human_contexts * len(spec.systems)} items (+{controls} control items), {assignments} assignments, "
            f"k={setup.ratings_per_response} ratings per response, {expected} ratings expected")


def write_assignments(session: Session, spec: StudyConfig, study: Study, rated: list[Candidate],
                      control_responses: Mapping[int, Mapping[str, int | None]],
                      item_ids: dict[Any, int]) -> tuple[list[Any], dict[Any, Candidate]]:
    """Plan and write the assignments of the `rated` items (tasks.design.plan_assignments, k distinct annotators
    each, the study's controls interleaved from `control_responses`: context id -> control system -> response id,
    None where it has none) in the caller's transaction: the control items the plan uses are written and added to
    `item_ids` (response id -> study item id, the real items' already written), then the assignments and their
    items. Returns the plan and the controls used. Study creation and an active draw (tasks.kinds.likert_active)
    both write their assignments here."""
    setup = spec.setup
    assert isinstance(setup, LikertSetup)
    controls = [Candidate(key=control_responses[cid][name], context=cid, system=name)
                for name in spec.controls for cid in sorted(control_responses) if control_responses[cid].get(name)]
    plan = plan_assignments(rated, controls, ratings_per_response=setup.ratings_per_response,
                            items_per_assignment=spec.design.items_per_assignment,
                            control_rate=spec.design.control_rate, seed=spec.seed) if rated else []
    used_controls = {c.key: c for a in plan for c in a.items if c.system in spec.control_targets}
    item_ids.update(zip(used_controls, insert_returning_ids(session, StudyItem, [
        {"study_id": study.id, "response_id": key, "is_control": True,
         "control_target": spec.control_targets[candidate.system], "design": {"system": candidate.system}}
        for key, candidate in used_controls.items()]), strict=True))
    insert_rows(session, AssignmentItem, [
        {"assignment_id": assignment_id, "item_id": item_ids[c.key], "position": position}
        for assignment_id, planned in zip(add_assignments(session, study, plan), plan, strict=True)
        for position, c in enumerate(planned.items)])
    return plan, used_controls


def _gold_scores(reader: StudyFileReader, value: Any, path: str, scale: Scale) -> tuple[int, ...]:
    """The scores a gold item counts right on one criterion: `value` is one score or [lowest, highest], on `scale`."""
    def score(v: Any) -> bool:
        return isinstance(v, int) and not isinstance(v, bool)

    if score(value):
        low = high = value
    elif isinstance(value, list) and len(value) == 2 and all(score(v) for v in value):
        low, high = value
    else:
        raise reader.error(path, f"must be a score or [lowest, highest] on the study's scale ({scale.min}-{scale.max}"
                           f"), got {value!r}")
    if low > high:
        raise reader.error(path, f"[{low}, {high}] is not [lowest, highest]: write [{high}, {low}]")
    if low < scale.min or high > scale.max:
        raise reader.error(path, f"{value!r} is off the study's scale ({scale.min}-{scale.max})")
    return tuple(range(low, high + 1))


@register
class LikertTasks(TaskKind):
    name: ClassVar[str] = "likert"
    setup = LikertSetup
    fields: ClassVar[dict[str, frozenset[str]]] = {
        "design": frozenset({"ratings_per_response", "human_share", "human_share_seed", "sampling"})}
    sections: ClassVar[frozenset[str]] = frozenset({"scale"})
    listing: ClassVar[dict[str, Any]] = {"description": DEFAULT_DESCRIPTION, "tags": list(DEFAULT_TAGS)}
    ui_page: ClassVar[str] = "likert"

    def parse(self, reader: StudyFileReader, data: dict[str, Any], parts: StudyFileParts) -> tuple[LikertSetup,
                                                                                                  Design]:
        d = data.get("design", {})
        setup = LikertSetup(ratings_per_response=reader.integer(
            d, "ratings_per_response", "design.ratings_per_response", LikertSetup.ratings_per_response, minimum=1,
            maximum=50))
        setup = self._human_share(reader, d, setup, n_contexts=parts.n_contexts, seed=parts.seed)
        if "scale" in data:
            sc = reader.table(data, "scale", "scale", {"min", "max", "labels"})
            low = reader.integer(sc, "min", "scale.min", 1, minimum=0)
            high = reader.integer(sc, "max", "scale.max", 5, minimum=(low or 0) + 1, maximum=(low or 0) + 10)
            labels = reader.strings(sc, "labels", "scale.labels")
            assert low is not None and high is not None
            if len(labels) != high - low + 1:
                raise reader.error("scale.labels", f"must label every point: {high - low + 1} labels for "
                                   f"{low}..{high}, got {len(labels)}")
            setup = replace(setup, scale=Scale(min=low, max=high, labels=labels))
        return setup, parts.design

    def qualification_items(self, reader: StudyFileReader, entries: list[Any], setup: StudySetup,
                            criteria: tuple[Criterion, ...], controls: tuple[str, ...]) -> tuple[GoldItem, ...]:
        """Each gold item: its `context`, the `response` rated, per criterion the scores counted right (`answer`: one
        score, or [lowest, highest], on the study's scale) and its `feedback`. An item that counts every score right
        on every criterion is refused: there would be nothing to get wrong."""
        assert isinstance(setup, LikertSetup)
        scale, items = setup.scale, []
        for i, entry in enumerate(entries):
            path = f"qualification.items[{i}]"
            gold_fields(reader, entry, path, ("context", "response", "answer", "feedback"))
            turns = gold_context(reader, entry, path)
            response = reader.string(entry, "response", f"{path}.response")
            accepted = tuple(Accepted(key, _gold_scores(reader, value, f"{path}.answer.{key}", scale))
                             for key, value in gold_answers(reader, entry, path, criteria).items())
            if all(len(a.answers) == scale.max - scale.min + 1 for a in accepted):
                raise reader.error(f"{path}.answer", "counts every score right on every criterion: narrow at least "
                                   "one to the scores a careful rater gives")
            items.append(GoldItem(feedback=gold_feedback(reader, entry, path), turns=turns, responses=(response,),
                                  accepted=accepted))
        return tuple(items)

    def qualification_rows(self, session: Session, spec: StudyConfig) -> list[GoldRow]:
        """Each gold item as a rated item is shown: the conversation, then the response to rate."""
        assert spec.qualification is not None
        rows = []
        for item in spec.qualification.items:
            conversation = context_panel(item.turns)
            shown = Panel(conversation.title, (*conversation.turns, ShownTurn("listener", item.responses[0],
                                                                               "Response to rate")))
            rows.append(GoldRow((shown,), item.accepted, item.feedback))
        return rows

    @staticmethod
    def _human_share(reader: StudyFileReader, d: dict, setup: LikertSetup, *, n_contexts: int,
                     seed: int) -> LikertSetup:
        """design.human_share, design.human_share_seed and design.sampling (model-assisted evaluation): people rate
        a seeded uniform sample of round(share x contexts) contexts (or, with sampling "active", an active sample of
        that many expected, drawn later), judges score every item. The share must be a number strictly
        between 0 and 1 that samples at least two contexts and not all of them (likert_human_share.
        human_share_problem); the seed defaults to the study's and is stored resolved, so the stored configuration
        reproduces the draw."""
        read = read_share_and_sampling(reader, d, n_contexts=n_contexts, seed=seed, people="rate")
        if read is None:
            return setup
        share, sample_seed, sampling = read
        return replace(setup, human_share=share, human_share_seed=sample_seed, sampling=sampling)

    def decision_terms(self, setup: StudySetup, systems: tuple[str, ...]) -> DecisionTerms:
        """Any two of the study's systems, the margin in points of its scale (their mean ratings' difference)."""
        return DecisionTerms()

    def system_role(self, spec: StudyConfig, system: str) -> str:
        return ""

    def write_drawn(self, session: Session, study: Study, drawn: set[int]) -> int:
        """The assignments of the drawn contexts' items (every system's, k distinct annotators each) with the
        study's controls on those contexts (each control system's latest), written in the draw's transaction
        (write_assignments); the number of assignments."""
        spec = study.config
        items = session.execute(select(StudyItem, Response.context_id)
                                .join(Response, Response.id == StudyItem.response_id)
                                .where(StudyItem.study_id == study.id)).all()
        item_ids: dict[Any, int] = {item.response_id: item.id for item, _ in items}
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
        plan, _ = write_assignments(session, spec, study, rated, control_responses, item_ids)
        return len(plan)

    def create(self, session: Session, spec: StudyConfig, study: Study, chosen: ChosenContexts) -> StudySummary:
        setup = spec.setup
        assert isinstance(setup, LikertSetup)
        human_ids = set(chosen.ids)
        share, share_seed = setup.human_share, setup.human_share_seed
        active = setup.sampling == ACTIVE_SAMPLING
        if share is not None:
            if problem := human_share_problem(share, len(chosen.keys)):
                raise StudySetupError(f"design.human_share: {problem}")
            share_seed = spec.seed if share_seed is None else share_seed
            # An active study's sample is drawn later (tasks.kinds.likert_active): none is rated yet.
            human_ids = set() if active else {chosen.key_to_id[key]
                                              for key in draw_human_sample(chosen.keys, share, share_seed)}
        items = [Candidate(key=chosen.response(cid, name), context=cid, system=name)
                 for cid in chosen.ids for name in spec.systems]
        # Any context may be drawn actively: the controls must have responses on the study's contexts.
        lacking_controls(spec, chosen, sorted(chosen.ids if active else human_ids))
        real = {candidate.key: {"study_id": study.id, "response_id": candidate.key,
                                "design": {"system": candidate.system}} for candidate in items}
        item_ids = dict(zip(real, insert_returning_ids(session, StudyItem, list(real.values())), strict=True))
        insert_rows(session, StudyContext, [{"study_id": study.id, "context_id": cid, "human_rated": cid in human_ids}
                                            for cid in chosen.ids])
        plan, used_controls = write_assignments(
            session, spec, study, [item for item in items if item.context in human_ids],
            {cid: {name: chosen.response(cid, name) for name in spec.controls} for cid in human_ids}, item_ids)

        n_slots = sum(len(a.items) for a in plan)
        cost = spec.pay.cost(len(plan))
        human_contexts = (human_sample_size(share, len(chosen.ids)) if active else len(human_ids)) \
            if share is not None else None
        return StudySummary(
            name=spec.name, kind=self.name, contexts=len(chosen.ids), systems=list(spec.systems), items=len(items),
            control_items=len(used_controls), assignments=len(plan), per_unit=setup.ratings_per_response,
            expected_answers=n_slots * len(spec.criteria), cost=cost,
            currency=spec.pay.currency if cost is not None else None,
            sentence=_describe(spec, setup, contexts=len(chosen.ids), items=len(items), controls=len(used_controls),
                               assignments=len(plan), expected=n_slots * len(spec.criteria),
                               human_contexts=human_contexts, share_seed=share_seed),
            human_contexts=human_contexts)

    def simulated_answers(self, engine: Engine, study: str, model: CrowdModel, seed: int) -> Answer:
        """Scores per item (likert_scores) from the item's system, with the response's own deviation drawn from the
        item id and `seed`."""
        truth = item_systems(engine, study)

        def rate(rater: Rater, rng: random.Random, assignment: dict) -> dict:
            criteria = tuple(c["key"] for c in assignment["criteria"])
            ratings = []
            for item in assignment["items"]:
                system = truth.get(item["item_id"])
                if system is None:
                    raise UnknownItem(f"item {item['item_id']} of assignment {assignment['assignment_id']} is not "
                                      "among the items the simulation was given")
                seconds = rater.seconds(model, rng)
                deviation = model.response_deviation(item["item_id"], seed, criteria)
                ratings.append({"item_id": item["item_id"], "seconds": seconds,
                                "scores": likert_scores(rater, system, criteria, model, rng, deviation)})
            return {"ratings": ratings}

        return rate

    def crowd_controls(self, session: Session, assignment_id: int) -> tuple[list[int], list[Control]]:
        """Its contexts, and each control item scored by the rule of analysis.kinds.likert.quality.control_results:
        it passes when its score on the target criterion is below the worker's mean there over the unit's real
        items."""
        rows = session.execute(
            select(StudyItem.id, StudyItem.is_control, StudyItem.control_target, Response.context_id)
            .join(AssignmentItem, AssignmentItem.item_id == StudyItem.id)
            .join(Response, Response.id == StudyItem.response_id)
            .where(AssignmentItem.assignment_id == assignment_id)
        ).all()
        return (sorted({context_id for *_, context_id in rows}),
                [Control(item_id=item_id, target=target, rule="below-mean", entries="ratings", field="scores")
                 for item_id, is_control, target, _ in rows if is_control])
