"""The pairwise (A/B) kind in the tasks room: its study-file fields, its design, its simulated raters, its crowd
parts and its page.

A pairwise study, as in the human A/B tests of MoEL and MIME: a rater sees one context with the responses of two
systems and picks the better one per criterion, or a tie. Its study file adds to the shared fields:

    kind = "pairwise"
    [systems]
    names = ["moel", "gold", "mime"]
    anchor = "moel"                  # moel against each other name ("ours vs each baseline") ...
    # pairs = [["moel", "gold"], ["mime", "gold"]]   # ... or the pairs listed; all pairs when neither is given
    controls = ["control-generic"]   # a control pair: a control against a real system, built to lose
    [design]
    judgments_per_pair = 3           # k distinct annotators per (context, pair)
    ties = true                      # whether "tie" is an answer
    items_per_assignment = 11        # pairs per assignment, controls included; the real ones (here 10) must
                                     # be even, so that each rater sees every pair's two orders equally often
                                     # (by default 10, or 11 when one of them is a control)
    # human_share = 0.25             # optional (model-assisted decisions): people judge the pairs of a seeded
    # human_share_seed = 11          # uniform sample of a quarter of the contexts, a judge of differences compares
                                     # every context's pairs (`empeval judge NAME --judges pairwise-http-judge`);
                                     # the seed defaults to the study's
    # sampling = "active"            # optional, with human_share: the share is drawn after the judges of
                                     # differences compared every pair (`empeval study sample NAME`), each context
                                     # with a probability from their disagreement (tasks.kinds.likert_active)

Its default criteria ask the paper's three questions as a choice ("Which response shows more understanding of
the feelings ...?"); a [[criteria]] question is shown as written, so write it as a choice. A pairwise study has no
[scale]. The first system of a listed pair (or the anchor) is the one whose wins the report counts.

Its gold items, when the study file has a [qualification] (tasks/qualification.py): `context` (the speaker's turn
first, ending with hers), `response_a` and `response_b` (shown as A and B), `answer` (per criterion "A", "B", "T"
when the study allows ties, or a list of the choices counted right: answer = { empathy = "B", fluency = ["A", "B",
"T"] }) and `feedback`.

Its design is tasks.kinds.pairwise_design.plan_pairwise (left/right counterbalanced per rater); a pair item holds
the two responses with the lower id as 'a', and each placement logs which of them is shown on the left.

The simulated raters judge each response by its latent quality (the system's quality plus the response's own
deviation, the very numbers a Likert rater of that response is drawn from) and choose the better one the
Thurstone way (case V, as analysis.simulate.pairwise does): each side perceived with the rater's noise, the
difference stretched like their use of the scale (severity shifts both sides and cancels), a tie when the two are
within `tie_band`, the left side helped by `position_bias`. Random clickers choose uniformly, straight-liners
always pick the same screen side, and context-ignorers judge every criterion by fluency.
"""
from __future__ import annotations

import random
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any, ClassVar

from sqlalchemy import Engine, func, select
from sqlalchemy.orm import Session, aliased

from empeval.server.errors import BadInput
from empeval.server.store.bulk import insert_rows
from empeval.server.store.kinds import StudySetup
from empeval.server.store.kinds.likert import StudyContext, StudyItem
from empeval.server.store.kinds.pairwise import AssignmentPair, Pair, PairItem, PairwiseSetup
from empeval.server.store.models import Response, Study, System
from empeval.server.store.qualification import Accepted, GoldItem, GoldRow, Panel, ShownTurn
from empeval.server.store.queries import study_by_name
from empeval.server.store.study_config import StudyConfig
from empeval.server.store.study_parts import ACTIVE_SAMPLING, Criterion, Design
from empeval.tasks.crowd.contract import Control
from empeval.tasks.decisions_file import DecisionTerms
from empeval.tasks.design import controls_per_assignment
from empeval.tasks.gold_items import context_panel, gold_answers, gold_context, gold_feedback, gold_fields
from empeval.tasks.kind_parts import ChosenContexts, StudyFileParts, StudyFileReader, StudySetupError, StudySummary
from empeval.tasks.kinds import Answer, TaskKind, register
from empeval.tasks.kinds.likert_human_share import draw_human_sample, human_share_problem, read_share_and_sampling
from empeval.tasks.kinds.pairwise_design import PlannedPairAssignment, pair_slots, plan_pairwise
from empeval.tasks.simulate import CrowdModel, Rater, UnknownItem
from empeval.tasks.study_create import add_assignments, lacking_controls

