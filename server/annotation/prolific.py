"""Running a study on Prolific: one signed study link, the participants it admits, the completion code they get
after a valid submit (or, when they fail the study's qualification, its screened-out or failed-checks code), and
releasing the work of those who returned or timed out.

Prolific sends every participant to the study's one link, `https://HOST/prolific/<study token>?PROLIFIC_PID=
{{%PROLIFIC_PID%}}&STUDY_ID={{%STUDY_ID%}}&SESSION_ID={{%SESSION_ID%}}`, filling in the three ids (24 lower-case
hex characters each). The study token is signed with the installation's secret (server.annotation.secrets), so
nobody can make a link to another study; the link only admits the Prolific study named in the study file's
[recruitment] section. A participant is an annotator of provider "prolific" whose pseudonym is the keyed hash
of her Prolific id (annotators.pseudonym_for, as for crowd workers): the id itself is never stored, and the
same id finds the same annotator on every visit (the store's unique (provider, pseudonym) key keeps two first
visits at once from making two).

Whoever has the study link can make up participant ids, so the link alone must not let one client take the
study's work (a script once claimed 46 of 46 assignments in 94 requests). Four rules, each kept where it cannot be
bypassed: being let in holds nothing, an assignment is claimed only when she starts (the task page asks for her
consent first and claims with `next` once she accepts; declining claims nothing); participants new to the
installation are let in at most recruitment.admissions_per_minute times per client address and minute
(AdmissionLimiter, 429 beyond); Prolific participants hold or have submitted at most the study's
recruitment.places assignments at once, checked in the claim's own UPDATE (handout, hot_sql.room_on_prolific_sql), as
Prolific never lets more participants take part at once; and `prolific sync` releases the work of those Prolific
says returned or timed out and reports the participants Prolific does not know (made-up ids), releasing theirs with
--release-unknown. A participant who has submitted gets her code again and no more work, in the claim's UPDATE too
(hot_sql.done_on_prolific_sql).

>>> token = make_study_token("s" * 32, "pilot")
>>> read_study_token("s" * 32, token)
'pilot'
>>> completion_after_submit(Recruitment("prolific", "a" * 24, "C1A2B3C4"), PROVIDER)
{'completion': {'code': 'C1A2B3C4', 'url': 'https://app.prolific.com/submissions/complete?cc=C1A2B3C4'}}
>>> completion_after_submit(Recruitment("prolific", "a" * 24, "C1A2B3C4"), "local")
{}
"""
from __future__ import annotations

import re
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import NamedTuple

from itsdangerous import BadSignature, URLSafeSerializer
from sqlalchemy import Engine, select
from sqlalchemy.orm import Session

from empeval.server.annotation.annotators import get_or_create_annotator, pseudonym_for
from empeval.server.annotation.handout import ensure_may_work, refuse_unless_may_work, release
from empeval.server.annotation.secrets import make_invite, secret_key
from empeval.server.errors import BadInput, EmpevalError, Forbidden, NotFound
from empeval.server.store.engine import unit_of_work
from empeval.server.store.models import Annotator, Assignment
from empeval.server.store.qualification_tables import QualificationOutcome
from empeval.server.store.queries import study_by_name
from empeval.server.store.statuses import AssignmentStatus, QualificationStatus
from empeval.server.store.study_parts import Recruitment

PROVIDER = "prolific"
PARAMETERS = ("PROLIFIC_PID", "STUDY_ID", "SESSION_ID")
PROLIFIC_ID = re.compile(r"[0-9a-f]{24}")
COMPLETION_URL = "https://app.prolific.com/submissions/complete?cc={code}"
# Prolific times a submission out after its maximum time, always under 24 hours (Prolific's API reference,
# "Submission object"); the invite cookie a link sets need not outlive that.
INVITE_DAYS = 1.0
# The statuses after which a participant will not come back to her assignment (Prolific's API reference).
GONE_STATUSES = frozenset({"RETURNED", "TIMED-OUT"})
_TOKEN_SALT = "prolific-study"


