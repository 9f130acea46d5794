"""The best-worst scaling tables: scores, ranking, reliability, the order shown, control tuples and a linked Likert
study beside them. Every table reads the choice contract (analysis.kinds.best_worst.schema) and leaves control
tuples out, except the control table.

- Scores (Orme 2009's counting analysis, the score of Kiritchenko & Mohammad 2017): per criterion and system, the
  share of the times its response was shown that it was picked best, minus the share it was picked worst, in
  percentage points (-100 to 100), with a percentile bootstrap interval over contexts (all answers about one
  context resampled together).
- Ranking: each answer implies comparisons (the best beats every other response of its tuple, every other
  response beats the worst: 2m - 3 of the m(m-1)/2 pairs of an m-tuple, Louviere et al. 2015's "MaxDiff implied
  pairs"), ranked with the Bradley-Terry model of analysis.stats.bradley_terry; its bootstrap resamples contexts,
  so that the implied comparisons of one answer, which are not independent, move together.
- Reliability: split-half (analysis.stats.split_half) over the responses of the tuples, with the Spearman-Brown
  correction; for a linked Likert study the same measure over its items beside its Krippendorff alpha.
- Position: how often the response shown at each place was picked best and worst, against 1/m (chi-square test of
  goodness of fit): a rater who favours the first response shows here, not in the scores (the order rotates).
- Controls: per annotator, the control tuples answered on their target criterion and how many she marked the
  control's response the worst (a control passes then).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy import stats

from empeval.analysis.kinds.best_worst.schema import SEPARATOR, validate_choices
from empeval.analysis.stats.bootstrap import percentile_interval, resample_weights, weighted_sums
from empeval.analysis.stats.bradley_terry import ranking
from empeval.analysis.stats.split_half import SPLIT_HALF_COLUMNS, split_half

SCORE_COLUMNS = ("criterion", "system", "rank", "score", "ci_low", "ci_high", "best_pct", "worst_pct", "shown",
                 "best", "worst", "contexts")
SCORES_CAPTION = ("Best-worst scores: the share of the times a system's response was shown that it was picked best, "
                  "minus the share it was picked worst, in percentage points (-100 to 100), with 95% percentile "
                  "bootstrap intervals over contexts; control tuples left out; rank 1 is the best.")
RANKING_CAPTION = ("Ranking: log strengths (mean zero) of a Bradley-Terry model fitted by maximum likelihood to the "
                   "comparisons the answers imply (the best beats each other response, each other response beats "
                   "the worst), with percentile bootstrap intervals over contexts; rank 1 is the strongest.")


def real_choices(choices: pd.DataFrame, *, include_late: bool = True) -> pd.DataFrame:
    """The non-control answers (and only the timely ones unless `include_late`)."""
    keep = ~choices["is_control"].astype(bool)
    if not include_late:
        keep &= ~choices["late"].astype(bool)
    return choices.loc[keep].reset_index(drop=True)


def best_worst_scores(choices: pd.DataFrame, *, n_boot: int = 1000, ci_level: float = 0.95,
                      seed: int = 0) -> pd.DataFrame:
    """Per criterion and system, the best-minus-worst score and its bootstrap interval over contexts (see the module
    docstring); the non-control rows of `choices` (the validated contract).

    Returns
    -------
    scores : pandas.DataFrame
        Columns ``SCORE_COLUMNS``, best first within each criterion: ``shown`` (answers about a tuple holding the
        system), ``best`` and ``worst`` (how many picked it), their shares and ``score``, ``contexts`` (those it was
        shown on), ``rank`` (1 = the best score).

    Examples
    --------
    >>> from empeval.analysis.kinds.best_worst.schema import choice_rows
    >>> rows = choice_rows([(1, ("a", "b", "c"), "a", "c"), (2, ("c", "b", "a"), "a", "b"),
    ...                     (3, ("b", "a", "c"), "b", "c")])
    >>> best_worst_scores(validate_choices(rows), n_boot=20)[["system", "rank", "score"]].round(1).values.tolist()
    [['a', 1, 66.7], ['b', 2, 0.0], ['c', 3, -66.7]]
    """
    table = real_choices(choices)
    frames = []
    for criterion, part in table.groupby("criterion", sort=True):
        frames.append(_scores_of(part, str(criterion), n_boot=n_boot, ci_level=ci_level, seed=seed))
    if not frames:
        return pd.DataFrame(columns=list(SCORE_COLUMNS))
    return pd.concat(frames, ignore_index=True)[list(SCORE_COLUMNS)]


def _scores_of(part: pd.DataFrame, criterion: str, *, n_boot: int, ci_level: float, seed: int) -> pd.DataFrame:
    members = part["shown"].str.split(SEPARATOR)
    systems = sorted({system for shown in members for system in shown})
    index = {system: i for i, system in enumerate(systems)}
    context_codes, contexts = pd.factorize(part["context_id"], sort=True)
    shape = (len(contexts), len(systems))
    shown, best, worst = np.zeros(shape), np.zeros(shape), np.zeros(shape)
    for row, tuple_members in enumerate(members):
        for system in tuple_members:
            shown[context_codes[row], index[system]] += 1
    np.add.at(best, (context_codes, part["best"].map(index).to_numpy()), 1.0)
    np.add.at(worst, (context_codes, part["worst"].map(index).to_numpy()), 1.0)
    weights = resample_weights(len(contexts), n_boot=n_boot, seed=seed)
    boot_shown, boot_net = weighted_sums(weights, shown), weighted_sums(weights, best - worst)
    with np.errstate(invalid="ignore", divide="ignore"):
        boot_score = 100 * boot_net / boot_shown
    rows = []
    for system, i in index.items():
        n_shown, n_best, n_worst = shown[:, i].sum(), best[:, i].sum(), worst[:, i].sum()
        low, high, _ = percentile_interval(boot_score[:, i], level=ci_level)
        rows.append({"criterion": criterion, "system": system, "score": 100 * (n_best - n_worst) / n_shown,
                     "ci_low": low, "ci_high": high, "best_pct": 100 * n_best / n_shown,
                     "worst_pct": 100 * n_worst / n_shown, "shown": int(n_shown), "best": int(n_best),
                     "worst": int(n_worst), "contexts": int((shown[:, i] > 0).sum())})
    frame = pd.DataFrame(rows).sort_values(["score", "system"], ascending=[False, True], kind="stable")
    frame["rank"] = np.arange(1, len(frame) + 1)
    return frame


def implied_comparisons(choices: pd.DataFrame) -> pd.DataFrame:
    """The paired comparisons each answer implies (the best beats every other response of its tuple, every other
    response beats the worst), as the comparison table of analysis.stats.bradley_terry (criterion, context_id,
    system_left, system_right, preferred, is_control).

    >>> from empeval.analysis.kinds.best_worst.schema import choice_rows
    >>> comparisons = implied_comparisons(validate_choices(choice_rows([(1, ("a", "b", "c", "d"), "b", "d")])))
    >>> sorted(zip(comparisons["system_left"], comparisons["system_right"]))
    [('a', 'd'), ('b', 'a'), ('b', 'c'), ('b', 'd'), ('c', 'd')]
    """
    rows = []
    for criterion, context, shown, best, worst, is_control in zip(
            choices["criterion"], choices["context_id"], choices["shown"], choices["best"], choices["worst"],
            choices["is_control"], strict=True):
        for other in shown.split(SEPARATOR):
            if other != best:
                rows.append((criterion, context, best, other, best, is_control))
            if other not in (best, worst):
                rows.append((criterion, context, other, worst, other, is_control))
    return pd.DataFrame(rows, columns=["criterion", "context_id", "system_left", "system_right", "preferred",
                                       "is_control"])


def best_worst_contributions(choices: pd.DataFrame) -> pd.DataFrame:
    """The split-half input (analysis.stats.split_half) of one criterion's answers: per answer, +1 to the response
    picked best, -1 to the one picked worst and 0 to the others, a unit being a tuple on a context."""
    rows = []
    for assignment, annotator, context, shown, best, worst in zip(
            choices["assignment_id"], choices["annotator"], choices["context_id"], choices["shown"],
            choices["best"], choices["worst"], strict=True):
        unit = (context, SEPARATOR.join(sorted(shown.split(SEPARATOR))))
        for system in shown.split(SEPARATOR):
            rows.append((unit, (assignment, annotator, unit), (unit, system),
                         1.0 if system == best else -1.0 if system == worst else 0.0))
    return pd.DataFrame(rows, columns=["unit", "judgment", "response", "value"])


def likert_contributions(ratings: pd.DataFrame) -> pd.DataFrame:
    """The split-half input of one criterion's Likert ratings (the tidy table): each rating scores its item."""
    return pd.DataFrame({"unit": ratings["item"], "judgment": list(zip(ratings["annotator"], ratings["item"],
                                                                         strict=True)),
                         "response": ratings["item"], "value": ratings["score"].astype(float)})


