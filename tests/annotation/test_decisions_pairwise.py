"""A pairwise (A/B) study's pre-registered decisions (server/annotation/decisions.py, kinds/pairwise_decisions.py):
raters who clearly prefer one system decide "A better" or "B better", and with stop_when_decided the study's claims
close after a submission while an assignment already started is still submitted and stored; an equal pair ends
"equivalent within margin" given enough judgments and stays undecided with few; a judgment counts for the system
chosen whichever side it was shown on and however the pair is stored; `empeval study status` and the study page
show the comparisons. Judgments go through the kind's real submit path, on a real SQLite file and a real
PostgreSQL database."""
from __future__ import annotations

import threading

import pytest
from sqlalchemy import func, select

from empeval.analysis.stats.sequential import Decision
from empeval.server.annotation.annotators import invite
from empeval.server.annotation.decisions import REASON_DECIDED, close_claims_if_decided, decision_status
from empeval.server.annotation.handout import NoNewWork, next_assignment, next_assignment_payload
from empeval.server.annotation.kinds.pairwise_decisions import net_preferences
from empeval.server.annotation.submission import submit_assignment
from empeval.server.store import unit_of_work
from empeval.server.store.kinds.pairwise import Choice
from empeval.server.store.models import Study
from empeval.server.store.study_decisions import Comparison
from empeval.tasks.study_create import create_study
from empeval.tasks.study_file import parse_study
from tests.annotation.conftest import add_responses, new_submission_id
from tests.annotation.pairwise_fixtures import AB_CRITERIA, neutral_text, placements

PAIR = ["sys-a", "sys-b"]


def _study(engine, *, count: int, decisions: dict, systems=PAIR, name: str = "ab-decided") -> None:
    add_responses(engine, systems, 60, text=neutral_text)
    spec = parse_study({
        "name": name, "kind": "pairwise", "seed": 7, "contexts": {"split": "test", "count": count},
        "systems": {"names": sorted(systems)},
        "design": {"judgments_per_pair": 2, "items_per_assignment": 4, "control_rate": 0.0},
        "decisions": decisions,
    }, f"{name}.toml")
    create_study(engine, spec)


def _rater(engine, name: str, study: str = "ab-decided"):
    return invite(engine, name, study)


def _judgments(engine, payload: dict, chooses) -> list[dict]:
    """A judgment of every pair of the payload: `chooses(context_id, left system, right system)` says which system
    wins ("A"/"B" are then the screen side it was shown on) or None for a tie."""
    shown = {p.pair_item_id: p for p in placements(engine, payload["assignment_id"])}
    out = []
    for item in payload["items"]:
        placement = shown[item["item_id"]]
        left, right = placement.left[0], placement.right[0]
        winner = chooses(placement.context_id, left, right)
        key = "T" if winner is None else "A" if winner == left else "B"
        out.append({"item_id": item["item_id"], "choices": {c: key for c in AB_CRITERIA}, "seconds": 5.0})
    return out


def _submit(engine, rater_id: int, payload: dict, chooses) -> None:
    receipt = submit_assignment(engine, payload["assignment_id"], rater_id,
                                {"submission_id": new_submission_id(), "judgments": _judgments(engine, payload,
                                                                                               chooses)})
    assert receipt["status"] == "stored"


def _prefers(system: str):
    return lambda _context, _left, _right: system


def _choices(engine) -> int:
    with unit_of_work(engine) as session:
        return session.scalar(select(func.count(Choice.id)))