class InvalidStudyLink(Forbidden):
    """A study link whose token is altered, truncated or from another installation."""


class WrongProlificStudy(Forbidden):
    """The link was opened from a Prolific study other than the one the study file names."""


class ProlificVisit(NamedTuple):
    """The three ids Prolific put in the link, each checked to be 24 lower-case hex characters."""

    participant_id: str
    study_id: str
    session_id: str


class Admission(NamedTuple):
    """A participant let in: her annotator id and the invite token her browser gets as its cookie; `completion`
    (what completion_after_submit gives) when she has already submitted her assignment of this study, in which
    case she is given the code again rather than more work (Prolific pays one submission per participant), or when
    she failed the study's qualification (completion_after_failure: `outcome` then says which code it is)."""

    annotator_id: int
    invite: str
    completion: dict[str, dict[str, str]] | None = None
    outcome: str = "completed"


def make_study_token(secret: str, study: str) -> str:
    """The signed token of the study link: names the study, and only this installation's secret makes one."""
    return URLSafeSerializer(secret, salt=_TOKEN_SALT).dumps({"s": study})


def read_study_token(secret: str, token: str) -> str:
    """The study a valid study-link token names; InvalidStudyLink otherwise."""
    try:
        payload = URLSafeSerializer(secret, salt=_TOKEN_SALT).loads(token)
    except BadSignature:
        raise InvalidStudyLink("this study link is not valid (altered, truncated, or from another installation): "
                               "go back to Prolific and open the study from there") from None
    if not isinstance(payload, dict) or not isinstance(payload.get("s"), str):
        raise InvalidStudyLink("this study link is not valid: go back to Prolific and open the study from there")
    return payload["s"]


def study_link(base_url: str, token: str) -> str:
    """The URL to paste into Prolific's study settings: Prolific fills in the three {{%...%}} placeholders."""
    query = "&".join(f"{name}={{{{%{name}%}}}}" for name in PARAMETERS)
    return f"{base_url.rstrip('/')}/prolific/{token}?{query}"


def read_visit(arguments: Mapping[str, Sequence[str]]) -> ProlificVisit:
    """The three Prolific ids of a link's query (name -> every value given); BadInput naming the parameter that
    is missing, repeated or not 24 lower-case hex characters."""
    values = []
    for name in PARAMETERS:
        given = list(arguments.get(name, ()))
        if not given:
            raise BadInput(f"the link has no {name}: open the study from Prolific, which adds it (in the study's "
                           f"settings the URL must end with ?{name}={{{{%{name}%}}}}...)")
        if len(given) > 1:
            raise BadInput(f"the link gives {name} {len(given)} times; it must be given once")
        if not PROLIFIC_ID.fullmatch(given[0]):
            raise BadInput(f"{name} must be a Prolific id (24 characters 0-9, a-f), got {given[0][:40]!r}: open "
                           "the study from Prolific rather than typing the address")
        values.append(given[0])
    return ProlificVisit(*values)


class AdmissionLimiter:
    """At most `limit` admissions per key (a study and a client address) within `window` seconds, a sliding window in
    this process's memory; thread-safe; remembers at most `max_keys` keys (those quiet the longest are forgotten
    first). Each process of `empeval serve` keeps its own, so with W worker processes an address may be let in up to
    W times `limit` (they share nothing but the store).

    >>> limiter = AdmissionLimiter()
    >>> [limiter.take(("pilot", "10.0.0.1"), 2, now=t) for t in (0.0, 1.0, 2.0, 61.0)]
    [0.0, 0.0, 59.0, 0.0]
    """

    def __init__(self, window: float = 60.0, max_keys: int = 10_000):
        self.window, self.max_keys = window, max_keys
        self._taken: dict[tuple[str, str], deque[float]] = {}
        self._lock = threading.Lock()

    def take(self, key: tuple[str, str], limit: int, now: float | None = None) -> float:
        """Count one admission for `key` and return 0 when it is within `limit`; else count nothing and return the
        seconds until one more fits."""
        now = time.monotonic() if now is None else now
        with self._lock:
            taken = self._taken.pop(key, None) or deque()
            while taken and now - taken[0] >= self.window:
                taken.popleft()
            wait = self.window - (now - taken[0]) if len(taken) >= limit else 0.0
            if not wait:
                taken.append(now)
            self._taken[key] = taken  # re-inserted: the dict stays ordered by last use
            while len(self._taken) > self.max_keys:
                del self._taken[next(iter(self._taken))]
            return wait


