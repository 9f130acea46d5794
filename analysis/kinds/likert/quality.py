"""Rater quality: controls, straight-lining, halo, time per item, agreement with the others; a flag list.

Each measure is one function returning one row per annotator; ``rater_quality`` joins them and flags
annotators with the reasons spelled out. Thresholds are keyword arguments because they change who is
excluded, and so the science; the report states the ones used.
"""

from __future__ import annotations

from collections.abc import Iterable, Set

import numpy as np
import pandas as pd

from empeval.analysis.kinds.likert.load import require_columns

#: One boolean column per flagging rule in ``rater_quality``, with what the rule catches in a few words.
FLAG_RULES: dict[str, str] = {
    "flag_controls": "failed controls",
    "flag_straightlining": "straight-lining",
    "flag_speed": "implausibly fast",
    "flag_halo": "halo",
    "flag_consensus": "low agreement with the consensus",
}
FLAG_COLUMNS: tuple[str, ...] = tuple(FLAG_RULES)


def control_results(ratings: pd.DataFrame) -> pd.DataFrame:
    """One row per annotator and control item: did the annotator score the control below the real responses
    on the criterion the control is built to fail?

    The reference is the annotator's mean score on that criterion over the real (non-control) items of the
    same assignment, or over all their real items when the assignment has none. ``passed`` means
    control_score < reference.

    Returns
    -------
    results : pandas.DataFrame
        One row per annotator and control item, on the criterion the control targets:

        * ``annotator``, ``assignment``, ``item``, ``control_kind``
        * ``criterion``: the targeted criterion
        * ``control_score``: the annotator's score of the control
        * ``reference``: their mean score of real items on that criterion
        * ``reference_scope``: "assignment" or "all items", where the reference came from
        * ``passed``: control_score < reference (nullable boolean; missing without a reference)

    Examples
    --------
    >>> from empeval.analysis import simulate_study, tidy_from_export
    >>> study = simulate_study(n_contexts=20, seed=1)
    >>> ratings = tidy_from_export(study.export)
    >>> results = control_results(ratings)
    >>> print(results[["annotator", "control_kind", "control_score", "reference", "passed"]].head(3).round(1)
    ...       .to_string(index=False))
    annotator      control_kind  control_score  reference  passed
    worker-02 control-scrambled              3        3.5    True
    worker-05   control-generic              5        5.0   False
    worker-07 control-scrambled              1        3.3    True
    """
    require_columns(ratings, ("annotator", "assignment", "item", "criterion", "score", "is_control", "control_kind",
                              "control_target"), what="control_results")
    is_control = ratings["is_control"].astype(bool)
    controls = ratings.loc[is_control & (ratings["criterion"] == ratings["control_target"])]
    columns = ["annotator", "assignment", "item", "control_kind", "criterion", "control_score", "reference",
               "reference_scope", "passed"]
    if controls.empty:
        return pd.DataFrame(columns=columns)
    real = ratings.loc[~is_control]
    per_assignment = real.groupby(["annotator", "assignment", "criterion"])["score"].mean().rename("in_assignment")
    overall = real.groupby(["annotator", "criterion"])["score"].mean().rename("overall")
    merged = (controls.rename(columns={"score": "control_score"})
              .join(per_assignment, on=["annotator", "assignment", "criterion"])
              .join(overall, on=["annotator", "criterion"]))
    merged["reference_scope"] = np.where(merged["in_assignment"].notna(), "assignment", "all items")
    merged["reference"] = merged["in_assignment"].fillna(merged["overall"])
    merged["passed"] = (merged["control_score"] < merged["reference"]).astype("boolean")
    merged.loc[merged["reference"].isna(), "passed"] = pd.NA
    return merged[columns].reset_index(drop=True)


