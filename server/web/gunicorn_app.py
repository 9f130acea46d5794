"""Running the app under gunicorn from Python (`empeval serve --workers N`)."""
from __future__ import annotations

from typing import Any

from gunicorn.app.base import BaseApplication


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


def run_gunicorn(config: dict[str, Any], *, host: str, port: int, workers: int, threads: int = 4) -> None:
    _App(config, {"bind": f"{host}:{port}", "workers": workers, "threads": threads, "worker_class": "gthread",
                  "accesslog": None, "timeout": 60}).run()