class TooManyNewcomers(EmpevalError):
    """More new participants from one address in a minute than the study's recruitment.admissions_per_minute."""

    http_status = 429

    def __init__(self, message: str, retry_after: int):
        self.retry_after = retry_after
        super().__init__(message)


def limit_newcomers(limiter: AdmissionLimiter, address: str) -> Callable[[str, Recruitment], None]:
    """What admit calls before letting in a participant new to the installation: TooManyNewcomers when `address` has
    had the study's recruitment.admissions_per_minute new ones in the last minute."""
    def check(study: str, recruitment: Recruitment) -> None:
        wait = limiter.take((study, address), recruitment.admissions_per_minute)
        if wait:
            raise TooManyNewcomers(f"too many new participants from your network in the last minute: wait "
                                   f"{int(wait) + 1} s, then open the study from Prolific again",
                                   retry_after=int(wait) + 1)
    return check


def admit(engine: Engine, secret: str, study: str, visit: ProlificVisit,
          newcomer: Callable[[str, Recruitment], None] | None = None) -> Admission:
    """Let a Prolific participant into `study`: the study must run on Prolific under visit.study_id (else
    WrongProlificStudy, or Forbidden when it is not a Prolific study), be open, and she not revoked (StudyClosed,
    AccessRevoked). Her annotator is found by the keyed hash of her Prolific id, created on her first visit, once
    `newcomer` (limit_newcomers) lets her in. If she has submitted an assignment of this study already, the admission
    carries her completion code. Being let in holds nothing: an assignment is claimed when she starts (the task
    page's `next`, after her consent)."""
    with Session(engine) as session:
        study_row = study_by_name(session, study)
        recruitment = study_row.config.recruitment
        if recruitment.platform != PROVIDER:
            raise Forbidden(f"study {study!r} does not recruit on Prolific (its study file's recruitment.platform is "
                            f"{recruitment.platform!r})")
        if visit.study_id != recruitment.prolific_study_id:
            raise WrongProlificStudy(f"STUDY_ID {visit.study_id} is not the Prolific study this link is for: go back "
                                     "to Prolific and open the study from its own page")
        refuse_unless_may_work(study_row, revoked=False)
        pseudonym = pseudonym_for(secret, PROVIDER, visit.participant_id)
        known = session.scalar(select(Annotator.id).where(Annotator.provider == PROVIDER,
                                                          Annotator.pseudonym == pseudonym))
    if known is None and newcomer is not None:
        newcomer(study, recruitment)
    annotator = get_or_create_annotator(engine, PROVIDER, pseudonym)
    with Session(engine) as session:
        study_row = study_by_name(session, study)
        ensure_may_work(session, study_row, annotator.id)
        submitted = session.scalar(select(Assignment.id).where(
            Assignment.study_id == study_row.id, Assignment.annotator_id == annotator.id,
            Assignment.status == AssignmentStatus.SUBMITTED).limit(1))
        failed = session.scalar(select(QualificationOutcome.id).where(
            QualificationOutcome.study_id == study_row.id, QualificationOutcome.annotator_id == annotator.id,
            QualificationOutcome.status == QualificationStatus.FAILED))
        qualification = study_row.config.qualification
    invite = make_invite(secret, annotator_id=annotator.id, study=study, days=INVITE_DAYS)
    if submitted is not None:
        return Admission(annotator.id, invite, completion_after_submit(recruitment, PROVIDER) or None)
    if failed is not None and qualification is not None:  # she failed the qualification: her code, no work
        completion = completion_after_failure(recruitment, PROVIDER, qualification.code_on_failure)
        return Admission(annotator.id, invite, completion or None, qualification.code_on_failure)
    return Admission(annotator.id, invite)


