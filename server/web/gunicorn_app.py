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
        from empeval.server.web import create_app

        return create_app(self._config)


# Threads per worker when `empeval serve` is not told (--threads). One thread per worker is faster on SQLite (a
# request is CPU work under one write lock, and threads only contend for it: benchmarks/annotation_load.py part
# settings, 2026-12-01, 2 workers x 1 thread 440-632 requests/s against 347-553 at 2 x 4), but a thread is held by
# a client whose request has not arrived whole (a rater's submission still uploading holds it until the body has
# arrived: over 40 s for one that stopped sending, measured): at 1 thread, one such rater per worker stalls every
# other rater, where the default leaves 3 threads per worker answering (tests/test_cli_serve_threads.py). So 1
# thread only behind a proxy that buffers whole requests (nginx does by default), by choice.
DEFAULT_THREADS = 4


def run_gunicorn(config: dict[str, Any], *, host: str, port: int, workers: int,
                 threads: int = DEFAULT_THREADS) -> None:
    _App(config, {"bind": f"{host}:{port}", "workers": workers, "threads": threads, "worker_class": "gthread",
                  "accesslog": None, "timeout": 60, "post_worker_init": _post_worker_init}).run()
