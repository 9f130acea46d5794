"""The pairwise A/B tables (analysis.kinds.pairwise.tables) on hand-made judgment tables whose every figure is
counted or
computed by hand (or by a closed form independent of the code under test)."""
from __future__ import annotations

import math
import warnings

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from empeval.analysis.kinds.pairwise.schema import judgment_rows
from empeval.analysis.kinds.pairwise.tables import (
    ab_counts,
    ab_table,
    choice_agreement,
    context_net_wins,
    control_scores,
    pairwise_tables,
    position_bias,
    sign_test,
    sign_tests,
)


def _frame(*groups: list[dict]) -> pd.DataFrame:
    return pd.DataFrame([row for group in groups for row in group])


# moel against gold on empathy, two annotators per context (hand counts in the test below):
#   context 1: moel, moel   -> net +2    context 2: gold, tie  -> net -1
#   context 3: tie, tie     -> net 0     context 4: moel, gold -> net 0
MOEL_GOLD = [(1, "moel", "gold", "left", "ann-1"), (1, "gold", "moel", "right", "ann-2"),
             (2, "moel", "gold", "right", "ann-1"), (2, "gold", "moel", "tie", "ann-2"),
             (3, "moel", "gold", "tie", "ann-1"), (3, "gold", "moel", "tie", "ann-2"),
             (4, "gold", "moel", "right", "ann-1"), (4, "moel", "gold", "right", "ann-2")]


def test_the_ab_table_matches_hand_counts_from_the_focus_systems_side():
    counts = ab_counts(_frame(judgment_rows(MOEL_GOLD)), focus="moel")
    row = counts.iloc[0]
    assert (row["system_a"], row["system_b"]) == ("moel", "gold")
    assert (row["judgments"], row["wins"], row["losses"], row["ties"]) == (8, 3, 2, 3)
    assert (row["win_pct"], row["lose_pct"], row["tie_pct"]) == (37.5, 25.0, 37.5)
    assert (row["contexts"], row["annotators"]) == (4, 2)
    # Without a focus the pair reads in sorted order: gold's side.
    plain = ab_counts(_frame(judgment_rows(MOEL_GOLD))).iloc[0]
    assert (plain["system_a"], plain["wins"], plain["losses"]) == ("gold", 2, 3)


def test_net_wins_per_context_match_hand_counts():
    net = context_net_wins(_frame(judgment_rows(MOEL_GOLD)), focus="moel")
    assert net["net_wins"].tolist() == [2, -1, 0, 0]
    tests = sign_tests(_frame(judgment_rows(MOEL_GOLD)), focus="moel").iloc[0]
    assert (tests["contexts_won"], tests["contexts_lost"], tests["contexts_even"]) == (1, 1, 2)
    assert tests["p"] == 1.0


def test_the_sign_test_gives_the_exact_binomial_values():
    assert sign_test(9, 1) == 22 / 1024  # 2 (C(10,9) + C(10,10)) / 2^10
    assert sign_test(1, 9) == 22 / 1024
    assert sign_test(10, 0) == 2 / 1024
    assert sign_test(3, 3) == 1.0
    assert math.isnan(sign_test(0, 0))  # no decisive context: undefined
    with pytest.raises(ValueError, match="counts"):
        sign_test(-1, 3)


def test_a_pair_with_no_decisive_context_leaves_the_holm_family_of_its_criterion():
    """Three pairs under one criterion: two decided (p = 2/1024 and 22/1024 by the exact test), one whose every
    context is even. The even pair's test is undefined (NaN, not significant) and Holm corrects over the two
    defined tests only: the smaller p times 2, not times 3."""
    rows = ([(c, "gold", "moel", "left") for c in range(10)]
            + [(10 + c, "gold", "base", "left") for c in range(9)] + [(19, "gold", "base", "right")]
            + [(20 + c, "moel", "base", "tie") for c in range(6)])
    tests = sign_tests(_frame(judgment_rows(rows))).set_index(["system_a", "system_b"])
    even = tests.loc[("base", "moel")] if ("base", "moel") in tests.index else tests.loc[("moel", "base")]
    assert (even["contexts_won"], even["contexts_lost"], even["contexts_even"]) == (0, 0, 6)
    assert math.isnan(even["p"]) and math.isnan(even["p_adj"]) and not even["significant"]
    decided = tests.dropna(subset=["p"]).sort_values("p")
    assert decided["p"].tolist() == [2 / 1024, 22 / 1024]
    assert decided["p_adj"].tolist() == pytest.approx([2 * 2 / 1024, 22 / 1024])


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 30), st.integers(0, 30))
def test_the_sign_test_is_twice_the_smaller_binomial_tail(wins, losses):
    n = wins + losses
    if n == 0:
        assert math.isnan(sign_test(wins, losses))
        return
    tail = sum(math.comb(n, x) for x in range(min(wins, losses) + 1)) / 2 ** n
    assert sign_test(wins, losses) == pytest.approx(min(1.0, 2 * tail), rel=1e-12)


