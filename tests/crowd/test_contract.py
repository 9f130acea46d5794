"""The crowd job files, defined once in tasks/crowd/contract.py, and the rules around them, without starting
Mephisto: the typed job, the one results reader and its crash rule, control scoring (checked against the
analysis), and the boundaries (the contract is stdlib-only Python 3.10; the runner imports nothing of ours
but the contract and its Mephisto compatibility module)."""
from __future__ import annotations

import ast
import json
import random
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from empeval.analysis.kinds.likert.load import tidy_from_export
from empeval.analysis.kinds.likert.quality import control_results
from empeval.analysis.simulate.likert import simulate_study
from empeval.tasks.crowd import contract, jobs
from empeval.tasks.crowd.contract import ContractError, Control, CrowdJob, CrowdResult
from tests.conftest import REPO
from tests.crowd.conftest import empeval, fake_result, load_runner

CONTRACT = REPO / "tasks" / "crowd" / "contract.py"
RUNNER = REPO / "tasks" / "crowd" / "runner.py"
COMPAT = REPO / "tasks" / "crowd" / "mephisto_compat.py"
OUR_PACKAGES = {"entry", "tasks", "server", "analysis", "tests"}


@pytest.fixture
def mock_job(crowd_dir, crowd_store):
    job_dir, cost = jobs.create_job(crowd_store, "pilot", provider="mock", units=2)
    return job_dir, list(contract.read_items(job_dir).values())


# ---------------------------------------------------------------- job.json and items.jsonl

def test_the_job_files_carry_each_unit_as_the_task_ui_expects_without_system_names(mock_job):
    job_dir, units = mock_job
    job = contract.read_job(job_dir)
    assert job.provider == "mock" and job.onboarding["questions"] and job.study == "pilot"
    assert len(units) == 2
    for unit in units:
        assert unit.payload["assignment_id"] == unit.assignment_id
        assert len(unit.payload["items"]) == 3 and len(unit.controls) == 1
        assert all(set(item) == {"item_id", "position", "response", "context"} for item in unit.payload["items"])


def test_a_job_round_trips_through_json_and_takes_its_defaults_from_one_place():
    job = CrowdJob(job_id="j1", study="pilot", provider="mock", reward=0.5)
    assert CrowdJob.from_json(json.loads(json.dumps(job.to_json()))) == job
    assert (job.port, job.timeout_seconds, job.router_host, job.units_per_assignment) == (3000, 3600, "127.0.0.1", 1)


@pytest.mark.parametrize("change, message", [
    ({"port": "3000"}, "job.json: port: expected an integer, got '3000'"),
    ({"provider": "mturk-live"}, "job.json: provider: 'mturk-live' is not one of mock, mturk_sandbox, mturk"),
    ({"seen_contexts": {"w1": ["a"]}}, "job.json: seen_contexts.w1[0]: expected an integer, got 'a'"),
    ({"min_control_pass_rate": 2}, "job.json: min_control_pass_rate: 2.0 is not within 0 and 1"),
    ({"tiemout_seconds": 10}, "job.json: unknown key 'tiemout_seconds'"),
    ({"study": None}, "job.json: study: expected a string, got null"),
])
def test_a_job_file_that_breaks_the_contract_is_refused_naming_the_key(change, message):
    data = {**CrowdJob(job_id="j1", study="pilot", provider="mock", reward=0.5).to_json(), **change}
    with pytest.raises(ContractError) as error:
        CrowdJob.from_json(data)
    assert str(error.value).startswith(message)


def test_the_app_reports_a_broken_job_file_as_a_crowd_error_with_its_path(mock_job):
    job_dir, _ = mock_job
    (job_dir / "job.json").write_text(json.dumps({"job_id": "x", "provider": "mock", "reward": 1}))
    with pytest.raises(jobs.CrowdError, match=r"job\.json: study: is required"):
        jobs.load_job(job_dir)


# ---------------------------------------------------------------- results.jsonl: one reader, one crash rule