# What the HIT listing and the preview page say of a pairwise job.
LISTING = {"title": "Compare two replies in conversations about feelings",
           "description": "Read short conversations in which someone shares an experience, and choose the better of "
                          "two replies in each for empathy, relevance and fluency (A, B or a tie).",
           "tags": ["empathy", "dialogue", "comparison", "conversation", "research"]}


def pairwise_choices(rater: Rater, left: str, right: str, criteria: tuple[str, ...], model: CrowdModel,
                     rng: random.Random, *, ties: bool = True, left_deviation: Mapping[str, float] | None = None,
                     right_deviation: Mapping[str, float] | None = None) -> dict[str, str]:
    """A simulated rater's choice per criterion between a response of `left` (shown on the left, as A) and one of
    `right` (B), each with its own deviation from its system's quality: "A", "B" or "T" (a tie, only when `ties`),
    the task page's keys. See the module docstring for the model."""
    if rater.behaviour == "random":
        options = ("A", "B", "T") if ties else ("A", "B")
        return {c: rng.choice(options) for c in criteria}
    if rater.behaviour == "straight":  # one screen side for everything, which side fixed by the rater
        return {c: "A" if rater.severity >= 0 else "B" for c in criteria}
    chosen = {}
    for c in criteria:
        difference = (rater.perceived(left, c, model, left_deviation, rng)
                      - rater.perceived(right, c, model, right_deviation, rng) + model.position_bias)
        chosen[c] = "T" if ties and abs(difference) < model.tie_band else ("A" if difference > 0 else "B")
    return chosen


@dataclass(frozen=True)
class ShownPair:
    """What one placement of a pairwise assignment shows, as only the simulation may know it: the systems on
    the left (A) and on the right (B), and the keys of their responses' fixed deviations
    (CrowdModel.response_deviation)."""

    left: str
    right: str
    left_key: object
    right_key: object


def pair_placements(engine: Engine, study: str) -> dict[tuple[int, int], ShownPair]:
    """(assignment id, pair item id) -> ShownPair for every placement of a pairwise study: the truth the A/B
    simulation needs (the API hides it). A response that the study's linked Likert study (`compare_with`) rates
    is keyed by that study item's id, the key its Likert raters' deviation was drawn from; any other response by
    "response-ID". Read once: an assignment copied on expiry later has placements this map does not hold."""
    response_a, response_b = aliased(Response), aliased(Response)
    system_a, system_b = aliased(System), aliased(System)
    with Session(engine) as session:
        found = study_by_name(session, study)
        linked = found.config.compare_with
        likert_item: dict[int, int] = {}
        if linked:
            items = session.execute(select(StudyItem.response_id, StudyItem.id)
                                    .join(Study, Study.id == StudyItem.study_id)
                                    .where(Study.name == linked).order_by(StudyItem.id.desc())).all()
            # ids descending: a response's lowest item id is the one kept
            likert_item = {response_id: item_id for response_id, item_id in items}
        rows = session.execute(
            select(AssignmentPair.assignment_id, AssignmentPair.pair_item_id, AssignmentPair.shown_left,
                   system_a.name, PairItem.response_a_id, system_b.name, PairItem.response_b_id)
            .join(PairItem, PairItem.id == AssignmentPair.pair_item_id)
            .join(response_a, response_a.id == PairItem.response_a_id)
            .join(system_a, system_a.id == response_a.system_id)
            .join(response_b, response_b.id == PairItem.response_b_id)
            .join(system_b, system_b.id == response_b.system_id)
            .where(PairItem.study_id == found.id)).all()

    def key(response_id: int) -> object:
        return likert_item.get(response_id, f"response-{response_id}")

    placements = {}
    for assignment_id, pair_item_id, shown_left, name_a, id_a, name_b, id_b in rows:
        a, b = (name_a, key(id_a)), (name_b, key(id_b))
        (left, left_key), (right, right_key) = (a, b) if shown_left == "a" else (b, a)
        placements[assignment_id, pair_item_id] = ShownPair(left, right, left_key, right_key)
    return placements


