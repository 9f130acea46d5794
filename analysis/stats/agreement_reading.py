"""Why Krippendorff's alpha and Gwet's AC2 can disagree so much on the same ratings, in a few sentences with
the study's own numbers: the paragraph printed next to the report's agreement table.

Both coefficients compare observed with chance agreement; they differ in the chance model. Alpha's chance
disagreement comes from the pooled distribution of scores, so when most scores pile on a few values (high
prevalence) chance disagreement is small and alpha falls even though raters mostly agree: the paradox of
Feinstein & Cicchetti (1990), "High agreement but low kappa: I. The problems of two paradoxes", J Clin
Epidemiol 43(6). Gwet's AC1/AC2 (Gwet 2008, "Computing inter-rater reliability and its variance in the
presence of high agreement", Br J Math Stat Psychol 61(1)) use a chance model that shrinks as ratings
concentrate, so AC2 stays close to raw agreement.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from empeval.analysis.stats.agreement import ALL_SYSTEMS


def modal_share(ratings: pd.DataFrame, criterion: str) -> tuple[int, float]:
    """The most common score of the real (non-control) ratings on ``criterion`` and its share of them."""
    scores = ratings.loc[~ratings["is_control"].astype(bool) & (ratings["criterion"] == criterion), "score"]
    shares = scores.value_counts(normalize=True)
    return int(shares.index[0]), float(shares.iloc[0])


def _range(values: list[float]) -> str:
    low, high = min(values), max(values)
    return f"{low:.2f}" if f"{low:.2f}" == f"{high:.2f}" else f"{low:.2f}–{high:.2f}"


def alpha_beside_ac2(agreement: pd.DataFrame, ratings: pd.DataFrame, criteria: Sequence[str]) -> str | None:
    """A paragraph reading ordinal alpha beside ordinal AC2 (pooled over systems) for the criteria where both
    are defined, with each criterion's most common score and its share; None when no criterion has both."""
    pooled = agreement.loc[agreement["system"] == ALL_SYSTEMS].set_index(["criterion", "coefficient"])["estimate"]
    both = [c for c in criteria
            if np.isfinite(pooled.get((c, "alpha_ordinal"), np.nan)) and np.isfinite(pooled.get((c, "ac2_ordinal"),
                                                                                                  np.nan))]
    if not both:
        return None
    alphas = [float(pooled[(c, "alpha_ordinal")]) for c in both]
    ac2s = [float(pooled[(c, "ac2_ordinal")]) for c in both]
    prevalence = "; ".join(f"{c} {score} ({share:.0%})" for c in both for score, share in [modal_share(ratings, c)])
    return (
        f"Reading α beside AC2: here ordinal α is {_range(alphas)} and AC2 {_range(ac2s)}. Both correct observed "
        "agreement for chance, with different chance models. α takes chance disagreement from the pooled "
        "distribution of scores: when most scores fall on a few values, chance disagreement is small, and even "
        "mostly agreeing raters get a low α (the \"high agreement, low kappa\" paradox, Feinstein & Cicchetti "
        "1990). AC2's chance agreement shrinks as ratings concentrate (Gwet 2008), so it stays near raw "
        f"agreement. The most common score and its share of the ratings: {prevalence}. Both can be right: α "
        "says how far raters tell responses apart beyond the shared score distribution, AC2 how often they "
        "agree; report α as the conservative figure and AC2 beside it.")
