"""The cassette's two transports under ``HttpService`` (spec §10.4): one records each
exchange it passes on, one answers from the cassette with no network."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable

import httpx

from ..redaction import REDACTED
from .cassette import (
    CALL,
    CANCELLED,
    TRANSPORT_ERRORS,
    WIRE_HEADERS,
    Call,
    Cassette,
    body_bytes,
    kept_body,
)


def _headers(pairs: Iterable[tuple[str, str]], call: Call) -> list[list[str]]:
    """Response headers as kept: redacted ones masked, secret values scrubbed, and
    none that describe the body as it was on the wire."""
    kept = []
    for name, value in pairs:
        if name.lower() in WIRE_HEADERS:
            continue
        if name.lower() in call.redact:
            shown = REDACTED
        else:
            shown = call.scrub(value) if call.scrub is not None else value
        kept.append([name, shown])
    return kept


def _call_of(request: httpx.Request) -> Call:
    call = request.extensions.get(CALL)
    if not isinstance(call, Call):
        raise TypeError("a cassette transport serves HttpService's requests only")
    return call


class RecordingTransport(httpx.AsyncBaseTransport):
    """Sends through ``inner`` and appends each exchange to the cassette as it ends;
    the response is handed on decoded (the body as recorded)."""

    def __init__(self, inner: httpx.AsyncBaseTransport, cassette: Cassette,
                 max_bytes: int) -> None:
        self._inner = inner
        self._cassette = cassette
        self._max_bytes = max_bytes

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        from .http_body import BodyTooLarge, read_body

        call = _call_of(request)
        try:
            response = await self._inner.handle_async_request(request)
            try:
                # One past the cap: HttpService then refuses it as it would live.
                wire = httpx.Response(response.status_code, headers=response.headers,
                                      stream=response.stream, request=request)
                try:
                    body = await read_body(wire, self._max_bytes + 1)
                except BodyTooLarge:
                    body = b"\0" * (self._max_bytes + 1)
            finally:
                await response.aclose()
        except asyncio.CancelledError:
            self._cassette.append(call, {"error": {"type": CANCELLED, "message":
                                  "the attempt ended while the request was in flight"}})
            raise
        except httpx.TransportError as exc:
            kind = type(exc).__name__ if type(exc).__name__ in TRANSPORT_ERRORS else "NetworkError"
            message = call.scrub(str(exc)) if call.scrub is not None else str(exc)
            self._cassette.append(call, {"error": {"type": kind, "message": message}})
            raise
        headers = _headers(response.headers.multi_items(), call)
        kept = kept_body(body)
        if call.scrub is not None and isinstance(kept, str):
            kept = call.scrub(kept)  # a server that echoes a secret echoes it to no one
        self._cassette.append(call, {"response": {"status": response.status_code,
                                                  "headers": headers, "body": kept}})
        # The script gets the live headers (HttpService scrubs them); the cassette the
        # kept ones.
        live = [(n, v) for n, v in response.headers.multi_items()
                if n.lower() not in WIRE_HEADERS]
        return _response(response.status_code, live, body, request)

    async def aclose(self) -> None:
        await self._inner.aclose()


class ReplayTransport(httpx.AsyncBaseTransport):
    """Answers from the cassette, with no network (spec §10.4)."""

    def __init__(self, cassette: Cassette) -> None:
        self._cassette = cassette

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        line = self._cassette.answer(_call_of(request))
        error = line.get("error")
        if error is not None:
            if error["type"] == CANCELLED:
                # Recorded cut short: it stays in flight until the attempt ends it.
                await asyncio.Event().wait()
            raise TRANSPORT_ERRORS[error["type"]](str(error.get("message", "")), request=request)
        response = line["response"]
        return _response(response["status"], response.get("headers") or [],
                         body_bytes(response.get("body"), f"{self._cassette.path}: a response"),
                         request)


def _response(status: int, headers: Iterable[Iterable[str]], body: bytes,
              request: httpx.Request) -> httpx.Response:
    """A response as a transport gives it: its body a stream not yet read (a
    ``content=`` body is read at once, and HttpService reads the raw stream)."""
    # As UTF-8 bytes: a kept header may hold a reference (⟦woml-secret:NAME⟧), which
    # httpx would refuse to encode as ASCII.
    return httpx.Response(status,
                          headers=[(str(n).encode(), str(v).encode()) for n, v in headers],
                          stream=httpx.ByteStream(body), request=request)
