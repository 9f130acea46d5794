"""Rater quality in an A/B study: control pairs failed, one screen side picked throughout, a tie on every pair,
implausibly fast; a flag list, as ``analysis.kinds.likert.quality`` flags Likert raters.

Each rule applies only with enough of the rater's data, and a rule whose data the study has not got (no control
pairs; no seconds measured per pair) flags nobody. Thresholds are keyword arguments because they change who is
excluded, and so the science; the report states the ones used (``rules_sentence``).
"""
from __future__ import annotations

import numpy as np
import pandas as pd
from scipy import stats

from empeval.analysis.kinds.pairwise.schema import TIE, validate_judgments
from empeval.analysis.kinds.pairwise.tables import control_scores

#: One boolean column per flagging rule in ``rater_quality``, with what the rule catches in a few words.
FLAG_RULES: dict[str, str] = {
    "flag_controls": "failed control pairs",
    "flag_position": "one screen side throughout",
    "flag_ties": "a tie on every pair",
    "flag_speed": "implausibly fast",
}
FLAG_COLUMNS: tuple[str, ...] = tuple(FLAG_RULES)

MIN_CONTROL_PASS_RATE = 0.5
MIN_CONTROLS = 2
MIN_PAIRS = 8
MAX_SIDE_SHARE = 0.9
MAX_SIDE_P = 0.01
MIN_MEDIAN_SECONDS = 5.0

QUALITY_COLUMNS = ("annotator", "pairs", "decisive_pairs", "left_share", "tie_share", "controls", "control_pass_rate",
                   "median_seconds", *FLAG_COLUMNS, "flagged", "reasons")


def rater_quality(judgments: pd.DataFrame, *, control_systems: set[str] | None = None,
                  min_control_pass_rate: float = MIN_CONTROL_PASS_RATE, min_controls: int = MIN_CONTROLS,
                  min_pairs: int = MIN_PAIRS, max_side_share: float = MAX_SIDE_SHARE, max_side_p: float = MAX_SIDE_P,
                  min_median_seconds: float | None = MIN_MEDIAN_SECONDS) -> pd.DataFrame:
    """One row per annotator with the measures of the A/B quality rules, one boolean column per rule, ``flagged``
    and the ``reasons``.

    An annotator is flagged when:

    - ``flag_controls``: she passed fewer than ``min_control_pass_rate`` of her control pairs (at least
      ``min_controls``; scored as ``analysis.kinds.pairwise.tables.control_scores`` scores them);
    - ``flag_position``: of her real shown pairs that leaned to a side (more criteria chose it), at least
      ``max_side_share`` went to one screen side, at least ``min_pairs`` of them, and an exact two-sided binomial test
      of 1/2 gives p < ``max_side_p`` (sides are counterbalanced, so a careful rater picks both);
    - ``flag_ties``: she answered tie on every criterion of every real shown pair (at least ``min_pairs``);
    - ``flag_speed``: her median seconds per shown pair (column ``seconds_on_item``, when the table has it) are
      below ``min_median_seconds`` (None: not checked).

    Returns
    -------
    quality : pandas.DataFrame
        ``QUALITY_COLUMNS``: ``annotator``; ``pairs`` (real shown pairs), ``decisive_pairs`` (those leaning to a
        side), ``left_share`` (of the decisive ones), ``tie_share`` (of her real choices); ``controls`` and
        ``control_pass_rate`` (NaN without control pairs); ``median_seconds`` (NaN when not measured); the flag
        columns, ``flagged`` and ``reasons`` (the rules that fired with her numbers, "; "-separated).

    Examples
    --------
    >>> from empeval.analysis.simulate.pairwise import simulate_pairwise_study
    >>> study = simulate_pairwise_study(n_contexts=30, anchor="moel", n_straight_liners=1, seed=4)
    >>> quality = rater_quality(study.judgments)
    >>> flagged_annotators(quality) == sorted(study.spammers)
    True
    >>> print(quality.loc[quality["flagged"], "reasons"].iloc[0])
    picked one screen side in 100% of 14 decisive pairs (>= 90%, binomial p < 0.001)
    """
    table = validate_judgments(judgments)
    real = table.loc[~table["is_control"]]
    keys = ["annotator", "assignment_id", "context_id", "pair"]
    side = pd.Series(np.where(real["choice"] == "left", 1, np.where(real["choice"] == "right", -1, 0)),
                     index=real.index)
    lean = side.groupby([real[k] for k in keys]).sum()
    shown = lean.groupby(level="annotator").agg(pairs="size", decisive_pairs=lambda v: int((v != 0).sum()),
                                                left=lambda v: int((v > 0).sum()))
    ties = real.groupby("annotator")["choice"].agg(lambda c: float((c == TIE).mean())).rename("tie_share")
    annotators = sorted(set(table["annotator"]))
    quality = pd.DataFrame({"annotator": annotators}).set_index("annotator")
    quality = quality.join(shown).join(ties)
    quality[["pairs", "decisive_pairs", "left"]] = quality[["pairs", "decisive_pairs", "left"]].fillna(0).astype(int)
    quality["left_share"] = quality["left"] / quality["decisive_pairs"].where(quality["decisive_pairs"] > 0)
    controls = control_scores(table, control_systems=control_systems).set_index("annotator")
    quality = quality.join(controls[["controls", "pass_rate"]].rename(columns={"pass_rate": "control_pass_rate"}))
    quality["controls"] = quality["controls"].fillna(0).astype(int)
    if "seconds_on_item" in table.columns:
        per_pair = table.drop_duplicates(["annotator", "assignment_id", "context_id", "pair"])
        quality = quality.join(per_pair.groupby("annotator")["seconds_on_item"].median().rename("median_seconds"))
    else:
        quality["median_seconds"] = np.nan
    found = {annotator: _rule_flags(row, min_control_pass_rate=min_control_pass_rate, min_controls=min_controls,
                                    min_pairs=min_pairs, max_side_share=max_side_share, max_side_p=max_side_p,
                                    min_median_seconds=min_median_seconds)
             for annotator, row in quality.to_dict("index").items()}
    for column in FLAG_COLUMNS:
        quality[column] = [column in found[annotator] for annotator in quality.index]
    quality["flagged"] = quality[list(FLAG_COLUMNS)].any(axis=1)
    quality["reasons"] = ["; ".join(found[annotator][c] for c in FLAG_COLUMNS if c in found[annotator])
                          for annotator in quality.index]
    return quality.reset_index()[list(QUALITY_COLUMNS)]