def control_pass_rates(ratings: pd.DataFrame) -> pd.DataFrame:
    """Control pass rate per annotator and targeted criterion, from ``control_results`` (controls without any
    real item to compare with are not counted).

    Returns
    -------
    rates : pandas.DataFrame
        One row per annotator and targeted criterion: ``annotator``, ``criterion``, ``n_controls``,
        ``n_passed``, ``pass_rate`` (= n_passed / n_controls).

    Examples
    --------
    >>> from empeval.analysis import simulate_study, tidy_from_export
    >>> study = simulate_study(n_contexts=20, seed=1)
    >>> ratings = tidy_from_export(study.export)
    >>> print(control_pass_rates(ratings).head(3).to_string(index=False))
    annotator criterion  n_controls  n_passed  pass_rate
    worker-01   empathy           1         1        1.0
    worker-02   fluency           1         1        1.0
    worker-03 relevance           1         1        1.0
    """
    results = control_results(ratings).dropna(subset=["passed"])
    if results.empty:
        return pd.DataFrame(columns=["annotator", "criterion", "n_controls", "n_passed", "pass_rate"])
    results["passed"] = results["passed"].astype(bool)
    table = results.groupby(["annotator", "criterion"])["passed"].agg(n_controls="size", n_passed="sum").reset_index()
    table["pass_rate"] = table["n_passed"] / table["n_controls"]
    return table


def straightlining(ratings: pd.DataFrame) -> pd.DataFrame:
    """Share of an annotator's items (controls included) on which every criterion got the same score, over
    items rated on at least two criteria, and the SD of all their scores.

    Returns
    -------
    table : pandas.DataFrame
        One row per annotator:

        * ``annotator``
        * ``n_multi_criterion_items``: items rated on two or more criteria
        * ``straightline_rate``: share of those with one score on every criterion
        * ``score_sd``: SD of all the annotator's scores (ddof = 0; 0 means one score for everything)

    Examples
    --------
    >>> from empeval.analysis import simulate_study, tidy_from_export
    >>> study = simulate_study(n_contexts=20, seed=1)
    >>> ratings = tidy_from_export(study.export)
    >>> table = straightlining(ratings).round(2)
    >>> print(table.loc[table["annotator"].isin(["worker-01", "worker-05"])].to_string(index=False))
    annotator  n_multi_criterion_items  straightline_rate  score_sd
    worker-01                       11               0.09      0.86
    worker-05                       22               1.00      0.00
    >>> study.spammers["worker-05"]
    'straight'
    """
    per_item = ratings.groupby(["annotator", "item"])["score"].agg(["nunique", "size"])
    multi = per_item.loc[per_item["size"] >= 2]
    one_score = (multi["nunique"] == 1).groupby(level="annotator")
    table = pd.DataFrame({"n_multi_criterion_items": one_score.size(), "straightline_rate": one_score.mean()})
    spread = ratings.groupby("annotator")["score"].std(ddof=0).rename("score_sd")
    return table.join(spread, how="outer").reset_index()


def halo(ratings: pd.DataFrame, *, min_items: int = 5) -> pd.DataFrame:
    """Halo: the mean pairwise Spearman correlation between criteria over an annotator's real items (NaN when
    fewer than ``min_items`` items or a criterion does not vary).

    Returns
    -------
    table : pandas.DataFrame
        One row per annotator: ``annotator``, ``halo`` (in [-1, 1], NaN when undefined).

    Examples
    --------
    >>> from empeval.analysis import simulate_study, tidy_from_export
    >>> study = simulate_study(n_contexts=20, seed=1)
    >>> ratings = tidy_from_export(study.export)
    >>> print(halo(ratings).head(3).round(2).to_string(index=False))
    annotator  halo
    worker-01  0.04
    worker-02 -0.34
    worker-03  0.50
    """
    real = ratings.loc[~ratings["is_control"].astype(bool)]
    if real.empty:
        return pd.DataFrame(columns=["annotator", "halo"])
    # All annotators at once (one pivot per annotator cost ~10 ms each): rows (annotator, item), a column per
    # criterion; an annotator's criteria are those they rated, and their items those scored on all of them.
    wide = real.groupby(["annotator", "item", "criterion"], observed=True)["score"].mean().unstack("criterion")
    by_annotator = wide.notna().groupby(level="annotator")
    rated = by_annotator.transform("any")
    wide = wide.loc[(wide.notna() | ~rated).all(axis=1)]
    ranks = wide.groupby(level="annotator").rank(method="average")  # Spearman: Pearson on the ranks
    centred = ranks - ranks.groupby(level="annotator").transform("mean")
    grouped = centred.groupby(level="annotator")
    squares = (centred**2).groupby(level="annotator").sum(min_count=1)
    n_items = grouped.size()
    n_criteria = rated.groupby(level="annotator").any().sum(axis=1)
    criteria = list(wide.columns)
    correlations = pd.DataFrame({
        (a, b): (centred[a] * centred[b]).groupby(level="annotator").sum(min_count=1)
        / np.sqrt(squares[a] * squares[b])
        for i, a in enumerate(criteria) for b in criteria[i + 1:]}, index=n_items.index)
    varies = ((squares > 0) | squares.isna()).all(axis=1)
    usable = (n_items >= min_items) & (n_criteria.reindex(n_items.index) >= 2) & varies
    values = correlations.mean(axis=1, skipna=True).where(usable)
    annotators = sorted(real["annotator"].unique())
    values = values.reindex(annotators)
    return pd.DataFrame({"annotator": annotators, "halo": values.to_numpy(dtype=float)}, columns=["annotator", "halo"])