def reliability_table(choices: pd.DataFrame, *, likert: pd.DataFrame | None = None, n_splits: int = 100,
                      seed: int = 0) -> pd.DataFrame:
    """Per criterion, the split-half reliability of the best-worst scores and, with `likert` (a linked Likert
    study's tidy ratings), of its mean ratings, with the Likert study's Krippendorff alpha (interval) beside: one row
    per criterion and study kind (``method``: "best-worst" or "likert")."""
    rows = []
    table = real_choices(choices)
    for criterion, part in table.groupby("criterion", sort=True):
        rows.append({"criterion": criterion, "method": "best-worst",
                     **split_half(best_worst_contributions(part), n_splits=n_splits, seed=seed),
                     "alpha_interval": float("nan")})
    if likert is not None:
        from empeval.analysis.stats.agreement import agreement_table

        rated = likert.loc[~likert["is_control"].astype(bool)]
        criteria = sorted(set(table["criterion"]) & set(rated["criterion"]))
        if criteria:
            alphas = agreement_table(rated, criteria=criteria, n_boot=1, seed=seed)
            interval = alphas.loc[alphas["coefficient"] == "alpha_interval"].set_index("criterion")["estimate"]
            for criterion in criteria:
                rows.append({"criterion": criterion, "method": "likert",
                             **split_half(likert_contributions(rated.loc[rated["criterion"] == criterion]),
                                          n_splits=n_splits, seed=seed),
                             "alpha_interval": float(interval.get(criterion, float("nan")))})
    columns = ["criterion", "method", *SPLIT_HALF_COLUMNS, "alpha_interval"]
    return pd.DataFrame(rows, columns=columns).sort_values(["criterion", "method"], kind="stable",
                                                            ignore_index=True)


