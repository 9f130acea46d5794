"""Creating a study in the store: pick contexts, find the responses to rate, plan assignments, write it all.

One transaction: a study is created whole or not at all. A Likert study gets study items (one response each)
and assignment items; a pairwise (A/B) study gets pair items (two responses to one context) and assignment
pairs that log which response is shown on the left. Both kinds pick their contexts the same way, so a pairwise
study with the seed, count and systems of a Likert one judges the same contexts.
"""
from __future__ import annotations

import math
import random
from dataclasses import dataclass

from sqlalchemy import Engine, select
from sqlalchemy.orm import Session

from empeval.server.backend.registry import DEFAULT_CONFIG, load_config
from empeval.server.datasets.sample import ED_DATASET
from empeval.server.errors import BadInput
from empeval.server.store.engine import unit_of_work
from empeval.server.store.models import (
    Assignment,
    AssignmentItem,
    AssignmentPair,
    Context,
    Dataset,
    Dialogue,
    PairItem,
    Response,
    Study,
    StudyContext,
    StudyItem,
    System,
)
from empeval.server.store.queries import assignment_counts
from empeval.server.store.statuses import AssignmentStatus, StudyStatus
from empeval.server.store.study_config import StudyConfig
from empeval.tasks.design import (
    Candidate,
    controls_per_assignment,
    draw_human_sample,
    human_share_problem,
    plan_assignments,
)
from empeval.tasks.pairwise_design import plan_pairwise


class StudySetupError(BadInput):
    """The store does not hold what the study file asks for; the message says what to run."""


def import_command(dataset: str, split: str) -> str:
    """The `empeval data ...` command that puts `dataset`'s `split` contexts into the store: the bundled sample
    holds ED's train and test splits; ED's valid split comes from the full data; any other dataset is the
    researcher's own (JSONL)."""
    if dataset != ED_DATASET:
        return f"`empeval data import-jsonl PATH --dataset {dataset}`"
    if split in ("train", "test"):
        return "`empeval data import-sample` (the bundled sample) or `empeval data import-ed PATH` (the full data)"
    return f"`empeval data import-ed PATH --split {split}` or `empeval data fetch-ed`"


def how_to_get_responses(systems: list[str] | tuple[str, ...], split: str) -> str:
    """What to run so that `systems` have responses on `split`: `empeval generate` for the systems the built-in
    model registry (server/backend/systems.toml) knows; for the others, how to register them first, since
    `empeval generate` refuses a name it does not know."""
    known = {spec.name for spec in load_config(DEFAULT_CONFIG)}
    registered = [name for name in systems if name in known]
    unknown = [name for name in systems if name not in known]
    steps = []
    if registered:
        steps.append(f"run `empeval generate --systems {','.join(registered)} --split {split}`")
    if unknown:
        names = ", ".join(repr(name) for name in unknown)
        steps.append(
            f"{names} {'is' if len(unknown) == 1 else 'are'} not in the model registry ({DEFAULT_CONFIG.name}: "
            f"{', '.join(sorted(known))}), so `empeval generate` cannot answer for "
            f"{'it' if len(unknown) == 1 else 'them'}: correct the name in the study file, or register the system "
            f"in a systems config of your own (`[systems.{unknown[0]}]` with kind = \"http\" and the URL of your "
            f"model, see server/backend/http_model.py) and run `empeval generate --config YOUR_SYSTEMS.toml "
            f"--systems {','.join(unknown)} --split {split}`")
    return "; ".join(steps)