def time_per_item(ratings: pd.DataFrame) -> pd.DataFrame:
    """Median seconds per item for each annotator. ``seconds_on_item`` where recorded; otherwise the
    assignment's duration (last submitted_at - first started_at) divided by its number of items.

    Returns
    -------
    table : pandas.DataFrame
        One row per annotator: ``annotator``, ``median_seconds`` (NaN without any timing).

    Examples
    --------
    >>> from empeval.analysis import simulate_study, tidy_from_export
    >>> study = simulate_study(n_contexts=20, seed=1)
    >>> ratings = tidy_from_export(study.export)
    >>> print(time_per_item(ratings).head(3).round(1).to_string(index=False))
    annotator  median_seconds
    worker-01            28.7
    worker-02             4.1
    worker-03            21.8
    """
    per_item = ratings.groupby(["annotator", "assignment", "item"]).agg(
        seconds=("seconds_on_item", "first"), started=("started_at", "min"), submitted=("submitted_at", "max")
    ).reset_index()
    per_assignment = per_item.groupby(["annotator", "assignment"]).agg(
        started=("started", "min"), submitted=("submitted", "max"), n_items=("item", "size")
    )
    duration = (per_assignment["submitted"] - per_assignment["started"]).dt.total_seconds()
    fallback = (duration / per_assignment["n_items"]).rename("fallback")
    per_item = per_item.join(fallback, on=["annotator", "assignment"])
    per_item["seconds"] = per_item["seconds"].fillna(per_item["fallback"])
    table = per_item.groupby("annotator")["seconds"].median().rename("median_seconds")
    return table.reset_index()


