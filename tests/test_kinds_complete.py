"""Every registered study kind supplies every part in every room: its setup and tables in the store, its study-file
fields, design, simulated raters, crowd parts and task page in tasks, its hand-out, submission, export and dashboard
readers in annotation, its tidy table and report in analysis; and a kind that lacks one is named with the part.

A part is what the room's base class declares: every public method of the base (which only raises
NotImplementedError) must be overridden, except the hooks it names in `optional_parts` (they have a default that
most kinds keep), and every class attribute it annotates must be set.
"""
from __future__ import annotations

import inspect
import re
from pathlib import Path
from typing import Any

import pytest

from empeval.analysis.kinds import AnalysisKind, analysis_kind, analysis_kinds
from empeval.analysis.report import study  # noqa: F401 (registers every kind's analysis part)
from empeval.server.annotation.kinds import AnnotationKind, annotation_kind, annotation_kinds
from empeval.server.store.kinds import StudySetup, kind_names, setup_class
from empeval.server.store.models import Base
from empeval.tasks.kinds import TaskKind, task_kind, task_kinds

REPO = Path(__file__).resolve().parents[1]
UI_REGISTRY = REPO / "tasks" / "webapp" / "src" / "kinds" / "index.js"

# room -> (the base class of a kind's part there, how to find a kind's part by name)
ROOMS: dict[str, tuple[type, Any]] = {
    "store": (StudySetup, setup_class),
    "tasks": (TaskKind, task_kind),
    "annotation": (AnnotationKind, annotation_kind),
    "analysis": (AnalysisKind, analysis_kind),
}


def ui_pages() -> dict[str, str]:
    """The task UI's registry: page name -> the component file it imports (tasks/webapp/src/kinds/index.js)."""
    source = UI_REGISTRY.read_text(encoding="utf-8")
    components = dict(re.findall(r'^import (\w+) from "\./(\w+\.jsx)";', source, re.M))
    return {name: components.get(component, "") for name, component in
            re.findall(r"^PAGES\.(\w+) = (\w+);", source, re.M)}


def missing_parts(base: type, part: Any, kind: str, room: str) -> list[str]:
    """What `part` (a kind's part in `room`, a class or an instance of a subclass of `base`) does not supply, each
    named with the kind and the room."""
    cls = part if isinstance(part, type) else type(part)
    missing = []
    for name, member in vars(base).items():
        if name.startswith("_") or not (inspect.isfunction(member) or isinstance(member, classmethod)):
            continue
        if name in getattr(base, "optional_parts", ()):  # a hook with a default every kind may keep
            continue
        owner = next(k for k in cls.__mro__ if name in vars(k))
        if owner is base:
            missing.append(f"study kind {kind!r} supplies no {name!r} in the {room} room ({cls.__qualname__})")
    for name in base.__annotations__:
        if name.startswith("_"):
            continue
        value = getattr(cls, name, None)
        if value is None or (isinstance(value, (tuple, dict, frozenset)) and not value and name == "tables"):
            missing.append(f"study kind {kind!r} sets no {name!r} in the {room} room ({cls.__qualname__})")
    return missing


def test_every_room_registers_the_same_kinds():
    registered = {"store": list(kind_names()), "tasks": [k.name for k in task_kinds()],
                  "annotation": [k.name for k in annotation_kinds()], "analysis": [k.name for k in analysis_kinds()],
                  "task UI": sorted(ui_pages())}
    expected = sorted(registered["store"])
    assert {room: sorted(names) for room, names in registered.items()} == {room: expected for room in registered}
    assert registered["store"][0] == "likert"  # the default kind, registered first


@pytest.mark.parametrize("kind", kind_names())
@pytest.mark.parametrize("room", ROOMS)
def test_every_kind_supplies_every_part_of_every_room(kind, room):
    base, find = ROOMS[room]
    assert missing_parts(base, find(kind), kind, room) == []


@pytest.mark.parametrize("kind", kind_names())
def test_every_kind_names_the_same_kind_everywhere_and_a_page_that_exists(kind):
    setup = setup_class(kind)
    assert setup.kind == task_kind(kind).name == annotation_kind(kind).name == analysis_kind(kind).name == kind
    assert task_kind(kind).setup is setup
    page = task_kind(kind).ui_page
    component = ui_pages().get(page)
    assert component and (UI_REGISTRY.parent / component).is_file(), f"study kind {kind!r}: no task page {page!r}"


@pytest.mark.parametrize("kind", kind_names())
def test_every_kind_owns_its_tables_and_the_annotation_part_names_them(kind):
    tables = {table.__tablename__ for table in setup_class(kind).tables}
    assert tables and tables <= set(Base.metadata.tables)
    part = annotation_kind(kind)
    assert {part.placement_table, part.item_table, part.answer_table} <= tables


def test_a_part_removed_is_named_with_its_kind_and_room():
    """What the test above says when a kind lacks a part: a copy of the pairwise annotation part without its export,
    and of the Likert analysis part without its report and its columns."""
    pairwise = type(annotation_kind("pairwise"))
    without_export = type("PairwiseWithoutExport", (AnnotationKind,),
                          {k: v for k, v in vars(pairwise).items() if k != "export_rows"})
    assert missing_parts(AnnotationKind, without_export, "pairwise", "annotation") == [
        "study kind 'pairwise' supplies no 'export_rows' in the annotation room (PairwiseWithoutExport)"]
    likert = type(analysis_kind("likert"))
    without_report = type("LikertWithoutReport", (AnalysisKind,),
                          {k: v for k, v in vars(likert).items() if k not in ("report", "columns")})
    assert missing_parts(AnalysisKind, without_report, "likert", "analysis") == [
        "study kind 'likert' supplies no 'report' in the analysis room (LikertWithoutReport)",
        "study kind 'likert' sets no 'columns' in the analysis room (LikertWithoutReport)"]


def test_an_unknown_kind_is_refused_with_the_registered_ones_listed():
    from empeval.server.store.kinds import UnknownStudyKind

    for find in (setup_class, task_kind, annotation_kind):
        with pytest.raises(UnknownStudyKind, match=r"unknown study kind 'ranking'; the registered kinds are 'likert', "
                                                   r"'pairwise'"):
            find("ranking")
