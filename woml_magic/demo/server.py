"""The demo API's HTTP/1.1 layer: a threaded standard-library server (spec §8).

``http.server.ThreadingHTTPServer`` with our own ``BaseHTTPRequestHandler`` — no new
dependency — gives exactly the control the faults need, which ASGI/WSGI stacks hide:

- drop: the handler owns the socket, so after executing a request it can close the
  connection without writing one byte; the client sees "server disconnected without
  sending a response" (an ambiguous outcome, spec §4.1);
- delay: one thread per connection, so a response held for seconds does not stop
  other connections — in particular a concurrent duplicate that must get 409;
- keep-alive: HTTP/1.1 with ``Content-Length`` on every response, so clients reuse
  connections the way httpx does against real APIs.

The server decides nothing: each request goes through ``DemoApp``'s public state
machine (``begin`` → the delay → ``finish``, or ``reject`` for a request refused
while reading it); the handler only reads bytes, waits, and writes or drops.

Clean shutdown (no leaked socket or thread, tests run with ``filterwarnings = error``):
the server remembers every open connection and its thread; ``stop`` ends the accept
loop, shuts every connection down (waking handlers blocked on idle keep-alive reads
and cutting delays short), closes the listening socket and joins every thread.
"""

from __future__ import annotations

import contextlib
import socket
import socketserver
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TYPE_CHECKING, Any, cast
from urllib.parse import urlsplit

from .problems import Response, problem

if TYPE_CHECKING:
    from .app import DemoApp

#: Request bodies above this are refused (413): the demo's records are tiny.
MAX_BODY = 1024 * 1024
#: How often the accept loop checks for shutdown; bounds how long stop() waits for it.
POLL_INTERVAL = 0.05
#: A thread that does not end this long after its socket was shut down is abandoned
#: (it is a daemon thread, so it cannot keep the process alive).
JOIN_TIMEOUT = 5.0


class DemoServer(ThreadingHTTPServer):
    """The listening socket, the accept thread and one thread per connection.

    ``stopping`` is set by ``stop``: it cuts short the delays handlers are holding.
    """

    daemon_threads = True
    # We join connection threads ourselves in stop(), after shutting their sockets.
    block_on_close = False

    def __init__(self, app: DemoApp, address: tuple[str, int]) -> None:
        self.app = app
        self.stopping = threading.Event()
        self._connections: dict[socket.socket, threading.Thread] = {}
        self._connections_lock = threading.Lock()
        self._thread: threading.Thread | None = None
        super().__init__(address, DemoHandler)

    def server_bind(self) -> None:
        # HTTPServer.server_bind calls socket.getfqdn(), a reverse DNS lookup that could
        # leave the machine; the demo never needs the name.
        socketserver.TCPServer.server_bind(self)
        host, port = self.server_address[:2]
        self.server_name = str(host)
        self.server_port = int(port)

    @property
    def port(self) -> int:
        """The port actually bound (the free one when asked for 0)."""
        return self.server_port

    def start(self) -> None:
        """Run the accept loop in a daemon thread."""
        self._thread = threading.Thread(
            target=self.serve_forever,
            kwargs={"poll_interval": POLL_INTERVAL},
            name=f"woml-demo-{self.port}",
            daemon=True,
        )
        self._thread.start()

    def stop(self) -> None:
        """Stop accepting, shut every connection down, close, join every thread."""
        self.stopping.set()
        self.shutdown()  # returns once the accept loop has exited: no new connections
        with self._connections_lock:
            connections = list(self._connections.items())
        for sock, _ in connections:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
        self.server_close()
        for _, thread in connections:
            thread.join(JOIN_TIMEOUT)
        if self._thread is not None:
            self._thread.join(JOIN_TIMEOUT)

    def process_request(self, request: Any, client_address: Any) -> None:
        """Handle the connection in its own daemon thread, remembered for stop()."""
        thread = threading.Thread(
            target=self.process_request_thread,
            args=(request, client_address),
            name=f"woml-demo-conn-{client_address[1]}",
            daemon=True,
        )
        with self._connections_lock:
            self._connections[request] = thread
        thread.start()

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            self.finish_request(request, client_address)
        except Exception:  # one broken connection must not kill the server
            self.handle_error(request, client_address)
        finally:
            self.shutdown_request(request)
            with self._connections_lock:
                self._connections.pop(request, None)

    def handle_error(self, request: Any, client_address: Any) -> None:
        # A client that hangs up mid-response, or stop() shutting a socket, is normal
        # for a server that teaches disconnects; anything else is a bug worth printing.
        if isinstance(sys.exc_info()[1], OSError):
            return
        super().handle_error(request, client_address)


