"""Running the app under gunicorn from Python (`empeval serve --gunicorn`): the earlier server, kept for comparison
and for use behind a proxy that buffers whole requests (server/web/serving.py is the default).

Gunicorn itself believes no forwarded header: by default it takes the scheme from `X-Forwarded-Proto` (and two
other headers) of any client at 127.0.0.1 (`forwarded_allow_ips`, or $FORWARDED_ALLOW_IPS), so anyone on the
machine could have switched on Secure cookies and HSTS. Here it trusts no address, and forwarded headers are the
app's business alone, as under the default server: read by ProxyFix from the proxies declared with --proxies
(server/web/app.py), else never."""
from __future__ import annotations

import sys
from typing import Any

from gunicorn.app.base import BaseApplication

# The GIL switch interval and the threads per worker are those of `empeval serve`'s own server (serving.py).
from empeval.server.web.serving import DEFAULT_THREADS, WORKER_SWITCH_INTERVAL_S

__all__ = ["DEFAULT_THREADS", "TRUST_NO_FORWARDED_HEADERS", "WORKER_SWITCH_INTERVAL_S", "run_gunicorn"]

# No peer may set the scheme (or the forwarder headers gunicorn maps): the app's ProxyFix reads them when --proxies
# declares a proxy, and the raw headers reach it whatever these say (they only govern gunicorn's own use of them).
TRUST_NO_FORWARDED_HEADERS: dict[str, Any] = {"forwarded_allow_ips": "", "secure_scheme_headers": {}}


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


def run_gunicorn(config: dict[str, Any], *, host: str, port: int, workers: int,
                 threads: int = DEFAULT_THREADS) -> None:
    """Serve the app built from `config` with gunicorn's gthread workers. A gthread worker hands a connection to a
    thread as soon as it is readable, so a client whose request has not arrived whole holds that thread (over 40 s
    for a submission that stopped sending, measured; issue 29: 16 sockets that sent half a request line stalled
    every real call of `--workers 2`): only behind a proxy that buffers whole requests (nginx does by default)."""
    _App(config, {"bind": f"{host}:{port}", "workers": workers, "threads": threads, "worker_class": "gthread",
                  "accesslog": None, "timeout": 60, "post_worker_init": _post_worker_init,
                  **TRUST_NO_FORWARDED_HEADERS}).run()
