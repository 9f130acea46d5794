"""A store with the bundled sample, stand-in systems with stored responses, and a study over them.

The responses are written straight into the store here (not produced by the backend), so these tests
pin the annotation path on its own.
"""

from __future__ import annotations

import uuid

import pytest
from sqlalchemy import insert, select

from empeval.server.store import make_engine, unit_of_work
from empeval.server.store.models import Context, Dialogue, Response, System
from empeval.server.web import create_app
from empeval.tasks.study_create import create_study
from empeval.tasks.study_file import parse_study

SYSTEMS = ["sys-a", "sys-b", "sys-c"]
CONTROLS = ["control-generic", "control-mismatched", "control-scrambled"]


def add_responses(
    engine, systems, n_contexts, text=lambda system, context_id: f"{system} answers context {context_id}."
):
    with unit_of_work(engine) as session:
        context_ids = session.scalars(
            select(Context.id).join(Dialogue).where(Dialogue.split == "test").order_by(Context.id).limit(n_contexts)
        ).all()
        for name in systems:
            system = System(
                name=name, kind="control" if name.startswith("control") else "test", version="1", parameters={}
            )
            session.add(system)
            session.flush()
            # One bulk INSERT (the ORM's, defaults applied) rather than a Response object per row: a third of the
            # CPU of the fixtures that make a study went to the unit of work's bookkeeping for these rows.
            session.execute(insert(Response), [
                {"context_id": cid, "system_id": system.id, "text": text(name, cid), "provenance": {"test": True},
                 "latency_ms": 0.0} for cid in context_ids])
    return context_ids


def make_study(
    engine,
    *,
    name="pilot",
    count=12,
    k=2,
    per_assignment=5,
    control_rate=0.2,
    seed=3,
    minutes=30,
    systems=SYSTEMS,
    controls=CONTROLS,
):
    spec = parse_study(
        {
            "name": name,
            "seed": seed,
            "contexts": {"split": "test", "count": count},
            "systems": {"names": list(systems), "controls": list(controls)},
            "design": {
                "ratings_per_response": k,
                "items_per_assignment": per_assignment,
                "control_rate": control_rate if controls else 0.0,
                "assignment_minutes": minutes,
            },
            "pay": {"per_assignment": 0.5, "currency": "USD"},
        }
    )
    return create_study(engine, spec)


@pytest.fixture
def sample_engine(store_url, sample_templates):
    """A store migrated to head with the bundled sample's test split, on each backend (a copy of the session's
    template, tests/conftest.py SampleTemplates)."""
    sample_templates.fill(store_url)
    engine = make_engine(store_url)
    yield engine
    engine.dispose()


@pytest.fixture
def study_engine(sample_engine):
    add_responses(sample_engine, SYSTEMS + CONTROLS, 40)
    make_study(sample_engine)
    return sample_engine


@pytest.fixture
def client_factory(study_engine):
    app = create_app({"DATABASE_URL": study_engine.url.render_as_string(hide_password=False), "TESTING": True})

    def make():
        return app.test_client()

    make.app = app
    return make


def new_submission_id() -> str:
    return uuid.uuid4().hex


def placed_items(session, assignment_id: int):
    """The assignment's placements of a Likert study (AssignmentItem rows) in position order."""
    from empeval.server.store.kinds.likert import AssignmentItem

    return session.scalars(select(AssignmentItem).where(AssignmentItem.assignment_id == assignment_id)
                           .order_by(AssignmentItem.position)).all()