def test_the_test_counts_contexts_not_judgments():
    """Six contexts, three judgments each, all for moel: per judgment 18 of 18 (p = 2^-17), per context 6 of 6
    (p = 2 / 64)."""
    specs = [(c, "moel", "gold", "left", f"ann-{r}") for c in range(6) for r in range(3)]
    tests = sign_tests(_frame(judgment_rows(specs))).iloc[0]
    assert tests["contexts_lost"] == 6  # gold's side: sorted order
    assert tests["p"] == 2 / 64


def test_ties_and_net_zero_contexts_are_left_out_of_the_test():
    """9 contexts won, 1 lost, and 5 even ones (all ties, or a win and a loss) must still give 22/1024."""
    specs = ([(c, "moel", "gold", "left") for c in range(9)] + [(9, "moel", "gold", "right")]
             + [(c, "moel", "gold", "tie") for c in range(10, 13)]
             + [(c, "moel", "gold", side, who) for c in (13, 14) for side, who in (("left", "a"), ("right", "b"))])
    tests = sign_tests(_frame(judgment_rows(specs)), focus="moel").iloc[0]
    assert (tests["contexts"], tests["contexts_won"], tests["contexts_lost"], tests["contexts_even"]) == (15, 9, 1, 5)
    assert tests["p"] == 22 / 1024


def _wins(pair: tuple[str, str], won: int, lost: int, criterion: str) -> list[dict]:
    a, b = pair
    specs = [(c, a, b, "left") for c in range(won)] + [(c, a, b, "right") for c in range(won, won + lost)]
    return judgment_rows(specs, criteria=(criterion,))


def test_holm_adjusts_within_each_criterion_in_the_order_of_the_p_values():
    """Empathy: p = 2/1024 (10-0), 22/1024 (9-1), 1 (1-1) -> Holm 3 x 2/1024, 2 x 22/1024, 1. Fluency's one
    pair (9-1) is its own family: unadjusted."""
    judgments = _frame(_wins(("moel", "gold"), 10, 0, "empathy"), _wins(("moel", "baseline"), 9, 1, "empathy"),
                       _wins(("moel", "mime"), 1, 1, "empathy"), _wins(("moel", "gold"), 9, 1, "fluency"))
    tests = sign_tests(judgments, focus="moel").set_index(["criterion", "system_b"])
    assert tests.loc[("empathy", "gold"), "p_adj"] == pytest.approx(6 / 1024)
    assert tests.loc[("empathy", "baseline"), "p_adj"] == pytest.approx(44 / 1024)
    assert tests.loc[("empathy", "mime"), "p_adj"] == 1.0
    assert tests.loc[("fluency", "gold"), "p_adj"] == pytest.approx(22 / 1024)
    assert tests["significant"].tolist() == [True, True, False, True]


def test_the_ab_table_joins_the_description_and_the_decision():
    table = ab_table(_frame(judgment_rows(MOEL_GOLD)), focus="moel")
    assert table[["wins", "losses", "ties", "contexts_won", "contexts_lost", "contexts_even"]].iloc[0].tolist() == \
        [3, 2, 3, 1, 1, 2]


# Three units (gold|moel on contexts 0-2), three raters each: gold gold tie / moel x3 / gold x3; screen sides
# differ between raters, so agreement on screen sides would differ from agreement on systems.
AGREEMENT = [(0, "gold", "moel", "left", "r0"), (0, "moel", "gold", "right", "r1"), (0, "gold", "moel", "tie", "r2"),
             (1, "gold", "moel", "right", "r0"), (1, "moel", "gold", "left", "r1"), (1, "moel", "gold", "left", "r2"),
             (2, "moel", "gold", "right", "r0"), (2, "gold", "moel", "left", "r1"), (2, "moel", "gold", "right", "r2")]


