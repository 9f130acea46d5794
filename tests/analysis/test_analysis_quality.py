"""Rater quality measures and the flag list with reasons (re-running without the flagged raters:
stats/test_exclusions.py)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from empeval.analysis.kinds.likert.quality import (
    FLAG_COLUMNS,
    FLAG_RULES,
    consensus_agreement,
    control_pass_rates,
    control_results,
    flagged_annotators,
    halo,
    rater_quality,
    straightlining,
    time_per_item,
)

CRITERIA = ("empathy", "relevance", "fluency")


def _rating(annotator, item, criterion, score, *, assignment="a1", control_target=None, seconds=20.0,
            context=None, system="sys"):
    return {"annotator": annotator, "item": item, "context": context or item, "system": system,
            "criterion": criterion, "score": score, "is_control": control_target is not None,
            "control_kind": "control-generic" if control_target else None, "control_target": control_target,
            "assignment": assignment, "seconds_on_item": seconds,
            "started_at": pd.Timestamp("2024-05-01T09:00:00Z"), "submitted_at": pd.Timestamp("2024-05-01T09:10:00Z")}


def test_control_passes_when_scored_below_the_real_responses():
    rows = [_rating("careful", "real-1", "empathy", 4), _rating("careful", "real-2", "empathy", 3),
            _rating("careful", "ctl", "empathy", 2, control_target="empathy"),
            _rating("careful", "ctl", "fluency", 5, control_target="empathy"),
            _rating("lazy", "real-3", "empathy", 3), _rating("lazy", "ctl-2", "empathy", 3, control_target="empathy")]
    results = control_results(pd.DataFrame(rows)).set_index("annotator")
    assert results.loc["careful", "criterion"] == "empathy"  # only the targeted criterion is judged
    assert results.loc["careful", "reference"] == 3.5 and bool(results.loc["careful", "passed"])
    assert not bool(results.loc["lazy", "passed"])  # equal to the real responses is not below them


def test_control_reference_falls_back_to_all_items_of_the_rater():
    rows = [_rating("r", "real", "relevance", 4, assignment="a1"),
            _rating("r", "ctl", "relevance", 1, assignment="a2", control_target="relevance")]
    result = control_results(pd.DataFrame(rows)).iloc[0]
    assert result["reference_scope"] == "all items" and bool(result["passed"])


def test_control_pass_rates_are_per_targeted_criterion(simulated_ratings):
    rates = control_pass_rates(simulated_ratings)
    assert set(rates["criterion"]) <= set(CRITERIA)
    assert ((rates["pass_rate"] >= 0) & (rates["pass_rate"] <= 1)).all()


def test_straight_lining_counts_identical_triples():
    rows = [_rating("flat", f"i{i}", c, 4) for i in range(6) for c in CRITERIA]
    rows += [_rating("varied", f"i{i}", c, 1 + (i + j) % 5) for i in range(6) for j, c in enumerate(CRITERIA)]
    table = straightlining(pd.DataFrame(rows)).set_index("annotator")
    assert table.loc["flat", "straightline_rate"] == 1.0 and table.loc["flat", "score_sd"] == 0
    assert table.loc["varied", "straightline_rate"] == 0.0


def test_halo_is_the_correlation_between_criteria():
    rows = [_rating("halo", f"i{i}", c, 1 + i % 5) for i in range(10) for c in CRITERIA]
    rows += [_rating("flat", f"i{i}", c, 3) for i in range(10) for c in CRITERIA]
    table = halo(pd.DataFrame(rows)).set_index("annotator")
    assert table.loc["halo", "halo"] == pytest.approx(1.0)
    assert np.isnan(table.loc["flat", "halo"])  # undefined without variation, not 0 or 1


def test_time_per_item_falls_back_to_the_assignment_duration():
    rows = [_rating("r", f"i{i}", "empathy", 3, seconds=np.nan) for i in range(4)]
    table = time_per_item(pd.DataFrame(rows)).set_index("annotator")
    assert table.loc["r", "median_seconds"] == pytest.approx(600 / 4)


def test_consensus_leaves_the_rater_out():
    # Item i: A and B give i, C gives 6 - i. A's consensus is the mean of B and C: always 3.
    rows = []
    for i in range(1, 6):
        rows += [_rating("A", f"i{i}", "empathy", i), _rating("B", f"i{i}", "empathy", i),
                 _rating("C", f"i{i}", "empathy", 6 - i)]
    table = consensus_agreement(pd.DataFrame(rows), min_items=5).set_index("annotator")
    assert np.isnan(table.loc["A", "consensus_r"])  # a constant consensus has no correlation
    assert table.loc["C", "consensus_r"] == pytest.approx(-1.0)
    without_c = consensus_agreement(pd.DataFrame(rows), min_items=5, exclude_from_consensus=["C"])
    assert without_c.set_index("annotator").loc["A", "consensus_r"] == pytest.approx(1.0)


def test_simulated_spammers_are_flagged_and_careful_raters_are_not(simulated, simulated_ratings):
    quality = rater_quality(simulated_ratings)
    assert flagged_annotators(quality) == sorted(simulated.spammers)
    reasons = quality.set_index("annotator")["reasons"]
    for annotator, kind in simulated.spammers.items():
        assert reasons[annotator]
        if kind == "straight":
            assert "same score" in reasons[annotator]
    assert (reasons.drop(index=list(simulated.spammers)) == "").all()


def test_each_rule_has_a_boolean_column_and_flagged_is_any_of_them(simulated, simulated_ratings):
    quality = rater_quality(simulated_ratings).set_index("annotator")
    flags = quality[list(FLAG_COLUMNS)]
    assert list(FLAG_COLUMNS) == list(FLAG_RULES)
    assert all(dtype == np.dtype(bool) for dtype in flags.dtypes) and quality["flagged"].dtype == np.dtype(bool)
    assert (quality["flagged"] == flags.any(axis=1)).all()
    assert (quality["flagged"] == (quality["reasons"] != "")).all()
    for annotator, kind in simulated.spammers.items():
        if kind == "straight":
            assert quality.loc[annotator, "flag_straightlining"]
    assert not flags.drop(index=list(simulated.spammers)).to_numpy().any()


def test_a_flag_column_says_which_rule_fired():
    # "fast" rates quickly and otherwise well; "flat" gives one score to everything.
    rows = [_rating("fast", f"i{i}", c, 1 + (i + j) % 5, seconds=1.0) for i in range(6) for j, c in enumerate(CRITERIA)]
    rows += [_rating("flat", f"i{i}", c, 3) for i in range(6) for c in CRITERIA]
    quality = rater_quality(pd.DataFrame(rows)).set_index("annotator")
    fired = {annotator: [c for c in FLAG_COLUMNS if quality.loc[annotator, c]] for annotator in quality.index}
    assert fired == {"fast": ["flag_speed"], "flat": ["flag_straightlining"]}


def test_spammers_are_caught_without_timing_data(simulated, simulated_ratings):
    quality = rater_quality(simulated_ratings.assign(seconds_on_item=np.nan, started_at=pd.NaT, submitted_at=pd.NaT))
    assert flagged_annotators(quality) == sorted(simulated.spammers)
    assert not quality["reasons"].str.contains("per item").any()


def test_thresholds_decide_who_is_flagged(simulated_ratings):
    lenient = rater_quality(simulated_ratings, min_control_pass_rate=0.0, max_straightline_rate=1.0,
                            min_consensus_r=-1.0, min_median_seconds=None)
    assert not lenient.loc[~lenient["reasons"].str.contains("same score"), "flagged"].any()
    strict = rater_quality(simulated_ratings, max_halo=0.0)
    assert strict["reasons"].str.contains("halo").any()
    assert (strict["flag_halo"] == strict["reasons"].str.contains("halo")).all()


def test_careful_raters_with_weak_consensus_by_chance_are_not_flagged():
    """Few items per rater and small real differences between items: careful raters' consensus r scatter
    below 0.2 by chance, which is not evidence against them."""
    from empeval.analysis.kinds.likert.load import tidy_from_export
    from empeval.analysis.simulate.likert import simulate_study

    study = simulate_study(n_contexts=12, n_honest=15, n_random_clickers=0, n_straight_liners=0, context_sd=0.15,
                           response_sd=0.15, noise_sd=0.9, controls_per_assignment=0, seed=3)
    quality = rater_quality(tidy_from_export(study.export), min_median_seconds=None)
    assert (quality["consensus_r"] < 0.2).sum() >= 2  # a bare cut-off at 0.2 would exclude these honest raters
    assert flagged_annotators(quality) == []


def test_each_simulated_control_ranks_last_on_the_criterion_it_targets(simulated_ratings):
    from empeval.analysis.kinds.likert.quality import controls_beside_systems

    table = controls_beside_systems(simulated_ratings).set_index("control_kind")
    assert set(table.index) == {"control-generic", "control-mismatched", "control-scrambled"}
    assert table["last_on_target"].all()
    generic = table.loc["control-generic"]
    assert generic["mean_empathy"] < generic["lowest_system_mean"] < generic["mean_fluency"]


def test_a_control_raters_did_not_see_through_is_reported_as_not_last():
    from empeval.analysis.kinds.likert.quality import controls_beside_systems

    rows = []
    for item, (system, score) in enumerate([("a", 2), ("b", 3), ("control-generic", 4)]):
        is_control = system.startswith("control")
        rows.append({"item": item, "system": system, "criterion": "empathy", "score": score, "annotator": "x",
                     "is_control": is_control, "control_kind": system if is_control else None,
                     "control_target": "empathy" if is_control else None})
    table = controls_beside_systems(pd.DataFrame(rows))
    assert table.loc[0, "last_on_target"] == False  # noqa: E712
    assert table.loc[0, "lowest_system"] == "a"