@pytest.mark.parametrize(("preferred", "state"), [("sys-a", Decision.A_BETTER), ("sys-b", Decision.B_BETTER)])
def test_a_clear_preference_is_decided_and_closes_the_claims_after_a_submission(sample_engine, preferred, state):
    """Raters who always choose one system: every comparison is decided its way; the look a submission through the
    API starts closes the claims (stop_when_decided); a newcomer is refused new work, and the assignment a rater
    started before is still submitted and stored."""
    from empeval.server.annotation.secrets import admin_token, secret_key
    from empeval.server.web import create_app

    _study(sample_engine, count=12, decisions={"margin": 0.2, "stop_when_decided": True})
    ann, ann_token = _rater(sample_engine, "ann")
    held = next_assignment_payload(sample_engine, "ab-decided", ann.id)  # started, not yet submitted
    bob, _ = _rater(sample_engine, "bob")
    _submit(sample_engine, bob.id, next_assignment_payload(sample_engine, "ab-decided", bob.id), _prefers(preferred))
    status = decision_status(sample_engine, "ab-decided")
    assert [c.comparison.describe() for c in status.comparisons] == [f"sys-a vs sys-b on {c}" for c in AB_CRITERIA]
    assert status.paid_ratings == _choices(sample_engine) == 4 * 3

    app = create_app({"DATABASE_URL": sample_engine.url.render_as_string(hide_password=False), "TESTING": True})
    client = app.test_client()
    cat, cat_token = _rater(sample_engine, "cat")
    payload = next_assignment_payload(sample_engine, "ab-decided", cat.id)
    answer = client.post(f"/api/assignments/{payload['assignment_id']}/submit",
                         headers={"Authorization": f"Bearer {cat_token}"},
                         json={"submission_id": new_submission_id(),
                               "judgments": _judgments(sample_engine, payload, _prefers(preferred))})
    assert answer.status_code == 200 and answer.get_json()["status"] == "stored", answer.get_data(as_text=True)
    for thread in [t for t in threading.enumerate() if t.name == "decisions-ab-decided"]:
        thread.join(30)
    assert app.extensions["empeval.decisions_watch"].looks == 1

    status = decision_status(sample_engine, "ab-decided")
    assert all(c.state is state for c in status.comparisons), status.lines()
    assert all(c.n == 8 for c in status.comparisons)  # two assignments of four contexts each
    sign = 1 if preferred == "sys-a" else -1
    assert all(c.human_estimate == sign for c in status.comparisons)
    with unit_of_work(sample_engine) as session:
        study = session.scalar(select(Study).where(Study.name == "ab-decided"))
        assert study.claims_closed_at is not None and study.claims_closed_reason == REASON_DECIDED
    assert not close_claims_if_decided(sample_engine, status)  # closed once

    _, dan_token = _rater(sample_engine, "dan")
    refused = client.get("/api/annotate/next", headers={"Authorization": f"Bearer {dan_token}"})
    assert refused.status_code == 403 and "not taking new work" in refused.get_data(as_text=True)
    with pytest.raises(NoNewWork, match="not taking new work"):
        next_assignment(sample_engine, "ab-decided", bob.id)
    resumed = client.get("/api/annotate/next", headers={"Authorization": f"Bearer {ann_token}"})
    assert resumed.status_code == 200 and resumed.get_json()["assignment"]["assignment_id"] == held["assignment_id"]
    before = _choices(sample_engine)
    answer = client.post(f"/api/assignments/{held['assignment_id']}/submit",
                         headers={"Authorization": f"Bearer {ann_token}"},
                         json={"submission_id": new_submission_id(),
                               "judgments": _judgments(sample_engine, held, _prefers(preferred))})
    assert answer.status_code == 200 and answer.get_json()["status"] == "stored"
    assert _choices(sample_engine) == before + len(held["items"]) * 3

    headers = {"Authorization": f"Bearer {admin_token(secret_key(sample_engine))}"}
    page = client.get("/admin/studies/ab-decided", headers=headers).get_data(as_text=True)
    table = page.split('id="decision-table"', 1)[1].split("</table>", 1)[0]
    assert "sys-a vs sys-b on empathy" in table and str(state) in table
    assert 'id="claims-closed"' in page and REASON_DECIDED in page


def _balanced(seen: dict[int, int]):
    """An equal pair: a context's judgments go A, B, tie in turn from a place set by the context id (labels 0, -1/2
    and +1/2 for two judgments, a net preference of about 0)."""
    def chooses(context_id: int, _left: str, _right: str) -> str | None:
        turn = seen.get(context_id, 0)
        seen[context_id] = turn + 1
        return ("sys-a", "sys-b", None)[(context_id + turn) % 3]
    return chooses