def controls_rounding_to_zero(*, items_per_assignment: int, control_rate: float,
                              rate_name: str = "design.control_rate",
                              size_name: str = "design.items_per_assignment") -> str | None:
    """What is wrong when a design's control slots round to zero, else None: an assignment of
    `items_per_assignment` items holds round(items_per_assignment x control_rate) controls
    (tasks.design.controls_per_assignment), and with a product of one half or less that is none at all (round
    halves to even), so the controls would silently never be shown. The fields are named as the caller's user
    wrote them (a study file's, or `empeval plan`'s options)."""
    if control_rate <= 0 or controls_per_assignment(items_per_assignment, control_rate) > 0:
        return None
    least_items = math.floor(0.5 / control_rate) + 1
    return (f"{rate_name} {control_rate:g} x {size_name} {items_per_assignment} = "
            f"{control_rate * items_per_assignment:g} control slots per assignment, which rounds to 0: the controls "
            f"would never be shown. Raise {rate_name} above {0.5 / items_per_assignment:.3g} or {size_name} to at "
            f"least {least_items}, or set {rate_name} to 0 to run without controls")


def check_controls_fit(*, items_per_assignment: int, control_rate: float, controls: list[str] | tuple[str, ...]
                       ) -> None:
    """Refuse a study whose listed controls round to zero slots per assignment (`controls_rounding_to_zero`)."""
    problem = controls and controls_rounding_to_zero(items_per_assignment=items_per_assignment,
                                                     control_rate=control_rate)
    if problem:
        raise StudySetupError(problem.replace("the controls would", f"the controls ({', '.join(controls)}) would"))


def planned_assignments(*, contexts: int, items_per_context: int, repeats: int, items_per_assignment: int,
                        control_rate: float = 0.0, controls: bool = False) -> int:
    """How many assignments `create_study` plans for a design, control slots counted: per round (one of
    `repeats`: ratings per response, or judgments per pair), the contexts are cut into ceil(contexts / real
    slots) blocks, where real slots = items_per_assignment minus the assignment's control slots, and each
    block gives one assignment per system (a Likert study) or pair of systems (a pairwise one), its
    `items_per_context` (tasks.design.plan_assignments).

    >>> planned_assignments(contexts=10, items_per_context=3, repeats=2, items_per_assignment=5)
    12
    >>> planned_assignments(contexts=10, items_per_context=3, repeats=2, items_per_assignment=5, control_rate=0.2,
    ...                     controls=True)
    18
    >>> planned_assignments(contexts=100, items_per_context=2, repeats=3, items_per_assignment=10, control_rate=0.1,
    ...                     controls=True)
    72
    """
    n_controls = controls_per_assignment(items_per_assignment, control_rate) if controls else 0
    real_slots = items_per_assignment - n_controls
    if real_slots < 1:
        raise StudySetupError(f"design.control_rate {control_rate:g} leaves no room for real items in an "
                              f"assignment of {items_per_assignment}")
    if contexts < 1:
        return 0
    return repeats * items_per_context * math.ceil(contexts / real_slots)


@dataclass
class StudySummary:
    name: str
    contexts: int
    systems: list[str]
    items: int
    control_items: int
    assignments: int
    ratings_per_response: int
    expected_ratings: int
    cost: float | None
    currency: str | None
    kind: str = "likert"
    pairs: int = 0  # pairwise: the pairs of systems compared
    human_contexts: int | None = None  # with design.human_share: the contexts people rate (judges score all)
    human_share: float | None = None
    human_share_seed: int | None = None

    def describe(self) -> str:
        if self.kind == "pairwise":
            text = (f"pairwise study {self.name!r}: {self.contexts} contexts x {self.pairs} pairs of systems = "
                    f"{self.items} pair items (+{self.control_items} control pairs), {self.assignments} assignments, "
                    f"k={self.ratings_per_response} judgments per (context, pair), {self.expected_ratings} "
                    "choices expected")
        elif self.human_contexts is not None:
            text = (f"study {self.name!r}: {self.contexts} contexts x {len(self.systems)} systems = {self.items} "
                    f"items, all for the judges (`empeval judge {self.name} --judges NAME`); people rate "
                    f"{self.human_contexts} of the {self.contexts} contexts (design.human_share {self.human_share:g}, "
                    f"seed {self.human_share_seed}): {self.human_contexts * len(self.systems)} items "
                    f"(+{self.control_items} control items), {self.assignments} assignments, "
                    f"k={self.ratings_per_response} ratings per response, {self.expected_ratings} ratings expected")
        else:
            text = (f"study {self.name!r}: {self.contexts} contexts x {len(self.systems)} systems = {self.items} "
                    f"items (+{self.control_items} control items), {self.assignments} assignments, "
                    f"k={self.ratings_per_response} ratings per response, {self.expected_ratings} ratings expected")
        if self.cost is not None:
            text += f"; crowd cost {self.cost:.2f} {self.currency} including platform fee"
        return text


