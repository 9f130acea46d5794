"""`empeval study create` for a pairwise (A/B) study on a real SQLite file: pair items and placements in SQL,
every (context, pair) judged k times, left/right logged and balanced, control pairs built to lose, the link to
another study checked, systems without responses refused with the command that makes them, and the demo's A/B
study creating cleanly after its Likert one, on the same contexts."""
from __future__ import annotations

from collections import Counter, defaultdict

import pytest
from click.testing import CliRunner
from sqlalchemy import select
from sqlalchemy.orm import aliased

from empeval.cli import cli
from empeval.server.backend.controls import CONTROL_TARGETS
from empeval.server.store import unit_of_work
from empeval.server.store.kinds.likert import AssignmentItem, StudyItem
from empeval.server.store.kinds.pairwise import AssignmentPair, PairItem
from empeval.server.store.models import Assignment, Response, Study, System
from empeval.server.store.queries import study_by_name
from empeval.tasks.kind_parts import StudySetupError
from empeval.tasks.study_create import create_study
from empeval.tasks.study_file import STUDIES_DIR, load_study_file, parse_study
from tests.annotation.conftest import CONTROLS, SYSTEMS, add_responses, make_study
from tests.conftest import sample_store_copy

DEMO_SYSTEMS = ["gold", "retrieval", "moel", "mime", "kemp"]


@pytest.fixture
def sqlite_engine(sqlite_url):
    engine = sample_store_copy(sqlite_url)
    yield engine
    engine.dispose()


def ab_spec(name="ab", *, count=12, k=3, per_assignment=5, control_rate=0.2, seed=5, systems=None, **extra):
    return parse_study({
        "name": name, "kind": "pairwise", "seed": seed, "contexts": {"split": "test", "count": count},
        "systems": systems or {"names": SYSTEMS, "anchor": SYSTEMS[0], "controls": CONTROLS},
        "design": {"judgments_per_pair": k, "items_per_assignment": per_assignment,
                   "control_rate": control_rate}, **extra})


def placements(engine, study: str) -> list[dict]:
    """Every placement of the study as SQL has it: assignment, position, context, systems a/b, side shown left,
    control side and target."""
    system_a, system_b = aliased(System), aliased(System)
    response_a, response_b = aliased(Response), aliased(Response)
    with unit_of_work(engine) as session:
        rows = session.execute(
            select(Assignment.id, Assignment.round, AssignmentPair.position, PairItem.context_id, system_a.name,
                   system_b.name, AssignmentPair.shown_left, PairItem.is_control, PairItem.control_side,
                   PairItem.control_target, PairItem.id)
            .join(AssignmentPair, AssignmentPair.assignment_id == Assignment.id)
            .join(PairItem, PairItem.id == AssignmentPair.pair_item_id)
            .join(response_a, response_a.id == PairItem.response_a_id)
            .join(system_a, system_a.id == response_a.system_id)
            .join(response_b, response_b.id == PairItem.response_b_id)
            .join(system_b, system_b.id == response_b.system_id)
            .join(Study, Study.id == Assignment.study_id).where(Study.name == study)
        ).all()
    keys = ("assignment", "round", "position", "context", "a", "b", "shown_left", "is_control", "control_side",
            "control_target", "item")
    result = [dict(zip(keys, row, strict=True)) for row in rows]
    for row in result:
        row["left"] = row[row["shown_left"]]
        row["right"] = row["b" if row["shown_left"] == "a" else "a"]
        row["pair"] = "|".join(sorted((row["a"], row["b"])))
    return result


def test_a_pairwise_study_is_stored_with_every_context_and_pair_judged_k_times(sqlite_engine):
    add_responses(sqlite_engine, SYSTEMS + CONTROLS, 30)
    summary = create_study(sqlite_engine, ab_spec())
    rows = placements(sqlite_engine, "ab")
    real = [r for r in rows if not r["is_control"]]
    judged = Counter((r["context"], r["pair"]) for r in real)
    assert len({c for c, _ in judged}) == 12 and {p for _, p in judged} == {"sys-a|sys-b", "sys-a|sys-c"}
    assert set(judged.values()) == {3} and summary.items == len(judged) == 24
    assert summary.kind == "pairwise" and summary.per_unit == 3 and "2 pairs of systems" in summary.describe()
    assert summary.assignments == len({r["assignment"] for r in rows})
    assert summary.expected_answers == 3 * len(rows)
    assert "pairwise study 'ab'" in summary.describe() and "k=3 judgments per (context, pair)" in summary.describe()
    by_assignment = defaultdict(list)
    for r in rows:
        by_assignment[r["assignment"]].append(r)
    for placed in by_assignment.values():
        assert len({r["context"] for r in placed}) == len(placed)  # no context twice in an assignment
        assert sorted(r["position"] for r in placed) == list(range(len(placed)))
    with unit_of_work(sqlite_engine) as session:  # the Likert tables stay empty for it
        study_id = study_by_name(session, "ab").id
        assert session.query(StudyItem).filter_by(study_id=study_id).count() == 0
        assert session.query(AssignmentItem).join(Assignment).filter(Assignment.study_id == study_id).count() == 0
        assert study_by_name(session, "ab").config == ab_spec()


