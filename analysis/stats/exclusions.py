"""Re-run an analysis without some annotators and put both results side by side."""

from __future__ import annotations

from collections.abc import Callable, Iterable

import pandas as pd

ALL_RATERS = "all raters"
EXCLUDING_FLAGGED = "excluding flagged"


def exclude_annotators(ratings: pd.DataFrame, annotators: Iterable[str]) -> pd.DataFrame:
    """The ratings without those of ``annotators`` (all their ratings, controls included).

    Returns
    -------
    ratings : pandas.DataFrame
        The same columns, the excluded annotators' rows dropped, index reset.

    Examples
    --------
    >>> from empeval.analysis import simulate_study, tidy_from_export
    >>> study = simulate_study(n_contexts=20, seed=1)
    >>> ratings = tidy_from_export(study.export)
    >>> kept = exclude_annotators(ratings, study.spammers)
    >>> len(ratings), len(kept), sorted(set(ratings["annotator"]) - set(kept["annotator"]))
    (594, 462, ['worker-02', 'worker-05', 'worker-12'])
    """
    excluded = set(annotators)
    return ratings.loc[~ratings["annotator"].isin(excluded)].reset_index(drop=True)


def side_by_side(
    ratings: pd.DataFrame,
    excluded: Iterable[str],
    analysis: Callable[..., pd.DataFrame],
    **options,
) -> pd.DataFrame:
    """Run ``analysis(ratings, **options)`` on all ratings and on the ratings without ``excluded``, so the
    effect of excluding annotators is shown rather than assumed.

    Returns
    -------
    table : pandas.DataFrame
        Both results stacked: a first column ``raters`` ("all raters", ``ALL_RATERS``, then "excluding
        flagged", ``EXCLUDING_FLAGGED``), followed by the columns of the analysis' own table.

    Examples
    --------
    >>> from empeval.analysis import simulate_study, tidy_from_export
    >>> study = simulate_study(n_contexts=20, seed=1)
    >>> ratings = tidy_from_export(study.export)
    >>> from empeval.analysis.stats.significance import system_means
    >>> both = side_by_side(ratings, study.spammers, system_means, criteria=["empathy"], n_boot=200)
    >>> print(both[["raters", "system", "mean", "ci_low", "ci_high"]].round(2).to_string(index=False))
               raters   system  mean  ci_low  ci_high
           all raters baseline  2.97    2.60     3.27
           all raters     gold  3.92    3.68     4.12
           all raters     moel  3.52    3.25     3.80
    excluding flagged baseline  2.77    2.43     3.05
    excluding flagged     gold  3.85    3.62     4.05
    excluding flagged     moel  3.37    3.12     3.63
    """
    excluded = list(excluded)
    tables = [analysis(ratings, **options).assign(raters=ALL_RATERS)]
    tables.append(analysis(exclude_annotators(ratings, excluded), **options).assign(raters=EXCLUDING_FLAGGED))
    table = pd.concat(tables, ignore_index=True)
    return table[["raters", *[c for c in table.columns if c != "raters"]]]