def _latest_system(session: Session, name: str) -> System | None:
    return session.scalar(select(System).where(System.name == name)
                          .order_by(System.created_at.desc(), System.id.desc()))


def _context_key(conv_id: str, n_turns: int) -> str:
    return f"{conv_id}#{n_turns}"


def create_study(engine: Engine, spec: StudyConfig) -> StudySummary:
    """Write `spec` as a study with its items and planned assignments; see StudySetupError for what can fail.

    With design.human_share (a Likert study only), every chosen context's items are written, for the judges, but
    the assignments hold only the items (and controls) of the contexts people rate: a seeded uniform sample
    (tasks.design.draw_human_sample), recorded in study_context with each context's `human_rated`."""
    if spec.design.human_share is not None and spec.is_pairwise:
        raise StudySetupError("design.human_share is for Likert studies only: judges score the items of a Likert "
                              f"study, and {spec.name!r} is pairwise")
    check_controls_fit(items_per_assignment=spec.design.items_per_assignment, control_rate=spec.design.control_rate,
                       controls=spec.controls)
    with unit_of_work(engine) as session:
        if session.scalar(select(Study.id).where(Study.name == spec.name)) is not None:
            raise StudySetupError(f"a study named {spec.name!r} exists already; choose another name")
        if spec.compare_with and session.scalar(select(Study.id).where(Study.name == spec.compare_with)) is None:
            raise StudySetupError(f"compare_with: no study named {spec.compare_with!r} in the store: create it "
                                  "first (`empeval study create FILE`), or correct the name")
        dataset = session.scalar(select(Dataset).where(Dataset.name == spec.contexts.dataset))
        if dataset is None:
            raise StudySetupError(f"no dataset {spec.contexts.dataset!r} in the store: import it first with "
                                  f"{import_command(spec.contexts.dataset, spec.contexts.split)}")
        systems: dict[str, System] = {}
        for name in (*spec.systems, *spec.controls):
            system = _latest_system(session, name)
            if system is None:
                where = ""
                if spec.pairwise is not None:
                    pair = next((p for p in spec.pairwise.pairs if name in (p.first, p.second)), None)
                    where = f" (compared in the pair {pair.first} vs {pair.second})" if pair else ""
                raise StudySetupError(f"system {name!r}{where} has no responses yet: "
                                      f"{how_to_get_responses([name], spec.contexts.split)}")
            systems[name] = system

        query = (select(Context.id, Dialogue.conv_id, Context.n_turns)
                 .join(Dialogue, Dialogue.id == Context.dialogue_id)
                 .where(Dialogue.dataset_id == dataset.id, Dialogue.split == spec.contexts.split))
        if spec.contexts.emotions:
            query = query.where(Dialogue.emotion.in_(spec.contexts.emotions))
        all_contexts = {_context_key(conv, n): cid for cid, conv, n in session.execute(query).all()}

        real_ids = [systems[name].id for name in spec.systems]
        responses: dict[tuple[int, int], int] = {
            (context_id, system_id): response_id for response_id, context_id, system_id in session.execute(
                select(Response.id, Response.context_id, Response.system_id)
                .where(Response.system_id.in_([s.id for s in systems.values()]))
            ).all()
        }
        complete = {key: cid for key, cid in all_contexts.items()
                    if all((cid, sid) in responses for sid in real_ids)}

        if spec.contexts.ids:
            missing = [key for key in spec.contexts.ids if key not in all_contexts]
            if missing:
                raise StudySetupError(f"contexts.ids: {missing[0]!r} is not a {spec.contexts.split} context of "
                                      f"{spec.contexts.dataset!r} "
                                      f"({len(missing)} of {len(spec.contexts.ids)} not found)")
            unanswered = [key for key in spec.contexts.ids if key not in complete]
            if unanswered:
                raise StudySetupError(f"context {unanswered[0]!r} lacks a response from some of the systems: "
                                      f"{how_to_get_responses(spec.systems, spec.contexts.split)}")
            chosen = list(spec.contexts.ids)
        else:
            if len(complete) < spec.contexts.count:
                raise StudySetupError(
                    f"contexts.count is {spec.contexts.count} but only {len(complete)} {spec.contexts.split} "
                    f"contexts have responses from all of {', '.join(spec.systems)}: lower the count, or "
                    f"{how_to_get_responses(spec.systems, spec.contexts.split)}")
            chosen = random.Random(spec.seed).sample(sorted(complete), spec.contexts.count)
        chosen_ids = {complete[key] for key in chosen}
        if spec.is_pairwise:
            return _write_pairwise(session, spec, systems, responses, sorted(chosen_ids))

        human_ids = chosen_ids
        share, share_seed = spec.design.human_share, spec.design.human_share_seed
        if share is not None:
            if problem := human_share_problem(share, len(chosen)):
                raise StudySetupError(f"design.human_share: {problem}")
            share_seed = spec.seed if share_seed is None else share_seed
            human_ids = {complete[key] for key in draw_human_sample(chosen, share, share_seed)}
        items = [Candidate(key=responses[(cid, systems[name].id)], context=cid, system=name)
                 for cid in sorted(chosen_ids) for name in spec.systems]
        rated = [item for item in items if item.context in human_ids]
        controls = [Candidate(key=responses[(cid, systems[name].id)], context=cid, system=name)
                    for name in spec.controls for cid in sorted(human_ids) if (cid, systems[name].id) in responses]
        if spec.controls and controls_per_assignment(spec.design.items_per_assignment, spec.design.control_rate):
            covered = {c.system for c in controls}
            lacking = [name for name in spec.controls if name not in covered]
            if lacking:
                raise StudySetupError(f"control {lacking[0]!r} has no response on the study's contexts: "
                                      f"{how_to_get_responses([lacking[0]], spec.contexts.split)}")

        plan = plan_assignments(rated, controls, ratings_per_response=spec.design.ratings_per_response,
                                items_per_assignment=spec.design.items_per_assignment,
                                control_rate=spec.design.control_rate, seed=spec.seed)

        study = Study(name=spec.name, config=spec, seed=spec.seed, status=StudyStatus.OPEN)
        session.add(study)
        session.flush()
        study_items: dict[int, StudyItem] = {}
        for candidate in items:
            study_items[candidate.key] = StudyItem(study_id=study.id, response_id=candidate.key,
                                                   design={"system": candidate.system})
        used_controls = {c.key: c for a in plan for c in a.items if c.system in spec.control_targets}
        for key, candidate in used_controls.items():
            study_items[key] = StudyItem(study_id=study.id, response_id=key, is_control=True,
                                         control_target=spec.control_targets[candidate.system],
                                         design={"system": candidate.system})
        session.add_all(study_items.values())
        session.add_all(StudyContext(study_id=study.id, context_id=cid, human_rated=cid in human_ids)
                        for cid in sorted(chosen_ids))
        session.flush()
        for planned in plan:
            assignment = Assignment(study_id=study.id, status=AssignmentStatus.OPEN, round=planned.round,
                                    design_index=planned.index)
            assignment.items = [AssignmentItem(item_id=study_items[c.key].id, position=position)
                                for position, c in enumerate(planned.items)]
            session.add(assignment)

        n_slots = sum(len(a.items) for a in plan)
        cost = spec.pay.cost(len(plan))
        return StudySummary(name=spec.name, contexts=len(chosen_ids), systems=list(spec.systems), items=len(items),
                            control_items=len(used_controls), assignments=len(plan),
                            ratings_per_response=spec.design.ratings_per_response,
                            expected_ratings=n_slots * len(spec.criteria), cost=cost,
                            currency=spec.pay.currency if cost is not None else None,
                            human_contexts=len(human_ids) if share is not None else None, human_share=share,
                            human_share_seed=share_seed if share is not None else None)