class DemoHandler(BaseHTTPRequestHandler):
    """HTTP/1.1 framing for one connection; ``DemoApp`` decides every response."""

    protocol_version = "HTTP/1.1"
    # Answer even unparsable requests with a status line and headers (the stdlib's
    # HTTP/0.9 default would send a bare body that no client can read as a problem).
    default_request_version = "HTTP/1.1"
    server_version = "woml-demo/1"
    sys_version = ""
    # The status line and headers go out in one write and the body in another: with
    # Nagle's algorithm the body then waits for the client's delayed ACK, ~40 ms a
    # response on Linux (bench/cassette.py measured 58 ms a call, 0.7 ms without).
    disable_nagle_algorithm = True

    @property
    def demo_server(self) -> DemoServer:
        return cast(DemoServer, self.server)

    def handle_one_request(self) -> None:
        """Read one request, answer it (or drop it), keep the connection if allowed."""
        try:
            self.raw_requestline = self.rfile.readline(65537)
        except OSError:
            self.close_connection = True
            return
        if len(self.raw_requestline) > 65536:
            self.requestline = self.request_version = self.command = ""
            self.send_error(414)
            return
        if not self.raw_requestline:
            self.close_connection = True
            return
        if not self.parse_request():
            return
        self._serve()

    def _serve(self) -> None:
        path = urlsplit(self.path).path or "/"
        headers = dict(self.headers.items())
        body = self._read_body(path, headers)
        if body is None:
            return
        app = self.demo_server.app
        exchange = app.begin(
            self.command, path, headers, self.headers.get_all("Idempotency-Key") or [], body
        )
        if exchange.delay > 0:
            # The effect has happened; the key stays in flight while we wait (spec §8).
            self.demo_server.stopping.wait(exchange.delay)
        app.finish(exchange)
        if exchange.drop:
            # Not one byte: the client sees a disconnect with no response (spec §4.1).
            self.close_connection = True
            return
        self._send(exchange.response)

    def _read_body(self, path: str, headers: dict[str, str]) -> bytes | None:
        """The request body by ``Content-Length``; ``None`` after refusing the request."""
        refusal: Response | None = None
        length_text = self.headers.get("Content-Length")
        if self.headers.get("Transfer-Encoding"):
            refusal = problem(
                411, "chunked request bodies are not supported; send a Content-Length."
            )
        elif length_text is not None and not length_text.strip().isdigit():
            refusal = problem(400, f"Content-Length {length_text!r} is not a whole number.")
        elif length_text is not None and int(length_text) > MAX_BODY:
            refusal = problem(
                413, f"the body has {int(length_text)} bytes; at most {MAX_BODY} are allowed."
            )
        if refusal is not None:
            self.demo_server.app.reject(self.command, path, headers, refusal)
            self.close_connection = True  # the unread body makes the stream unusable
            self._send(refusal)
            return None
        length = int(length_text) if length_text is not None else 0
        body = self.rfile.read(length) if length else b""
        if len(body) < length:
            self.close_connection = True
            return None
        return body

    def _send(self, response: Response) -> None:
        self.send_response(response.status)
        for name, value in response.headers:
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(response.body)))
        if self.close_connection:
            self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(response.body)
        self.wfile.flush()

    def send_error(self, code: int, message: str | None = None, explain: str | None = None) -> None:
        """Malformed requests caught by ``http.server`` get a problem too (spec §8)."""
        self.close_connection = True
        detail = message or explain or "the request could not be parsed as HTTP/1.1."
        self._send(problem(code, detail))

    def log_message(self, format: str, *args: Any) -> None:
        # DemoApp(log=...) reports requests; http.server's stderr lines would litter
        # notebooks and test output.
        return