def test_a_line_cut_short_by_a_crash_is_ignored_by_the_reader_and_cut_off_by_the_runner(mock_job):
    job_dir, units = mock_job
    path = job_dir / "results.jsonl"
    whole = json.dumps(fake_result(units[0], "w1", "job-test-1", 1)) + "\n"
    torn = json.dumps(fake_result(units[1], "w2", "job-test-1", 2))[:50]
    path.write_text(whole + torn)
    found = contract.read_results(path)
    assert len(found) == 1 and found.torn_last_line and found.problems == []

    results = contract.ResultsFile(path)  # what the runner opens
    assert len(results) == 1 and path.read_text() == whole
    second = CrowdResult.from_json(fake_result(units[1], "w2", "job-test-1", 2))
    assert results.append(second) and not results.append(second)
    assert [r.worker_name for r in contract.read_results(path).records] == ["w1", "w2"]


def test_a_corrupt_line_in_the_middle_is_reported_with_file_and_line_never_skipped_in_silence(mock_job):
    job_dir, units = mock_job
    path = job_dir / "results.jsonl"
    good = [json.dumps(fake_result(units[i], f"w{i}", "job-test-1", i)) for i in (0, 1)]
    broken = fake_result(units[0], "w9", "job-test-1", 9)
    del broken["worker_name"]
    path.write_text("\n".join([good[0], '{"submission_id": "job-test-1.u5", "assignm', json.dumps(broken),
                               json.dumps({**fake_result(units[1], "w8", "job-test-1", 8), "assignment_id": "7"}),
                               good[1]]) + "\n")
    found = contract.read_results(path)
    assert [r.worker_name for r in found.records] == ["w0", "w1"] and found.line_numbers == [1, 5]
    assert found.problems[0].startswith(f"{path}:2: not valid JSON (Unterminated string")
    assert found.problems[1:] == [f"{path}:3: worker_name: is required",
                                  f"{path}:4: assignment_id: expected an integer, got '7'"]
    assert not found.torn_last_line


def test_the_runner_and_the_app_read_results_with_the_same_reader():
    runner = load_runner()
    # One file, whichever path reaches it (the app imports it through the installed link tree).
    assert (Path(runner.contract.read_results.__code__.co_filename).resolve()
            == Path(contract.read_results.__code__.co_filename).resolve())
    source = RUNNER.read_text()
    assert "json.loads(line" not in source and "def read_results" not in source
    assert "def read_results" not in (REPO / "tasks" / "crowd" / "jobs.py").read_text()


def test_status_states_are_the_contracts_constants():
    status = contract.JobStatus(job_id="j", state=contract.RUNNING, pid=1)
    assert status.live and contract.JobStatus.from_json(status.to_json()) == status
    with pytest.raises(ContractError, match="state: 'runing' is not one of starting, running"):
        contract.JobStatus.from_json({"job_id": "j", "state": "runing"})


# ---------------------------------------------------------------- control scoring

def test_a_control_passes_when_scored_below_the_workers_real_items_on_its_criterion():
    controls = [Control(item_id=9, target="empathy")]

    def outputs(control_score):
        return {"ratings": [{"item_id": 1, "scores": {"empathy": 4}}, {"item_id": 2, "scores": {"empathy": 5}},
                            {"item_id": 9, "scores": {"empathy": control_score}}]}

    assert contract.score_controls(outputs(1), controls) == contract.ControlScore(n=1, passed=1)
    assert contract.score_controls(outputs(5), controls) == contract.ControlScore(n=1, passed=0)
    assert not contract.score_controls(outputs(5), controls).ok(min_pass_rate=0.5)
    assert contract.score_controls(outputs(5), []).ok(min_pass_rate=0.5)


def _contract_outcomes(ratings: pd.DataFrame) -> dict[tuple[str, str, str], bool]:
    """The contract's verdict per (annotator, assignment, control item), one unit at a time as the runner
    sees it (item ids as the integers the store uses)."""
    number = {item: i for i, item in enumerate(sorted(ratings["item"].unique()), start=1)}
    verdicts = {}
    for (annotator, assignment), unit in ratings.groupby(["annotator", "assignment"]):
        outputs = {"ratings": [{"item_id": number[item], "scores": dict(zip(rows["criterion"], map(int, rows["score"]),
                                                                             strict=True))}
                               for item, rows in unit.groupby("item")]}
        control_rows = unit.loc[unit["is_control"].astype(bool)].drop_duplicates("item")
        controls = [Control(item_id=number[row.item], target=row.control_target) for row in control_rows.itertuples()]
        item_of = {number[item]: item for item in unit["item"]}
        for item_id, passed in contract.control_outcomes(outputs, controls).items():
            verdicts[(annotator, assignment, item_of[item_id])] = passed
    return verdicts


