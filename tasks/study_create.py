"""Creating a study in the store: pick contexts, find the responses to rate, plan assignments, write it all.

One transaction: a study is created whole or not at all. The checks every study needs (its name is free, the
study it is compared with exists, the dataset and every system's responses are in the store) and the choice of its
contexts are made here, the same way for every kind; the study's kind (its tasks part, tasks/kinds/) then plans the
assignments over those contexts and writes its units and placements (a Likert study's items, an A/B study's pairs
with the side each is shown on, ...).
"""
from __future__ import annotations

import math
import random
from typing import Any

from sqlalchemy import Engine, select
from sqlalchemy.orm import Session

from empeval.server.backend.registry import DEFAULT_CONFIG, load_config
from empeval.server.datasets.sample import ED_DATASET
from empeval.server.store.bulk import insert_returning_ids
from empeval.server.store.engine import unit_of_work
from empeval.server.store.models import Assignment, Context, Dataset, Dialogue, Response, Study, System
from empeval.server.store.queries import assignment_counts
from empeval.server.store.statuses import AssignmentStatus, StudyStatus
from empeval.server.store.study_config import StudyConfig
from empeval.tasks.design import controls_per_assignment
from empeval.tasks.kind_parts import ChosenContexts, StudySetupError, StudySummary
from empeval.tasks.kinds import TaskKind, task_kind
from empeval.tasks.qualification import describe as describe_qualification
from empeval.tasks.qualification import write_gold_items


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


def _latest_system(session: Session, name: str) -> System | None:
    return session.scalar(select(System).where(System.name == name)
                          .order_by(System.created_at.desc(), System.id.desc()))


def _context_key(conv_id: str, n_turns: int) -> str:
    return f"{conv_id}#{n_turns}"


def create_study(engine: Engine, spec: StudyConfig) -> StudySummary:
    """Write `spec` as a study with its units and planned assignments, in one transaction (a study is created whole
    or not at all); see StudySetupError for what can fail. The contexts are chosen here, the same way for every
    kind (so a study of another kind with the seed, count and systems of a Likert one judges the same contexts),
    and the study's kind (its tasks part's `create`) designs and writes the rest."""
    kind = task_kind(spec.kind)
    check_controls_fit(items_per_assignment=spec.design.items_per_assignment, control_rate=spec.design.control_rate,
                       controls=spec.controls)
    with unit_of_work(engine) as session:
        if session.scalar(select(Study.id).where(Study.name == spec.name)) is not None:
            raise StudySetupError(f"a study named {spec.name!r} exists already; choose another name")
        if spec.compare_with and session.scalar(select(Study.id).where(Study.name == spec.compare_with)) is None:
            raise StudySetupError(f"compare_with: no study named {spec.compare_with!r} in the store: create it "
                                  "first (`empeval study create FILE`), or correct the name")
        if kind.own_contexts:
            # The kind finds its contexts itself (an ACUTE study: its chat study's prompts): nothing stored to find.
            found = kind.study_contexts(session, spec)
            return _create_with(session, kind, spec, found, found, {}, {})
        dataset = session.scalar(select(Dataset).where(Dataset.name == spec.contexts.dataset))
        if dataset is None:
            raise StudySetupError(f"no dataset {spec.contexts.dataset!r} in the store: import it first with "
                                  f"{import_command(spec.contexts.dataset, spec.contexts.split)}")
        if kind.live_systems:
            # The systems answer live while raters work (the backend serves them): nothing stored to find, only
            # the prompts to choose. The kind checks that its systems are configured.
            kind.check_live_systems(spec)
            prompts = {_context_key(conv, n): cid for cid, conv, n in session.execute(
                select(Context.id, Dialogue.conv_id, Context.n_turns).join(Dialogue, Dialogue.id == Context.dialogue_id)
                .where(Dialogue.dataset_id == dataset.id, Dialogue.split == spec.contexts.split, Context.n_turns == 1,
                       *([Dialogue.emotion.in_(spec.contexts.emotions)] if spec.contexts.emotions else []))).all()}
            return _create_with(session, kind, spec, prompts, prompts, {}, {})
        systems: dict[str, System] = {}
        missing = []
        for name in (*spec.systems, *spec.controls):
            system = _latest_system(session, name)
            if system is None:
                missing.append(name)
            else:
                systems[name] = system
        if missing:  # every one named at once, with the one command that generates them
            listed = ", ".join(f"{name!r}{kind.system_role(spec, name)}" for name in missing)
            raise StudySetupError(f"{'system' if len(missing) == 1 else f'{len(missing)} systems'} {listed} "
                                  f"{'has' if len(missing) == 1 else 'have'} no responses yet: "
                                  f"{how_to_get_responses(missing, spec.contexts.split)}")

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
        return _create_with(session, kind, spec, all_contexts, complete, systems, responses)


