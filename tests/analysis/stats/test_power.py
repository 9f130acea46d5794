"""Planning: simulated power agrees with the analytic paired t-test on the same design, and a simulated
pilot gives back the sample size its planted components need."""
from __future__ import annotations

from click.testing import CliRunner

from empeval.analysis.kinds.likert.load import tidy_from_export
from empeval.analysis.simulate.likert import simulate_study
from empeval.analysis.stats.power import (
    Components,
    analytic_t_contexts,
    analytic_t_power,
    components_from_pilot,
    required_contexts,
    simulated_power,
)

TRUE = Components(centre=3.2, context_sd=0.4, response_sd=0.4, rater_sd=0.3, noise_sd=0.7)


def test_simulated_t_test_power_matches_the_noncentral_t_formula():
    for k, n in ((1, 120), (3, 60), (5, 40)):
        simulated = simulated_power(TRUE, n_contexts=n, k=k, effect=0.3, replicates=3000, test="t", seed=k)
        analytic = analytic_t_power(TRUE, n_contexts=n, k=k, effect=0.3)
        assert abs(simulated - analytic) < 0.035, (k, n, simulated, analytic)


def test_required_contexts_of_the_wilcoxon_plan_are_within_15_percent_of_the_analytic_t_test():
    for k in (1, 3):
        wilcoxon = required_contexts(TRUE, k=k, effect=0.3, replicates=1500)
        analytic = analytic_t_contexts(TRUE, k=k, effect=0.3)
        assert 0.95 * analytic <= wilcoxon <= 1.15 * analytic, (k, wilcoxon, analytic)


def test_a_simulated_pilot_recovers_the_planted_components_and_sample_size():
    pilot = simulate_study(n_contexts=80, n_honest=24, n_random_clickers=0, n_straight_liners=0, raters_per_item=3,
                           centre=TRUE.centre, context_sd=TRUE.context_sd, response_sd=TRUE.response_sd,
                           rater_bias_sd=TRUE.rater_sd, noise_sd=TRUE.noise_sd, seed=4)
    estimated = components_from_pilot(tidy_from_export(pilot.export), criterion="empathy")
    assert abs(estimated.noise_sd - TRUE.noise_sd) < 0.15
    assert abs(estimated.context_sd - TRUE.context_sd) < 0.2
    planned = required_contexts(estimated, k=3, effect=0.3, replicates=1000)
    truth = analytic_t_contexts(TRUE, k=3, effect=0.3)
    assert abs(planned - truth) / truth < 0.3, (planned, truth)


def test_plan_command_prints_the_design_table_and_writes_the_plot(tmp_path):
    from empeval.cli import cli

    pilot = simulate_study(n_contexts=30, seed=2)
    export = tmp_path / "pilot.csv"
    pilot.export.to_csv(export, index=False)
    plot = tmp_path / "plan.png"
    result = CliRunner().invoke(cli, ["plan", "--pilot-export", str(export), "--reward", "1.5", "--replicates", "150",
                                      "--plot", str(plot), "--contexts", "50,100"])
    assert result.exit_code == 0, result.output
    assert "contexts needed for power 0.8" in result.output and "k = 5:" in result.output
    assert result.output.count("\n  3       50") == 1 or "  3        50" in result.output
    assert plot.stat().st_size > 10_000
    bad = CliRunner().invoke(cli, ["plan", "--ks", "0,3"])
    assert bad.exit_code == 2