def _analysis_outcomes(ratings: pd.DataFrame) -> dict[tuple[str, str, str], bool]:
    """analysis.kinds.likert.quality.control_results, keeping the controls judged against their own assignment (the only
    reference a unit has; the analysis falls back to the annotator's other assignments)."""
    table = control_results(ratings)
    table = table.loc[table["reference_scope"] == "assignment"].dropna(subset=["passed"])
    return {(r.annotator, r.assignment, r.item): bool(r.passed) for r in table.itertuples()}


def test_control_scoring_agrees_with_the_analysis_on_a_simulated_study():
    study = simulate_study(n_contexts=30, controls_per_assignment=2, n_straight_liners=2, seed=11)
    ratings = tidy_from_export(study.export)
    from_contract, from_analysis = _contract_outcomes(ratings), _analysis_outcomes(ratings)
    controls_rated = ratings.loc[ratings["is_control"].astype(bool), ["annotator", "item"]].drop_duplicates()
    assert len(from_analysis) == len(controls_rated)
    assert from_contract == from_analysis
    assert 0 < sum(from_contract.values()) < len(from_contract)  # both verdicts occur


def test_control_scoring_agrees_with_the_analysis_on_random_units_with_ties_and_units_without_real_items():
    rng = random.Random(5)
    criteria = ("empathy", "relevance", "fluency")
    rows = []
    for n in range(300):
        annotator, assignment = f"a{n % 7}", f"asg-{n}"
        n_real, n_controls = rng.randint(0, 3), rng.randint(1, 2)
        for k in range(n_real + n_controls):
            is_control = k >= n_real
            target = rng.choice(criteria) if is_control else ""
            for criterion in criteria:
                rows.append({"annotator": annotator, "assignment": assignment, "item": f"{assignment}:{k}",
                             "criterion": criterion, "score": rng.randint(1, 3), "is_control": is_control,
                             "control_kind": "control-x" if is_control else "", "control_target": target})
    ratings = pd.DataFrame(rows)
    from_contract, from_analysis = _contract_outcomes(ratings), _analysis_outcomes(ratings)
    assert from_contract == from_analysis
    ties = ratings.loc[~ratings["is_control"]].groupby(["assignment", "criterion"])["score"].mean()
    assert (ties == ties.round()).any()  # integer means: a control equal to the mean occurs, and fails in both


# ---------------------------------------------------------------- boundaries