def _rule_flags(row: dict, *, min_control_pass_rate: float, min_controls: int, min_pairs: int, max_side_share: float,
                max_side_p: float, min_median_seconds: float | None) -> dict[str, str]:
    """The rules that fire for one annotator's row, as flag column -> reason for people."""
    found = {}
    if row["controls"] >= min_controls and row["control_pass_rate"] < min_control_pass_rate:
        passed = int(round(row["control_pass_rate"] * row["controls"]))
        found["flag_controls"] = (f"passed {passed} of {int(row['controls'])} control pairs "
                                  f"({row['control_pass_rate']:.0%} < {min_control_pass_rate:.0%})")
    decisive, left = int(row["decisive_pairs"]), int(row["left"])
    if decisive >= min_pairs:
        share = max(left, decisive - left) / decisive
        p = float(stats.binomtest(left, decisive, p=0.5, alternative="two-sided").pvalue)
        if share >= max_side_share and p < max_side_p:
            words = "< 0.001" if p < 0.001 else f"= {p:.3f}"
            found["flag_position"] = (f"picked one screen side in {share:.0%} of {decisive} decisive pairs "
                                      f"(>= {max_side_share:.0%}, binomial p {words})")
    if row["pairs"] >= min_pairs and row["tie_share"] == 1.0:
        found["flag_ties"] = f"answered tie on every criterion of all {int(row['pairs'])} pairs"
    seconds = row["median_seconds"]
    if min_median_seconds is not None and np.isfinite(seconds) and seconds < min_median_seconds:
        found["flag_speed"] = f"median {seconds:.1f} s per pair (< {min_median_seconds:g} s)"
    return found


def flagged_annotators(quality: pd.DataFrame) -> list[str]:
    """Annotators flagged in a ``rater_quality`` table, sorted.

    Examples
    --------
    >>> flagged_annotators(pd.DataFrame({"annotator": ["b", "a", "c"], "flagged": [True, True, False]}))
    ['a', 'b']
    """
    return sorted(quality.loc[quality["flagged"], "annotator"])


def rules_sentence(*, timed: bool) -> str:
    """The A/B quality rules with their thresholds, in a reader's words (for the methods paragraph and the rater
    quality section); ``timed``: whether the study measured the seconds per pair (the speed rule applies).

    Examples
    --------
    >>> rules_sentence(timed=False)  # doctest: +ELLIPSIS
    'A rater was flagged when she passed fewer than 50% of her control pairs (at least 2), picked one screen ...'
    """
    rules = [f"passed fewer than {MIN_CONTROL_PASS_RATE:.0%} of her control pairs (at least {MIN_CONTROLS})",
             f"picked one screen side in at least {MAX_SIDE_SHARE:.0%} of her decisive pairs (at least {MIN_PAIRS}, "
             f"binomial p < {MAX_SIDE_P:g})", f"answered tie on every pair (at least {MIN_PAIRS})"]
    if timed:
        rules.append(f"spent a median of under {MIN_MEDIAN_SECONDS:g} s on a pair")
    untimed = "" if timed else "; the seconds per pair were not measured, so no speed rule applied"
    return f"A rater was flagged when she {', '.join(rules[:-1])} or {rules[-1]}{untimed}."
