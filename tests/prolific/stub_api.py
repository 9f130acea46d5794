"""A stand-in for Prolific's API on 127.0.0.1: a real HTTP server (the standard library's) answering
`GET /api/v1/studies/<id>/submissions/` from pages the test sets, checking the `Authorization: Token` header,
and recording every request it gets."""
from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

TOKEN = "stub-api-token-0123456789"


class StubProlific:
    """Pages by path (`pages[path] = (status, body)`; a dict or list body is sent as JSON, bytes as they are);
    `requests` lists (path, Authorization header) of every request."""

    def __init__(self) -> None:
        self.pages: dict[str, tuple[int, Any]] = {}
        self.requests: list[tuple[str, str | None]] = []
        stub = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 - the standard library's name
                stub.requests.append((self.path, self.headers.get("Authorization")))
                if self.headers.get("Authorization") != f"Token {TOKEN}":
                    status, body = 401, {"error": {"detail": "Invalid token."}}
                else:
                    status, body = stub.pages.get(self.path, (404, {"error": {"detail": "Not found."}}))
                data = body if isinstance(body, bytes) else json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def start(self) -> StubProlific:
        self.thread.start()
        return self

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(10)

    def submissions(self, study_id: str, entries: list[dict], *, page: int = 1, next_page: str | None = None) -> None:
        """Serve `entries` as page `page` of the study's submissions, pointing to `next_page` (a URL) if given."""
        path = f"/api/v1/studies/{study_id}/submissions/" + ("" if page == 1 else f"?page={page}")
        links = {"next": {"href": next_page, "title": "Next"} if next_page else None}
        self.pages[path] = (200, {"results": entries, "_links": links, "meta": {"count": len(entries)}})
