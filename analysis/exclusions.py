"""Re-run an analysis without some annotators and put both results side by side."""

from __future__ import annotations

from collections.abc import Callable, Iterable

import pandas as pd

ALL_RATERS = "all raters"
EXCLUDING_FLAGGED = "excluding flagged"


def exclude_annotators(ratings: pd.DataFrame, annotators: Iterable[str]) -> pd.DataFrame:
    """The ratings without those of ``annotators`` (all their ratings, controls included)."""
    excluded = set(annotators)
    return ratings.loc[~ratings["annotator"].isin(excluded)].reset_index(drop=True)


def side_by_side(
    ratings: pd.DataFrame,
    excluded: Iterable[str],
    analysis: Callable[..., pd.DataFrame],
    **options,
) -> pd.DataFrame:
    """Run ``analysis(ratings, **options)`` on all ratings and on the ratings without ``excluded``; return
    both tables stacked with a first column ``raters`` ("all raters" / "excluding flagged")."""
    excluded = list(excluded)
    tables = [analysis(ratings, **options).assign(raters=ALL_RATERS)]
    tables.append(analysis(exclude_annotators(ratings, excluded), **options).assign(raters=EXCLUDING_FLAGGED))
    table = pd.concat(tables, ignore_index=True)
    return table[["raters", *[c for c in table.columns if c != "raters"]]]