def consensus_agreement(
    ratings: pd.DataFrame, *, min_items: int = 8, exclude_from_consensus: Iterable[str] = ()
) -> pd.DataFrame:
    """Agreement of each annotator with the leave-one-out consensus: for every real item they rated, the mean
    of the other annotators' scores on that item and criterion (annotators in ``exclude_from_consensus``
    do not count towards anyone's consensus, but get their own correlation).

    consensus_r is the pooled within-criterion Pearson correlation between own score and that consensus (both
    centred per criterion, then correlated over all the annotator's ratings; pooling over criteria steadies
    an estimate that would otherwise rest on a few items per criterion). NaN with fewer than ``min_items``
    items or no variation. consensus_mae is the mean absolute difference.

    Returns
    -------
    table : pandas.DataFrame
        One row per annotator with a co-rated real item:

        * ``annotator``
        * ``n_consensus_items``: real items they rated that someone else in the pool rated too
        * ``consensus_r``: pooled within-criterion Pearson r with the leave-one-out consensus
        * ``consensus_mae``: mean absolute difference from that consensus

    Examples
    --------
    >>> from empeval.analysis import simulate_study, tidy_from_export
    >>> study = simulate_study(n_contexts=20, seed=1)
    >>> ratings = tidy_from_export(study.export)
    >>> print(consensus_agreement(ratings).head(3).round(2).to_string(index=False))
    annotator  n_consensus_items  consensus_r  consensus_mae
    worker-01                 10         0.29           0.80
    worker-02                 10        -0.18           1.62
    worker-03                 10         0.64           0.62
    """
    real = ratings.loc[~ratings["is_control"].astype(bool), ["annotator", "item", "criterion", "score"]].copy()
    in_pool = ~real["annotator"].isin(set(exclude_from_consensus))
    pooled = real["score"].where(in_pool, 0.0)
    keys = [real["item"], real["criterion"]]
    total = pooled.groupby(keys).transform("sum")
    count = in_pool.astype(int).groupby(keys).transform("sum")
    others = count - in_pool.astype(int)
    real = real.loc[others >= 1].copy()
    real["consensus"] = (total - pooled)[others >= 1] / others[others >= 1]
    # Every annotator at once (a loop over annotators cost ~10 ms each): centre within (annotator, criterion),
    # then per-annotator sums of the products.
    keys = [real["annotator"], real["criterion"]]
    own = real["score"] - real["score"].groupby(keys).transform("mean")
    others = real["consensus"] - real["consensus"].groupby(keys).transform("mean")
    sums = pd.DataFrame({"cross": own * others, "own2": own * own, "others2": others * others,
                         "own_abs": own.abs(), "others_abs": others.abs(),
                         "error": (real["score"] - real["consensus"]).abs()}).groupby(real["annotator"])
    totals = sums.sum()
    n_items = real.groupby("annotator")["item"].nunique()
    defined = (n_items >= min_items) & (totals["own_abs"] > 0) & (totals["others_abs"] > 0)
    with np.errstate(divide="ignore", invalid="ignore"):
        r = totals["cross"] / np.sqrt(totals["own2"] * totals["others2"])
    return pd.DataFrame({
        "annotator": totals.index.to_numpy(),
        "n_consensus_items": n_items.to_numpy(dtype=int),
        "consensus_r": r.where(defined).to_numpy(dtype=float),
        "consensus_mae": sums["error"].mean().to_numpy(dtype=float),
    }, columns=["annotator", "n_consensus_items", "consensus_r", "consensus_mae"])


def _clearly_below(consensus: pd.DataFrame, threshold: float, *, flagged_by_rules: Set[str] = frozenset(),
                   z_one_sided: float = 1.6449, z_outlier: float = 0.8416, outlier_mads: float = 3.0) -> pd.Series:
    """Which annotators' consensus_r is clearly low: below `threshold` and either
    - significantly so: the one-sided 95% upper confidence bound (Fisher z-transform, standard error
      1 / sqrt(n - 3), n = items rated) is below `threshold`; or
    - an outlier among this study's raters (more than `outlier_mads` scaled MADs, 1.4826 MAD, below the
      median r of the raters no other rule flagged) whose one-sided 80% upper bound is below `threshold`:
      how far r can fall by chance depends on the mix of items a rater happened to get, which the spread of
      the others' r understates.
    With few items per rater and small true differences between items, careful raters' r scatter widely
    around a low mean; a bare point-estimate cut-off would then exclude honest raters by chance."""
    r = consensus["consensus_r"]
    n = consensus["n_consensus_items"].astype(float)
    z = np.arctanh(r.clip(-0.999999, 0.999999))
    se = 1 / np.sqrt((n - 3).clip(lower=1))
    upper = np.tanh(z + z_one_sided * se)
    upper_outlier = np.tanh(z + z_outlier * se)
    defined = r[~consensus["annotator"].isin(flagged_by_rules)].dropna()
    if len(defined) >= 5:
        median = float(defined.median())
        spread = 1.4826 * float((defined - median).abs().median())
        outlier = r < median - outlier_mads * spread
    else:
        outlier = pd.Series(False, index=r.index)
    return r.notna() & (r < threshold) & ((upper < threshold) | (outlier & (upper_outlier < threshold)))


