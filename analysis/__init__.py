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
"""

from analysis.agreement import agreement_table, icc_table
from analysis.compare import adjust_pvalues, compare_pairs, friedman_test, item_means, system_means
from analysis.exclusions import exclude_annotators, side_by_side
from analysis.load import read_export, tidy_from_export
from analysis.preferences import preference_tests
from analysis.quality import flagged_annotators, rater_quality
from analysis.simulate import simulate_study

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