def test_the_side_shown_left_is_logged_and_balanced_within_one_per_pair_and_per_context(sqlite_engine):
    add_responses(sqlite_engine, SYSTEMS + CONTROLS, 30)
    create_study(sqlite_engine, ab_spec(k=3))
    rows = placements(sqlite_engine, "ab")
    per_pair, per_cell = Counter(), Counter()
    for r in rows:
        first = min(r["a"], r["b"])
        per_pair[r["pair"]] += 1 if r["left"] == first else -1
        per_cell[(r["context"], r["pair"])] += 1 if r["left"] == first else -1
    assert all(abs(v) <= 1 for v in per_pair.values()) and all(abs(v) <= 1 for v in per_cell.values())
    assert {r["left"] for r in rows} >= set(SYSTEMS)  # every system is shown on the left somewhere


def test_control_pairs_hold_a_control_on_the_logged_side_scored_on_its_target(sqlite_engine):
    add_responses(sqlite_engine, SYSTEMS + CONTROLS, 30)
    summary = create_study(sqlite_engine, ab_spec())
    controls = [r for r in placements(sqlite_engine, "ab") if r["is_control"]]
    assert controls and summary.control_items == len({r["item"] for r in controls})
    for r in controls:
        control = r[r["control_side"]]
        other = r["b" if r["control_side"] == "a" else "a"]
        assert control in CONTROLS and other in SYSTEMS and r["control_target"] == CONTROL_TARGETS[control]


def test_a_pairwise_study_linked_to_a_missing_study_is_refused_naming_the_field(sqlite_engine):
    add_responses(sqlite_engine, SYSTEMS + CONTROLS, 30)
    with pytest.raises(StudySetupError, match=r"^compare_with: no study named 'pilot'"):
        create_study(sqlite_engine, ab_spec(compare_with="pilot"))
    with unit_of_work(sqlite_engine) as session:
        assert session.query(Study).count() == 0
    make_study(sqlite_engine, name="pilot")
    create_study(sqlite_engine, ab_spec(compare_with="pilot"))
    with unit_of_work(sqlite_engine) as session:
        assert study_by_name(session, "ab").config.compare_with == "pilot"


def test_a_pair_naming_a_system_without_responses_is_refused_with_the_command_that_makes_them(sqlite_engine):
    add_responses(sqlite_engine, ["sys-a", "sys-b"], 30)
    spec = ab_spec(systems={"names": SYSTEMS, "pairs": [["sys-a", "sys-b"], ["sys-c", "sys-a"]]}, control_rate=0.0,
                   per_assignment=4)
    with pytest.raises(StudySetupError) as caught:
        create_study(sqlite_engine, spec)
    message = str(caught.value)
    assert "'sys-c' (compared in the pair sys-c vs sys-a) has no responses" in message
    # sys-c is not in the model registry: `empeval generate --systems sys-c` would fail, so how to register it
    assert "`empeval generate --config YOUR_SYSTEMS.toml --systems sys-c --split test`" in message


def test_the_same_seed_count_and_systems_judge_the_contexts_of_the_likert_study(sqlite_engine):
    add_responses(sqlite_engine, SYSTEMS + CONTROLS, 30)
    make_study(sqlite_engine, name="pilot", count=12, seed=5)
    create_study(sqlite_engine, ab_spec(compare_with="pilot"))
    with unit_of_work(sqlite_engine) as session:
        likert = set(session.scalars(
            select(Response.context_id).join(StudyItem, StudyItem.response_id == Response.id)
            .join(Study, Study.id == StudyItem.study_id).where(Study.name == "pilot", ~StudyItem.is_control)))
    assert {r["context"] for r in placements(sqlite_engine, "ab") if not r["is_control"]} == likert


def test_the_demo_ab_study_file_creates_after_the_demo_through_the_command_line(sqlite_engine, sqlite_url,
                                                                                tmp_path):
    add_responses(sqlite_engine, DEMO_SYSTEMS + CONTROLS, 40)
    runner = CliRunner()
    first = runner.invoke(cli, ["--database-url", sqlite_url, "study", "create", str(STUDIES_DIR / "demo_ab.toml")])
    assert first.exit_code == 2 and "compare_with: no study named 'demo'" in first.output
    for name in ("demo.toml", "demo_ab.toml"):
        result = runner.invoke(cli, ["--database-url", sqlite_url, "study", "create", str(STUDIES_DIR / name)])
        assert result.exit_code == 0, result.output
    assert "pairwise study 'demo-ab': 30 contexts x 4 pairs of systems = 120 pair items" in result.output
    spec = load_study_file(STUDIES_DIR / "demo_ab.toml")
    assert [p.label for p in spec.setup.pairs] == ["gold|moel", "moel|retrieval", "mime|moel", "kemp|moel"]
    assert spec.compare_with == "demo"
    with unit_of_work(sqlite_engine) as session:
        likert = set(session.scalars(
            select(Response.context_id).join(StudyItem, StudyItem.response_id == Response.id)
            .join(Study, Study.id == StudyItem.study_id).where(Study.name == "demo", ~StudyItem.is_control)))
    rows = placements(sqlite_engine, "demo-ab")
    assert {r["context"] for r in rows if not r["is_control"]} == likert
    assert Counter((r["context"], r["pair"]) for r in rows if not r["is_control"]).most_common(1)[0][1] == 3