def rater_quality(
    ratings: pd.DataFrame,
    *,
    min_control_pass_rate: float = 0.5,
    min_controls: int = 2,
    max_straightline_rate: float = 0.8,
    min_items: int = 5,
    min_consensus_r: float = 0.2,
    min_consensus_items: int = 8,
    min_median_seconds: float | None = 5.0,
    max_halo: float | None = None,
    max_consensus_rounds: int = 10,
) -> pd.DataFrame:
    """One row per annotator with every quality measure, one boolean column per flagging rule, ``flagged``
    and the ``reasons``.

    An annotator is flagged when (each rule applies only with enough data):

    - ``flag_controls``: they pass fewer than ``min_control_pass_rate`` of their controls (at least
      ``min_controls``);
    - ``flag_straightlining``: more than ``max_straightline_rate`` of their items (at least ``min_items``)
      got one score on every criterion, or every score they gave is the same;
    - ``flag_speed``: their median time per item is below ``min_median_seconds`` (None: not checked);
    - ``flag_halo``: their halo exceeds ``max_halo`` (None, the default: reported only, because good
      responses are good on every criterion, so a high halo alone is weak evidence);
    - ``flag_consensus``: their correlation with the leave-one-out consensus is clearly below
      ``min_consensus_r``: below it and either significantly so (one-sided 95% Fisher-z bound) or a robust
      outlier among the study's raters (see ``_clearly_below``), so a careful rater whose few items happen
      to correlate weakly is not flagged on chance alone; the consensus leaves out the annotators flagged so
      far and is recomputed until the flags settle (at most ``max_consensus_rounds`` rounds).

    Code should read the boolean columns (``FLAG_COLUMNS``; ``FLAG_RULES`` names each in a few words);
    ``reasons`` is for people.

    Returns
    -------
    quality : pandas.DataFrame
        One row per annotator:

        * ``annotator``
        * ``n_items``, ``n_ratings``: items rated (controls included) and ratings given
        * ``n_controls``, ``control_pass_rate``: controls judged and the share passed (``control_results``)
        * ``pass_rate_<criterion>``: the pass rate on the controls targeting each criterion
        * ``n_multi_criterion_items``, ``straightline_rate``, ``score_sd``: see ``straightlining``
        * ``halo``: see ``halo``
        * ``median_seconds``: see ``time_per_item``
        * ``n_consensus_items``, ``consensus_r``, ``consensus_mae``: see ``consensus_agreement`` (with the
          consensus of the final round)
        * ``flag_controls``, ``flag_straightlining``, ``flag_speed``, ``flag_halo``, ``flag_consensus``: bool,
          whether each rule flags the annotator
        * ``flagged``: any of the flags
        * ``reasons``: the rules that fired with the annotator's numbers, "; "-separated ("" when none)

    Examples
    --------
    A simulated study with two random clickers and one straight-liner among 15 annotators:

    >>> from empeval.analysis import simulate_study, tidy_from_export
    >>> study = simulate_study(n_contexts=20, seed=1)
    >>> ratings = tidy_from_export(study.export)
    >>> quality = rater_quality(ratings)
    >>> flags = ["annotator", "flag_controls", "flag_straightlining", "flag_speed", "flag_consensus"]
    >>> print(quality.loc[quality["flagged"], flags].to_string(index=False))
    annotator  flag_controls  flag_straightlining  flag_speed  flag_consensus
    worker-02          False                False        True            True
    worker-05           True                 True        True           False
    worker-12          False                False        True           False
    >>> sorted(study.spammers.items())
    [('worker-02', 'random'), ('worker-05', 'straight'), ('worker-12', 'random')]
    >>> print(quality.set_index("annotator").loc["worker-05", "reasons"])
    passed 0 of 2 controls (0% < 50%); gave every rating the same score; median 2.9 s per item (< 5 s)
    """
    require_columns(ratings, ("annotator", "assignment", "item", "criterion", "score", "is_control", "control_kind",
                              "control_target", "seconds_on_item", "started_at", "submitted_at"), what="rater_quality")
    base = ratings.groupby("annotator").agg(n_items=("item", "nunique"), n_ratings=("score", "size"))
    passes = control_pass_rates(ratings)
    controls = passes.groupby("annotator")[["n_controls", "n_passed"]].sum()
    controls["control_pass_rate"] = controls["n_passed"] / controls["n_controls"]
    per_criterion = passes.pivot(index="annotator", columns="criterion", values="pass_rate").add_prefix("pass_rate_")
    table = (base.join(controls[["n_controls", "control_pass_rate"]])
             .join(per_criterion)
             .join(straightlining(ratings).set_index("annotator"))
             .join(halo(ratings, min_items=min_items).set_index("annotator"))
             .join(time_per_item(ratings).set_index("annotator")))
    table["n_controls"] = table["n_controls"].fillna(0).astype(int)

    # The consensus leaves out annotators flagged so far, and is recomputed until the flag set settles: a
    # careful annotator whose items happened to be co-rated by spammers is then not judged against noise.
    found = {annotator: _rule_flags(row, min_control_pass_rate=min_control_pass_rate, min_controls=min_controls,
                                    max_straightline_rate=max_straightline_rate, min_items=min_items,
                                    min_median_seconds=min_median_seconds, max_halo=max_halo)
             for annotator, row in table.to_dict("index").items()}
    by_rules = {annotator for annotator, flags in found.items() if flags}
    excluded: set[str] = set(by_rules)
    for _ in range(max_consensus_rounds):
        consensus = consensus_agreement(ratings, min_items=min_consensus_items, exclude_from_consensus=excluded)
        low = set(consensus.loc[_clearly_below(consensus, min_consensus_r, flagged_by_rules=by_rules), "annotator"])
        if by_rules | low == excluded:
            break
        excluded = by_rules | low
    table = table.join(consensus.set_index("annotator"))
    for annotator in sorted(low):
        found[annotator]["flag_consensus"] = (f"correlation with the other raters' consensus r = "
                                              f"{table.loc[annotator, 'consensus_r']:.2f} "
                                              f"(clearly < {min_consensus_r:.2f})")
    for column in FLAG_COLUMNS:
        table[column] = [column in found[annotator] for annotator in table.index]
    table["flagged"] = table[list(FLAG_COLUMNS)].any(axis=1)
    # The reasons in the order of FLAG_COLUMNS, for people; code reads the boolean columns.
    table["reasons"] = ["; ".join(found[annotator][c] for c in FLAG_COLUMNS if c in found[annotator])
                        for annotator in table.index]
    ordered = ["n_items", "n_ratings", "n_controls", "control_pass_rate", *per_criterion.columns,
               "n_multi_criterion_items", "straightline_rate", "score_sd", "halo", "median_seconds",
               "n_consensus_items", "consensus_r", "consensus_mae", *FLAG_COLUMNS, "flagged", "reasons"]
    return table[ordered].reset_index()


