"""services.http.request against real loopback servers (spec §4.1, §4.2, §4.3, §5.2).

Two kinds of server, both on 127.0.0.1 only:
- ``EchoServer``: a threading ``http.server`` that records each request and answers as
  the query string asks (``?status=…&ctype=…&body=…``), else echoes the request as JSON;
- ``RawServer``: a raw socket that misbehaves on purpose (close before reading, close
  after reading, reset, never answer), or a full backlog for connect timeouts.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
import struct
import threading
from collections.abc import Awaitable, Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, TypeVar
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest

from woml_magic.errors import ServiceRejection
from woml_magic.events import CallFinished, CallStarted, Event, event_from_dict
from woml_magic.services import CallScope, HttpService, StepCalls, classify_transport_error
from woml_magic.services.scope import CALL_EXTENSION, CallTag

T = TypeVar("T")


class EchoServer:
    """A real HTTP/1.1 server in a thread; ``requests`` holds what it received."""

    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        self.connections = 0
        self.busy_seen: list[bool] = []
        self.busy_flag = [False]
        owner = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            disable_nagle_algorithm = True  # no 40 ms delayed-ACK stalls between writes

            def setup(self) -> None:
                owner.connections += 1
                super().setup()

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def _answer(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length).decode()
                owner.busy_seen.append(owner.busy_flag[0])
                parts = urlsplit(self.path)
                query = parse_qs(parts.query)
                record = {
                    "method": self.command,
                    "path": parts.path,
                    "query": parts.query,
                    "headers": dict(self.headers.items()),
                    "body": body,
                }
                owner.requests.append(record)
                status = int(query.get("status", ["200"])[0])
                ctype = query.get("ctype", ["application/json"])[0]
                text = query["body"][0] if "body" in query else json.dumps(record)
                if "size" in query:
                    text = "x" * int(query["size"][0])
                payload = text.encode()
                self.send_response(status)
                self.send_header("Content-Type", ctype)
                self.send_header("Set-Cookie", "session=SECRET-COOKIE")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(payload)

            do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = do_HEAD = _answer

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join()


class RawServer:
    """A socket server that fails in one chosen way, to make httpx fail for real.

    close: accept, close without reading. readclose: read the request, close.
    reset: read the request, close with SO_LINGER 0 (RST). silent: read, never answer.
    backlog: never accept, with the listen queue filled so a new connect hangs.
    """

    def __init__(self, mode: str) -> None:
        self.mode = mode
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(0 if mode == "backlog" else 8)
        self.sock.settimeout(0.05)
        self.port = self.sock.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self.accepted = 0
        self.received = b""
        self.held: list[socket.socket] = []
        self.stop = threading.Event()
        if mode == "backlog":
            # Fill the accept queue with connections nobody accepts; later SYNs are dropped.
            for _ in range(3):
                filler = socket.socket()
                filler.setblocking(False)
                with contextlib.suppress(BlockingIOError):
                    filler.connect(("127.0.0.1", self.port))
                self.held.append(filler)
            self.thread = None
        else:
            self.thread = threading.Thread(target=self._serve, daemon=True)
            self.thread.start()

    def _serve(self) -> None:
        while not self.stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            self.accepted += 1
            if self.mode != "close":
                conn.settimeout(2)
                with contextlib.suppress(OSError):
                    self.received += conn.recv(65536)
            if self.mode == "reset":
                conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            if self.mode == "silent":
                self.held.append(conn)
            else:
                conn.close()

    def close(self) -> None:
        self.stop.set()
        if self.thread is not None:
            self.thread.join()
        self.sock.close()
        for conn in self.held:
            conn.close()


@pytest.fixture(scope="module")
def echo() -> Iterator[EchoServer]:
    server = EchoServer()
    yield server
    server.close()


@pytest.fixture
def server(echo: EchoServer) -> EchoServer:
    echo.requests.clear()
    echo.busy_seen.clear()
    return echo


@pytest.fixture
def raw() -> Iterator[Callable[[str], RawServer]]:
    made: list[RawServer] = []

    def make(mode: str) -> RawServer:
        made.append(RawServer(mode))
        return made[-1]

    yield make
    for one in made:
        one.close()


class Harness:
    """One HttpService and the scope of one attempt, with the events it emitted."""

    def __init__(self, service: HttpService, busy_flag: list[bool] | None = None) -> None:
        self.service = service
        self.events: list[Event] = []
        self.step_calls = StepCalls()
        self.busy_flag = busy_flag if busy_flag is not None else [False]
        self.scope = self.new_attempt(1)

    @contextlib.contextmanager
    def _busy(self) -> Iterator[None]:
        self.busy_flag[0] = True
        try:
            yield
        finally:
            self.busy_flag[0] = False

    def new_attempt(self, number: int) -> CallScope:
        self.scope = CallScope(
            run_id="run-1",
            step_id="charge",
            attempt_number=number,
            step_calls=self.step_calls,
            emit=self.events.append,
            now=lambda: float(len(self.events)),
            busy=self._busy,
        )
        return self.scope

    async def call(self, request: Any, options: Any = None) -> dict[str, Any]:
        return await self.service.request(request, options, self.scope)

    async def reject(self, request: Any, options: Any = None) -> ServiceRejection:
        with pytest.raises(ServiceRejection) as info:
            await self.call(request, options)
        return info.value

    def kinds(self) -> list[str]:
        return [e.kind for e in self.events]

    def finished(self) -> CallFinished:
        last = self.events[-1]
        assert isinstance(last, CallFinished)
        return last


def run(
    body: Callable[[Harness], Awaitable[T]], busy_flag: list[bool] | None = None, **kw: Any
) -> T:
    """Run ``body`` with a fresh service on a fresh event loop, closing the service."""

    async def main() -> T:
        service = HttpService(**kw)
        try:
            return await body(Harness(service, busy_flag))
        finally:
            await service.aclose()

    return asyncio.run(main())


# --- responses (spec §4.1) ---------------------------------------------------------------


def test_request_fields_reach_the_server(server: EchoServer) -> None:
    async def body(h: Harness) -> dict[str, Any]:
        return await h.call(
            {
                "method": "put",
                "url": server.url + "/customers/7",
                "headers": {"X-Trace": "t-1"},
                "query": {"expand": ["a", "b"], "n": 2},
                "json": {"email": "a@example.com"},
                "timeout": "5s",
            }
        )

    result = run(body)
    (seen,) = server.requests
    assert seen["method"] == "PUT"
    assert seen["path"] == "/customers/7"
    assert seen["query"] == "expand=a&expand=b&n=2"
    assert seen["headers"]["X-Trace"] == "t-1"
    assert seen["headers"]["Content-Type"] == "application/json"
    assert json.loads(seen["body"]) == {"email": "a@example.com"}
    assert result["status"] == 200
    assert result["replayed"] is False
    assert result["data"]["body"] == seen["body"]


def test_body_string_is_sent_verbatim(server: EchoServer) -> None:
    async def body(h: Harness) -> dict[str, Any]:
        return await h.call(
            {
                "method": "POST",
                "url": server.url,
                "body": "a=1&b=2",
                "headers": {"Content-Type": "application/x-www-form-urlencoded"},
            }
        )

    run(body)
    assert server.requests[0]["body"] == "a=1&b=2"
    assert server.requests[0]["headers"]["Content-Type"] == "application/x-www-form-urlencoded"


def test_idempotency_header_is_sent_exactly(server: EchoServer) -> None:
    key = "4e3b1916-7901-53c2-9575-f70651305d8b"

    async def body(h: Harness) -> list[Event]:
        await h.call(
            {
                "method": "POST",
                "url": server.url,
                "json": {},
                "idempotency": {"header": "Idempotency-Key", "value": key},
            }
        )
        return h.events

    events = run(body)
    sent = server.requests[0]["headers"]
    assert [v for k, v in sent.items() if k.lower() == "idempotency-key"] == [key]
    started = events[0]
    assert isinstance(started, CallStarted)
    assert (started.idempotency_header, started.idempotency_value) == ("Idempotency-Key", key)
    assert started.request_headers["Idempotency-Key"] == key


@pytest.mark.parametrize(
    ("ctype", "text", "data"),
    [
        ("application/json", '{"a": 1}', {"a": 1}),
        ("application/json; charset=utf-8", "[1, 2]", [1, 2]),
        ("application/problem+json", '{"title": "t"}', {"title": "t"}),
        ("application/vnd.api+json", '{"data": null}', {"data": None}),
        ("text/plain", '{"a": 1}', '{"a": 1}'),
        ("text/html", "<p>hi</p>", "<p>hi</p>"),
        ("application/json", "{not json", "{not json"),
        ("application/json", "NaN", "NaN"),
    ],
)
def test_data_is_parsed_json_only_for_json_content_types(
    server: EchoServer, ctype: str, text: str, data: Any
) -> None:
    async def body(h: Harness) -> dict[str, Any]:
        return await h.call({"url": server.url, "query": {"ctype": ctype, "body": text}})

    assert run(body)["data"] == data


def test_status_400_and_above_rejects_with_httperror_props(server: EchoServer) -> None:
    problem = '{"type": "about:blank", "title": "Conflict", "detail": "key in use"}'

    async def body(h: Harness) -> tuple[ServiceRejection, CallFinished]:
        err = await h.reject(
            {
                "url": server.url,
                "query": {"status": 409, "ctype": "application/problem+json", "body": problem},
            }
        )
        return err, h.finished()

    err, finished = run(body)
    assert err.name == "HttpError"
    assert err.props["status"] == 409
    assert err.props["data"] == json.loads(problem)
    headers = err.props["headers"]
    assert isinstance(headers, dict)
    assert headers["content-type"] == "application/problem+json"
    assert headers["set-cookie"] == "•••"
    assert "answered 409" in err.message
    assert "key in use" in err.message
    assert (finished.outcome, finished.status) == ("response", 409)


def test_cookies_set_by_a_response_are_not_sent_later(server: EchoServer) -> None:
    async def body(h: Harness) -> None:
        await h.call({"url": server.url})
        await h.call({"url": server.url})

    run(body)
    assert [r["headers"].get("Cookie") for r in server.requests] == [None, None]


def test_redirects_are_not_followed(server: EchoServer) -> None:
    async def body(h: Harness) -> dict[str, Any]:
        return await h.call({"url": server.url, "query": {"status": 302}})

    assert run(body)["status"] == 302
    assert len(server.requests) == 1


def test_response_body_over_the_cap_rejects_and_is_not_kept(server: EchoServer) -> None:
    async def body(h: Harness) -> ServiceRejection:
        return await h.reject({"url": server.url, "query": {"size": 2048}}, {"name": "big"})

    err = run(body, max_response_bytes=1024)
    assert err.name == "ResponseTooLargeError"
    assert err.props["limit"] == 1024
    assert "1024 byte limit" in err.message


# --- events and redaction (spec §4.1, §5.2) ----------------------------------------------


def test_call_started_is_emitted_before_the_request_and_finished_after(
    server: EchoServer,
) -> None:
    async def body(h: Harness) -> list[Event]:
        await h.call({"url": server.url}, {"name": "list"})
        await h.call({"url": server.url})
        return h.events

    events = run(body)
    assert [(e.kind, getattr(e, "call_index", None)) for e in events] == [
        ("call-started", 0),
        ("call-finished", 0),
        ("call-started", 1),
        ("call-finished", 1),
    ]
    started, finished = events[0], events[1]
    assert isinstance(started, CallStarted)
    assert isinstance(finished, CallFinished)
    assert (started.run_id, started.step_id, started.number) == ("run-1", "charge", 1)
    assert (started.name, started.method, started.url) == ("list", "GET", server.url)
    assert (finished.outcome, finished.status, finished.replayed) == ("response", 200, False)
    assert finished.response["status"] == 200
    assert started.at < finished.at  # the scope's clock counts emitted events


def test_busy_is_held_while_the_request_is_in_flight(server: EchoServer) -> None:
    flag = [False]
    server_flag = server.busy_flag

    async def body(h: Harness) -> bool:
        await h.call({"url": server.url})
        return flag[0]

    server.busy_flag = flag
    try:
        still_busy = run(body, busy_flag=flag)
    finally:
        server.busy_flag = server_flag
    assert server.busy_seen == [True]
    assert still_busy is False


def test_sensitive_values_never_appear_in_any_event(server: EchoServer) -> None:
    async def body(h: Harness) -> tuple[dict[str, Any], ServiceRejection]:
        ok = await h.call(
            {
                "method": "POST",
                "url": server.url,
                # Not the echo body: a response body is data, journaled as the API sent it.
                "query": {"body": "{}"},
                "headers": {
                    "Authorization": "Bearer TOKEN-AUTH",
                    "x-api-key": "TOKEN-KEY",
                    "X-Tenant-Secret": "TOKEN-CONFIGURED",
                },
                "json": {},
            },
            {"name": "a"},
        )
        err = await h.reject(
            {
                "url": server.url,
                "headers": {"Authorization": "Bearer TOKEN-AUTH"},
                "query": {"status": 500, "body": "oops"},
            }
        )
        return ok, err

    events: list[Event] = []

    async def capture(h: Harness) -> tuple[dict[str, Any], ServiceRejection]:
        try:
            return await body(h)
        finally:
            events.extend(h.events)

    ok, err = run(capture, redact=("authorization", "x-api-key", "set-cookie", "x-tenant-secret"))
    dumped = json.dumps([e.to_dict() for e in events], ensure_ascii=False)
    for secret in ("TOKEN-AUTH", "TOKEN-KEY", "TOKEN-CONFIGURED", "SECRET-COOKIE"):
        assert secret not in dumped
        assert secret not in json.dumps(err.props)
    assert "•••" in dumped
    # The real values still travel: the server saw them, the script sees its response.
    assert server.requests[0]["headers"]["Authorization"] == "Bearer TOKEN-AUTH"
    assert server.requests[0]["headers"]["X-Tenant-Secret"] == "TOKEN-CONFIGURED"
    assert ok["headers"]["set-cookie"] == "session=SECRET-COOKIE"


# --- definitive and ambiguous failures (spec §4.1, §4.2) ---------------------------------


def test_connection_refused_is_a_definitive_network_error() -> None:
    probe = socket.socket()
    probe.bind(("127.0.0.1", 0))
    port = probe.getsockname()[1]
    probe.close()  # nothing listens on this port now

    async def body(h: Harness) -> tuple[ServiceRejection, CallFinished, bool]:
        err = await h.reject({"url": f"http://127.0.0.1:{port}/"})
        return err, h.finished(), h.scope.unkeyed_ambiguity

    err, finished, unkeyed = run(body)
    assert err.name == "NetworkError"
    assert "ambiguous" not in err.props
    assert "nothing was sent" in err.message
    assert finished.outcome == "network-error"
    assert unkeyed is False


def test_connect_timeout_on_a_full_backlog_is_a_definitive_network_error(
    raw: Callable[[str], RawServer],
) -> None:
    srv = raw("backlog")

    async def body(h: Harness) -> ServiceRejection:
        return await h.reject({"url": srv.url, "timeout": "300ms"})

    err = run(body)
    assert err.name == "NetworkError"
    assert "connecting took longer than 300ms" in err.message


@pytest.mark.parametrize(
    ("mode", "timeout"),
    [("close", "5s"), ("readclose", "5s"), ("reset", "5s"), ("silent", "300ms")],
)
def test_request_that_may_have_arrived_without_a_response_is_ambiguous(
    raw: Callable[[str], RawServer], mode: str, timeout: str
) -> None:
    srv = raw(mode)

    async def body(h: Harness) -> tuple[ServiceRejection, CallFinished, bool]:
        err = await h.reject({"method": "POST", "url": srv.url, "json": {}, "timeout": timeout})
        return err, h.finished(), h.scope.unkeyed_ambiguity

    err, finished, unkeyed = run(body)
    assert err.name == "AmbiguousError"
    assert err.props == {"ambiguous": True}
    assert "unknown" in err.message
    assert "idempotency" in err.message  # teaches the fix
    assert finished.outcome == "ambiguous"
    assert unkeyed is True
    assert srv.accepted == 1


def test_read_timeout_message_names_the_timeout(raw: Callable[[str], RawServer]) -> None:
    srv = raw("silent")

    async def body(h: Harness) -> ServiceRejection:
        return await h.reject({"url": srv.url, "timeout": 250})

    assert "no response arrived within 250ms" in run(body).message


def test_ambiguity_with_an_idempotency_key_does_not_mark_the_attempt(
    raw: Callable[[str], RawServer],
) -> None:
    srv = raw("readclose")

    async def body(h: Harness) -> tuple[ServiceRejection, bool]:
        err = await h.reject(
            {"method": "POST", "url": srv.url, "idempotency": {"header": "Idem", "value": "k"}}
        )
        return err, h.scope.unkeyed_ambiguity

    err, unkeyed = run(body)
    assert err.name == "AmbiguousError"
    assert unkeyed is False
    assert b"Idem: k" in srv.received


@pytest.mark.parametrize(
    ("exc", "outcome"),
    [
        (httpx.ConnectError("[Errno 111] Connection refused"), "network-error"),
        (httpx.ConnectError("[Errno -2] Name or service not known"), "network-error"),
        (httpx.ConnectTimeout(""), "network-error"),
        (httpx.PoolTimeout(""), "network-error"),
        (httpx.UnsupportedProtocol("no"), "network-error"),
        (httpx.LocalProtocolError("bad header"), "network-error"),
        (httpx.ProxyError("no"), "network-error"),
        (httpx.ReadTimeout(""), "ambiguous"),
        (httpx.WriteTimeout(""), "ambiguous"),
        (httpx.RemoteProtocolError("Server disconnected without sending a response."), "ambiguous"),
        (httpx.ReadError("[Errno 104] Connection reset by peer"), "ambiguous"),
        (httpx.WriteError("[Errno 32] Broken pipe"), "ambiguous"),
        (httpx.CloseError(""), "ambiguous"),
        (httpx.DecodingError("bad gzip"), "ambiguous"),
        (RuntimeError("something new"), "ambiguous"),
    ],
)
def test_classification_table(exc: Exception, outcome: str) -> None:
    got, reason = classify_transport_error(exc, 2.0)
    assert got == outcome
    if outcome == "network-error":
        assert "unknown" not in reason
    else:
        assert reason.endswith("whether the server acted on it is unknown")


# --- allow-list (spec §4.1) --------------------------------------------------------------


def test_a_host_outside_the_allow_list_is_refused_before_any_byte(
    raw: Callable[[str], RawServer],
) -> None:
    srv = raw("readclose")

    async def body(h: Harness) -> tuple[ServiceRejection, CallFinished]:
        err = await h.reject({"url": f"http://localhost:{srv.port}/", "method": "POST"})
        finished = h.finished()
        # Control: the allowed spelling of the same server does connect.
        await h.reject({"url": srv.url})
        return err, finished

    err, finished = run(body, allow_hosts=["127.0.0.1"])
    assert err.name == "NetworkError"
    assert err.props == {"blocked": True, "host": "localhost"}
    assert "not in the http_allow list (127.0.0.1)" in err.message
    assert finished.outcome == "network-error"
    assert srv.accepted == 1  # only the control


# --- names and reattaching (spec §4.1, §4.3) ---------------------------------------------


def test_a_name_is_unique_within_one_attempt(server: EchoServer) -> None:
    async def body(h: Harness) -> tuple[ServiceRejection, list[str]]:
        await h.call({"url": server.url}, {"name": "list"})
        err = await h.reject({"url": server.url}, {"name": "list"})
        return err, h.kinds()

    err, kinds = run(body)
    assert err.name == "TypeError"
    assert "'list' is already used in this attempt" in err.message
    assert kinds == ["call-started", "call-finished"]  # the duplicate emitted nothing
    assert len(server.requests) == 1


def test_a_named_2xx_call_is_reattached_in_later_attempts_without_sending(
    server: EchoServer,
) -> None:
    request = {"method": "POST", "url": server.url, "query": {"status": 201}, "json": {"n": 1}}

    async def body(h: Harness) -> tuple[dict[str, Any], dict[str, Any], list[Event]]:
        first = await h.call(request, {"name": "create"})
        h.new_attempt(2)
        again = await h.call(request, {"name": "create"})
        return first, again, h.events

    first, again, events = run(body)
    assert len(server.requests) == 1
    assert again["replayed"] is True
    assert again["status"] == first["status"] == 201
    assert again["data"] == first["data"]
    assert again["headers"]["set-cookie"] == "•••"  # only the journaled form is known
    replay = events[-1]
    assert isinstance(replay, CallFinished)
    assert (replay.number, replay.replayed, replay.status) == (2, True, 201)


def test_unnamed_calls_and_non_2xx_named_calls_are_always_sent(server: EchoServer) -> None:
    async def body(h: Harness) -> None:
        await h.call({"url": server.url})
        await h.reject({"url": server.url, "query": {"status": 503}}, {"name": "flaky"})
        h.new_attempt(2)
        await h.call({"url": server.url})
        await h.reject({"url": server.url, "query": {"status": 503}}, {"name": "flaky"})

    run(body)
    assert len(server.requests) == 4


def test_reattach_works_from_journaled_events_after_a_resume(server: EchoServer) -> None:
    request = {"method": "POST", "url": server.url, "json": {"n": 1}}

    async def first_run(h: Harness) -> list[dict[str, Any]]:
        await h.call(request, {"name": "create"})
        return [e.to_dict() for e in h.events]

    journal = json.loads(json.dumps(run(first_run)))

    async def resumed(h: Harness) -> dict[str, Any]:
        events = [event_from_dict(d) for d in journal]
        h.step_calls.reattach.update(StepCalls.from_events(events, "charge").reattach)
        return await h.call(request, {"name": "create"})

    again = run(resumed)
    assert again["replayed"] is True
    assert again["data"]["body"] == '{"n":1}'
    assert len(server.requests) == 1
    assert StepCalls.from_events([event_from_dict(d) for d in journal], "other").reattach == {}


# --- resources ---------------------------------------------------------------------------


def test_one_pooled_connection_is_reused_and_aclose_closes_it(server: EchoServer) -> None:
    before = server.connections

    async def body(h: Harness) -> None:
        for _ in range(3):
            await h.call({"url": server.url})

    run(body)
    assert server.connections - before == 1


def test_aclose_leaves_a_client_it_was_given_open(server: EchoServer) -> None:
    async def main() -> bool:
        async with httpx.AsyncClient(trust_env=False) as client:
            service = HttpService(client=client)
            await service.aclose()
            return client.is_closed

    assert asyncio.run(main()) is False


# --- the transport (one pipeline, STYLE 13) -----------------------------------------------


def test_a_transport_gets_every_step_and_the_calls_tag() -> None:
    """The service's own client over a given transport: the same events, headers and
    value as over the network, and each request says which call it is (``CallTag``)."""
    seen: list[httpx.Request] = []

    def answer(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(201, json={"ok": True})

    async def body(h: Harness) -> dict[str, Any]:
        h.new_attempt(2)
        return await h.call({"method": "POST", "url": "http://api.test/x", "json": {"a": 1},
                             "headers": {"Authorization": "Bearer t"}}, {"name": "create"})

    events: list[Event] = []

    async def main() -> dict[str, Any]:
        service = HttpService(transport=httpx.MockTransport(answer))
        harness = Harness(service)
        harness.events = events
        try:
            return await body(harness)
        finally:
            await service.aclose()

    result = asyncio.run(main())
    assert result == {"status": 201, "headers": {"content-length": "11",
                                                 "content-type": "application/json"},
                      "data": {"ok": True}, "replayed": False}
    [request] = seen
    assert request.extensions[CALL_EXTENSION] == CallTag("run-1", "charge", 2, 0, "create")
    assert request.headers["user-agent"].startswith("woml-magic/")
    assert request.headers["authorization"] == "Bearer t"
    assert [e.kind for e in events] == ["call-started", "call-finished"]
    started = events[0]
    assert isinstance(started, CallStarted)
    assert started.request_headers["Authorization"] == "•••"


def test_a_request_in_flight_holds_the_clock_unless_the_transport_answers_on_it() -> None:
    """spec §5.1: a real request is real work; a model answering on the run's clock
    (the lab's, spec §11) is not, so the clock may move to let it answer."""
    held: list[bool] = []

    async def main(holds_clock: bool) -> None:
        flag = [False]

        def answer(request: httpx.Request) -> httpx.Response:
            held.append(flag[0])
            return httpx.Response(204)

        service = HttpService(transport=httpx.MockTransport(answer), holds_clock=holds_clock)
        try:
            await Harness(service, flag).call({"url": "http://api.test/"})
        finally:
            await service.aclose()

    asyncio.run(main(True))
    asyncio.run(main(False))
    assert held == [True, False]


def test_a_transports_response_read_when_made_is_capped_too() -> None:
    """A handler's ``httpx.Response(content=...)`` is read when made: the size cap
    still applies (spec §4.5)."""

    async def main(size: int) -> Any:
        service = HttpService(max_response_bytes=16, transport=httpx.MockTransport(
            lambda request: httpx.Response(200, content=b"x" * size)))
        try:
            harness = Harness(service)
            if size <= 16:
                return (await harness.call({"url": "http://api.test/"}))["data"]
            return (await harness.reject({"url": "http://api.test/"})).name
        finally:
            await service.aclose()

    assert asyncio.run(main(16)) == "x" * 16
    assert asyncio.run(main(17)) == "ResponseTooLargeError"


def test_a_service_takes_a_client_or_a_transport_not_both() -> None:
    async def main() -> None:
        async with httpx.AsyncClient() as client:
            with pytest.raises(ValueError,
                               match=r"a client or a transport \(or cassette\), not both"):
                HttpService(client=client, transport=httpx.MockTransport(httpx.Response))

    asyncio.run(main())


def test_an_attempt_ending_mid_request_records_the_call_as_ambiguous(
    raw: Callable[[str], RawServer],
) -> None:
    srv = raw("silent")

    async def body(h: Harness) -> tuple[CallFinished, bool]:
        task = asyncio.ensure_future(h.call({"method": "POST", "url": srv.url}))
        while srv.accepted == 0 or not srv.received:
            await asyncio.sleep(0.01)  # wait until the request has really arrived
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        return h.finished(), h.scope.unkeyed_ambiguity

    finished, unkeyed = run(body)
    assert finished.outcome == "ambiguous"
    assert "in flight" in (finished.error or "")
    assert unkeyed is True