def _gold_choices(reader: StudyFileReader, value: Any, path: str, offered: tuple[str, ...]) -> tuple[str, ...]:
    """The choices a gold item counts right on one criterion: `value` is one of `offered` or a list of them."""
    chosen = value if isinstance(value, list) else [value]
    words = " or ".join(f'"{c}"' for c in offered)
    if not chosen or not all(isinstance(c, str) for c in chosen):
        raise reader.error(path, f"must be {words}, or a list of them, got {value!r}")
    for choice in chosen:
        if choice not in offered:
            hint = ' (the study has no ties: design.ties = false)' if choice == "T" else ""
            raise reader.error(path, f"{choice!r} is not a choice of the study{hint}; expected {words}")
    if len(set(chosen)) != len(chosen):
        raise reader.error(path, "lists a choice twice")
    return tuple(chosen)


@register
class PairwiseTasks(TaskKind):
    name: ClassVar[str] = "pairwise"
    setup = PairwiseSetup
    fields: ClassVar[dict[str, frozenset[str]]] = {"systems": frozenset({"pairs", "anchor"}),
                                                   "design": frozenset({"judgments_per_pair", "ties", "human_share",
                                                                        "human_share_seed", "sampling"})}
    foreign_hints: ClassVar[dict[str, str]] = {
        "design.ratings_per_response": "a pairwise study counts judgments per (context, pair): use "
                                       "design.judgments_per_pair",
        "scale": "a pairwise study has no scale: raters choose A, B (or a tie)"}
    listing: ClassVar[dict[str, Any]] = LISTING
    ui_page: ClassVar[str] = "pairwise"

    def parse(self, reader: StudyFileReader, data: dict[str, Any], parts: StudyFileParts) -> tuple[PairwiseSetup,
                                                                                                  Design]:
        s, d = data.get("systems", {}), data.get("design", {})
        pairs = self._pairs(reader, s, parts.systems)
        design = self._even_pair_slots(reader, parts.design, given="items_per_assignment" in parts.design_given,
                                       with_controls=bool(parts.controls))
        ties = d.get("ties", PairwiseSetup.ties)
        if not isinstance(ties, bool):
            raise reader.error("design.ties", f"must be true or false, got {ties!r}")
        k = reader.integer(d, "judgments_per_pair", "design.judgments_per_pair", PairwiseSetup.judgments_per_pair,
                           minimum=1, maximum=50)
        setup = PairwiseSetup(pairs=pairs, anchor=s.get("anchor", ""), ties=ties, judgments_per_pair=k or 1)
        return self._human_share(reader, d, setup, n_contexts=parts.n_contexts, seed=parts.seed), design

    @staticmethod
    def _human_share(reader: StudyFileReader, d: dict, setup: PairwiseSetup, *, n_contexts: int,
                     seed: int) -> PairwiseSetup:
        """design.human_share, design.human_share_seed and design.sampling (model-assisted decisions): people judge
        the pairs of a seeded uniform sample of round(share x contexts) contexts (or, with sampling "active", of an
        active sample of that many expected, drawn once judges of differences compared every pair), a judge of
        differences compares the pairs of every context. The rules a Likert study's share follows
        (likert_human_share.human_share_problem); the seed defaults to the study's and is stored resolved, so the
        stored configuration reproduces the draw."""
        read = read_share_and_sampling(reader, d, n_contexts=n_contexts, seed=seed, people="judge")
        if read is None:
            return setup
        share, sample_seed, sampling = read
        return replace(setup, human_share=share, human_share_seed=sample_seed, sampling=sampling)

    def qualification_items(self, reader: StudyFileReader, entries: list[Any], setup: StudySetup,
                            criteria: tuple[Criterion, ...], controls: tuple[str, ...]) -> tuple[GoldItem, ...]:
        """Each gold item: its `context`, `response_a` and `response_b` (shown as A, on the left, and B), per
        criterion the right choice (`answer`: "A", "B", "T" for a tie when the study allows ties, or a list of the
        choices counted right) and its `feedback`. An item that counts every choice right on every criterion is
        refused: there would be nothing to get wrong."""
        assert isinstance(setup, PairwiseSetup)
        offered = ("A", "B", "T") if setup.ties else ("A", "B")
        items = []
        for i, entry in enumerate(entries):
            path = f"qualification.items[{i}]"
            gold_fields(reader, entry, path, ("context", "response_a", "response_b", "answer", "feedback"))
            turns = gold_context(reader, entry, path)
            responses = (reader.string(entry, "response_a", f"{path}.response_a"),
                         reader.string(entry, "response_b", f"{path}.response_b"))
            accepted = tuple(Accepted(key, _gold_choices(reader, value, f"{path}.answer.{key}", offered))
                             for key, value in gold_answers(reader, entry, path, criteria).items())
            if all(len(a.answers) == len(offered) for a in accepted):
                raise reader.error(f"{path}.answer", "counts every choice right on every criterion: name the right "
                                   "one for at least one criterion")
            items.append(GoldItem(feedback=gold_feedback(reader, entry, path), turns=turns, responses=responses,
                                  accepted=accepted))
        return tuple(items)

    def qualification_rows(self, session: Session, spec: StudyConfig) -> list[GoldRow]:
        """Each gold item as a pair is shown: the conversation, then response A and response B."""
        assert spec.qualification is not None
        return [GoldRow((context_panel(item.turns),
                         *(Panel(f"Response {side}", (ShownTurn("listener", text, f"Response {side}"),))
                           for side, text in zip("AB", item.responses, strict=True))), item.accepted, item.feedback)
                for item in spec.qualification.items]

    @staticmethod
    def _even_pair_slots(r: StudyFileReader, design: Design, *, given: bool, with_controls: bool) -> Design:
        """The pairwise design with an even number of real pairs per assignment (items less controls), as
        tasks.kinds.pairwise_design needs to keep each rater's left/right orders balanced: a size left to its default
        grows to the next one that fits (11 with one control); a size given that does not fit is refused."""
        size, rate = design.items_per_assignment, design.control_rate

        def fits(n: int) -> bool:
            slots = pair_slots(n, rate, with_controls=with_controls)
            return slots > 0 and slots % 2 == 0

        if fits(size):
            return design
        if not given:
            return replace(design, items_per_assignment=next(n for n in range(size + 1, 201) if fits(n)))
        n_real = pair_slots(size, rate, with_controls=with_controls)
        n_controls = size - n_real
        near = [n for n in (next((n for n in range(size - 1, 0, -1) if fits(n)), None),
                            next((n for n in range(size + 1, 201) if fits(n)), None)) if n is not None]
        if with_controls:
            controls = f"{n_controls} control{'' if n_controls == 1 else 's'} (design.control_rate = {rate})"
            change = f"use {' or '.join(map(str, near))} items (or another design.control_rate)"
        else:
            controls, change = "no control", f"use {' or '.join(map(str, near))} items"
        raise r.error("design.items_per_assignment",
                      f"{size} items with {controls} leave {n_real} pair judgments per assignment, an odd number; "
                      f"{change} so that each rater sees every pair's two orders equally often")

    @staticmethod
    def _pairs(r: StudyFileReader, s: dict, systems: tuple[str, ...]) -> tuple[Pair, ...]:
        """The pairs a pairwise study compares: systems.pairs as listed, or the anchor against each other name,
        or every pair of names (in the order they are named); every name must be in some pair."""
        if "pairs" in s and "anchor" in s:
            raise r.error("systems", "give pairs or anchor, not both")
        if len(systems) < 2:
            raise r.error("systems.names", "a pairwise study compares at least two systems")
        if "anchor" in s:
            anchor = r.string(s, "anchor", "systems.anchor")
            if anchor not in systems:
                raise r.error("systems.anchor", f"{anchor!r} is not among systems.names ({', '.join(systems)})")
            return tuple(Pair(anchor, other) for other in systems if other != anchor)
        if "pairs" not in s:
            return tuple(Pair(a, b) for i, a in enumerate(systems) for b in systems[i + 1:])
        raw = s["pairs"]
        if not isinstance(raw, list) or not raw:
            raise r.error("systems.pairs", f'must be a non-empty list of pairs like [["moel", "gold"]], got {raw!r}')
        pairs: list[Pair] = []
        seen: dict[frozenset[str], int] = {}
        for i, entry in enumerate(raw):
            path = f"systems.pairs[{i}]"
            if not isinstance(entry, list) or len(entry) != 2 or not all(isinstance(v, str) for v in entry):
                raise r.error(path, f'must be two system names like ["moel", "gold"], got {entry!r}')
            for name in entry:
                if name not in systems:
                    raise r.error(path, f"{name!r} is not among systems.names ({', '.join(systems)})")
            if entry[0] == entry[1]:
                raise r.error(path, f"pairs {entry[0]!r} with itself; a pair is two different systems")
            key = frozenset(entry)
            if key in seen:
                raise r.error(path, f"repeats systems.pairs[{seen[key]}] (a pair is the same in either order)")
            seen[key] = i
            pairs.append(Pair(entry[0], entry[1]))
        paired = {name for pair in pairs for name in (pair.first, pair.second)}
        unpaired = [name for name in systems if name not in paired]
        if unpaired:
            raise r.error("systems.names", f"{unpaired[0]!r} is in no pair of systems.pairs; pair it or remove it")
        return tuple(pairs)

    def decision_terms(self, setup: StudySetup, systems: tuple[str, ...]) -> DecisionTerms:
        """The pairs the design judges (an anchored design: the anchor against each other system), each with its
        first system (the anchor, or the first of a listed pair) as A; the margin in net preference, the share of
        judgments A wins minus the share B wins (between -1 and 1), so below 1."""
        assert isinstance(setup, PairwiseSetup)
        return DecisionTerms(pairs=tuple((p.first, p.second) for p in setup.pairs),
                             margin_unit="net preference: A's share of wins minus B's, between -1 and 1",
                             margin_below=1.0)

    def system_role(self, spec: StudyConfig, system: str) -> str:
        setup = spec.setup
        assert isinstance(setup, PairwiseSetup)
        pair = next((p for p in setup.pairs if system in (p.first, p.second)), None)
        return f" (compared in the pair {pair.first} vs {pair.second})" if pair else ""

    def create(self, session: Session, spec: StudyConfig, study: Study, chosen: ChosenContexts) -> StudySummary:
        """Plan the study over the chosen contexts and write its pair items and placements. A pair item holds the
        two responses with the lower id as 'a'; each placement logs which of them is shown on the left, as the
        design counterbalanced it."""
        setup = spec.setup
        assert isinstance(setup, PairwiseSetup)
        human_ids = list(chosen.ids)
        active = setup.sampling == ACTIVE_SAMPLING
        if setup.human_share is not None:
            if problem := human_share_problem(setup.human_share, len(chosen.keys)):
                raise StudySetupError(f"design.human_share: {problem}")
            seed = spec.seed if setup.human_share_seed is None else setup.human_share_seed
            # An active study's sample is drawn later (`empeval study sample`, write_drawn): nobody judges yet.
            drawn = set() if active else {chosen.key_to_id[key] for key in draw_human_sample(
                chosen.keys, setup.human_share, seed)}
            human_ids = [cid for cid in chosen.ids if cid in drawn]
        lacking_controls(spec, chosen, chosen.ids if active else human_ids)
        plan = _plan(spec, setup, human_ids, {name: [cid for cid in human_ids if chosen.response(cid, name)]
                                              for name in spec.controls})
        pair_items = _planned_items(spec, study, plan, chosen.response, {})
        # With a human share, the other contexts' pairs are written too, for the judge of differences, and no
        # assignment holds them; study_context records which contexts people judge.
        judge_only = [cid for cid in chosen.ids if cid not in set(human_ids)]
        for cid in judge_only:
            for pair in setup.pairs:
                (response_a, system_a), (response_b, system_b) = sorted(
                    (chosen.response(cid, name) or 0, name) for name in (pair.first, pair.second))
                pair_items[(cid, (system_a, system_b) if system_a < system_b else (system_b, system_a))] = PairItem(
                    study_id=study.id, context_id=cid, response_a_id=response_a, response_b_id=response_b,
                    is_control=False, design={"pair": pair.label, "systems": [system_a, system_b]})
        session.add_all(pair_items.values())
        if setup.human_share is not None:
            session.add_all(StudyContext(study_id=study.id, context_id=cid, human_rated=cid not in judge_only)
                            for cid in chosen.ids)
        session.flush()
        _place(session, study, plan, pair_items, chosen.response)

        n_slots = sum(len(a.items) for a in plan)
        expected = n_slots * len(spec.criteria)
        cost = spec.pay.cost(len(plan))
        real = [item for item in pair_items.values() if not item.is_control]
        return StudySummary(
            name=spec.name, kind=self.name, contexts=len(chosen.ids), systems=list(spec.systems), items=len(real),
            control_items=len(pair_items) - len(real), assignments=len(plan), per_unit=setup.judgments_per_pair,
            expected_answers=expected, cost=cost, currency=spec.pay.currency if cost is not None else None,
            sentence=(f"pairwise study {spec.name!r}: {len(chosen.ids)} contexts x {len(setup.pairs)} pairs of "
                      f"systems = {len(real)} pair items (+{len(pair_items) - len(real)} control pairs), "
                      f"{len(plan)} assignments, k={setup.judgments_per_pair} judgments per (context, pair), "
                      f"{expected} choices expected"
                      + (f"; people will judge the pairs of an active sample of about "
                         f"{setup.human_share * len(chosen.ids):.0f} of the {len(chosen.ids)} contexts "
                         f"(design.human_share {setup.human_share:g} expected, design.sampling active, seed "
                         f"{setup.human_share_seed}), drawn with probabilities from the judges of differences' "
                         f"disagreement once they have compared every pair: run `empeval judge {spec.name} --judges "
                         f"NAME,...` (two judges of differences or more), then `empeval study sample {spec.name}`; "
                         "no assignment exists until then" if active and setup.human_share is not None else
                         f"; people judge the pairs of {len(human_ids)} of the {len(chosen.ids)} contexts "
                         f"(design.human_share {setup.human_share:g}, seed {setup.human_share_seed}), a judge of "
                         "differences compares those of every context" if setup.human_share is not None else "")))

    def write_drawn(self, session: Session, study: Study, drawn: set[int]) -> int:
        """The assignments of the drawn contexts' pairs (every pair of the study, k judgments each, left/right
        counterbalanced as at creation) with the study's control pairs on those contexts (the latest response of
        each control system there), written in the draw's transaction; the number of assignments."""
        spec = study.config
        setup = spec.setup
        assert isinstance(setup, PairwiseSetup)
        real = session.scalars(select(PairItem).where(PairItem.study_id == study.id, PairItem.is_control.is_(False),
                                                      PairItem.context_id.in_(drawn))).all()
        responses: dict[tuple[int, str], int] = {}
        for item in real:
            system_a, system_b = item.design["systems"]
            responses[item.context_id, system_a] = item.response_a_id
            responses[item.context_id, system_b] = item.response_b_id
        for name in spec.controls:
            system_id = session.scalar(select(System.id).where(System.name == name)
                                       .order_by(System.created_at.desc(), System.id.desc()))
            if system_id is not None:
                for response_id, cid in session.execute(select(func.max(Response.id), Response.context_id)
                                                        .where(Response.system_id == system_id,
                                                               Response.context_id.in_(drawn))
                                                        .group_by(Response.context_id)).all():
                    responses[cid, name] = response_id

        def response(cid: int, name: str) -> int | None:
            return responses.get((cid, name))

        ids = sorted(drawn)
        lacking = [name for name in spec.controls if not any((cid, name) in responses for cid in ids)]
        if lacking and controls_per_assignment(spec.design.items_per_assignment, spec.design.control_rate):
            raise BadInput(f"study {study.name!r}: control {lacking[0]!r} has no response on any of the "
                           f"{len(ids)} drawn contexts, and the design shows controls: draw again with another "
                           f"seed (`empeval study sample {study.name} --seed N`; nothing was written)")
        plan = _plan(spec, setup, ids, {name: [cid for cid in ids if response(cid, name)] for name in spec.controls})
        existing = {(item.context_id, tuple(sorted(item.design["systems"]))): item for item in real}
        made = _planned_items(spec, study, plan, response, existing)
        session.add_all(item for key, item in made.items() if key not in existing)
        session.flush()
        _place(session, study, plan, made, response)
        return len(plan)

    def simulated_answers(self, engine: Engine, study: str, model: CrowdModel, seed: int) -> Answer:
        """A choice per pair and criterion (pairwise_choices) from the placement's systems, each response with the
        deviation drawn from its key (pair_placements) and `seed`: with the seed of a linked Likert study's run, each
        response keeps the quality its Likert raters saw."""
        placements = pair_placements(engine, study)

        def judge(rater: Rater, rng: random.Random, assignment: dict) -> dict:
            criteria = tuple(c["key"] for c in assignment["criteria"])
            ties = bool(assignment.get("ties", True))
            judgments = []
            for item in assignment["items"]:
                shown = placements.get((assignment["assignment_id"], item["item_id"]))
                if shown is None:
                    raise UnknownItem(f"pair item {item['item_id']} of assignment {assignment['assignment_id']} is not "
                                      "among the placements the simulation was given")
                seconds = rater.seconds(model, rng)
                chosen = pairwise_choices(rater, shown.left, shown.right, criteria, model, rng, ties=ties,
                                          left_deviation=model.response_deviation(shown.left_key, seed, criteria),
                                          right_deviation=model.response_deviation(shown.right_key, seed, criteria))
                judgments.append({"item_id": item["item_id"], "seconds": seconds, "choices": chosen})
            return {"judgments": judgments}

        return judge

    def crowd_controls(self, session: Session, assignment_id: int) -> tuple[list[int], list[Control]]:
        """Its contexts, and each control pair scored by the rule of analysis.kinds.pairwise.tables.control_scores:
        it passes when the worker chose the real response, shown as B when the control is shown as A (left)."""
        pairs = session.execute(
            select(PairItem.id, PairItem.context_id, PairItem.is_control, PairItem.control_target,
                   PairItem.control_side, AssignmentPair.shown_left)
            .join(AssignmentPair, AssignmentPair.pair_item_id == PairItem.id)
            .where(AssignmentPair.assignment_id == assignment_id)
        ).all()
        return (sorted({context_id for _, context_id, *_ in pairs}),
                [Control(item_id=item_id, target=target, rule="one-of", entries="judgments", field="choices",
                         passing=("B",) if side == left else ("A",))
                 for item_id, _, is_control, target, side, left in pairs if is_control])


