"""Local annotators and their invite links."""
from __future__ import annotations

import hashlib

from sqlalchemy import Engine, select

from server.annotation.secrets import make_invite, secret_key
from server.store.engine import unit_of_work
from server.store.models import Annotator
from server.store.queries import study_by_name


def pseudonym_for(secret: str, provider: str, external_id: str) -> str:
    """A stable pseudonym: a keyed hash of the name or worker id, so exports never carry the raw id."""
    return f"{provider}-" + hashlib.sha256(f"{secret}|{provider}|{external_id}".encode()).hexdigest()[:12]


def invite(engine: Engine, name: str, study: str, *, days: float = 30.0) -> tuple[Annotator, str]:
    """The annotator called `name` (created on first invite) and a fresh invite token for `study`."""
    secret = secret_key(engine)
    pseudonym = pseudonym_for(secret, "local", name)
    with unit_of_work(engine) as session:
        study_by_name(session, study)
        annotator = session.scalar(select(Annotator).where(Annotator.provider == "local",
                                                           Annotator.pseudonym == pseudonym))
        if annotator is None:
            annotator = Annotator(provider="local", pseudonym=pseudonym, display_name=name)
            session.add(annotator)
            session.flush()
    return annotator, make_invite(secret, annotator_id=annotator.id, study=study, days=days)
