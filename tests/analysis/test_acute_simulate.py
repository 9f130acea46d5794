"""Simulated ACUTE-Eval studies (analysis.simulate.acute) against the ACUTE analysis (analysis.kinds.acute.part): the
design they produce, the true order and win rates recovered, the raters who pick the known-bad control partner
flagged and their leaving-out bringing the win rates back to the truth, a planted position bias found, and the
ranking's intervals covering the true Bradley-Terry strengths about as often as they claim, over seeded
replications."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from empeval.analysis.kinds.acute.part import acute_tables
from empeval.analysis.kinds.acute.schema import judgment_view, validate_acute
from empeval.analysis.kinds.pairwise.schema import validate_judgments
from empeval.analysis.kinds.pairwise.tables import position_bias
from empeval.analysis.simulate.acute import simulate_acute_study
from empeval.analysis.stats.bradley_terry import ranking

QUESTIONS = ("empathy", "talk_to")


def win_rate_errors(study, ab: pd.DataFrame) -> pd.DataFrame:
    """Per row of the A/B win table (a question and a pair of systems): the observed share of picks of system_a,
    the true one, and the standard error of a share over that many pairs of conversations (the unit: its k
    judgments are one draw of its conversations)."""
    rows = []
    for row in ab.itertuples(index=False):
        truth = study.true_win_rate(row.system_a, row.system_b, row.criterion)
        rows.append({"criterion": row.criterion, "pair": f"{row.system_a}|{row.system_b}",
                     "observed": row.win_pct / 100, "truth": truth,
                     "se": np.sqrt(truth * (1 - truth) / row.contexts)})
    return pd.DataFrame(rows).assign(error=lambda t: (t["observed"] - t["truth"]).abs())


# --- the design ----------------------------------------------------------------------------------------------------

@pytest.mark.parametrize(("n_prompts", "k", "seed"), [(4, 1, 0), (9, 2, 1), (12, 3, 2)])
def test_every_pair_of_conversations_is_judged_k_times_by_k_raters_on_balanced_sides(n_prompts, k, seed):
    study = simulate_acute_study(n_prompts=n_prompts, k=k, n_honest=9 * k, seed=seed)
    table = validate_acute(study.judgments)  # the contract: one judgment per rater, pair and question
    real = table.loc[~table["is_control"]]
    per_pair = real.groupby(["comparison_id", "criterion"])["annotator"].agg(["size", "nunique"])
    assert len(per_pair) == 3 * n_prompts * len(QUESTIONS) and (per_pair["size"] == k).all()
    assert (per_pair["nunique"] == k).all()
    assert real["same_prompt"].all() and (real["context_left"] == real["context_id"]).all()
    for pair, part in real.loc[real["criterion"] == "empathy"].groupby("pair"):
        first = str(pair).split("|")[0]
        on_left = int((part["system_left"] == first).sum())
        assert abs(2 * on_left - len(part)) <= 1, (pair, on_left, len(part))
    # With a pool this large nobody reads a prompt twice, control pairs included.
    assert table.groupby(["annotator", "context_id"])["comparison_id"].nunique().max() == 1
    controls = table.loc[table["is_control"] & (table["criterion"] == "empathy")]
    assert len(controls) and (controls["control_target"] == "empathy").all()
    assert (controls["system_left"].eq("control-generic") != controls["system_right"].eq("control-generic")).all()
    on_left = controls.assign(left=controls["system_left"] == "control-generic").groupby("annotator")["left"]
    assert ((2 * on_left.sum() - on_left.size()).abs() <= 1).all()  # each rater's controls alternate sides


def test_the_truth_is_consistent_with_itself():
    study = simulate_acute_study(n_prompts=2, position_bias=0.4, position_bias_sd=0.2, seed=0)
    for question in QUESTIONS:
        assert study.true_win_rate("gold", "moel", question) + study.true_win_rate("moel", "gold", question) \
            == pytest.approx(1.0)
        strengths = study.true_strengths(question)
        assert strengths.sum() == pytest.approx(0.0, abs=1e-9)
        assert strengths.sort_values(ascending=False).index.tolist() == study.true_ranking(question)
        assert study.true_share_left(question) > 0.5
    assert simulate_acute_study(n_prompts=2, seed=0).true_share_left("empathy") == pytest.approx(0.5)


# --- what the analysis recovers --------------------------------------------------------------------------------------

@pytest.mark.parametrize("seed", [3, 4])
def test_the_analysis_recovers_the_true_order_and_win_rates(seed):
    """40 prompts, k = 3, honest raters with a position bias (0.3, spread 0.1) that the balanced sides cancel: the
    Bradley-Terry ranking puts the systems in their true order on each question, every win rate is within 3.5
    standard errors of the truth, and the sign test finds the two systems furthest apart."""
    study = simulate_acute_study(n_prompts=40, k=3, position_bias=0.3, position_bias_sd=0.1, seed=seed)
    tables = acute_tables(study.judgments, n_boot=50, seed=seed)
    assert tables.flagged == []
    ranked = tables.pairwise.ranking
    for question in QUESTIONS:
        order = ranked.loc[ranked["criterion"] == question].sort_values("rank")["system"].tolist()
        assert order == study.true_ranking(question)
    errors = win_rate_errors(study, tables.pairwise.ab)
    assert len(errors) == 3 * len(QUESTIONS)
    assert (errors["error"] < 3.5 * errors["se"]).all(), errors
    extremes = tables.pairwise.ab.set_index(["criterion", "system_a", "system_b"])
    assert extremes.loc[("empathy", "baseline", "gold"), "significant"]


def test_control_pairs_flag_the_raters_who_pick_the_known_bad_partner_and_leaving_them_out_restores_the_truth():
    """Three raters invert the question (they pick the worse listener) and two click at random among 12 honest
    ones: the inverted fail their control pairs and are flagged, honest raters never are, random clickers may be
    (they pass half their controls); with the flagged left out the win rates are closer to the truth than with
    them kept, and within 3.5 standard errors of it."""
    study = simulate_acute_study(n_prompts=30, k=3, n_honest=12, n_inverted=3, n_random_clickers=2, seed=8)
    inverted = {rater for rater, kind in study.careless.items() if kind == "inverted"}
    random_clickers = {rater for rater, kind in study.careless.items() if kind == "random"}
    kept = acute_tables(study.judgments, n_boot=20)
    flagged = set(kept.flagged)
    assert inverted <= flagged <= inverted | random_clickers
    scores = kept.pairwise.controls.set_index("annotator")["pass_rate"]
    honest = [rater for rater in scores.index if rater not in study.careless]
    assert scores[honest].min() >= 0.75 and scores[sorted(inverted)].max() <= 0.25
    assert not set(kept.kept["annotator"]) & flagged
    everyone = acute_tables(study.judgments, n_boot=20, exclude_flagged=False)
    assert set(everyone.kept["annotator"]) >= flagged
    without, with_them = win_rate_errors(study, kept.pairwise.ab), win_rate_errors(study, everyone.pairwise.ab)
    assert without["error"].mean() < 0.5 * with_them["error"].mean()
    assert (without["error"] < 3.5 * without["se"]).all(), without


def test_a_planted_position_bias_is_found_and_its_interval_covers_the_true_share():
    study = simulate_acute_study(n_prompts=30, k=3, position_bias=0.6, seed=5)
    position = acute_tables(study.judgments, n_boot=20).pairwise.position.set_index("criterion")
    for question in QUESTIONS:
        row, truth = position.loc[question], study.true_share_left(question)
        assert row["p"] < 0.01 and row["ci_low"] > 0.5
        assert row["ci_low"] <= truth <= row["ci_high"]


# --- the intervals --------------------------------------------------------------------------------------------------

REPLICATIONS = 30


def test_the_ranking_intervals_cover_the_true_strengths_at_about_the_nominal_rate():
    """30 seeded studies (15 prompts, k = 3, 12 honest raters with a position bias of 0.3 spread 0.1, one question),
    each ranked with 100 bootstrap resamples of its pairs of conversations, as acute_tables ranks (pinned on the
    first). Their 95% intervals hold the true Bradley-Terry strengths (SimulatedAcuteStudy.true_strengths) in 80% to
    99% of the 90 cases: about 0.90 in 400 replications of this design, a little under the level (the estimate's
    small-sample bias away from zero, and the conversation each pair of conversations shares with the pairs of the
    same conversation against the other systems, which the bootstrap does not cluster); intervals far too wide would
    hold them every time. Their widths follow the spread of the estimates over the replications (mean half-width /
    1.96 within a factor 1.5 of the estimates' standard deviation). The truth must be the Bradley-Terry one: the
    latent Thurstone qualities (centred) are held far less often. The position-bias intervals (exact binomial) hold
    the true left share at least 90% of the time (0.995 in 400 replications: with the sides balanced the count of
    left picks varies less than a binomial one, so they are conservative)."""
    rows, covered_left = [], []
    for replication in range(REPLICATIONS):
        study = simulate_acute_study(n_prompts=15, k=3, questions=("empathy",), position_bias=0.3,
                                     position_bias_sd=0.1, seed=100 + replication)
        view = validate_judgments(judgment_view(validate_acute(study.judgments)))
        ranked = ranking(view, n_boot=100, seed=replication)
        if replication == 0:
            report = acute_tables(study.judgments, n_boot=100, seed=replication).pairwise.ranking
            pd.testing.assert_frame_equal(ranked, report)
        truth = study.true_strengths("empathy")
        latent = pd.Series({system: q["empathy"] for system, q in study.system_quality.items()})
        for entry in ranked.itertuples(index=False):
            rows.append({"system": entry.system, "estimate": entry.strength, "low": entry.ci_low,
                         "high": entry.ci_high, "truth": truth[entry.system],
                         "latent": latent[entry.system] - latent.mean()})
        left = position_bias(view).set_index("criterion").loc["empathy"]
        covered_left.append(left["ci_low"] <= study.true_share_left("empathy") <= left["ci_high"])
    cases = pd.DataFrame(rows)

    def coverage(of: str) -> float:
        return float(((cases["low"] <= cases[of]) & (cases[of] <= cases["high"])).mean())

    assert 0.80 <= coverage("truth") <= 0.99, coverage("truth")
    assert coverage("latent") < 0.8, coverage("latent")
    half = (cases["high"] - cases["low"]) / 3.92
    spread = pd.DataFrame({"sd": cases.groupby("system")["estimate"].std(),
                           "half": half.groupby(cases["system"]).mean()})
    assert (spread["half"] / spread["sd"]).between(1 / 1.5, 1.5).all(), spread
    assert np.mean(covered_left) >= 0.9
