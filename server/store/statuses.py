"""The states an assignment and a study go through, as types: the ORM maps the columns to these enums and the hot
path's SQL text is written from them, so a status is spelt once (the assignment table's CHECK constraint lists the
same values, from here; tests/store/test_statuses.py finds any status spelt as a bare string elsewhere).

An assignment is `open` in the pool, `assigned` while an annotator works on it (the one active state: at most one
per study and annotator, a partial unique index), `submitted` once its answers are stored, and `expired` when its
deadline passed first (a copy with the same items goes back to the pool). A study is `draft` until created whole,
`open` while it takes work and `closed` once the researcher closes it. A rater's qualification in a study that has
one is `pending` until she has answered its gold items, then `passed` or `failed` for good (only these two are
stored, one outcome per rater and study).

>>> AssignmentStatus.ASSIGNED == "assigned", f"status = '{AssignmentStatus.OPEN}'"
(True, "status = 'open'")
>>> [status.value for status in StudyStatus]
['draft', 'open', 'closed']
"""
from __future__ import annotations

from enum import StrEnum


class AssignmentStatus(StrEnum):
    OPEN = "open"
    ASSIGNED = "assigned"
    SUBMITTED = "submitted"
    EXPIRED = "expired"


class StudyStatus(StrEnum):
    DRAFT = "draft"
    OPEN = "open"
    CLOSED = "closed"


class QualificationStatus(StrEnum):
    PENDING = "pending"
    PASSED = "passed"
    FAILED = "failed"


# The outcomes a qualification_outcome row may hold: a pending qualification has no row.
DECIDED = (QualificationStatus.PASSED, QualificationStatus.FAILED)


def sql_values(statuses: type[StrEnum]) -> str:
    """The values of an enum as a SQL list, for a CHECK constraint: `'a', 'b'`.

    >>> sql_values(StudyStatus)
    "'draft', 'open', 'closed'"
    """
    return ", ".join(f"'{status.value}'" for status in statuses)
