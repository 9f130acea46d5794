"""The stores of the annotation tests (a SQLite file, then a real PostgreSQL database, with the bundled sample and a
study over stand-in systems), for tests that hold promises the code's docstrings make (issue 29, item 10)."""
from tests.annotation.conftest import sample_engine, study_engine  # noqa: F401 - the fixtures, used by the tests
