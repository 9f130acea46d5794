from tests.annotation.conftest import sample_engine  # noqa: F401  (shared fixture)
