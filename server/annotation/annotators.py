"""Annotators (local and crowd) and the invite links of local ones."""
from __future__ import annotations

import hashlib

from sqlalchemy import Engine, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from server.annotation.secrets import make_invite, secret_key
from server.store.engine import unit_of_work
from server.store.models import Annotator
from server.store.queries import study_by_name


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
    secret = secret_key(engine)
    with Session(engine) as session:
        study_by_name(session, study)
    annotator = get_or_create_annotator(engine, "local", pseudonym_for(secret, "local", name), display_name=name)
    return annotator, make_invite(secret, annotator_id=annotator.id, study=study, days=days)
