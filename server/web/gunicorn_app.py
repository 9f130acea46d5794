"""Running the app under gunicorn from Python (`empeval serve --workers N`)."""
from __future__ import annotations

import sys
from typing import Any

from gunicorn.app.base import BaseApplication

# How often (seconds) a worker's threads hand the GIL over; Python's default is 5 ms. A thread that holds SQLite's
# write lock gives the GIL up at each statement and must wait to get it back: while other threads of the worker
# run Python for up to a full interval each, every writer of every worker waits behind it. At 0.5 ms the lock is
# held about half as long at the 90th percentile and a worker of 8 threads stores about 40% more submissions per
# second (measured in one process with benchmarks' threads; the trivial endpoint is served with the same setting).
WORKER_SWITCH_INTERVAL_S = 0.0005


def _post_worker_init(_worker: Any) -> None:
    sys.setswitchinterval(WORKER_SWITCH_INTERVAL_S)


class _App(BaseApplication):
    def __init__(self, config: dict[str, Any], options: dict[str, Any]):
        self._config, self._options = config, options
        super().__init__()

    def load_config(self) -> None:
        for key, value in self._options.items():
            self.cfg.set(key, value)

    def load(self):
        from server.web import create_app

        return create_app(self._config)


# Threads per worker when `empeval serve` is not told (--threads), by store. On SQLite a request is CPU work and
# one write at a time: a worker's threads only take the GIL and the write lock from each other. With 32 raters
# against 2 workers (benchmarks/annotation_load.py, 2026-12-01, alternating runs) 1 thread served 440-505
# requests/s, 2 threads 487-501 and 4 threads 347-371, at 2.6 against 3.3 ms of server CPU per request; 3 workers
# of 1 thread 518-615. On PostgreSQL a request mostly waits for the server, and threads overlap those waits.
DEFAULT_THREADS = {"sqlite": 1, "postgresql": 4}


def default_threads(database_url: str) -> int:
    """Threads per gunicorn worker for a store at `database_url` (DEFAULT_THREADS; 4 for any other database)."""
    return DEFAULT_THREADS["sqlite"] if database_url.startswith("sqlite") else DEFAULT_THREADS["postgresql"]


def run_gunicorn(config: dict[str, Any], *, host: str, port: int, workers: int, threads: int) -> None:
    _App(config, {"bind": f"{host}:{port}", "workers": workers, "threads": threads, "worker_class": "gthread",
                  "accesslog": None, "timeout": 60, "post_worker_init": _post_worker_init}).run()
