"""Live crowd units: a chat study's conversations held on a crowd platform's task page (Mephisto's router), whose
turns the empeval server answers.

A static crowd unit needs nothing from this server until ingest: the page gets its items from the job's
items.jsonl and hands the answers back to the platform. A chat unit cannot: every turn is a live model call that
this server makes and stores. So the job (tasks/crowd/jobs.py) gives each chat unit a **unit token**, signed with
the store's secret, that names one assignment of one study, the job's provider and the suffix Mephisto adds to a
worker's name on that provider; the page sends it with each live call (the `X-Empeval-Unit` header) and with it
the worker's platform id as the page knows it (`X-Empeval-Worker`).

The worker becomes the annotator ingest will store her work under: Annotator(provider, pseudonym_for(secret,
provider, worker id + suffix)), the pseudonym of the very name Mephisto records (ingest reads it from the run's
database). Her first turn claims the assignment for her with the hand-out's own claim (no local deadline: the
platform times crowd work), so the seen-context and one-active-assignment keys hold for crowd chats as for local
ones; ingest later finds the claim already hers and stores the submission on it. Whoever else presents the token
(a second worker given the same unit after the first returned it) is refused with a message, never handed her
conversation.

A token authorises nothing but its assignment's live routes; it expires with the job (its lifetime plus the time
a worker has for a unit).
"""
from __future__ import annotations

import time
import unicodedata
from dataclasses import dataclass
from typing import Literal

from itsdangerous import BadSignature, URLSafeSerializer
from sqlalchemy import Engine
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from empeval.server.annotation.annotators import get_or_create_annotator, pseudonym_for
from empeval.server.annotation.handout import claim, contexts_seen_before, ensure_may_work
from empeval.server.annotation.kinds import annotation_kind
from empeval.server.errors import Conflict, Forbidden, NotFound
from empeval.server.store.engine import unit_of_work
from empeval.server.store.models import Assignment, Study
from empeval.server.store.queries import now_utc
from empeval.server.store.statuses import AssignmentStatus
from empeval.server.store.storable import MAX_ROW_ID

UNIT_SALT = "crowd-unit"
MAX_WORKER_ID_CHARS = 128


class InvalidUnit(Forbidden):
    """A unit token that is altered, foreign, expired, or presented for another assignment; the message says which."""


@dataclass(frozen=True)
class CrowdUnitToken:
    """What a unit token carries."""

    assignment_id: int
    study: str
    job_id: str
    provider: str
    name_suffix: str  # what the platform appends to a worker's id in the name it records ("_sandbox" on mock)
    expires: float  # Unix seconds


def make_unit_token(secret: str, unit: CrowdUnitToken) -> str:
    """A signed token for one crowd unit's live routes (the store's secret; a new secret voids it)."""
    return URLSafeSerializer(secret, salt=UNIT_SALT).dumps(
        {"a": unit.assignment_id, "s": unit.study, "j": unit.job_id, "p": unit.provider, "x": unit.name_suffix,
         "exp": int(unit.expires)})


def read_unit_token(secret: str, token: str, *, now: float | None = None) -> CrowdUnitToken:
    """The unit a valid token names; InvalidUnit says why one is refused."""
    try:
        payload = URLSafeSerializer(secret, salt=UNIT_SALT).loads(token)
    except BadSignature:
        raise InvalidUnit("the task's unit token is not valid (altered, truncated, or from another installation)") \
            from None
    if not isinstance(payload, dict) or not {"a", "s", "j", "p", "x", "exp"} <= set(payload):
        raise InvalidUnit("the task's unit token is not valid")
    unit = CrowdUnitToken(assignment_id=int(payload["a"]), study=str(payload["s"]), job_id=str(payload["j"]),
                          provider=str(payload["p"]), name_suffix=str(payload["x"]), expires=float(payload["exp"]))
    if (time.time() if now is None else now) > unit.expires:
        raise InvalidUnit("this task has expired: its crowd run is over")
    return unit


def checked_worker_id(worker: str | None) -> str:
    """The worker's platform id as the page sends it: 1 to MAX_WORKER_ID_CHARS printable characters."""
    worker = (worker or "").strip()
    if not worker:
        raise InvalidUnit("the task page did not say which worker is at work (no X-Empeval-Worker): reload the task")
    if len(worker) > MAX_WORKER_ID_CHARS or any(unicodedata.category(c)[0] in "CZ" and c != " " for c in worker):
        raise InvalidUnit(f"the worker id must be 1 to {MAX_WORKER_ID_CHARS} printable characters")
    return worker


OnOpen = Literal["claim", "show", "refuse"]


def unit_annotator(engine: Engine, secret: str, unit: CrowdUnitToken, assignment_id: int, worker: str, *,
                   on_open: OnOpen) -> tuple[int, str]:
    """(annotator_id, study) of the worker at a crowd unit, for its live routes.

    The token must name this assignment. While the assignment is still open, `on_open` says what happens: "claim"
    (her first turn) claims it for her in one transaction, as ingest claims crowd work (no local deadline), refused
    (Conflict) when she was shown one of its contexts elsewhere in the study or holds another of its assignments;
    "show" leaves it open (reading its state); "refuse" is NotFound (nothing to end yet). Held by someone else, or
    submitted: Conflict. StudyClosed / AccessRevoked when she may not work on the study."""
    if not 0 < assignment_id <= MAX_ROW_ID or unit.assignment_id != assignment_id:
        raise InvalidUnit(f"this task's unit token is for assignment {unit.assignment_id}, not {assignment_id}")
    annotator_id = get_or_create_annotator(
        engine, unit.provider, pseudonym_for(secret, unit.provider, checked_worker_id(worker) + unit.name_suffix)).id
    with Session(engine) as session:
        row = session.get(Assignment, assignment_id)
        study = session.get(Study, row.study_id) if row is not None else None
        if row is None or study is None or study.name != unit.study:
            raise NotFound(f"no assignment {assignment_id} in study {unit.study!r}")
        ensure_may_work(session, study, annotator_id)
        if row.annotator_id == annotator_id and row.status == AssignmentStatus.ASSIGNED:
            return annotator_id, study.name
        if row.status != AssignmentStatus.OPEN:
            raise Conflict("this task was started by another worker, or is finished: return it so that it goes to "
                           "someone else")
        if on_open == "show":
            return annotator_id, study.name
        if on_open != "claim":
            raise NotFound("this task's conversation has not started: send your first message")
        kind = annotation_kind(study.config.kind)
        seen = contexts_seen_before(session, kind, assignment_id, annotator_id)
    if seen:
        raise Conflict("you have already talked about this task's situation in another task of this study: return "
                       "this task so that it goes to someone else")
    try:
        with unit_of_work(engine) as session:
            claimed = claim(session, kind, assignment_id, annotator_id, now=now_utc(), minutes=None)
    except IntegrityError:
        raise Conflict("you already hold another unfinished task of this study, or have seen this one's situation: "
                       "finish or return the other first") from None
    if not claimed:  # another worker's first turn won the race
        with Session(engine) as session:
            holder = session.get_one(Assignment, assignment_id)
            if holder.annotator_id != annotator_id:
                raise Conflict("this task was started by another worker: return it so that it goes to someone else")
    return annotator_id, study.name
