"""Fixtures for the analysis tests: published reference data and one simulated study with known truth."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from empeval.analysis.kinds.likert.load import tidy_from_export
from empeval.analysis.simulate.likert import simulate_study

NAN = np.nan

# Krippendorff (2011), "Computing Krippendorff's Alpha-Reliability", example C: 4 observers x 12 units,
# values 1-5, with missing values. Published: nominal 0.743, ordinal 0.815, interval 0.849.
KRIPPENDORFF_2011 = np.array([
    [1, 2, 3, 3, 2, 1, 4, 1, 2, NAN, NAN, NAN],
    [1, 2, 3, 3, 2, 2, 4, 1, 2, 5, NAN, 3],
    [NAN, 3, 3, 3, 2, 3, 4, 2, 2, 5, 1, NAN],
    [1, 2, 3, 3, 2, 4, 4, 1, 2, 5, 1, NAN],
])

# Fleiss (1971), Table 1: 30 patients x 5 diagnoses (depression, personality disorder, schizophrenia, neurosis,
# other); each cell is the number of the 6 psychiatrists who chose that diagnosis. Published kappa: 0.430.
FLEISS_1971 = np.array([
    [0, 0, 0, 6, 0], [0, 3, 0, 0, 3], [0, 1, 4, 0, 1], [0, 0, 0, 0, 6], [0, 3, 0, 3, 0],
    [2, 0, 4, 0, 0], [0, 0, 4, 0, 2], [2, 0, 3, 1, 0], [2, 0, 0, 4, 0], [0, 0, 0, 0, 6],
    [1, 0, 0, 5, 0], [1, 1, 0, 4, 0], [0, 3, 3, 0, 0], [1, 0, 0, 5, 0], [0, 2, 0, 3, 1],
    [0, 0, 5, 0, 1], [3, 0, 0, 1, 2], [5, 1, 0, 0, 0], [0, 2, 0, 4, 0], [1, 0, 2, 0, 3],
    [0, 0, 0, 0, 6], [0, 1, 0, 5, 0], [0, 2, 0, 1, 3], [2, 0, 0, 4, 0], [1, 0, 0, 4, 1],
    [0, 5, 0, 1, 0], [4, 0, 0, 0, 2], [0, 2, 0, 4, 0], [1, 0, 5, 0, 0], [0, 0, 0, 0, 6],
])

# Shrout & Fleiss (1979), Table 2: 6 targets x 4 judges. Published ICC(1,1) .17, ICC(2,1) .29, ICC(3,1) .71,
# ICC(1,4) .44, ICC(2,4) .62, ICC(3,4) .91.
SHROUT_FLEISS_1979 = np.array([
    [9, 2, 5, 8], [6, 1, 3, 2], [8, 4, 6, 8], [7, 1, 2, 6], [10, 5, 6, 9], [6, 2, 4, 7],
])

# R's `sleep` data (Student 1908): extra hours of sleep of 10 patients under two drugs.
SLEEP_GROUP_1 = np.array([0.7, -1.6, -0.2, -1.2, -0.1, 3.4, 3.7, 0.8, 0.0, 2.0])
SLEEP_GROUP_2 = np.array([1.9, 0.8, 1.1, 0.1, -0.1, 4.4, 5.5, 1.6, 4.6, 3.4])


def long_ratings(matrix: np.ndarray, *, criterion: str = "empathy", system: str = "sys") -> pd.DataFrame:
    """A tidy ratings table from a raters x units matrix (NaN = not rated): one item per unit."""
    rows = []
    for rater, scores in enumerate(np.asarray(matrix, dtype=float)):
        for unit, score in enumerate(scores):
            if not np.isnan(score):
                rows.append({"item": f"u{unit:03d}", "context": f"c{unit:03d}", "system": system,
                             "annotator": f"r{rater}", "criterion": criterion, "score": score, "is_control": False})
    return pd.DataFrame(rows)


@pytest.fixture
def krippendorff_2011() -> np.ndarray:
    return KRIPPENDORFF_2011.copy()


@pytest.fixture
def fleiss_1971() -> np.ndarray:
    return FLEISS_1971.copy()


@pytest.fixture
def shrout_fleiss_1979() -> np.ndarray:
    return SHROUT_FLEISS_1979.copy()


@pytest.fixture
def sleep() -> tuple[np.ndarray, np.ndarray]:
    return SLEEP_GROUP_1.copy(), SLEEP_GROUP_2.copy()


@pytest.fixture
def to_long():
    """Turn a raters x units matrix into a tidy ratings table (see ``long_ratings``)."""
    return long_ratings


@pytest.fixture(scope="session")
def simulated():
    """The acceptance study: three systems with known differences, 12 careful raters, two random clickers and
    one straight-liner."""
    return simulate_study(seed=0)


@pytest.fixture(scope="session")
def simulated_ratings(simulated) -> pd.DataFrame:
    return tidy_from_export(simulated.export)


@pytest.fixture
def export_rows(simulated) -> pd.DataFrame:
    """A small slice of a valid export, as text the way a CSV reader sees it."""
    return simulated.export.head(12).astype(str).reset_index(drop=True)
