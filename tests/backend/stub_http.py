"""A local stand-in for a remote model or judge endpoint on 127.0.0.1, shared by the `http` system's and the
`http-judge`'s tests: a handler base that records every request and answers JSON, and the server's lifetime."""
from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class JsonStubHandler(BaseHTTPRequestHandler):
    """Subclasses implement `answer(route, body)`; each request is appended to `empeval.server.calls` as
    (path, body, headers) before it is answered."""

    def log_message(self, *args: Any) -> None:  # keep test output clean
        pass

    def send_json(self, status: int, body: Any) -> None:
        """Answer `body` with `status`: a bytes body is sent as it is, anything else as JSON."""
        payload = body if isinstance(body, bytes) else json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def hold_until_released(self) -> None:
        """Answer nothing until the server stops (at most 30 s): the client's timeout, not a race between it and a
        sleep here, decides (a fixed 0.6 s sleep against a 0.3 s timeout was answered in time when the loaded
        machine paused the client for longer than the difference)."""
        self.server.released.wait(30)  # type: ignore[attr-defined]

    def calls_to(self, path: str) -> int:
        """How many requests to `path` the server has had, this one included."""
        return sum(1 for called, _, _ in self.server.calls if called == path)  # type: ignore[attr-defined]


@contextmanager
def stub_server(handler: type[JsonStubHandler]) -> Iterator[ThreadingHTTPServer]:
    """Serve `handler` on a free port of 127.0.0.1 in a thread, with an empty `calls` list; stopped on exit."""
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    httpd.calls = []  # type: ignore[attr-defined]
    httpd.released = threading.Event()  # type: ignore[attr-defined]
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield httpd
    finally:
        httpd.released.set()  # type: ignore[attr-defined]
        httpd.shutdown()
        httpd.server_close()
