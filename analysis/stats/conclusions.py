"""What the report means by "a conclusion changes": one definition, used wherever two analyses of the same
pair of systems are set side by side.

A pairwise conclusion is the pair's order (the sign of the difference of means) and whether the difference is
significant after correction (p adj. < alpha). It *changes* when the order reverses or significance is gained
or lost. A difference within ``TIE`` of zero has no order; an undefined p-value (too few contexts) is never
significant. ``empeval.analysis.stats.rater_aware`` applies the same rule to its checks.
"""

from __future__ import annotations

import numpy as np

TIE = 1e-9  # the tolerance analysis.stats.rater_aware uses for "no order"

DEFINITION = ("A pairwise conclusion changes when the order of the two systems (the sign of Δ) reverses, or when "
              "the difference gains or loses significance after correction (p adj. < α).")


def order(difference: float) -> int:
    """+1, -1, or 0 for a difference within TIE of zero or undefined."""
    if difference is None or not np.isfinite(difference) or abs(difference) < TIE:
        return 0
    return 1 if difference > 0 else -1


def conclusion_changes(diff_before: float, p_before: float, diff_after: float, p_after: float, *,
                       alpha: float) -> bool:
    """Whether the conclusion about one pair differs between two analyses (see ``DEFINITION``).

    >>> conclusion_changes(0.4, 0.01, 0.3, 0.02, alpha=0.05), conclusion_changes(0.4, 0.01, 0.3, 0.20, alpha=0.05)
    (False, True)
    >>> conclusion_changes(0.1, 0.60, -0.1, 0.70, alpha=0.05)  # the order reverses
    True
    """
    significant_before = bool(np.isfinite(p_before) and p_before < alpha)
    significant_after = bool(np.isfinite(p_after) and p_after < alpha)
    return order(diff_before) != order(diff_after) or significant_before != significant_after
