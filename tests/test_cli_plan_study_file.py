"""`empeval plan STUDY_FILE` (entry/planning.py): sizes read from the study file, Holm over its pairs, the cost in its
currency, raters and time; and a study of the size it recommends, simulated whole and tested as the report tests it,
reaches the stated power."""
from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from empeval.analysis.simulate.likert import simulate_study
from empeval.analysis.stats.power import Components
from empeval.analysis.stats.significance import compare_pairs
from empeval.cli import cli
from empeval.planning import PlanRefused, plan_study
from empeval.tasks.study_file import load_study_file

STUDY = """
name = "{name}"
seed = 5
[contexts]
dataset = "empatheticdialogues"
split = "test"
count = {count}
[systems]
names = {systems}
[design]
ratings_per_response = 3
items_per_assignment = 10
control_rate = 0
[pay]
per_assignment = 0.90
currency = "GBP"
platform_fee = 0.33
[recruitment]
platform = "{platform}"
"""


def study_file(tmp_path: Path, *, systems=("a", "b"), count=40, platform="local", name="sized") -> Path:
    path = tmp_path / f"{name}.toml"
    extra = ""
    if platform == "prolific":
        extra = 'prolific_study_id = "0123456789abcdef01234567"\ncompletion_code = "C0DE1234"\n'
    path.write_text(STUDY.format(name=name, count=count, systems=list(systems), platform=platform) + extra)
    return path


def run_plan(*args: str) -> str:
    result = CliRunner().invoke(cli, ["plan", *args], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result.output


def test_plan_study_file_reads_the_file_and_corrects_over_its_pairs(tmp_path):
    three = run_plan(str(study_file(tmp_path, systems=("a", "b", "c"), platform="prolific")), "--effect", "0.6",
                     "--replicates", "100", "--max-assignments-per-rater", "2", "--arrivals-per-hour", "4")
    assert "Holm over the 3 pairs of 3 systems per criterion: planned at alpha 0.05 / 3 = 0.01667" in three
    assert "GBP" in three and "prolific: platform fee 33% included" in three
    needed = int(re.search(r"on each pair: (\d+)", three).group(1))
    assignments = int(re.search(r"ratings in ([\d,]+) assignments", three).group(1).replace(",", ""))
    assert assignments == 3 * 3 * -(-needed // 10)  # k x systems x blocks of 10 contexts
    cost = float(re.search(r"cost ([\d,.]+) GBP", three).group(1).replace(",", ""))
    assert cost == pytest.approx(round(assignments * 0.90 * 1.33, 2))
    raters = int(re.search(r"raters to recruit: (\d+)", three).group(1))
    assert raters == max(9, -(-assignments // 2))
    hours = float(re.search(r"finish: ([\d.]+) h", three).group(1))
    assert hours == pytest.approx(raters / 4 + 2 * 10 * 25 / 3600, abs=0.06)
    two = run_plan(str(study_file(tmp_path, name="two")), "--effect", "0.6", "--replicates", "100")
    assert "one pair of systems: alpha 0.05" in two
    assert int(re.search(r"on each pair: (\d+)", two).group(1)) < needed  # fewer pairs, looser threshold
    assert "local raters: no platform fee" in two


def test_plan_study_file_says_when_the_files_count_is_short(tmp_path):
    output = run_plan(str(study_file(tmp_path, count=8)), "--effect", "0.6", "--replicates", "100")
    needed = int(re.search(r"on each pair: (\d+)", output).group(1))
    assert "the study file rates 8 contexts" in output and f"raise contexts.count to {needed}" in output


def test_plan_study_file_refuses_what_it_cannot_size(tmp_path):
    config = load_study_file(study_file(tmp_path, systems=("a",), name="alone"))
    with pytest.raises(PlanRefused, match="has 1 system"):
        plan_study(config, Components(), effect=0.5)
    pairwise = load_study_file(Path(__file__).resolve().parents[1] / "tasks" / "studies" / "demo_ab.toml")
    with pytest.raises(PlanRefused, match="plan --pairwise"):
        plan_study(pairwise, Components(), effect=0.5)
    bad = subprocess.run([sys.executable, "-m", "empeval.cli", "plan", str(study_file(tmp_path)),
                          "--difference-correlation", "0.99", "--replicates", "50"],
                         capture_output=True, text=True, timeout=120)
    assert bad.returncode == 2 and "--difference-correlation" in bad.stderr and "Traceback" not in bad.stderr


def test_plan_study_file_prints_paid_ratings_per_strategy(tmp_path):
    output = run_plan(str(study_file(tmp_path, systems=("a", "b", "c"))), "--effect", "0.5", "--replicates", "40",
                      "--difference-correlation", "0.7")
    paid = {name.strip(): int(value.replace(",", "")) for name, value in
            re.findall(r"^  ([A-Za-z ]+?)\s+([\d,]+) ratings", output, flags=re.M)}
    assert set(paid) == {"human fixed", "human sequential", "PPI uniform", "PPI active", "PPI active sequential",
                         "PPI two phase"}
    assert paid["PPI uniform"] < 0.7 * paid["human fixed"]  # a judge of difference correlation 0.7: ~1 - 0.49
    # The two-phase design (study sample --burn-in) is PPI too: it needs about what the other PPI designs need (it
    # saved 0-2% over them on the benchmark's studies), far fewer than the people alone.
    assert 0.8 * paid["PPI uniform"] < paid["PPI two phase"] < 0.7 * paid["human fixed"]
    assert "study sample --burn-in 0.3" in output


def test_plan_study_file_power_holds_for_a_study_of_the_recommended_size(tmp_path):
    """200 whole simulated studies (analysis.simulate.likert: raters with bias, rounding to the scale, assignments)
    of the recommended size, two systems `effect` apart, tested as the report tests them (compare_pairs: Wilcoxon on
    item means, Holm): the share found is the stated power within 5 points (the Monte Carlo SE at 0.8 and 200
    studies is 0.028)."""
    output = run_plan(str(study_file(tmp_path)), "--effect", "0.6", "--replicates", "400", "--power", "0.8")
    needed = int(re.search(r"on each pair: (\d+)", output).group(1))
    c = Components()
    found = []
    for seed in range(200):
        study = simulate_study(n_contexts=needed, system_effects={"a": 0.0, "b": 0.6}, criteria=("empathy",),
                               n_honest=max(12, 2 * 3 + 2), n_random_clickers=0, n_straight_liners=0,
                               controls_per_assignment=0, centre=c.centre, context_sd=c.context_sd,
                               response_sd=c.response_sd, rater_bias_sd=c.rater_sd, noise_sd=c.noise_sd, seed=seed)
        # The export's columns renamed as the loader names them: tidy_from_export's checks of every cell are tested
        # elsewhere and would cost most of this test's time.
        ratings = study.export.rename(columns={"item_id": "item", "context_id": "context",
                                               "assignment_id": "assignment"})
        pairs = compare_pairs(ratings, n_boot=0)
        found.append(bool(pairs["significant"].iloc[0]))
    assert np.mean(found) == pytest.approx(0.8, abs=0.05)