def _plan(spec: StudyConfig, setup: PairwiseSetup, contexts: list[int],
          controls: Mapping[str, list[int]]) -> list[PlannedPairAssignment]:
    """The study's pairwise plan over the contexts people judge (tasks.kinds.pairwise_design.plan_pairwise); none
    when nobody judges yet (an active study before its draw)."""
    if not contexts:
        return []
    return plan_pairwise(contexts, [(pair.first, pair.second) for pair in setup.pairs],
                         judgments_per_pair=setup.judgments_per_pair,
                         items_per_assignment=spec.design.items_per_assignment,
                         control_rate=spec.design.control_rate if spec.controls else 0.0,
                         controls=controls, seed=spec.seed)


def _planned_items(spec: StudyConfig, study: Study, plan: list[PlannedPairAssignment], response: Any,
                   existing: Mapping[tuple[Any, tuple[str, str]], PairItem]) -> dict[tuple[Any, tuple[str, str]],
                                                                                    PairItem]:
    """The pair item of every (context, pair) the plan places, by (context, sorted systems): the `existing` one, or
    a new one (not yet added to the session) holding the two responses (`response(context, system)`) with the lower
    id as 'a', a control pair with its control's target and side."""
    pair_items: dict[tuple[Any, tuple[str, str]], PairItem] = dict(existing)
    for planned in plan:
        for placed in planned.items:
            key = (placed.context, placed.systems)
            if key in pair_items:
                continue
            by_response = sorted((response(placed.context, name) or 0, name) for name in placed.systems)
            (response_a, system_a), (response_b, system_b) = by_response
            control_side = None
            if placed.control is not None:
                control_side = "a" if system_a == placed.control else "b"
            pair_items[key] = PairItem(
                study_id=study.id, context_id=placed.context, response_a_id=response_a, response_b_id=response_b,
                is_control=placed.control is not None,
                control_target=spec.control_targets[placed.control] if placed.control else None,
                control_side=control_side, design={"pair": placed.label, "systems": [system_a, system_b]})
    return pair_items


def _place(session: Session, study: Study, plan: list[PlannedPairAssignment],
           pair_items: Mapping[tuple[Any, tuple[str, str]], PairItem], response: Any) -> None:
    """One open assignment per planned one, and its placements: each pair item at its position, with the side the
    design shows on the left (pair items already flushed)."""
    rows = []
    for assignment_id, planned in zip(add_assignments(session, study, plan), plan, strict=True):
        for position, placed in enumerate(planned.items):
            item = pair_items[(placed.context, placed.systems)]
            left_response = response(placed.context, placed.left)
            rows.append({"assignment_id": assignment_id, "pair_item_id": item.id, "position": position,
                         "shown_left": "a" if left_response == item.response_a_id else "b"})
    insert_rows(session, AssignmentPair, rows)