def _rule_flags(row: dict, *, min_control_pass_rate: float, min_controls: int, max_straightline_rate: float,
                min_items: int, min_median_seconds: float | None, max_halo: float | None) -> dict[str, str]:
    """The per-annotator rules that fire (all but the consensus rule), as flag column -> reason for people."""
    found = {}
    if row["n_controls"] >= min_controls and row["control_pass_rate"] < min_control_pass_rate:
        passed = int(round(row["control_pass_rate"] * row["n_controls"]))
        found["flag_controls"] = (f"passed {passed} of {int(row['n_controls'])} controls "
                                  f"({row['control_pass_rate']:.0%} < {min_control_pass_rate:.0%})")
    if row["n_items"] >= min_items and row["score_sd"] == 0:
        found["flag_straightlining"] = "gave every rating the same score"
    elif row["n_multi_criterion_items"] >= min_items and row["straightline_rate"] > max_straightline_rate:
        found["flag_straightlining"] = (f"one score on every criterion for {row['straightline_rate']:.0%} of items "
                                        f"(> {max_straightline_rate:.0%})")
    if (min_median_seconds is not None and np.isfinite(row["median_seconds"])
            and row["median_seconds"] < min_median_seconds):
        found["flag_speed"] = f"median {row['median_seconds']:.1f} s per item (< {min_median_seconds:g} s)"
    if max_halo is not None and np.isfinite(row["halo"]) and row["halo"] > max_halo:
        found["flag_halo"] = f"halo: criteria correlate at {row['halo']:.2f} (> {max_halo:.2f})"
    return found