def test_agreement_on_choices_mapped_to_systems_matches_hand_computation():
    """Fleiss: P_bar = (1/3 + 1 + 1) / 3 = 63/81, P_e = (5/9)^2 + (3/9)^2 + (1/9)^2 = 35/81,
    kappa = (63 - 35) / (81 - 35) = 28/46. Krippendorff (nominal): coincidences o(gold, tie) = o(tie, gold) = 1
    among n = 9 pairable values (n_gold 5, n_moel 3, n_tie 1): D_o = 2/9, D_e = (81 - 25 - 9 - 1) / (9 * 8),
    alpha = 1 - D_o / D_e = 30/46."""
    agreement = choice_agreement(_frame(judgment_rows(AGREEMENT))).set_index("coefficient")
    assert agreement.loc["fleiss_kappa", "estimate"] == pytest.approx(28 / 46)
    assert agreement.loc["krippendorff_alpha", "estimate"] == pytest.approx(30 / 46)
    assert agreement.loc["fleiss_kappa", "units"] == 3 and agreement.loc["fleiss_kappa", "ratings_per_unit"] == 3


def test_fleiss_uses_the_units_with_the_common_number_of_ratings():
    extra = [(3, "gold", "moel", "left", "r0"), (3, "gold", "moel", "left", "r1")]  # a unit with two ratings
    agreement = choice_agreement(_frame(judgment_rows(AGREEMENT + extra))).set_index("coefficient")
    assert agreement.loc["fleiss_kappa", "units"] == 3
    assert agreement.loc["fleiss_kappa", "estimate"] == pytest.approx(28 / 46)
    assert agreement.loc["krippendorff_alpha", "units"] == 4


def test_agreement_without_variation_is_undefined_not_a_warning():
    rows = [row for unit in range(3) for rater in ("r0", "r1")
            for row in judgment_rows([(unit, "gold", "moel", "left")], annotator=rater)]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        agreement = choice_agreement(_frame(rows))
    assert agreement["estimate"].isna().all() and agreement["units"].tolist() == [3, 3]


def test_position_bias_counts_left_choices_among_non_ties_with_an_exact_interval():
    specs = ([(c, "gold", "moel", "left" if c < 8 else "right") for c in range(10)]
             + [(c, "gold", "moel", "tie") for c in range(10, 14)])
    bias = position_bias(_frame(judgment_rows(specs))).set_index("criterion").loc["empathy"]
    assert (bias["decisive"], bias["left"], bias["share_left"]) == (10, 8, 0.8)
    assert bias["p"] == pytest.approx(2 * (45 + 10 + 1) / 1024)
    # Clopper-Pearson from its beta-quantile form.
    assert bias["ci_low"] == pytest.approx(stats.beta.ppf(0.025, 8, 3))
    assert bias["ci_high"] == pytest.approx(stats.beta.ppf(0.975, 9, 2))


def test_controls_are_scored_on_their_target_only_and_kept_out_of_the_comparison():
    real = judgment_rows([(1, "moel", "gold", "left"), (2, "moel", "gold", "left")], criteria=("empathy", "fluency"))
    controls = (
        # passed on empathy (the real response), the control wins fluency, which is not scored
        judgment_rows([(3, "control-generic", "moel", "right")], criteria=("empathy",), is_control=True,
                      control_target="empathy")
        + judgment_rows([(3, "control-generic", "moel", "left")], criteria=("fluency",), is_control=True,
                        control_target="empathy")
        # a tie and a control chosen on the target: both fail
        + judgment_rows([(4, "moel", "control-generic", "tie"), (5, "gold", "control-generic", "right")],
                        criteria=("empathy",), is_control=True, control_target="empathy"))
    judgments = _frame(real, controls)
    scores = control_scores(judgments).iloc[0]
    assert (scores["controls"], scores["passed"], scores["tied"], scores["failed"]) == (3, 1, 1, 1)
    counts = ab_counts(judgments).set_index("criterion")
    assert counts["judgments"].tolist() == [2, 2]
    assert set(counts["system_b"]) == {"moel"}
    assert position_bias(judgments).set_index("criterion").loc["all", "decisive"] == 2  # two real pairs shown


