"""Simulated A/B raters (analysis.simulate.pairwise): the design they produce, agreement with the Likert
simulation's truth, and the position-bias check run on them."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from empeval.analysis.kinds.likert.load import tidy_from_export
from empeval.analysis.kinds.pairwise.schema import validate_judgments
from empeval.analysis.kinds.pairwise.tables import ab_counts, control_scores, position_bias
from empeval.analysis.simulate.likert import simulate_study
from empeval.analysis.simulate.pairwise import simulate_pairwise_study, study_pairs


@settings(max_examples=15, deadline=None)
@given(n_contexts=st.integers(1, 12), k=st.integers(1, 4), design=st.sampled_from(["all", "anchor", "pairs"]),
       seed=st.integers(0, 10_000))
def test_the_design_gives_k_judgments_per_context_and_pair_balanced_left_and_right(n_contexts, k, design, seed):
    pairs = [("gold", "baseline")] if design == "pairs" else None
    anchor = "moel" if design == "anchor" else None
    study = simulate_pairwise_study(n_contexts=n_contexts, k=k, pairs=pairs, anchor=anchor, criteria=("empathy",),
                                    n_honest=9 * k, seed=seed)
    table = validate_judgments(study.judgments)  # also: nobody judges the same pair on a context twice
    real = table.loc[~table["is_control"]]
    per_unit = real.groupby(["context_id", "pair"]).size()
    assert len(per_unit) == n_contexts * len(study.pairs) and (per_unit == k).all()
    assert (real.groupby(["context_id", "pair"])["annotator"].nunique() == k).all()
    for pair, part in real.groupby("pair"):
        first = str(pair).split("|")[0]
        on_left = int((part["system_left"] == first).sum())
        assert abs(2 * on_left - len(part)) <= 1, (pair, on_left, len(part))
    # With a pool this large no annotator sees a context twice, controls included.
    assert table.groupby(["annotator", "context_id"])["pair"].nunique().max() == 1


def test_study_pairs_refuse_a_pair_naming_an_unknown_system_or_one_system_twice():
    with pytest.raises(ValueError, match="'mime'"):
        study_pairs(["gold", "moel"], pairs=[("gold", "mime")])
    with pytest.raises(ValueError, match="two different systems"):
        study_pairs(["gold", "moel"], pairs=[("gold", "gold")])
    with pytest.raises(ValueError, match="anchor 'mime'"):
        study_pairs(["gold", "moel"], anchor="mime")


def _thurstone_win_share(delta: float, *, response_sd: float = 0.4, noise_sd: float = 0.7,
                         tie_band: float = 0.3) -> float:
    """P(a chosen | not a tie) for an honest rater: the perceived difference is delta plus the two responses'
    own effects (each 0.7 shared + 0.7 own, variance 2 x 0.49 response_sd^2) plus two perception noises;
    a tie when it falls within +-tie_band."""
    sd = np.sqrt(2 * (0.49 + 0.49) * response_sd ** 2 + 2 * noise_sd ** 2)
    win = stats.norm.sf((tie_band - delta) / sd)
    lose = stats.norm.cdf((-tie_band - delta) / sd)
    return float(win / (win + lose))


def test_pairwise_choices_follow_the_thurstone_model_of_the_latent_qualities():
    study = simulate_pairwise_study(n_contexts=400, k=1, anchor="gold", criteria=("empathy",),
                                    controls_per_assignment=0, seed=7)
    counts = ab_counts(study.judgments, focus="gold").set_index("system_b")
    for other in ("moel", "baseline"):
        delta = study.system_effects["gold"]["empathy"] - study.system_effects[other]["empathy"]
        row = counts.loc[other]
        share = row["wins"] / (row["wins"] + row["losses"])
        se = np.sqrt(share * (1 - share) / (row["wins"] + row["losses"]))
        assert abs(share - _thurstone_win_share(delta)) < 4 * se, (other, share, _thurstone_win_share(delta))


def test_likert_and_ab_order_the_systems_as_the_shared_truth_does():
    likert = tidy_from_export(simulate_study(n_contexts=40, seed=3, n_random_clickers=0, n_straight_liners=0).export)
    ab = simulate_pairwise_study(n_contexts=40, k=3, seed=3)
    for criterion in ("empathy", "relevance"):
        real = likert[~likert["is_control"] & (likert["criterion"] == criterion)]
        likert_order = real.groupby("system")["score"].mean().sort_values(ascending=False).index.tolist()
        counts = ab_counts(ab.judgments)
        wins = {s: 0 for s in ab.system_effects}
        for row in counts[counts["criterion"] == criterion].itertuples():
            wins[row.system_a] += row.wins
            wins[row.system_b] += row.losses
        ab_order = sorted(wins, key=lambda s: -wins[s])
        assert likert_order == ab_order == ab.true_ranking(criterion)


def test_planted_position_bias_is_detected():
    """A left shift of 0.5 latent points moves the left share to about 0.6; with 40 contexts x 3 pairs x 3
    judgments (about 300 decisive choices) the test finds it (power above 0.95)."""
    study = simulate_pairwise_study(n_contexts=40, k=3, criteria=("empathy",), position_bias=0.5, seed=11)
    bias = position_bias(study.judgments).set_index("criterion").loc["empathy"]
    assert bias["p"] < 0.01 and bias["ci_low"] > 0.5


def test_without_position_bias_the_test_rejects_at_most_at_its_level():
    """60 seeded studies without bias, test at 0.05: under H0 rejections are at most Binomial(60, 0.05)
    (fewer: counterbalancing makes the count less variable than binomial), so 10 or more would happen with
    probability 0.002. A planted bias of 0.5 in the same design is found in nearly all of them."""
    def rejected(bias: float, seed: int) -> bool:
        study = simulate_pairwise_study(n_contexts=12, k=2, criteria=("empathy",), controls_per_assignment=0,
                                        position_bias=bias, seed=seed)
        return bool(position_bias(study.judgments).set_index("criterion").loc["empathy", "p"] < 0.05)

    assert sum(rejected(0.0, seed) for seed in range(60)) <= 9
    assert sum(rejected(0.8, seed) for seed in range(20)) >= 17


def test_controls_separate_honest_raters_from_random_clickers():
    study = simulate_pairwise_study(n_contexts=40, k=3, n_honest=8, n_random_clickers=4, controls_per_assignment=2,
                                    seed=5)
    scores = control_scores(study.judgments).set_index("annotator")["pass_rate"]
    spammers = [a for a, kind in study.spammers.items() if kind == "random"]
    honest = [a for a in scores.index if a not in study.spammers]
    assert scores[honest].mean() > 0.9
    assert scores[spammers].mean() < 0.6


def test_linked_simulated_likert_and_ab_studies_point_the_same_way():
    from empeval.analysis.kinds.pairwise.tables import likert_beside_ab, pairwise_tables

    likert = tidy_from_export(simulate_study(n_contexts=40, seed=8, n_random_clickers=0, n_straight_liners=0).export)
    ab = simulate_pairwise_study(n_contexts=40, k=3, anchor="moel", seed=8)
    table = likert_beside_ab(likert, ab.judgments, focus="moel")
    assert pairwise_tables(ab.judgments, focus="moel", likert=likert, n_boot=20).likert.equals(table)
    assert len(table) == 6 and table["likert_contexts"].eq(40).all()
    assert table["same_direction"].tolist() == [True] * 6
