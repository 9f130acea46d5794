"""A pairwise (A/B) study on the bundled sample for the collection-path tests: responses whose text names no system
(so a test can tell that no system name reaches the page), the study made by `create_study`, and what SQL says
about each placement, to check pages and exports against."""
from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import event, select, update
from sqlalchemy.orm import Session, aliased

from empeval.server.store.kinds.pairwise import AssignmentPair, PairItem
from empeval.server.store.models import Assignment, Response, Study, System
from empeval.tasks.study_create import create_study
from empeval.tasks.study_file import parse_study
from tests.annotation.conftest import CONTROLS, SYSTEMS, add_responses

AB_CRITERIA = ("empathy", "relevance", "fluency")


def neutral_text(system: str, context_id: int) -> str:
    """A reply that says nothing of the system that wrote it, yet is unique per (system, context)."""
    return f"Reply {(SYSTEMS + CONTROLS).index(system) + 1} to conversation {context_id}."


def make_ab_study(engine, *, name="ab", count=8, k=2, per_assignment=None, control_rate=0.25, ties=True, seed=5,
                  with_responses=True, **extra):
    if per_assignment is None:  # four pairs (the design needs an even number) and the control slot, if any
        per_assignment = 5 if control_rate else 4
    if with_responses:
        add_responses(engine, SYSTEMS + CONTROLS, 30, text=neutral_text)
    spec = parse_study({
        "name": name, "kind": "pairwise", "seed": seed, "contexts": {"split": "test", "count": count},
        "systems": {"names": SYSTEMS, "anchor": SYSTEMS[0], "controls": CONTROLS if control_rate else []},
        "design": {"judgments_per_pair": k, "items_per_assignment": per_assignment, "control_rate": control_rate,
                   "ties": ties, "assignment_minutes": 30},
        **extra})
    return create_study(engine, spec)


@dataclass(frozen=True)
class Placement:
    assignment_id: int
    position: int
    pair_item_id: int
    context_id: int
    shown_left: str
    system_a: str
    system_b: str
    text_a: str
    text_b: str
    is_control: bool
    control_target: str | None

    @property
    def left(self) -> tuple[str, str]:
        """(system, text) shown on the left, as A."""
        return (self.system_a, self.text_a) if self.shown_left == "a" else (self.system_b, self.text_b)

    @property
    def right(self) -> tuple[str, str]:
        return (self.system_b, self.text_b) if self.shown_left == "a" else (self.system_a, self.text_a)


def placements(engine, assignment_id: int) -> list[Placement]:
    """The assignment's placements as SQL holds them, in position order."""
    response_a, response_b = aliased(Response), aliased(Response)
    system_a, system_b = aliased(System), aliased(System)
    with Session(engine) as session:
        rows = session.execute(
            select(AssignmentPair.assignment_id, AssignmentPair.position, PairItem.id, PairItem.context_id,
                   AssignmentPair.shown_left, system_a.name, system_b.name, response_a.text, response_b.text,
                   PairItem.is_control, PairItem.control_target)
            .join(PairItem, PairItem.id == AssignmentPair.pair_item_id)
            .join(response_a, response_a.id == PairItem.response_a_id)
            .join(system_a, system_a.id == response_a.system_id)
            .join(response_b, response_b.id == PairItem.response_b_id)
            .join(system_b, system_b.id == response_b.system_id)
            .where(AssignmentPair.assignment_id == assignment_id)
            .order_by(AssignmentPair.position)).all()
    return [Placement(*row) for row in rows]


def assignment_ids(engine, study: str) -> list[int]:
    with Session(engine) as session:
        return list(session.scalars(select(Assignment.id).join(Study).where(Study.name == study)
                                    .order_by(Assignment.design_index, Assignment.id)))


def give(engine, assignment_id: int, annotator_id: int, *, expires_at=None) -> None:
    """Hand one assignment to an annotator directly in SQL (the tests of payload, submit and export do not depend
    on how the hand-out picks it)."""
    with Session(engine) as session, session.begin():
        session.execute(update(Assignment).where(Assignment.id == assignment_id)
                        .values(status="assigned", annotator_id=annotator_id, expires_at=expires_at))


class StatementCounter:
    """SQL statements an engine runs while in the `with` block (transaction control left out)."""

    def __init__(self, engine):
        self.engine, self.statements = engine, []

    def _record(self, _conn, _cursor, statement, *_args):
        if not statement.lstrip().upper().startswith(("BEGIN", "COMMIT", "ROLLBACK", "PRAGMA", "SAVEPOINT",
                                                      "RELEASE")):
            self.statements.append(statement)

    def __enter__(self):
        event.listen(self.engine, "before_cursor_execute", self._record)
        return self

    def __exit__(self, *_exc):
        event.remove(self.engine, "before_cursor_execute", self._record)