def _create_with(session: Session, kind: TaskKind, spec: StudyConfig, all_contexts: dict[str, int],
                 complete: dict[str, int], systems: dict[str, System], responses: dict[tuple[int, int], int]
                 ) -> StudySummary:
    """Choose the study's contexts among `complete` (key -> id: those with every system's response, or a live
    kind's prompts; `all_contexts`: every context of the split), write the study row and hand over to the kind's
    `create`."""
    live = kind.live_systems
    if spec.contexts.ids:
        missing = [key for key in spec.contexts.ids if key not in all_contexts]
        if missing:
            raise StudySetupError(f"contexts.ids: {missing[0]!r} is not a {spec.contexts.split} "
                                  f"{'prompt (a first turn, `#1`)' if live else 'context'} of "
                                  f"{spec.contexts.dataset!r} ({len(missing)} of {len(spec.contexts.ids)} not found)")
        unanswered = [key for key in spec.contexts.ids if key not in complete]
        if unanswered:
            raise StudySetupError(f"context {unanswered[0]!r} lacks a response from some of the systems: "
                                  f"{how_to_get_responses(spec.systems, spec.contexts.split)}")
        chosen = list(spec.contexts.ids)
    elif spec.contexts.count is None and kind.own_contexts:
        chosen = sorted(complete)  # every context the kind found
    else:
        count = spec.contexts.count or 0
        if len(complete) < count:
            raise StudySetupError(
                f"contexts.count is {count} but the study can be made over only {len(complete)} contexts"
                if kind.own_contexts else
                f"contexts.count is {count} but the {spec.contexts.split} split holds only {len(complete)} prompts"
                if live else
                f"contexts.count is {count} but only {len(complete)} {spec.contexts.split} "
                f"contexts have responses from all of {', '.join(spec.systems)}: lower the count, or "
                f"{how_to_get_responses(spec.systems, spec.contexts.split)}")
        chosen = random.Random(spec.seed).sample(sorted(complete), count)

    study = Study(name=spec.name, config=spec, seed=spec.seed, status=StudyStatus.OPEN)
    session.add(study)
    session.flush()
    summary = kind.create(session, spec, study, ChosenContexts(
        ids=sorted({complete[key] for key in chosen}), keys=chosen, key_to_id=complete, systems=systems,
        responses=responses))
    write_gold_items(session, kind, spec, study)  # the study's qualification, if any (tasks/qualification.py)
    summary.sentence += describe_qualification(spec)
    summary.platform, summary.platform_fee = spec.recruitment.platform, spec.pay.platform_fee
    return summary


def lacking_controls(spec: StudyConfig, chosen: ChosenContexts, context_ids: list[int] | set[int]) -> None:
    """StudySetupError naming the first control with no response on `context_ids`, when the design shows controls
    at all (their slots do not round to zero)."""
    if not spec.controls or not controls_per_assignment(spec.design.items_per_assignment, spec.design.control_rate):
        return
    lacking = [name for name in spec.controls if not any(chosen.response(cid, name) for cid in context_ids)]
    if lacking:
        raise StudySetupError(f"control {lacking[0]!r} has no response on the study's contexts: "
                              f"{how_to_get_responses([lacking[0]], spec.contexts.split)}")


def add_assignments(session: Session, study: Study, plan: list[Any]) -> list[int]:
    """One open assignment per planned one (its round and design position), written at once (server.store.bulk);
    their ids, in the order of `plan`, for the placements to name."""
    return insert_returning_ids(session, Assignment, [
        {"study_id": study.id, "status": AssignmentStatus.OPEN, "round": planned.round, "design_index": planned.index}
        for planned in plan])


def study_progress(engine: Engine, name: str) -> dict[str, int]:
    """Assignments per status for a study (used by `empeval study status`)."""
    with Session(engine) as session:
        study = session.scalar(select(Study).where(Study.name == name))
        if study is None:
            raise StudySetupError(f"no study named {name!r}")
        return assignment_counts(session, study.id)