def _imported_modules(path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            assert node.level == 0, f"{path.name}: relative import of {node.module}"
            names.add(node.module.split(".")[0])
    return names


def test_the_contract_imports_only_the_standard_library():
    outside = _imported_modules(CONTRACT) - set(sys.stdlib_module_names)
    assert outside == set(), f"tasks/crowd/contract.py must stay stdlib-only, imports {sorted(outside)}"


def test_the_contract_passes_its_self_checks_here():
    import doctest

    outcome = doctest.testmod(contract)
    assert outcome.attempted > 0 and outcome.failed == 0


def test_the_contract_compiles_and_passes_its_self_checks_on_the_crowd_python(crowd_python):
    version = subprocess.run([str(crowd_python), "-c", "import sys; print(*sys.version_info[:2])"],
                             capture_output=True, text=True, check=True).stdout.split()
    assert version == ["3", "10"]
    checked = subprocess.run([str(crowd_python), "-W", "error", str(CONTRACT)], capture_output=True, text=True,
                             timeout=60)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "contract self-checks:" in checked.stdout


def test_the_runner_imports_only_mephisto_the_standard_library_and_loads_only_the_contract_and_compat_by_path():
    # Hydra is Mephisto's configuration system: its task configs are Hydra configs, composed here.
    allowed = set(sys.stdlib_module_names) | {"mephisto", "hydra"}
    assert _imported_modules(RUNNER) - allowed == set()
    assert _imported_modules(RUNNER) & OUR_PACKAGES == set()
    tree = ast.parse(RUNNER.read_text(encoding="utf-8"))
    loaded = [node for node in ast.walk(tree)
              if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "_load_by_path"]
    assert sorted(ast.unparse(call.args[1]) for call in loaded) == [
        "HERE / 'contract.py'", "HERE / 'mephisto_compat.py'"]
    spec_calls = [node for node in ast.walk(tree) if isinstance(node, ast.Attribute)
                  and node.attr == "spec_from_file_location"]
    assert len(spec_calls) == 1  # only inside _load_by_path


def test_the_mephisto_compatibility_module_imports_only_mephisto_and_the_standard_library():
    assert _imported_modules(COMPAT) - (set(sys.stdlib_module_names) | {"mephisto"}) == set()


# ---------------------------------------------------------------- launch-time rules

def test_onboarding_needs_the_known_answers():
    runner = load_runner()
    onboarding = json.loads((REPO / "tasks" / "crowd" / "onboarding.json").read_text())
    right = {q["key"]: q["answer"] for q in onboarding["questions"]}
    assert runner.onboarding_passed(right, onboarding)
    assert not runner.onboarding_passed({**right, "q1": "A"}, onboarding)


def test_live_mturk_prints_the_cost_and_launches_nothing_without_confirmation(crowd_dir, crowd_store, crowd_python):
    result = empeval("crowd", "launch", "pilot", "--provider", "mturk", "--public-url", "https://tasks.example.org",
                     "--aws-profile", "lab", input="n\n")
    assert "cost: 4 units x 0.50 USD reward + 20% fees = 2.40 USD" in result.output
    assert result.exit_code == 2 and "not launched" in result.output
    assert not list(crowd_dir.glob("pilot/*/"))


def test_mturk_without_a_public_url_is_refused_with_what_to_do(crowd_dir, crowd_store, crowd_python):
    result = empeval("crowd", "launch", "pilot", "--provider", "mturk_sandbox", "--aws-profile", "lab")
    assert result.exit_code == 2 and "public HTTPS URL" in result.output


def test_a_closed_study_is_not_put_on_the_crowd_and_no_job_directory_is_written(crowd_dir, crowd_store):
    from empeval.server.annotation.handout import close_study

    close_study(crowd_store, "pilot")
    with pytest.raises(jobs.CrowdError, match="'pilot' is closed"):
        jobs.create_job(crowd_store, "pilot", provider="mock", units=2)
    assert not list(crowd_dir.glob("pilot/*/"))


def test_a_rejection_needs_a_reason_and_approved_work_cannot_be_rejected(mock_job):
    from empeval.tasks.crowd.review import check_actions

    job_dir, units = mock_job
    record = {**fake_result(units[0], "w1", "job-test-1", 1), "passed_controls": False}
    (job_dir / "results.jsonl").write_text(json.dumps(record) + "\n")
    with pytest.raises(jobs.CrowdError, match="reason"):
        check_actions(job_dir, [{"unit_id": "1", "action": "reject", "reason": "bad"}])
    (job_dir / "review.jsonl").write_text(json.dumps({"unit_id": "1", "action": "approve", "ok": True}) + "\n")
    with pytest.raises(jobs.CrowdError, match="approved already"):
        check_actions(job_dir, [{"unit_id": "1", "action": "reject", "reason": "Every item got the same score."}])


def test_crowd_status_prints_aligned_columns(mock_job):
    job_dir, units = mock_job
    contract.write_status(job_dir, contract.JobStatus(job_id=job_dir.name, state=contract.COMPLETED, run_id="1",
                                                      url="http://127.0.0.1:3000", units_total=2, units_done=2))
    (job_dir / "results.jsonl").write_text(json.dumps(fake_result(units[0], "w1", "job-test-1", 1)) + "\n{oops\n")
    result = empeval("crowd", "status", "pilot")
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert [line.split()[0] for line in lines] == ["job", "state", "run_id", "url", "units_total", "units_done",
                                                   "results"]
    value_columns = {len(line) - len(line.split(maxsplit=1)[1]) for line in lines}
    assert value_columns == {len("units_total") + 2}
    assert lines[-1].endswith("1 lines in results.jsonl, 1 not valid (`crowd ingest` lists them)")