def completion_after_submit(recruitment: Recruitment, provider: str | None) -> dict[str, dict[str, str]]:
    """What a valid submit's receipt adds for a Prolific participant: {"completion": {"code", "url"}} with the
    study's completion code and Prolific's completion URL; {} for anyone else or a study without a code."""
    if provider != PROVIDER or recruitment.platform != PROVIDER or not recruitment.completion_code:
        return {}
    code = recruitment.completion_code
    return {"completion": {"code": code, "url": COMPLETION_URL.format(code=code)}}


def completion_after_failure(recruitment: Recruitment, provider: str | None, outcome: str
                             ) -> dict[str, dict[str, str]]:
    """What a Prolific participant who failed the study's qualification is given: {"completion": {"code", "url",
    "outcome"}} with the study's code for `outcome` ("screened_out" or "failed_checks", the qualification's
    code_on_failure) and Prolific's completion URL; {} for anyone else or a study without that code.

    >>> completion_after_failure(Recruitment("prolific", "a" * 24, "C1", screened_out_code="S0"), PROVIDER,
    ...                          "screened_out")["completion"]["code"]
    'S0'
    """
    code = recruitment.code_for(outcome)
    if provider != PROVIDER or recruitment.platform != PROVIDER or not code:
        return {}
    return {"completion": {"code": code, "url": COMPLETION_URL.format(code=code), "outcome": outcome}}


class Released(NamedTuple):
    """What releasing the work of departed participants did."""

    participants: int  # distinct participant ids given
    known: int  # of them, annotators this installation has seen
    released: list[int]  # ids of the assignments put back in the pool


def release_departed(engine: Engine, study: str, participant_ids: Iterable[str]) -> Released:
    """Put back in the pool the assignments these Prolific participants hold unsubmitted in `study` (they
    returned their submission or timed out on Prolific, so they will not finish it), in one transaction, with
    handout.release: the claim is undone as if it had never been made. Ids that are not Prolific ids are
    refused (BadInput); participants never seen here are counted and skipped."""
    ids = sorted(set(participant_ids))
    for participant_id in ids:
        if not PROLIFIC_ID.fullmatch(participant_id):
            raise BadInput(f"{participant_id[:40]!r} is not a Prolific participant id (24 characters 0-9, a-f)")
    secret = secret_key(engine)
    pseudonyms = [pseudonym_for(secret, PROVIDER, participant_id) for participant_id in ids]
    released: list[int] = []
    with unit_of_work(engine) as session:
        study_id = study_by_name(session, study).id
        annotators = session.scalars(select(Annotator.id).where(Annotator.provider == PROVIDER,
                                                                Annotator.pseudonym.in_(pseudonyms))).all()
        held = session.execute(select(Assignment.id, Assignment.annotator_id)
                               .where(Assignment.study_id == study_id, Assignment.status == AssignmentStatus.ASSIGNED,
                                      Assignment.annotator_id.in_(annotators))
                               .order_by(Assignment.id)).all()
        for assignment_id, annotator_id in held:
            if annotator_id is not None and release(session, assignment_id, annotator_id):
                released.append(assignment_id)
    return Released(len(ids), len(annotators), released)


class Unknown(NamedTuple):
    """A participant of a study whom Prolific does not know: an id made up, as no one Prolific sent can have."""

    pseudonym: str
    held: list[int]  # the assignments she holds unsubmitted
    submitted: int  # how many she has submitted


