"""Annotators (local and crowd), the invite links of local ones, revoking an annotator, and who works on a study."""
from __future__ import annotations

import hashlib
from datetime import datetime
from typing import NamedTuple

from sqlalchemy import Engine, func, or_, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from empeval.server.annotation.handout import expire_active_of
from empeval.server.annotation.secrets import make_invite, secret_key
from empeval.server.annotation.study_log import WITHDRAWAL
from empeval.server.errors import NotFound
from empeval.server.store.engine import unit_of_work
from empeval.server.store.models import Annotator, Assignment, StudyLogEntry, StudyRevocation
from empeval.server.store.queries import now_utc, study_by_name
from empeval.server.store.statuses import AssignmentStatus
from empeval.server.store.storable import column_length, require_storable


def pseudonym_for(secret: str, provider: str, external_id: str) -> str:
    """A stable pseudonym: a keyed hash of the name or worker id, so exports never carry the raw id."""
    return f"{provider}-" + hashlib.sha256(f"{secret}|{provider}|{external_id}".encode()).hexdigest()[:12]


def get_or_create_annotator(engine: Engine, provider: str, pseudonym: str, *,
                            display_name: str | None = None) -> Annotator:
    """The annotator (provider, pseudonym), created on first use. Two callers creating the same annotator at
    once both get the one row: the loser of the race hits the unique constraint and reads the winner's."""
    for _ in range(2):
        with Session(engine, expire_on_commit=False) as session:
            found = session.scalar(select(Annotator).where(Annotator.provider == provider,
                                                           Annotator.pseudonym == pseudonym))
            if found is not None:
                return found
        try:
            with unit_of_work(engine) as session:
                annotator = Annotator(provider=provider, pseudonym=pseudonym, display_name=display_name)
                session.add(annotator)
                session.flush()
            return annotator
        except IntegrityError:  # created concurrently: read it again
            continue
    raise RuntimeError(f"could not read or create the {provider} annotator {pseudonym}")


def invite(engine: Engine, name: str, study: str, *, days: float = 30.0) -> tuple[Annotator, str]:
    """The annotator called `name` (created on first invite) and a fresh invite token for `study`."""
    require_storable(name, "the annotator name", limit=column_length(Annotator, "display_name"))
    require_storable(study, "the study name")
    secret = secret_key(engine)
    with Session(engine) as session:
        study_by_name(session, study)
    annotator = get_or_create_annotator(engine, "local", pseudonym_for(secret, "local", name), display_name=name)
    return annotator, make_invite(secret, annotator_id=annotator.id, study=study, days=days)


class Revocation(NamedTuple):
    annotator_id: int
    already: bool  # she was revoked there already: nothing changed but her active assignments
    expired: int  # active assignments expired now, each copied back to the pool


def revoke(engine: Engine, name: str, *, study: str | None = None, provider: str = "local",
           now: datetime | None = None) -> Revocation:
    """Revoke the annotator `name` (an invited name, or with `provider` a crowd worker's id) in `study`, or in every
    study when None. From then on she gets no assignment and her submissions are refused (handout.AccessRevoked);
    her active assignments expire now and copies go back to the pool; she keeps her seen contexts. Ratings she
    submitted before stay in the store: leaving them out is the analysis' decision."""
    pseudonym = pseudonym_for(secret_key(engine), provider, name)
    now = now or now_utc()
    with unit_of_work(engine) as session:
        annotator = session.scalar(select(Annotator).where(Annotator.provider == provider,
                                                           Annotator.pseudonym == pseudonym))
        if annotator is None:
            raise NotFound(f"no {provider} annotator {name!r}: check the name as it was invited (or the worker id "
                           f"and --provider for crowd workers)")
        if study is None:
            already = annotator.revoked_at is not None
            annotator.revoked_at = annotator.revoked_at or now
            expired = expire_active_of(session, annotator.id)
        else:
            study_id = study_by_name(session, study).id
            already = session.get(StudyRevocation, (study_id, annotator.id)) is not None
            if not already:
                session.add(StudyRevocation(study_id=study_id, annotator_id=annotator.id, revoked_at=now))
            expired = expire_active_of(session, annotator.id, study_id=study_id)
        return Revocation(annotator.id, already, expired)


class RosterLine(NamedTuple):
    """One annotator of a study as `empeval annotators list` shows her."""

    annotator_id: int
    pseudonym: str
    provider: str
    name: str | None  # the name she was invited under (None for crowd workers and withdrawn participants)
    done: int  # assignments submitted
    in_progress: int | None  # the id of the assignment she holds now, if any
    revoked: bool  # in this study or in every study
    withdrawn: bool  # `empeval annotators forget` took her out of this study


def study_roster(engine: Engine, study: str) -> list[RosterLine]:
    """Everyone handed an assignment of the study, or revoked in it, by pseudonym: two statements, the study and the
    roster, however many there are (NotFound when there is no such study)."""
    with Session(engine) as session:
        study_id = study_by_name(session, study).id
        in_study = or_(Annotator.id.in_(select(Assignment.annotator_id).where(Assignment.study_id == study_id)),
                       Annotator.id.in_(select(StudyRevocation.annotator_id)
                                        .where(StudyRevocation.study_id == study_id)))
        done = (select(func.count()).where(Assignment.study_id == study_id, Assignment.annotator_id == Annotator.id,
                                           Assignment.status == AssignmentStatus.SUBMITTED).scalar_subquery())
        active = (select(Assignment.id).where(Assignment.study_id == study_id, Assignment.annotator_id == Annotator.id,
                                              Assignment.status == AssignmentStatus.ASSIGNED)
                  .limit(1).scalar_subquery())
        revoked_here = (select(StudyRevocation.annotator_id).where(StudyRevocation.study_id == study_id,
                                                                   StudyRevocation.annotator_id == Annotator.id)
                        .exists())
        withdrawn = (select(StudyLogEntry.id).where(StudyLogEntry.study_id == study_id,
                                                    StudyLogEntry.annotator_id == Annotator.id,
                                                    StudyLogEntry.event == WITHDRAWAL).exists())
        rows = session.execute(
            select(Annotator.id, Annotator.pseudonym, Annotator.provider, Annotator.display_name, done, active,
                   or_(Annotator.revoked_at.is_not(None), revoked_here), withdrawn)
            .where(in_study).order_by(Annotator.pseudonym)).all()
        return [RosterLine(row[0], row[1], row[2], row[3], int(row[4]), row[5], bool(row[6]), bool(row[7]))
                for row in rows]
