"""The rater-aware check: the mixed model recovers known effects and flags orders that raters, not systems, made."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from empeval.analysis.stats.rater_aware import (
    mixed_model_pairs,
    rater_aware_check,
    zscore_by_annotator,
)


def _lenient_raters_on_one_system(seed: int = 0) -> pd.DataFrame:
    """System B is truly 0.3 better than A, but A is mostly rated by lenient annotators (+1.2) and B by strict
    ones (-1.2): averaged item scores put A first. Everyone rates both systems, so the leniency is estimable."""
    rng = np.random.default_rng(seed)
    lenient, strict = [f"len-{i}" for i in range(4)], [f"str-{i}" for i in range(4)]
    bias = {**dict.fromkeys(lenient, 1.2), **dict.fromkeys(strict, -1.2)}
    rows = []
    for c in range(60):
        context_effect = rng.normal(0, 0.3)
        for system, quality, home, away in (("A", 0.0, lenient, strict), ("B", 0.3, strict, lenient)):
            raters = list(rng.choice(home, 2, replace=False)) + [rng.choice(away)]
            for annotator in raters:
                score = 3.0 + quality + context_effect + bias[annotator] + rng.normal(0, 0.3)
                rows.append({"item": f"{system}-{c}", "context": f"c{c}", "system": system, "annotator": annotator,
                             "criterion": "empathy", "score": float(np.clip(np.rint(score), 1, 5)),
                             "is_control": False})
    return pd.DataFrame(rows)


def test_mixed_model_recovers_the_simulated_differences(simulated, simulated_ratings):
    clean = simulated_ratings.loc[~simulated_ratings["annotator"].isin(list(simulated.spammers))]
    pairs = mixed_model_pairs(clean, criterion="empathy").set_index(["system_a", "system_b"])
    effects = simulated.system_effects
    # Rounding to a 1-5 scale shrinks differences a little; the signs and rough sizes must be right.
    truth = effects["baseline"]["empathy"] - effects["gold"]["empathy"]
    assert pairs.loc[("baseline", "gold"), "lmm_diff"] == pytest.approx(truth, abs=0.35)
    assert pairs.loc[("baseline", "gold"), "lmm_p"] < 1e-6
    assert pairs.loc[("gold", "moel"), "lmm_diff"] > 0


def test_no_pair_is_flagged_when_raters_do_not_confound_systems(simulated, simulated_ratings):
    clean = simulated_ratings.loc[~simulated_ratings["annotator"].isin(list(simulated.spammers))]
    check = rater_aware_check(clean, n_boot=100)
    assert len(check) == 9
    assert not check["flagged"].any(), check.loc[check["flagged"], "reason"].tolist()


def test_an_order_made_by_lenient_raters_is_flagged():
    ratings = _lenient_raters_on_one_system()
    check = rater_aware_check(ratings, n_boot=100).iloc[0]
    assert (check["system_a"], check["system_b"]) == ("A", "B")
    assert check["mean_diff"] > 0  # the naive item means put A first
    assert check["lmm_diff"] < 0  # the model, knowing the raters' leniency, puts B first
    assert check["order_changes"] and check["flagged"]
    assert "mixed model reverses the order" in check["reason"]


def test_z_scores_drop_raters_without_variation():
    rows = [{"item": f"i{i}", "context": f"c{i}", "system": "A", "annotator": annotator, "criterion": "empathy",
             "score": score, "is_control": False}
            for i in range(5) for annotator, score in (("flat", 3.0), ("varied", float(1 + i)))]
    zscored, dropped = zscore_by_annotator(pd.DataFrame(rows))
    assert dropped == ["flat"]
    assert zscored["score"].mean() == pytest.approx(0.0)
    assert zscored["score"].std(ddof=1) == pytest.approx(1.0)
