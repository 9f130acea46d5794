"""Statistics over tidy tables of human judgments: DataFrame in, tidy DataFrame out; nothing here imports ``server``
or ``tasks``. The public face, by topic (docs/api.md lists it with what each function computes):

- reading an export: ``read_export``, ``tidy_from_export`` (Likert ratings), ``read_judgments`` (pairwise A/B);
  every kind's reader is in ``empeval.analysis.kinds.<kind>.schema``
- agreement: ``agreement_table``, ``icc_table``; the coefficients themselves: ``krippendorff_alpha``, ``gwet_ac2``,
  ``fleiss_kappa``; ``split_half`` reliability with ``spearman_brown``
- comparing systems: ``system_means``, ``item_means``, ``compare_pairs``, ``friedman_test``, ``adjust_pvalues``,
  ``rater_aware_check``; from paired comparisons, ``ranking`` (Bradley-Terry / Davidson); A/B shares:
  ``preference_tests``, ``pairwise_tables``
- rater quality: ``rater_quality``, ``flagged_annotators``, ``exclude_annotators``, ``side_by_side``
- planning: ``components_from_pilot``, ``plan_table``, ``pairwise_plan_table``
- uncertainty: ``resample_weights``, ``percentile_interval`` (the bootstrap every interval here uses)
- simulation with a known truth: ``simulate_study``, ``simulate_pairwise_study``

The package is organised by role: ``stats/`` (the statistics), ``kinds/`` (each study kind's table and report),
``report/`` (sections, rendering, plots) and ``simulate/``. The names below are imported on first use (PEP 562),
not with the package: ``import empeval.analysis`` costs nothing heavy, and ``from empeval.analysis import
agreement_table`` imports only what that needs (a study kind's names come through ``analysis.kinds.public``, which
imports the kinds' public modules together).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from empeval.analysis.kinds.public import (
        flagged_annotators,
        pairwise_tables,
        rater_quality,
        read_export,
        read_judgments,
        simulate_pairwise_study,
        simulate_study,
        tidy_from_export,
    )
    from empeval.analysis.stats.agreement import agreement_table, icc_table
    from empeval.analysis.stats.bootstrap import percentile_interval, resample_weights
    from empeval.analysis.stats.bradley_terry import ranking
    from empeval.analysis.stats.coefficients import fleiss_kappa, gwet_ac2, krippendorff_alpha
    from empeval.analysis.stats.exclusions import exclude_annotators, side_by_side
    from empeval.analysis.stats.power import components_from_pilot, pairwise_plan_table, plan_table
    from empeval.analysis.stats.preferences import preference_tests
    from empeval.analysis.stats.rater_aware import rater_aware_check
    from empeval.analysis.stats.significance import (
        adjust_pvalues,
        compare_pairs,
        friedman_test,
        item_means,
        system_means,
    )
    from empeval.analysis.stats.split_half import spearman_brown, split_half

#: Where each public name lives, by topic (a study kind's names through analysis.kinds.public, so that this shared
#: package never names a kind's module).
_HOMES = {
    # reading an export
    "read_export": "empeval.analysis.kinds.public",
    "tidy_from_export": "empeval.analysis.kinds.public",
    "read_judgments": "empeval.analysis.kinds.public",
    # agreement and reliability
    "agreement_table": "empeval.analysis.stats.agreement",
    "icc_table": "empeval.analysis.stats.agreement",
    "krippendorff_alpha": "empeval.analysis.stats.coefficients",
    "gwet_ac2": "empeval.analysis.stats.coefficients",
    "fleiss_kappa": "empeval.analysis.stats.coefficients",
    "split_half": "empeval.analysis.stats.split_half",
    "spearman_brown": "empeval.analysis.stats.split_half",
    # comparing systems
    "system_means": "empeval.analysis.stats.significance",
    "item_means": "empeval.analysis.stats.significance",
    "compare_pairs": "empeval.analysis.stats.significance",
    "friedman_test": "empeval.analysis.stats.significance",
    "adjust_pvalues": "empeval.analysis.stats.significance",
    "rater_aware_check": "empeval.analysis.stats.rater_aware",
    "ranking": "empeval.analysis.stats.bradley_terry",
    "preference_tests": "empeval.analysis.stats.preferences",
    "pairwise_tables": "empeval.analysis.kinds.public",
    # rater quality
    "rater_quality": "empeval.analysis.kinds.public",
    "flagged_annotators": "empeval.analysis.kinds.public",
    "exclude_annotators": "empeval.analysis.stats.exclusions",
    "side_by_side": "empeval.analysis.stats.exclusions",
    # planning
    "components_from_pilot": "empeval.analysis.stats.power",
    "plan_table": "empeval.analysis.stats.power",
    "pairwise_plan_table": "empeval.analysis.stats.power",
    # uncertainty
    "resample_weights": "empeval.analysis.stats.bootstrap",
    "percentile_interval": "empeval.analysis.stats.bootstrap",
    # simulation
    "simulate_study": "empeval.analysis.kinds.public",
    "simulate_pairwise_study": "empeval.analysis.kinds.public",
}

__all__ = [  # the names of _HOMES, in its order (a literal, so that linters and IDEs read it)
    "read_export",
    "tidy_from_export",
    "read_judgments",
    "agreement_table",
    "icc_table",
    "krippendorff_alpha",
    "gwet_ac2",
    "fleiss_kappa",
    "split_half",
    "spearman_brown",
    "system_means",
    "item_means",
    "compare_pairs",
    "friedman_test",
    "adjust_pvalues",
    "rater_aware_check",
    "ranking",
    "preference_tests",
    "pairwise_tables",
    "rater_quality",
    "flagged_annotators",
    "exclude_annotators",
    "side_by_side",
    "components_from_pilot",
    "plan_table",
    "pairwise_plan_table",
    "resample_weights",
    "percentile_interval",
    "simulate_study",
    "simulate_pairwise_study",
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