def position_table(choices: pd.DataFrame) -> pd.DataFrame:
    """Per criterion and place shown (0 = first, labelled A), the share of the answers that picked the response
    there best and worst, against the 1/m expected without a position effect, and a chi-square goodness-of-fit
    test of the best picks' places and of the worst picks'."""
    table = real_choices(choices)
    rows = []
    for criterion, part in table.groupby("criterion", sort=True):
        shown = part["shown"].str.split(SEPARATOR)
        size = int(shown.str.len().max())
        best_place = np.array([members.index(best) for members, best in zip(shown, part["best"], strict=True)])
        worst_place = np.array([members.index(worst) for members, worst in zip(shown, part["worst"], strict=True)])
        sizes = shown.str.len().to_numpy()
        same_size = sizes == size
        best_counts = np.bincount(best_place[same_size], minlength=size)
        worst_counts = np.bincount(worst_place[same_size], minlength=size)
        n = int(same_size.sum())
        p_best = stats.chisquare(best_counts).pvalue if n else float("nan")
        p_worst = stats.chisquare(worst_counts).pvalue if n else float("nan")
        for place in range(size):
            rows.append({"criterion": criterion, "place": place, "label": "ABCDEF"[place], "answers": n,
                         "best_pct": 100 * best_counts[place] / n if n else float("nan"),
                         "worst_pct": 100 * worst_counts[place] / n if n else float("nan"),
                         "expected_pct": 100 / size, "p_best": float(p_best), "p_worst": float(p_worst)})
    return pd.DataFrame(rows, columns=["criterion", "place", "label", "answers", "best_pct", "worst_pct",
                                       "expected_pct", "p_best", "p_worst"])


