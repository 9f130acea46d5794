"""A store with the bundled sample, stand-in systems with stored responses, and a Likert study recruited on
Prolific over them; the app around it, and the study link it answers."""
from __future__ import annotations

import pytest

from empeval.server.annotation.prolific import make_study_token
from empeval.server.annotation.secrets import secret_key
from empeval.server.web import create_app
from empeval.tasks.study_create import create_study
from empeval.tasks.study_file import parse_study
from tests.annotation.conftest import add_responses, sample_engine  # noqa: F401 - the fixture, used below

PROLIFIC_STUDY_ID = "5f0c1e2d3a4b5c6d7e8f9a0b"
OTHER_PROLIFIC_STUDY_ID = "60a1b2c3d4e5f60718293a4b"
COMPLETION_CODE = "C1A2B3C4"
PID = "5e9d8c7b6a5f4e3d2c1b0a99"
SESSION = "6b5a4f3e2d1c0b9a8f7e6d5c"
SYSTEMS = ["sys-a", "sys-b"]
CSRF = {"X-Requested-With": "empeval"}


def study_file(name: str = "pilot", *, recruitment: dict | None = None, count: int = 6) -> dict:
    return {"name": name, "seed": 1, "contexts": {"split": "test", "count": count},
            "systems": {"names": SYSTEMS}, "design": {"ratings_per_response": 2, "items_per_assignment": 3},
            "recruitment": recruitment if recruitment is not None else {
                "platform": "prolific", "prolific_study_id": PROLIFIC_STUDY_ID, "completion_code": COMPLETION_CODE}}


@pytest.fixture
def prolific_engine(sample_engine):  # noqa: F811 - pytest's fixture by name
    add_responses(sample_engine, SYSTEMS, 12)
    create_study(sample_engine, parse_study(study_file()))
    return sample_engine


@pytest.fixture
def prolific_app(prolific_engine):
    return create_app({"DATABASE_URL": prolific_engine.url.render_as_string(hide_password=False), "TESTING": True})


def link_path(engine, study: str = "pilot") -> str:
    """The path of the study's Prolific link (what `empeval prolific link` prints, without host and query)."""
    return f"/prolific/{make_study_token(secret_key(engine), study)}"


def ids(pid: str = PID, study_id: str = PROLIFIC_STUDY_ID, session: str = SESSION) -> dict[str, str]:
    return {"PROLIFIC_PID": pid, "STUDY_ID": study_id, "SESSION_ID": session}