def _write_pairwise(session: Session, spec: StudyConfig, systems: dict[str, System],
                    responses: dict[tuple[int, int], int], context_ids: list[int]) -> StudySummary:
    """Plan a pairwise study over `context_ids` and write its pair items and placements (in the caller's
    transaction). A pair item holds the two responses with the lower id as 'a'; each placement logs which of
    them is shown on the left, as the design counterbalanced it."""
    setup = spec.pairwise
    if setup is None:
        raise StudySetupError(f"study {spec.name!r} is pairwise but its configuration names no pairs")
    control_contexts = {name: [cid for cid in context_ids if (cid, systems[name].id) in responses]
                        for name in spec.controls}
    if spec.controls and controls_per_assignment(spec.design.items_per_assignment, spec.design.control_rate):
        lacking = [name for name in spec.controls if not control_contexts[name]]
        if lacking:
            raise StudySetupError(f"control {lacking[0]!r} has no response on the study's contexts: "
                                  f"{how_to_get_responses([lacking[0]], spec.contexts.split)}")
    plan = plan_pairwise(context_ids, [(pair.first, pair.second) for pair in setup.pairs],
                         judgments_per_pair=setup.judgments_per_pair,
                         items_per_assignment=spec.design.items_per_assignment,
                         control_rate=spec.design.control_rate if spec.controls else 0.0,
                         controls=control_contexts, seed=spec.seed)

    study = Study(name=spec.name, config=spec, seed=spec.seed, status=StudyStatus.OPEN)
    session.add(study)
    session.flush()
    pair_items: dict[tuple[int, tuple[str, str]], PairItem] = {}
    for planned in plan:
        for placed in planned.items:
            key = (placed.context, placed.systems)
            if key in pair_items:
                continue
            by_response = sorted((responses[(placed.context, systems[name].id)], name) for name in placed.systems)
            (response_a, system_a), (response_b, system_b) = by_response
            control_side = None
            if placed.control is not None:
                control_side = "a" if system_a == placed.control else "b"
            pair_items[key] = PairItem(
                study_id=study.id, context_id=placed.context, response_a_id=response_a, response_b_id=response_b,
                is_control=placed.control is not None,
                control_target=spec.control_targets[placed.control] if placed.control else None,
                control_side=control_side, design={"pair": placed.label, "systems": [system_a, system_b]})
    session.add_all(pair_items.values())
    session.flush()
    for planned in plan:
        assignment = Assignment(study_id=study.id, status=AssignmentStatus.OPEN, round=planned.round,
                                design_index=planned.index)
        session.add(assignment)
        session.flush()
        for position, placed in enumerate(planned.items):
            item = pair_items[(placed.context, placed.systems)]
            left_response = responses[(placed.context, systems[placed.left].id)]
            session.add(AssignmentPair(assignment_id=assignment.id, pair_item_id=item.id, position=position,
                                       shown_left="a" if left_response == item.response_a_id else "b"))
    session.flush()

    n_slots = sum(len(a.items) for a in plan)
    cost = spec.pay.cost(len(plan))
    real = [item for item in pair_items.values() if not item.is_control]
    return StudySummary(name=spec.name, contexts=len(context_ids), systems=list(spec.systems), items=len(real),
                        control_items=len(pair_items) - len(real), assignments=len(plan),
                        ratings_per_response=setup.judgments_per_pair,
                        expected_ratings=n_slots * len(spec.criteria), cost=cost,
                        currency=spec.pay.currency if cost is not None else None, kind="pairwise",
                        pairs=len(setup.pairs))


def study_progress(engine: Engine, name: str) -> dict[str, int]:
    """Assignments per status for a study (used by `empeval study status`)."""
    with Session(engine) as session:
        study = session.scalar(select(Study).where(Study.name == name))
        if study is None:
            raise StudySetupError(f"no study named {name!r}")
        return assignment_counts(session, study.id)