def control_table(choices: pd.DataFrame) -> pd.DataFrame:
    """Per annotator, her answers about control tuples on each one's target criterion and how many passed (the
    control's response marked the worst), worst pass rate first."""
    controls = choices.loc[choices["is_control"].astype(bool)
                           & (choices["criterion"] == choices["control_target"])]
    if controls.empty:
        return pd.DataFrame(columns=["annotator", "controls", "passed", "pass_rate"])
    passed = (controls["worst"] == controls["control_system"]).groupby(controls["annotator"]).agg(["size", "sum"])
    frame = pd.DataFrame({"annotator": passed.index, "controls": passed["size"].to_numpy(),
                          "passed": passed["sum"].astype(int).to_numpy()})
    frame["pass_rate"] = frame["passed"] / frame["controls"]
    return frame.sort_values(["pass_rate", "annotator"], kind="stable", ignore_index=True)


def likert_beside_best_worst(ratings: pd.DataFrame, scores: pd.DataFrame, ranks: pd.DataFrame) -> pd.DataFrame:
    """Per criterion and system, a linked Likert study's mean rating and rank beside the best-worst score and the
    Bradley-Terry rank (systems both studies hold), with per criterion the Spearman correlation of the Likert means
    and the best-worst scores over the systems (``rho``, the same on every row of the criterion)."""
    rated = ratings.loc[~ratings["is_control"].astype(bool)]
    means = rated.groupby(["criterion", "system"])["score"].mean().rename("likert_mean").reset_index()
    table = scores[["criterion", "system", "score", "rank"]].rename(columns={"score": "bws_score",
                                                                             "rank": "bws_rank"})
    if ranks is not None and not ranks.empty:
        table = table.merge(ranks[["criterion", "system", "rank"]].rename(columns={"rank": "bt_rank"}),
                            on=["criterion", "system"], how="left")
    else:
        table["bt_rank"] = pd.NA
    table = table.merge(means, on=["criterion", "system"], how="inner")
    table["likert_rank"] = table.groupby("criterion")["likert_mean"].rank(ascending=False, method="min").astype(int)
    rho = {criterion: (stats.spearmanr(part["likert_mean"], part["bws_score"]).statistic if len(part) >= 3
                       else float("nan")) for criterion, part in table.groupby("criterion")}
    table["rho"] = table["criterion"].map(rho)
    return table[["criterion", "system", "likert_mean", "likert_rank", "bws_score", "bws_rank", "bt_rank", "rho"]]


@dataclass
class BestWorstTables:
    """Every table of a best-worst report (None where it does not apply)."""

    scores: pd.DataFrame
    ranking: pd.DataFrame
    reliability: pd.DataFrame
    position: pd.DataFrame
    controls: pd.DataFrame
    likert: pd.DataFrame | None = None


def best_worst_tables(choices: pd.DataFrame, *, include_late: bool = True, likert: pd.DataFrame | None = None,
                      n_boot: int = 1000, n_splits: int = 100, seed: int = 0) -> BestWorstTables:
    """Every table of the report from the choice table (validated here), late answers left out unless
    `include_late`; `likert`: the tidy ratings of a linked Likert study, beside the scores and in the reliability
    table."""
    table = validate_choices(choices)
    if not include_late:
        table = table.loc[~table["late"]].reset_index(drop=True)
    scores = best_worst_scores(table, n_boot=n_boot, seed=seed)
    real = real_choices(table)
    ranks = ranking(implied_comparisons(real), model="bradley_terry", n_boot=n_boot, seed=seed) if len(
        real) else pd.DataFrame()
    return BestWorstTables(
        scores=scores, ranking=ranks, reliability=reliability_table(table, likert=likert, n_splits=n_splits,
                                                                    seed=seed),
        position=position_table(table), controls=control_table(table),
        likert=None if likert is None else likert_beside_best_worst(likert, scores, ranks))