def unknown_to_prolific(engine: Engine, study: str, participant_ids: Iterable[str]) -> list[Unknown]:
    """The Prolific participants of `study` (holding or having submitted its work) whose Prolific id is none of
    `participant_ids` (every participant of the study Prolific lists, whatever her submission's status: Prolific
    lists a participant as soon as she starts, before its link brings her here), by pseudonym: the ids themselves are
    not stored, so they are named by pseudonym only."""
    secret = secret_key(engine)
    known = {pseudonym_for(secret, PROVIDER, participant_id) for participant_id in participant_ids}
    with Session(engine) as session:
        study_id = study_by_name(session, study).id
        rows = session.execute(select(Annotator.pseudonym, Assignment.id, Assignment.status)
                               .join(Assignment, Assignment.annotator_id == Annotator.id)
                               .where(Annotator.provider == PROVIDER, Assignment.study_id == study_id,
                                      Assignment.status.in_([AssignmentStatus.ASSIGNED, AssignmentStatus.SUBMITTED]))
                               .order_by(Annotator.pseudonym, Assignment.id)).all()
    unknown: dict[str, Unknown] = {}
    for pseudonym, assignment_id, status in rows:
        if pseudonym in known:
            continue
        entry = unknown.setdefault(pseudonym, Unknown(pseudonym, [], 0))
        if status == AssignmentStatus.ASSIGNED:
            entry.held.append(assignment_id)
        else:
            unknown[pseudonym] = entry._replace(submitted=entry.submitted + 1)
    return list(unknown.values())


def release_unknown(engine: Engine, study: str, unknown: Iterable[Unknown]) -> list[int]:
    """Put back in the pool the assignments these participants Prolific does not know hold unsubmitted in `study`
    (handout.release, in one transaction); the ids released."""
    released: list[int] = []
    with unit_of_work(engine) as session:
        study_id = study_by_name(session, study).id
        pseudonyms = [entry.pseudonym for entry in unknown]
        held = session.execute(select(Assignment.id, Assignment.annotator_id)
                               .join(Annotator, Annotator.id == Assignment.annotator_id)
                               .where(Assignment.study_id == study_id, Assignment.status == AssignmentStatus.ASSIGNED,
                                      Annotator.provider == PROVIDER, Annotator.pseudonym.in_(pseudonyms))
                               .order_by(Assignment.id)).all()
        for assignment_id, annotator_id in held:
            if annotator_id is not None and release(session, assignment_id, annotator_id):
                released.append(assignment_id)
    return released


class Pseudonym(NamedTuple):
    participant_id: str
    pseudonym: str  # the annotator's name in empeval's exports, report and commands
    seen: bool  # whether this participant has come through a study link of this installation


def pseudonyms_of(engine: Engine, participant_ids: Iterable[str]) -> list[Pseudonym]:
    """The pseudonym each Prolific participant id has (or would have) here, in the order given, so a rater the
    report flags can be found on Prolific; BadInput for an id that is not a Prolific id."""
    ids = list(participant_ids)
    for participant_id in ids:
        if not PROLIFIC_ID.fullmatch(participant_id):
            raise BadInput(f"{participant_id[:40]!r} is not a Prolific participant id (24 characters 0-9, a-f)")
    secret = secret_key(engine)
    named = {participant_id: pseudonym_for(secret, PROVIDER, participant_id) for participant_id in ids}
    with Session(engine) as session:
        seen = set(session.scalars(select(Annotator.pseudonym).where(Annotator.provider == PROVIDER,
                                                                     Annotator.pseudonym.in_(named.values()))))
    return [Pseudonym(participant_id, named[participant_id], named[participant_id] in seen) for participant_id in ids]


def require_prolific_study(engine: Engine, study: str) -> Recruitment:
    """The recruitment of `study` when it runs on Prolific; NotFound or BadInput saying what to change."""
    with Session(engine) as session:
        recruitment = study_by_name(session, study).config.recruitment
    if recruitment.platform != PROVIDER:
        raise BadInput(f"study {study!r} does not recruit on Prolific: its study file needs a [recruitment] section "
                       'with platform = "prolific", prolific_study_id and completion_code (create the study again)')
    if recruitment.prolific_study_id is None:
        raise NotFound(f"study {study!r} names no Prolific study id")
    return recruitment
