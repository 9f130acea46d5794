"""The study kinds' names in the public face of ``empeval.analysis`` (its ``__init__`` lists them in ``__all__``
and imports this module on first use of one of them). A kind that adds a public name adds it here, so that the
shared package never names a kind's module."""

from __future__ import annotations

from empeval.analysis.kinds.likert.load import read_export, tidy_from_export
from empeval.analysis.kinds.likert.quality import flagged_annotators, rater_quality
from empeval.analysis.kinds.pairwise.schema import read_judgments
from empeval.analysis.kinds.pairwise.tables import pairwise_tables
from empeval.analysis.simulate.likert import simulate_study
from empeval.analysis.simulate.pairwise import simulate_pairwise_study

__all__ = ["flagged_annotators", "pairwise_tables", "rater_quality", "read_export", "read_judgments",
           "simulate_pairwise_study", "simulate_study", "tidy_from_export"]