def test_an_equal_pair_is_undecided_with_few_judgments_and_equivalent_with_enough(sample_engine):
    _study(sample_engine, count=40, decisions={"comparisons": ["sys-a vs sys-b on empathy"], "margin": 0.5,
                                               "stop_when_decided": True})
    seen: dict[int, int] = {}
    chooses = _balanced(seen)
    submitted = 0
    for i in range(40 * 2 // 4):
        rater, _ = _rater(sample_engine, f"rater-{i}")
        payload = next_assignment_payload(sample_engine, "ab-decided", rater.id)
        if payload is None:
            continue
        _submit(sample_engine, rater.id, payload, chooses)
        submitted += 1
        if submitted == 1:  # four contexts: the interval is still wider than the margin
            (few,) = decision_status(sample_engine, "ab-decided").comparisons
            assert few.state is Decision.UNDECIDED and few.n == 4 and few.human_high - few.human_low > 1.0
    assert submitted == 20
    status = decision_status(sample_engine, "ab-decided")
    (comparison,) = status.comparisons
    assert comparison.n == 40 and abs(comparison.human_estimate) < 0.1
    assert comparison.state is Decision.EQUIVALENT, status.lines()
    assert -0.5 <= comparison.human_low < 0 < comparison.human_high <= 0.5
    assert close_claims_if_decided(sample_engine, status)


def test_a_judgment_counts_for_the_system_chosen_whichever_side_and_however_the_pair_is_stored(sample_engine):
    """sys-b's responses are added first, so every pair item stores sys-b as its 'a' response (the B/A order of the
    comparison "sys-a vs sys-b"); the design shows either one on the left. A rater who always clicks the left
    response gives a context +1 for sys-a where sys-a was on the left and -1 where it was on the right; the reverse
    comparison reads the same judgments with the opposite sign."""
    _study(sample_engine, count=8, systems=["sys-b", "sys-a"],
           decisions={"comparisons": ["sys-a vs sys-b on empathy", "sys-b vs sys-a on fluency"]})
    rater, _ = _rater(sample_engine, "ann")
    payload = next_assignment_payload(sample_engine, "ab-decided", rater.id)
    shown = placements(sample_engine, payload["assignment_id"])
    assert {p.system_a for p in shown} == {"sys-b"}  # stored B/A
    assert {p.left[0] for p in shown} == {"sys-a", "sys-b"}  # shown both ways
    _submit(sample_engine, rater.id, payload, lambda _context, left, _right: left)
    expected = {p.context_id: 1.0 if p.left[0] == "sys-a" else -1.0 for p in shown}

    forward, reverse = Comparison("sys-a", "sys-b", "empathy"), Comparison("sys-b", "sys-a", "fluency")
    with unit_of_work(sample_engine) as session:
        study_id = session.scalar(select(Study.id).where(Study.name == "ab-decided"))
        labels, paid = net_preferences(session, study_id, (forward, reverse))
    assert paid == len(shown) * 3
    assert dict(zip(labels[forward].contexts, labels[forward].labels, strict=True)) == expected
    assert dict(zip(labels[reverse].contexts, labels[reverse].labels, strict=True)) == {
        c: -v for c, v in expected.items()}
    assert labels[forward].planned == 8

    # A second rater who always chooses sys-a, whatever the side: +1 on every context she judged.
    bob, _ = _rater(sample_engine, "bob")
    second = next_assignment_payload(sample_engine, "ab-decided", bob.id)
    _submit(sample_engine, bob.id, second, _prefers("sys-a"))
    with unit_of_work(sample_engine) as session:
        labels, _ = net_preferences(session, study_id, (forward,))
    after = dict(zip(labels[forward].contexts, labels[forward].labels, strict=True))
    for placement in placements(sample_engine, second["assignment_id"]):
        before = expected.get(placement.context_id)
        assert after[placement.context_id] == (1.0 if before is None else (before + 1.0) / 2)


def test_study_status_prints_the_comparisons_and_refuses_a_judge_that_compared_no_pair(sample_engine):
    from tests.annotation.researcher_helpers import cli_run

    _study(sample_engine, count=12, systems=["sys-a", "sys-b", "sys-c"], decisions={
        "comparisons": ["sys-a vs sys-c on empathy"], "margin": 0.2, "stop_when_decided": True, "budget": 500})
    rater, _ = _rater(sample_engine, "ann")
    _submit(sample_engine, rater.id, next_assignment_payload(sample_engine, "ab-decided", rater.id),
            _prefers("sys-c"))
    result = cli_run(sample_engine, "study", "status", "ab-decided")
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert "decisions: 1 comparisons, alpha 0.05 (Bonferroni: 0.05 each), margin 0.2; 12 paid ratings so far of a " \
           "budget of 500" in lines
    (line,) = [line for line in lines if line.startswith("  sys-a vs sys-c on empathy: n=")]
    assert "human-only" in line and "model-assisted" not in line
    assert "stop_when_decided: claims close when every comparison is decided or the budget is spent" in lines
    assert "note:" not in result.output  # no judge asked for, no note
    # An A/B study's model-assisted intervals come from a judge of differences: one that compared none of its
    # pairs is refused by name (tests/annotation/test_decisions_pairwise_judged.py has the intervals).
    judged = cli_run(sample_engine, "status", "ab-decided", "--judge", "length")
    assert judged.exit_code == 0 and "decisions: judge 'length' has compared no pair of study 'ab-decided'" in \
        judged.output, judged.output
