"""What analysis.kinds.pairwise.tables promises beyond the hand-counted tables of test_pairwise_tables.py: the
documented
columns of empty tables, the options reaching the tables they name, the edges of agreement (two units, a tie
between unit sizes), the messages that name the row, and the Likert side-by-side's undecided cases."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from empeval.analysis.kinds.pairwise.schema import judgment_rows
from empeval.analysis.kinds.pairwise.tables import (
    ab_counts,
    ab_table,
    choice_agreement,
    context_net_wins,
    control_scores,
    control_sides,
    likert_beside_ab,
    oriented,
    pairwise_tables,
    position_bias,
    sign_test,
    sign_tests,
)

AB_COUNT_COLUMNS = ["criterion", "system_a", "system_b", "judgments", "wins", "losses", "ties", "win_pct",
                    "lose_pct", "tie_pct", "contexts", "annotators"]
SIGN_TEST_COLUMNS = ["criterion", "system_a", "system_b", "contexts", "contexts_won", "contexts_lost",
                     "contexts_even", "p", "p_adj", "significant"]
CONTROL_COLUMNS = ["annotator", "controls", "passed", "tied", "failed", "pass_rate"]
AGREEMENT_COLUMNS = ["criterion", "coefficient", "estimate", "ci_low", "ci_high", "units", "ratings_per_unit",
                     "judgments"]
LIKERT_COLUMNS = ["criterion", "system_a", "system_b", "likert_mean_a", "likert_mean_b", "likert_diff",
                  "likert_contexts", "win_pct", "lose_pct", "tie_pct", "same_direction"]


def _frame(rows: list[dict]) -> pd.DataFrame:
    return pd.DataFrame(rows)


def _only_controls() -> pd.DataFrame:
    return _frame(judgment_rows([(1, "control-generic", "moel", "right")], is_control=True,
                                control_target="fluency"))


def test_tables_without_real_judgments_keep_their_documented_columns():
    empty = _only_controls()
    counts = ab_counts(empty)
    assert counts.empty and list(counts.columns) == AB_COUNT_COLUMNS
    tests = sign_tests(empty)
    assert tests.empty and list(tests.columns) == SIGN_TEST_COLUMNS
    assert list(ab_table(empty).columns) == AB_COUNT_COLUMNS + SIGN_TEST_COLUMNS[4:]
    assert list(oriented(empty).columns)[-3:] == ["system_a", "system_b", "outcome"] and oriented(empty).empty
    # the control is judged on empathy, its target is fluency: nothing scored, and the columns stay
    scores = control_scores(empty, control_systems={"control-generic"})
    assert scores.empty and list(scores.columns) == CONTROL_COLUMNS


def test_the_ab_table_lists_every_column_with_counts_and_decision_side_by_side():
    rows = judgment_rows([(1, "moel", "gold", "left"), (2, "moel", "gold", "right"), (3, "gold", "moel", "tie")])
    table = ab_table(_frame(rows), focus="moel")
    assert list(table.columns) == AB_COUNT_COLUMNS + SIGN_TEST_COLUMNS[4:]
    row = table.iloc[0]
    assert (row["system_a"], row["wins"], row["losses"], row["ties"]) == ("moel", 1, 1, 1)
    assert row["win_pct"] == pytest.approx(100 / 3) and row["tie_pct"] == pytest.approx(100 / 3)
    assert (row["contexts_won"], row["contexts_lost"], row["contexts_even"], row["p"]) == (1, 1, 1, 1.0)


def test_net_wins_are_integers_per_context_with_their_judgment_count():
    rows = judgment_rows([(1, "moel", "gold", "left", "a"), (1, "moel", "gold", "left", "b"),
                          (2, "gold", "moel", "left", "a")])
    net = context_net_wins(_frame(rows), focus="moel")
    assert list(net.columns) == ["criterion", "system_a", "system_b", "context_id", "judgments", "net_wins"]
    assert net[["context_id", "judgments", "net_wins"]].values.tolist() == [[1, 2, 2], [2, 1, -1]]
    assert net["net_wins"].dtype == np.int64 and net["judgments"].dtype == np.int64


def test_the_sign_test_refuses_a_negative_count_on_either_side():
    with pytest.raises(ValueError, match=r"must be counts \(>= 0\), got 3 and -1"):
        sign_test(3, -1)
    with pytest.raises(ValueError, match=r"got -2 and 0"):
        sign_test(-2, 0)
    assert isinstance(sign_test(4, 1), float)


def test_significance_is_an_adjusted_p_strictly_below_alpha():
    """9 contexts won, 1 lost: p = 22/1024 exactly. At alpha = 22/1024 it is not significant (p < alpha, not
    <=); just above, it is; the default alpha is 0.05."""
    rows = judgment_rows([(c, "moel", "gold", "left") for c in range(9)] + [(9, "moel", "gold", "right")])
    assert not sign_tests(_frame(rows), alpha=22 / 1024).iloc[0]["significant"]
    assert sign_tests(_frame(rows), alpha=23 / 1024).iloc[0]["significant"]
    assert sign_tests(_frame(rows)).iloc[0]["significant"]
    assert not sign_tests(_frame(rows), alpha=0.02).iloc[0]["significant"]


def test_the_correction_option_reaches_the_adjustment():
    """Two pairs with p = 2/1024 and 22/1024: Bonferroni doubles both; Holm doubles the smaller only."""
    rows = (judgment_rows([(c, "moel", "gold", "left") for c in range(10)])
            + judgment_rows([(c, "moel", "mime", "left") for c in range(9)] + [(9, "moel", "mime", "right")]))
    holm = sign_tests(_frame(rows), focus="moel").set_index("system_b")["p_adj"]
    bonferroni = sign_tests(_frame(rows), focus="moel", correction="bonferroni").set_index("system_b")["p_adj"]
    assert holm["mime"] == pytest.approx(22 / 1024) and bonferroni["mime"] == pytest.approx(44 / 1024)
    assert holm["gold"] == pytest.approx(4 / 1024) and bonferroni["gold"] == pytest.approx(4 / 1024)
    table = ab_table(_frame(rows), focus="moel", correction="bonferroni", alpha=0.03).set_index("system_b")
    assert table.loc["mime", "p_adj"] == pytest.approx(44 / 1024) and not table.loc["mime", "significant"]


def _unit(context: int, picks: list[str]) -> list[dict]:
    side = {"gold": "left", "moel": "right", "tie": "tie"}
    return [row for rater, pick in enumerate(picks)
            for row in judgment_rows([(context, "gold", "moel", side[pick])], annotator=f"r{rater}")]


def test_fleiss_kappa_on_two_units_by_hand_and_the_judgments_it_used():
    """Units gold gold / gold moel: P_bar = (1 + 0) / 2, p = (3/4, 1/4), P_e = 10/16, kappa = (1/2 - 10/16) /
    (6/16) = -1/3. Krippendorff (nominal): n = 4, o(gold, moel) = o(moel, gold) = 1, D_o = 2/4,
    D_e = (16 - 9 - 1) / 12 = 1/2, alpha = 0."""
    agreement = choice_agreement(_frame(_unit(0, ["gold", "gold"]) + _unit(1, ["gold", "moel"])))
    assert list(agreement.columns) == AGREEMENT_COLUMNS
    agreement = agreement.set_index("coefficient")
    assert agreement.loc["fleiss_kappa", "estimate"] == pytest.approx(-1 / 3)
    assert agreement.loc["fleiss_kappa", ["units", "ratings_per_unit", "judgments"]].tolist() == [2, 2, 4]
    assert agreement.loc["krippendorff_alpha", "estimate"] == pytest.approx(0.0, abs=1e-12)
    assert agreement.loc["krippendorff_alpha", ["units", "judgments"]].tolist() == [2, 4]
    assert np.isnan(agreement.loc["krippendorff_alpha", "ratings_per_unit"])


def test_fleiss_prefers_the_larger_unit_size_when_two_sizes_are_equally_common():
    """Two units of three ratings and two of two: kappa uses the three-rating units (the larger size wins a tie
    of counts); alpha every unit."""
    rows = (_unit(0, ["gold", "gold", "moel"]) + _unit(1, ["moel", "moel", "moel"])
            + _unit(2, ["gold", "gold"]) + _unit(3, ["tie", "gold"]))
    agreement = choice_agreement(_frame(rows)).set_index("coefficient")
    assert agreement.loc["fleiss_kappa", ["units", "ratings_per_unit", "judgments"]].tolist() == [2, 3, 6]
    # Fleiss on [[2, 1, 0], [0, 3, 0]]: P_bar = (1/3 + 1) / 2 = 2/3, p = (2/6, 4/6), P_e = 20/36, kappa = 1/4
    assert agreement.loc["fleiss_kappa", "estimate"] == pytest.approx(0.25)
    assert agreement.loc["krippendorff_alpha", ["units", "judgments"]].tolist() == [4, 10]


def test_agreement_needs_two_ratings_of_a_unit_and_two_units_for_kappa():
    single = choice_agreement(_frame(_unit(0, ["gold"]) + _unit(1, ["moel"]))).set_index("coefficient")
    assert single.loc["fleiss_kappa", ["units", "judgments"]].tolist() == [0, 0]
    assert np.isnan(single.loc["fleiss_kappa", "estimate"]) and np.isnan(single.loc["fleiss_kappa", "ratings_per_unit"])
    assert single.loc["krippendorff_alpha", ["units", "judgments"]].tolist() == [0, 0]
    assert np.isnan(single.loc["krippendorff_alpha", "estimate"])
    one_unit = choice_agreement(_frame(_unit(0, ["gold", "moel"]) + _unit(1, ["moel"]))).set_index("coefficient")
    assert one_unit.loc["fleiss_kappa", ["units", "ratings_per_unit"]].tolist() == [1, 2]
    assert np.isnan(one_unit.loc["fleiss_kappa", "estimate"])


def test_agreement_leaves_control_pairs_out():
    controls = [row for rater in ("r0", "r1") for row in judgment_rows(
        [(5, "control-generic", "moel", "left")], annotator=rater, is_control=True, control_target="empathy")]
    plain = choice_agreement(_frame(_unit(0, ["gold", "gold"]) + _unit(1, ["gold", "moel"])))
    mixed = choice_agreement(_frame(_unit(0, ["gold", "gold"]) + _unit(1, ["gold", "moel"]) + controls))
    pd.testing.assert_frame_equal(plain, mixed)


def test_position_bias_interval_follows_the_requested_level_and_ties_do_not_count():
    specs = [(c, "gold", "moel", "left" if c < 8 else "right") for c in range(10)] + [(10, "gold", "moel", "tie")]
    bias = position_bias(_frame(judgment_rows(specs)), ci_level=0.9).set_index("criterion")
    assert list(bias.reset_index().columns) == ["criterion", "decisive", "left", "share_left", "ci_low", "ci_high",
                                                 "p"]
    assert bias.loc["empathy", "ci_low"] == pytest.approx(stats.beta.ppf(0.05, 8, 3))
    assert bias.loc["empathy", "ci_high"] == pytest.approx(stats.beta.ppf(0.95, 9, 2))
    assert bias.loc["all", ["decisive", "left"]].tolist() == [10, 8]
    assert bias.loc["all", "p"] == pytest.approx(2 * (45 + 10 + 1) / 1024)


def test_position_bias_pools_per_shown_pair_of_each_assignment_and_leaves_controls_out():
    """The same context and pair shown in two assignments is two shown pairs; a right lean counts as right."""
    rows = (judgment_rows([(1, "gold", "moel", "right")], criteria=("empathy", "fluency"), assignment_id=1)
            + judgment_rows([(1, "gold", "moel", "right")], criteria=("empathy", "fluency"), assignment_id=2,
                            annotator="ann-2")
            + judgment_rows([(2, "control-generic", "moel", "left")], is_control=True, control_target="empathy"))
    bias = position_bias(_frame(rows)).set_index("criterion")
    assert bias.loc["all", ["decisive", "left", "share_left"]].tolist() == [2, 0, 0.0]
    assert bias.loc["empathy", ["decisive", "left"]].tolist() == [2, 0]


def test_a_control_pair_of_two_control_systems_is_refused_saying_both():
    rows = judgment_rows([(1, "gold", "moel", "left")]) + judgment_rows(
        [(2, "control-a", "control-b", "left")], is_control=True, control_target="empathy")
    with pytest.raises(ValueError, match=r"row 2 is a control pair \('control-a\|control-b'\) but both of its sides"):
        control_sides(_frame(rows))
    neither = judgment_rows([(1, "gold", "moel", "left")]) + judgment_rows(
        [(2, "gold", "moel", "left")], is_control=True, control_target="empathy")
    with pytest.raises(ValueError, match=r"row 2 is a control pair \('gold\|moel'\) but neither of its sides is "
                                         r"a control system \(\['control-a'\]\)"):
        control_sides(_frame(neither), control_systems={"control-a"})


def test_control_sides_name_the_control_on_either_side_and_none_elsewhere():
    rows = (judgment_rows([(1, "gold", "moel", "left")])
            + judgment_rows([(2, "moel", "control-generic", "left"), (3, "control-generic", "gold", "right")],
                            is_control=True, control_target="empathy"))
    assert control_sides(_frame(rows)).tolist() == [None, "control-generic", "control-generic"]
    # named explicitly: a real system may serve as the control side
    assert control_sides(_frame(rows[:1] + judgment_rows([(4, "moel", "gold", "left")], is_control=True,
                                                           control_target="empathy")),
                         control_systems={"gold"}).tolist() == [None, "gold"]


def test_control_scores_count_per_annotator_with_the_pass_rate():
    rows = (judgment_rows([(1, "moel", "gold", "left")])
            + judgment_rows([(2, "moel", "control-generic", "left"), (3, "control-generic", "moel", "left"),
                             (4, "moel", "control-generic", "left")], is_control=True, control_target="empathy",
                            annotator="ann-2")
            + judgment_rows([(5, "control-generic", "gold", "right")], is_control=True, control_target="empathy",
                            annotator="ann-3"))
    scores = control_scores(_frame(rows))
    assert list(scores.columns) == CONTROL_COLUMNS
    assert scores.values.tolist() == [["ann-2", 3, 2, 0, 1, pytest.approx(2 / 3)], ["ann-3", 1, 1, 0, 0, 1.0]]
    assert all(scores[c].dtype == np.int64 for c in ("controls", "passed", "tied", "failed"))


def _ratings(scores: dict[str, list[int]]) -> pd.DataFrame:
    rows = [{"item": f"{c}:{system}", "context": str(c), "system": system, "criterion": "empathy", "score": s,
             "is_control": False} for system, values in scores.items() for c, s in enumerate(values)]
    return pd.DataFrame(rows)


def test_the_likert_side_by_side_is_undecided_on_an_even_vote_or_an_even_mean_and_nan_for_unrated_systems():
    even_vote = _frame(judgment_rows([(0, "moel", "gold", "left"), (1, "moel", "gold", "right")]))
    table = likert_beside_ab(_ratings({"moel": [5, 4], "gold": [3, 3]}), even_vote, focus="moel")
    assert list(table.columns) == LIKERT_COLUMNS
    assert table.iloc[0]["likert_diff"] == 1.5 and table.iloc[0]["same_direction"] is None
    moel_wins = _frame(judgment_rows([(0, "moel", "gold", "left")]))
    even_mean = likert_beside_ab(_ratings({"moel": [4, 3], "gold": [3, 4]}), moel_wins, focus="moel").iloc[0]
    assert even_mean["likert_diff"] == 0 and even_mean["same_direction"] is None
    agreeing = likert_beside_ab(_ratings({"moel": [4, 4], "gold": [3, 4]}), moel_wins, focus="moel").iloc[0]
    assert agreeing["same_direction"] is not None and bool(agreeing["same_direction"])
    assert agreeing["likert_contexts"] == 2
    unrated = likert_beside_ab(_ratings({"moel": [4, 4]}), moel_wins, focus="moel").iloc[0]
    assert unrated["likert_mean_a"] == 4.0 and np.isnan(unrated["likert_mean_b"])
    assert unrated["likert_contexts"] == 0 and unrated["same_direction"] is None
    assert unrated["win_pct"] == 100.0 and unrated["tie_pct"] == 0.0
    assert likert_beside_ab(_ratings({"moel": [4]}), _only_controls()).columns.tolist() == LIKERT_COLUMNS


def test_the_likert_side_by_side_accepts_is_control_as_text_free_booleans_and_counts_shared_contexts_only():
    ratings = _ratings({"moel": [4, 4, 2], "gold": [3, 4]})
    ratings["is_control"] = [0, 0, 1, 0, 0]  # moel's third rating is a control's: left out
    table = likert_beside_ab(ratings, _frame(judgment_rows([(0, "moel", "gold", "left")])), focus="moel").iloc[0]
    assert table["likert_mean_a"] == 4.0 and table["likert_contexts"] == 2


def test_pairwise_tables_pass_each_option_to_the_table_it_names():
    rows = (judgment_rows([(c, "moel", "gold", "left" if c % 4 else "right", f"a{c % 3}") for c in range(12)])
            + judgment_rows([(c, "moel", "mime", "left" if c % 3 else "tie", f"a{c % 3}") for c in range(12)])
            + judgment_rows([(c, "gold", "mime", "right" if c % 2 else "left", f"a{c % 3}") for c in range(12)])
            + judgment_rows([(20, "moel", "gold", "left")], late=True, annotator="late")
            # gold as the control side of a control pair: only control_systems= says so (by default it is refused)
            + judgment_rows([(30, "gold", "moel", "right")], is_control=True, control_target="empathy"))
    frame = _frame(rows)
    tables = pairwise_tables(frame, focus="moel", include_late=False, n_boot=30, ci_level=0.8, seed=5,
                             control_systems={"gold"}, correction="bonferroni", alpha=0.2)
    on_time = frame.loc[~frame["late"]]
    pd.testing.assert_frame_equal(tables.ab, ab_table(on_time, focus="moel", correction="bonferroni", alpha=0.2))
    pd.testing.assert_frame_equal(tables.agreement, choice_agreement(on_time))
    pd.testing.assert_frame_equal(tables.position, position_bias(on_time, ci_level=0.8))
    pd.testing.assert_frame_equal(tables.controls, control_scores(on_time, control_systems={"gold"}))
    from empeval.analysis.stats.bradley_terry import RANKING_CAPTION, ranking

    pd.testing.assert_frame_equal(tables.ranking, ranking(on_time, n_boot=30, ci_level=0.8, seed=5))
    assert tables.ranking_caption == RANKING_CAPTION and tables.likert is None
    assert "Position bias" in tables.position_caption
    likert = _ratings({"moel": [4], "gold": [3]})
    with_likert = pairwise_tables(frame, focus="moel", n_boot=10, control_systems={"gold"}, likert=likert)
    pd.testing.assert_frame_equal(with_likert.likert, likert_beside_ab(likert, frame, focus="moel"))


def test_tables_come_sorted_by_criterion_and_pair_whatever_the_order_of_the_rows():
    rows = (judgment_rows([(0, "moel", "mime", "left")], criteria=("fluency", "empathy"))
            + judgment_rows([(1, "moel", "gold", "right")], criteria=("fluency", "empathy")))
    counts = ab_counts(_frame(rows))
    assert counts[["criterion", "system_a", "system_b"]].values.tolist() == [
        ["empathy", "gold", "moel"], ["empathy", "mime", "moel"], ["fluency", "gold", "moel"],
        ["fluency", "mime", "moel"]]
    assert position_bias(_frame(rows))["criterion"].tolist() == ["empathy", "fluency", "all"]
    assert choice_agreement(_frame(rows))["criterion"].tolist() == ["empathy"] * 2 + ["fluency"] * 2


def test_the_ab_table_decides_at_its_alpha_and_by_default_at_five_percent():
    """moel 10-0 over gold (p = 2/1024) and 1-1 with mime (p = 1)."""
    rows = (judgment_rows([(c, "moel", "gold", "left") for c in range(10)])
            + judgment_rows([(0, "moel", "mime", "left"), (1, "moel", "mime", "right")]))
    default = ab_table(_frame(rows), focus="moel").set_index("system_b")["significant"]
    assert bool(default["gold"]) and not bool(default["mime"])
    strict = ab_table(_frame(rows), focus="moel", alpha=0.001).set_index("system_b")["significant"]
    assert not strict.any()


def test_position_bias_without_decisive_choices_keeps_its_columns():
    bias = position_bias(_frame(judgment_rows([(1, "gold", "moel", "tie")])))
    assert list(bias.columns) == ["criterion", "decisive", "left", "share_left", "ci_low", "ci_high", "p"]
    assert bias["criterion"].tolist() == ["all"] and bias[["share_left", "ci_low", "ci_high", "p"]].isna().all().all()


def test_the_likert_side_by_side_of_a_focus_system_the_likert_study_did_not_rate():
    table = likert_beside_ab(_ratings({"gold": [3]}), _frame(judgment_rows([(0, "moel", "gold", "left")])),
                             focus="moel").iloc[0]
    assert np.isnan(table["likert_mean_a"]) and table["likert_mean_b"] == 3.0 and np.isnan(table["likert_diff"])
    assert table["likert_contexts"] == 0 and table["same_direction"] is None
