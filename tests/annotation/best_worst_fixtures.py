"""A best-worst scaling study on the bundled sample for the collection-path tests: four stand-in systems whose
replies name no system, the study made by `create_study`, and what SQL says about each placement (its tuple's
systems and texts in the order shown), to check pages, submissions and exports against."""
from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import select
from sqlalchemy.orm import Session

from empeval.server.store.kinds.best_worst import AssignmentTuple, BestWorstChoice, TupleItem, TupleMember
from empeval.server.store.models import Response, System
from empeval.tasks.study_create import create_study
from empeval.tasks.study_file import parse_study
from tests.annotation.conftest import CONTROLS, add_responses

BWS_SYSTEMS = ["sys-a", "sys-b", "sys-c", "sys-d"]
BWS_CRITERIA = ("empathy", "relevance", "fluency")
LETTERS = "ABCDEF"


def neutral_text(system: str, context_id: int) -> str:
    """A reply that says nothing of the system that wrote it, yet is unique per (system, context)."""
    return f"Reply {(BWS_SYSTEMS + CONTROLS).index(system) + 1} to conversation {context_id}."


def make_bws_study(engine, *, name="bws", count=8, k=2, size=3, per_assignment=4, control_rate=0.25, seed=5,
                   with_responses=True, systems=BWS_SYSTEMS, **extra):
    if with_responses:
        add_responses(engine, list(systems) + CONTROLS, 30, text=neutral_text)
    spec = parse_study({
        "name": name, "kind": "best_worst", "seed": seed, "contexts": {"split": "test", "count": count},
        "systems": {"names": list(systems), "controls": CONTROLS if control_rate else []},
        "design": {"judgments_per_tuple": k, "tuple_size": size, "items_per_assignment": per_assignment,
                   "control_rate": control_rate, "assignment_minutes": 30},
        **extra})
    return create_study(engine, spec)


@dataclass(frozen=True)
class TuplePlacement:
    assignment_id: int
    position: int
    tuple_item_id: int
    context_id: int
    shown_order: str
    systems: tuple[str, ...]  # in the order shown (the first is A)
    texts: tuple[str, ...]  # in the order shown
    is_control: bool
    control_target: str | None
    control_system: str | None

    def letter_of(self, system: str) -> str:
        return LETTERS[self.systems.index(system)]


def tuple_placements(engine, assignment_id: int) -> list[TuplePlacement]:
    """The assignment's placements as SQL holds them, in position order."""
    with Session(engine) as session:
        rows = session.execute(
            select(AssignmentTuple.position, TupleItem.id, TupleItem.context_id, AssignmentTuple.shown_order,
                   TupleItem.is_control, TupleItem.control_target, TupleItem.control_slot)
            .join(TupleItem, TupleItem.id == AssignmentTuple.tuple_item_id)
            .where(AssignmentTuple.assignment_id == assignment_id).order_by(AssignmentTuple.position)).all()
        members = {(tuple_id, slot): (system, text) for tuple_id, slot, system, text in session.execute(
            select(TupleMember.tuple_item_id, TupleMember.slot, System.name, Response.text)
            .join(Response, Response.id == TupleMember.response_id).join(System, System.id == Response.system_id)
            .where(TupleMember.tuple_item_id.in_([row[1] for row in rows])))}
    placed = []
    for position, tuple_id, context_id, shown_order, is_control, target, control_slot in rows:
        shown = [members[tuple_id, int(slot)] for slot in shown_order]
        placed.append(TuplePlacement(
            assignment_id, position, tuple_id, context_id, shown_order, tuple(s for s, _ in shown),
            tuple(t for _, t in shown), bool(is_control), target,
            members[tuple_id, control_slot][0] if is_control else None))
    return placed


def stored_picks(engine, assignment_id: int) -> dict[tuple[int, str], tuple[str, str]]:
    """(tuple item, criterion) -> (system picked best, system picked worst), as stored."""
    with Session(engine) as session:
        slots = {(t, s): system for t, s, system in session.execute(
            select(TupleMember.tuple_item_id, TupleMember.slot, System.name)
            .join(Response, Response.id == TupleMember.response_id).join(System, System.id == Response.system_id))}
        return {(item, criterion): (slots[item, best], slots[item, worst])
                for item, criterion, best, worst in session.execute(
                    select(BestWorstChoice.tuple_item_id, BestWorstChoice.criterion, BestWorstChoice.best_slot,
                           BestWorstChoice.worst_slot).where(BestWorstChoice.assignment_id == assignment_id))}


def picks_body(engine, assignment_id: int, *, best="A", worst=None, submission_id="bws-submit-0001",
               **extra) -> dict:
    """Every tuple of the assignment answered: `best` (a letter) best on every criterion and `worst` (default: the
    last letter) worst."""
    entries = []
    for p in tuple_placements(engine, assignment_id):
        last = LETTERS[len(p.systems) - 1]
        entries.append({"item_id": p.tuple_item_id, "seconds": 2.0 + p.position,
                        "best": {c: best for c in BWS_CRITERIA}, "worst": {c: worst or last for c in BWS_CRITERIA}})
    return {"submission_id": submission_id, **extra, "best_worst": entries}
