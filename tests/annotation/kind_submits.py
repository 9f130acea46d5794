"""The submission lifecycle as the tests drive it per kind: each kind's validator and schema through the one lifecycle
(server.annotation.submission) and envelope (submission_schema), named as the tests read them."""
from __future__ import annotations

from typing import Any

from empeval.server.annotation.kinds import annotation_kind
from empeval.server.annotation.submission import validate_submission
from empeval.server.annotation.submission_schema import submission_schema

LIKERT = annotation_kind("likert")
PAIRWISE = annotation_kind("pairwise")


def validate_likert(payload: Any, expected: Any):
    """A Likert body checked against one assignment's ExpectedRatings."""
    return validate_submission(payload, LIKERT, expected)


def validate_pairwise(payload: Any, expected: Any):
    """An A/B body checked against one assignment's ExpectedChoices."""
    return validate_submission(payload, PAIRWISE, expected)


def likert_schema(expected: Any | None = None) -> dict:
    return submission_schema(LIKERT, expected)


def pairwise_schema(expected: Any | None = None) -> dict:
    return submission_schema(PAIRWISE, expected)


BEST_WORST = annotation_kind("best_worst")


def validate_best_worst(payload: Any, expected: Any):
    """A best-worst body checked against one assignment's ExpectedPicks."""
    return validate_submission(payload, BEST_WORST, expected)


def best_worst_schema(expected: Any | None = None) -> dict:
    return submission_schema(BEST_WORST, expected)
