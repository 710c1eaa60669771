"""A small HTTP server on 127.0.0.1 in a thread, for tests that must see what was sent.

``Loopback(handle)`` serves ``handle(request) -> (status, headers, body)`` for every
GET and POST; each request (``method``, ``path``, ``headers``, ``body`` text) is kept
in ``requests`` in arrival order. Use it as a context manager or call ``close``.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

Answer = tuple[int, dict[str, str], bytes]


class Loopback:
    def __init__(self, handle: Callable[[dict[str, Any]], Answer]) -> None:
        self.requests: list[dict[str, Any]] = []
        owner = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                request = {"method": self.command, "path": self.path,
                           "headers": dict(self.headers.items()),
                           "body": self.rfile.read(length).decode()}
                owner.requests.append(request)
                status, headers, payload = handle(request)
                self.send_response(status)
                for name, value in headers.items():
                    self.send_header(name, value)
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            do_GET = do_POST

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join()

    def __enter__(self) -> Loopback:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