def control_summary(ratings: pd.DataFrame) -> pd.DataFrame:
    """Control pass rate per targeted criterion over all annotators (``control_pass_rates`` summed).

    Returns
    -------
    summary : pandas.DataFrame
        One row per targeted criterion: ``criterion``, ``n_controls``, ``n_passed``, ``pass_rate``.

    Examples
    --------
    >>> from empeval.analysis import simulate_study, tidy_from_export
    >>> study = simulate_study(n_contexts=20, seed=1)
    >>> ratings = tidy_from_export(study.export)
    >>> print(control_summary(ratings).round(2).to_string(index=False))
    criterion  n_controls  n_passed  pass_rate
      empathy           6         5       0.83
      fluency           6         6       1.00
    relevance           6         5       0.83
    """
    passes = control_pass_rates(ratings)
    table = passes.groupby("criterion")[["n_controls", "n_passed"]].sum().reset_index()
    table["pass_rate"] = table["n_passed"] / table["n_controls"]
    return table


def controls_beside_systems(ratings: pd.DataFrame) -> pd.DataFrame:
    """Mean score of each kind of control next to the real systems, per criterion.

    One row per control kind: control_kind, control_target, n_ratings, mean_<criterion> for every
    criterion, lowest_system (the real system with the lowest mean on the target), its mean
    (lowest_system_mean) and last_on_target (the control's mean on its target is below every real
    system's): a built-to-fail control that is not last on its target means raters did not see the flaw.

    Returns
    -------
    table : pandas.DataFrame
        One row per kind of control:

        * ``control_kind``, ``control_target``: the control's system and the criterion it is built to fail
        * ``n_ratings``: ratings of controls of this kind (all criteria)
        * ``mean_<criterion>``: the control's mean score on each criterion
        * ``lowest_system``, ``lowest_system_mean``: the real system with the lowest mean on the target
        * ``last_on_target``: the control's mean on its target is below that lowest system's

    Examples
    --------
    >>> from empeval.analysis import simulate_study, tidy_from_export
    >>> study = simulate_study(n_contexts=20, seed=1)
    >>> ratings = tidy_from_export(study.export)
    >>> table = controls_beside_systems(ratings)
    >>> columns = ["control_kind", "control_target", "mean_empathy", "mean_relevance", "mean_fluency",
    ...            "lowest_system_mean", "last_on_target"]
    >>> print(table[columns].round(2).to_string(index=False))
          control_kind control_target  mean_empathy  mean_relevance  mean_fluency  lowest_system_mean  last_on_target
       control-generic        empathy          1.67            3.00          4.67                2.97            True
    control-mismatched      relevance          2.67            2.00          4.00                3.07            True
     control-scrambled        fluency          1.67            2.33          1.50                3.30            True
    """
    controls = ratings.loc[ratings["is_control"].astype(bool)]
    real = ratings.loc[~ratings["is_control"].astype(bool)]
    columns = ["control_kind", "control_target", "n_ratings", "lowest_system", "lowest_system_mean", "last_on_target"]
    if controls.empty or real.empty:
        return pd.DataFrame(columns=columns)
    system_means = real.groupby(["criterion", "system"])["score"].mean()
    rows = []
    for (kind, target), part in controls.groupby(["control_kind", "control_target"]):
        row = {"control_kind": kind, "control_target": target, "n_ratings": int(len(part))}
        for criterion, mean in part.groupby("criterion")["score"].mean().items():
            row[f"mean_{criterion}"] = float(mean)
        if target in system_means.index.get_level_values(0):
            on_target = system_means.loc[target]
            row["lowest_system"] = str(on_target.idxmin())
            row["lowest_system_mean"] = float(on_target.min())
            row["last_on_target"] = bool(row.get(f"mean_{target}", np.inf) < on_target.min())
        rows.append(row)
    table = pd.DataFrame(rows)
    return table[[c for c in columns[:3]] + sorted(c for c in table.columns if c.startswith("mean_")) + columns[3:]]


def flagged_annotators(quality: pd.DataFrame) -> list[str]:
    """Annotators flagged in a ``rater_quality`` table, sorted.

    Returns
    -------
    annotators : list of str
        The annotators whose ``flagged`` is True.

    Examples
    --------
    >>> import pandas as pd
    >>> flagged_annotators(pd.DataFrame({"annotator": ["b", "a", "c"], "flagged": [True, True, False]}))
    ['a', 'b']
    """
    return sorted(quality.loc[quality["flagged"], "annotator"])