def test_a_control_pair_with_no_known_control_side_is_refused_naming_the_row():
    rows = judgment_rows([(1, "gold", "moel", "left")]) + judgment_rows(
        [(2, "gold", "moel", "left")], is_control=True, control_target="empathy")
    with pytest.raises(ValueError, match="row 2 is a control pair"):
        control_scores(_frame(rows))
    scores = control_scores(_frame(rows), control_systems={"moel"})
    assert scores["passed"].tolist() == [1]


def test_pairwise_tables_drop_late_judgments_on_request_and_rank_only_beyond_two_systems():
    rows = judgment_rows(MOEL_GOLD) + judgment_rows([(5, "moel", "gold", "left")], late=True, annotator="ann-3")
    with_late = pairwise_tables(_frame(rows), focus="moel", n_boot=20)
    on_time = pairwise_tables(_frame(rows), focus="moel", include_late=False, n_boot=20)
    assert with_late.ab["judgments"].tolist() == [9] and on_time.ab["judgments"].tolist() == [8]
    assert with_late.ranking is None and with_late.ranking_caption == ""
    assert "sign test" in with_late.ab_caption and "left out" in with_late.ab_caption
    three = rows + judgment_rows([(6, "moel", "mime", "left"), (7, "mime", "gold", "right")])
    assert pairwise_tables(_frame(three), n_boot=20).ranking is not None


def test_empty_tables_have_their_columns():
    empty = judgment_rows([(1, "moel", "gold", "left")], is_control=True, control_target="empathy")
    assert list(ab_table(_frame(empty), focus="moel").columns)[:4] == ["criterion", "system_a", "system_b", "judgments"]
    assert sign_tests(_frame(empty)).empty
    assert np.isnan(position_bias(_frame(empty)).set_index("criterion").loc["all", "share_left"])


def test_a_linked_likert_study_sits_beside_the_ab_table_with_its_means_by_hand():
    from empeval.analysis.kinds.pairwise.tables import likert_beside_ab

    # gold item means: (5 + 3) / 2 = 4 on context 1, 4 on context 2 -> 4; moel: 3 and 2 -> 2.5; a control of
    # moel's with a 1 is left out.
    ratings = pd.DataFrame({
        "item": ["1:gold", "1:gold", "1:moel", "2:gold", "2:moel", "ctl"],
        "context": ["1", "1", "1", "2", "2", "3"], "system": ["gold", "gold", "moel", "gold", "moel", "moel"],
        "criterion": "empathy", "score": [5, 3, 3, 4, 2, 1], "is_control": [False] * 5 + [True]})
    table = likert_beside_ab(ratings, _frame(judgment_rows(MOEL_GOLD)), focus="moel").iloc[0]
    assert (table["likert_mean_a"], table["likert_mean_b"], table["likert_diff"]) == (2.5, 4.0, -1.5)
    assert table["likert_contexts"] == 2
    assert (table["win_pct"], table["lose_pct"]) == (37.5, 25.0)
    # Likert favours gold, the A/B judgments moel (3 wins to 2)
    assert table["same_direction"] is not None and not table["same_direction"]
    with pytest.raises(ValueError, match="'score'"):
        likert_beside_ab(ratings.drop(columns="score"), _frame(judgment_rows(MOEL_GOLD)))


def test_over_all_criteria_a_shown_pair_counts_once_for_the_side_most_criteria_chose():
    rows = (judgment_rows([(1, "gold", "moel", "left")], criteria=("empathy", "fluency", "relevance"))
            # context 2: left on empathy, right on fluency -> no lean; context 3: left, tie -> left
            + judgment_rows([(2, "gold", "moel", "left")], criteria=("empathy",))
            + judgment_rows([(2, "gold", "moel", "right")], criteria=("fluency",))
            + judgment_rows([(3, "gold", "moel", "left")], criteria=("empathy",))
            + judgment_rows([(3, "gold", "moel", "tie")], criteria=("fluency",)))
    bias = position_bias(_frame(rows)).set_index("criterion")
    assert bias.loc["empathy", ["decisive", "left"]].tolist() == [3, 3]
    assert bias.loc["fluency", ["decisive", "left"]].tolist() == [2, 1]
    assert bias.loc["all", ["decisive", "left"]].tolist() == [2, 2]
