"""Statistics over a tidy ratings table: agreement, system comparison, rater quality, preferences, report.

DataFrame in, tidy DataFrame out; nothing here imports ``server`` or ``tasks``. Start from
``read_export``/``tidy_from_export`` (analysis.load), then:

- analysis.agreement: Krippendorff's alpha, Gwet's AC2, Fleiss' kappa, ICC, percent agreement, with CIs
- analysis.compare: system means with CIs, pairwise Wilcoxon / t-tests, corrections, effect sizes, Friedman
- analysis.rater_aware: mixed-model and z-score checks of the pairwise conclusions
- analysis.quality: controls, straight-lining, halo, time, consensus agreement, flags
- analysis.exclusions: re-run any analysis without the flagged annotators, side by side
- analysis.preferences: A/B win / tie / loss rates with exact binomial tests
- analysis.report: ``write_report`` (Markdown + self-contained HTML); analysis.plots: the figures
- analysis.simulate: studies with known truth, for checks, power planning and the notebooks

The names below are imported on first use (PEP 562), not with the package: ``import empeval.analysis.load`` (which
the command line does on every start) then costs pandas and numpy only, not scipy, statsmodels and
matplotlib. ``from empeval.analysis import rater_quality`` works as before.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from empeval.analysis.agreement import agreement_table, icc_table
    from empeval.analysis.compare import adjust_pvalues, compare_pairs, friedman_test, item_means, system_means
    from empeval.analysis.exclusions import exclude_annotators, side_by_side
    from empeval.analysis.load import read_export, tidy_from_export
    from empeval.analysis.preferences import preference_tests
    from empeval.analysis.quality import flagged_annotators, rater_quality
    from empeval.analysis.simulate import simulate_study

#: Where each public name lives.
_HOMES = {
    "adjust_pvalues": "empeval.analysis.compare",
    "agreement_table": "empeval.analysis.agreement",
    "compare_pairs": "empeval.analysis.compare",
    "exclude_annotators": "empeval.analysis.exclusions",
    "flagged_annotators": "empeval.analysis.quality",
    "friedman_test": "empeval.analysis.compare",
    "icc_table": "empeval.analysis.agreement",
    "item_means": "empeval.analysis.compare",
    "preference_tests": "empeval.analysis.preferences",
    "rater_quality": "empeval.analysis.quality",
    "read_export": "empeval.analysis.load",
    "side_by_side": "empeval.analysis.exclusions",
    "simulate_study": "empeval.analysis.simulate",
    "system_means": "empeval.analysis.compare",
    "tidy_from_export": "empeval.analysis.load",
}

__all__ = [
    "adjust_pvalues",
    "agreement_table",
    "compare_pairs",
    "exclude_annotators",
    "flagged_annotators",
    "friedman_test",
    "icc_table",
    "item_means",
    "preference_tests",
    "rater_quality",
    "read_export",
    "side_by_side",
    "simulate_study",
    "system_means",
    "tidy_from_export",
]


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'empeval.analysis' has no attribute {name!r}")
    value = getattr(importlib.import_module(home), name)
    globals()[name] = value  # later look-ups skip this function
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])
