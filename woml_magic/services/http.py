"""``services.http.request``, performed in the kernel process with httpx (spec §4.1-§4.3).

One ``HttpService`` per run owns one ``httpx.AsyncClient`` (keep-alive pooling,
``trust_env=False`` so no proxy or netrc from the environment, no redirects followed,
no cookie jar)
and is closed with the run. Each call:

1. validates the request (``TypeError`` rejections, nothing emitted), with secret
   references resolved for sending and kept for showing (spec §10.1);
2. claims its name in the attempt (a duplicate is a ``TypeError``);
3. emits ``CallStarted`` with redacted headers, durable before anything is sent (§5.2);
4. refuses a host outside the allow-list (``NetworkError``, ``blocked: true``);
5. reattaches a named call whose 2xx response is known (§4.3), sending nothing;
6. applies the injected faults that match the call (spec §10.2, ``faults.py``);
7. sends, reads at most ``max_response_bytes``, emits ``CallFinished`` and resolves
   or rejects as ``http_outcome`` describes.

Each step is a method of ``HttpService`` (``_open`` 1-3, ``_check_allowed`` 4,
``_reattached`` 5, ``CallFaults.before_send`` 6, ``_exchange`` and ``_answer`` 7), and
they are the one pipeline of every managed call: where a request goes is the client's
transport, httpx's own or a given one (``transport=``: the lab's server model, spec
§11), which learns which call it carries from the ``CALL_EXTENSION`` request extension.

Everything that leaves ``request`` — the events it emits, its value, its rejections —
is scrubbed of secret values first (``Secrets.scrub``): a server that echoes a secret
echoes it to no one.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import ssl
from collections.abc import Callable, Iterable
from http.cookiejar import CookieJar, DefaultCookiePolicy
from typing import Any

import httpx

from .. import __version__
from ..errors import ServiceRejection
from ..limits import DEFAULT_MAX_JSON_DEPTH, DEFAULT_MAX_RESPONSE_BYTES, DEFAULT_TIMEOUT_S
from .allow_list import HostAllowList
from .cassette import CALL, Call, Cassette, Unmatched
from .cassette_transport import RecordingTransport, ReplayTransport
from .faults import CallFaults, Fault
from .http_body import ACCEPT_ENCODING, BodyTooLarge, UnsupportedEncoding, read_body
from .http_call import ManagedCall, claim_call
from .http_outcome import (
    TooDeep,
    classify_transport_error,
    decode_data,
    http_error_message,
)
from .http_request import (
    DEFAULT_REDACTED,
    HttpRequest,
    call_started,
    parse_request,
    redact_headers,
)
from .scope import CALL_EXTENSION, CallScope, is_reattachable
from .secrets import Secrets, hide_from_logs, stop_hiding_from_logs

MAX_RESPONSE_BYTES = DEFAULT_MAX_RESPONSE_BYTES


class _TooLarge(Exception):
    """The response body passed the size cap; carries what was known by then."""

    def __init__(self, response: httpx.Response) -> None:
        self.response = response


class _Unreadable(Exception):
    """The response body is in an encoding this client does not read."""

    def __init__(self, response: httpx.Response, encoding: str) -> None:
        self.response = response
        self.encoding = encoding


@functools.cache
def _tls_context() -> ssl.SSLContext:
    """One verifying TLS context per process: loading the CA store costs ~15 ms, and a
    run makes a fresh client (spec §4.1: one client per run, closed with the run)."""
    return httpx.create_ssl_context()  # what httpx would build: certifi's CA bundle


class HttpService:
    """The managed HTTP service of one run (spec §4.1).

    ``redact``: header names shown and journaled as ``•••`` (case-insensitive).
    ``allow_hosts``: the ``http_allow`` setting (see ``HostAllowList``); ``None``
    allows every host. ``default_timeout``: seconds, when the request gives none.
    ``client``: an ``httpx.AsyncClient`` to use instead of creating one; the caller
    then owns it and ``aclose`` leaves it open. ``transport``: what the client this
    service creates sends through (httpx's own by default; the lab's server model,
    spec §11), every step of ``request`` unchanged. ``holds_clock``: whether a request
    in flight holds a simulated clock still (real work, spec §5.1); False for a
    transport that answers on the run's clock itself. ``secrets``: the values
    references in requests stand for (spec §10.1). ``faults``: injected faults (spec
    §10.2). ``cassette``: record every call into it, or answer every call from it with
    no network (spec §10.4); it becomes the transport (a recording sends on through
    ``transport`` or httpx's own), so every step above it — the allow-list, faults,
    caps, scrubbing — acts on a replayed call as on a live one.
    """

    def __init__(
        self,
        *,
        redact: Iterable[str] = DEFAULT_REDACTED,
        allow_hosts: Iterable[str] | None = None,
        default_timeout: float = DEFAULT_TIMEOUT_S,
        client: httpx.AsyncClient | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
        holds_clock: bool = True,
        max_response_bytes: int = MAX_RESPONSE_BYTES,
        max_json_depth: int = DEFAULT_MAX_JSON_DEPTH,
        secrets: Secrets | None = None,
        faults: Iterable[Fault] = (),
        cassette: Cassette | None = None,
    ) -> None:
        if client is not None and (transport is not None or cassette is not None):
            raise ValueError("give HttpService a client or a transport (or cassette), not "
                             "both: a client already has its transport")
        self.cassette = cassette
        if cassette is not None and cassette.replaying:
            transport = ReplayTransport(cassette)
        elif cassette is not None:
            inner = transport or httpx.AsyncHTTPTransport(verify=_tls_context(), trust_env=False)
            transport = RecordingTransport(inner, cassette, max_response_bytes)
        self.secrets = secrets if secrets is not None else Secrets()
        self.faults = tuple(faults)
        if self.secrets:
            hide_from_logs(self.secrets)
        self.redact = tuple(name.lower() for name in redact)
        self.allow = HostAllowList(allow_hosts)
        self.default_timeout = default_timeout
        self.max_response_bytes = max_response_bytes
        self.max_json_depth = max_json_depth
        self.holds_clock = holds_clock
        self._transport = transport
        self._owns_client = client is None
        self._client = client or httpx.AsyncClient(
            trust_env=False,
            follow_redirects=False,
            # A given transport has its own TLS (or none): build the context only for ours.
            verify=_tls_context() if transport is None else True,
            transport=transport,
            # No cookie jar: each request carries exactly the headers the script wrote and
            # the journal shows, whatever earlier responses set.
            cookies=CookieJar(policy=DefaultCookiePolicy(allowed_domains=[])),
            # Only encodings read_body inflates with its size bounded (http_body.py).
            headers={"User-Agent": f"woml-magic/{__version__}",
                     "Accept-Encoding": ACCEPT_ENCODING},
        )

    async def aclose(self) -> None:
        """Close the client this service created (one per run, closed with the run)."""
        stop_hiding_from_logs(self.secrets)
        if self._owns_client:
            await self._client.aclose()

    async def request(self, request: Any, options: Any, scope: CallScope) -> dict[str, Any]:
        """Perform one ``services.http.request(request, options)`` call (spec §4.1).

        Returns ``{status, headers, data, replayed}``; raises ``ServiceRejection`` named
        ``TypeError``, ``HttpError``, ``NetworkError``, ``AmbiguousError`` or
        ``ResponseTooLargeError``. Response headers are returned with real values to
        the script, except when reattached: the journal only holds redacted ones.
        Secret values are scrubbed from all of it (spec §10.1).
        """
        secrets = self.secrets
        try:
            result = await self._request(request, options, scope)
        except ServiceRejection as rejection:
            raise secrets.scrub_rejection(rejection) from None
        except Exception as exc:
            # An internal error becomes the attempt's crash message: never with a value.
            if secrets and (secrets.reveals(str(exc)) or secrets.reveals(repr(exc))):
                raise RuntimeError(secrets.scrub(f"{type(exc).__name__}: {exc}")) from None
            raise
        return secrets.scrub_json(result)  # type: ignore[no-any-return]  # a JSON object

    async def _request(self, request: Any, options: Any, scope: CallScope) -> dict[str, Any]:
        """The module docstring's seven steps, one call each."""
        call = self._open(request, options, scope)  # 1-3
        self._check_allowed(call)  # 4
        stored = self._reattached(call)  # 5
        if stored is not None:
            return stored
        await call.faults.before_send(call.req, scope.sleep, call.finish, self.redact)  # 6
        response, body = await self._exchange(call)  # 7
        return self._answer(call, response, body)

    def _open(self, request: Any, options: Any, scope: CallScope) -> ManagedCall:
        """Steps 1-3: validate the request, claim its name, emit ``CallStarted``."""
        req = parse_request(request, options, default_timeout=self.default_timeout,
                            secrets=self.secrets)
        faults = CallFaults.of(self.faults, req.name, scope.attempt_number,
                               has_clock=scope.sleep is not None)
        index = claim_call(req, scope)
        started = call_started(req, scope, index, self.redact)
        scope.emit(started)
        return ManagedCall(req, scope, index, faults, started, self.secrets)

    def _check_allowed(self, call: ManagedCall) -> None:
        """Step 4: a host outside the allow-list is a ``NetworkError``, nothing sent."""
        req = call.req
        if self.allow.allows(req.url):
            return
        message = (
            f"{req.method} {req.shown_url}: the host {req.url.host!r} is not in the "
            f"http_allow list ({', '.join(self.allow.entries or ())}); nothing was sent"
        )
        call.finish(outcome="network-error", error=message)
        raise ServiceRejection("NetworkError", message, {"blocked": True, "host": req.url.host})

    def _reattached(self, call: ManagedCall) -> dict[str, Any] | None:
        """Step 5: the journaled 2xx response of a named call, replayed (spec §4.3)."""
        name = call.req.name
        stored = call.scope.step_calls.reattach.get(name) if name is not None else None
        if stored is None:
            return None
        call.finish(outcome="response", status=stored.get("status"), replayed=True,
                    response=stored)
        return {**stored, "replayed": True}

    async def _exchange(self, call: ManagedCall) -> tuple[httpx.Response, bytes]:
        """Step 7's sending: ``CallStarted`` made durable, the request sent and its body
        read; a failure to get an answer is recorded and raised as spec §4.1 names it."""
        req, scope = call.req, call.scope
        if scope.durable is not None:
            await scope.durable(call.started)  # spec §5.2: recorded before the request leaves
        # What a cassette keeps of the call, made before anything is sent (spec §10.4).
        kept = None if self.cassette is None else \
            Call.of(call.req, scope, self.redact, self.secrets)
        try:
            with scope.busy() if self.holds_clock else contextlib.nullcontext():
                return await self._send(call, kept)
        except Unmatched as exc:
            # A replay with no recorded answer: nothing was sent, so not ambiguous; the
            # message names the request and the nearest recorded one (spec §10.4).
            message = f"{req.method} {req.shown_url}: {exc}"
            call.finish(outcome="network-error", error=message)
            raise ServiceRejection("NetworkError", message, {"unmatched": True}) from None
        except asyncio.CancelledError:
            # The attempt ended (timeout, cancel) with the request in flight: record it as
            # ambiguous, but never let a failing emit replace the cancellation.
            call.mark_unkeyed()
            with contextlib.suppress(Exception):
                call.finish(
                    outcome="ambiguous",
                    error="the attempt ended while the request was in flight; "
                    "whether the server acted on it is unknown",
                )
            raise
        except _TooLarge as exc:
            raise self._too_large(req, exc.response, call.finish) from None
        except _Unreadable as exc:
            raise self._unreadable(req, exc, call.finish) from None
        except httpx.HTTPError as exc:
            outcome, reason = classify_transport_error(exc, req.timeout)
            message = f"{req.method} {req.shown_url}: {reason}"
            call.finish(outcome=outcome, error=message)
            if outcome == "network-error":
                raise ServiceRejection("NetworkError", message) from None
            raise call.ambiguous(message) from None
        except Exception as exc:
            # Not an error httpx documents: the request may have left, so record the call
            # as ambiguous (fail closed) and let the engine report a crash (spec §3.2).
            call.mark_unkeyed()
            call.finish(outcome="ambiguous", error=f"internal error while sending: {exc!r}")
            raise

    def _answer(self, call: ManagedCall, response: httpx.Response, body: bytes) -> dict[str, Any]:
        """Step 7's answer: a dropped response (an injected fault), the body decoded and
        scrubbed, ``CallFinished``, and the value or the ``HttpError``."""
        req = call.req
        dropped = call.faults.dropped(req, response.status_code, call.finish)
        if dropped is not None:
            raise call.ambiguous(dropped)
        content_type = response.headers.get("content-type")
        # httpx finds the charset with the email parser: ask only when there is one.
        charset = response.charset_encoding if "charset" in (content_type or "").lower() else None
        try:
            data = decode_data(body, content_type, charset, max_depth=self.max_json_depth)
        except TooDeep as exc:
            raise self._too_deep(req, response, str(exc), call.finish) from None
        del body
        # Scrubbed at once, so nothing below (the reattach store included) holds a value.
        secrets = self.secrets
        data = secrets.scrub_json(data)
        headers = secrets.scrub_json({name: response.headers[name] for name in response.headers})
        status = response.status_code
        record = {"status": status, "headers": redact_headers(headers, self.redact),
                  "data": data}
        if status >= 400:
            message = http_error_message(req.method, req.shown_url, response, data)
            call.finish(outcome="response", status=status, response=record, error=message)
            raise ServiceRejection("HttpError", message, dict(record))
        call.finish(outcome="response", status=status, response=record)
        if req.name is not None and is_reattachable(status):
            call.scope.step_calls.reattach[req.name] = record
        return {"status": status, "headers": headers, "data": data, "replayed": False}

    async def _send(self, call: ManagedCall, kept: Call | None) -> tuple[httpx.Response, bytes]:
        """Send and read the body, at most ``max_response_bytes`` of it, counted after
        decompression while it streams (http_body.py)."""
        req = call.req
        # The userinfo is in req.headers as Authorization already (http_request.py).
        url = req.url.copy_with(username=None, password=None) if req.url.userinfo else req.url
        request = self._client.build_request(req.method, url, headers=list(req.headers),
                                             content=req.content, timeout=req.timeout,
                                             extensions={CALL_EXTENSION: call.tag, CALL: kept})
        if self._transport is not None:
            # The client's send loop would add nothing here (no auth, no redirects
            # followed, no cookies kept: see __init__) but its cost, which a lab pays on
            # every call of every client (bench/lab.py).
            response = await self._transport.handle_async_request(request)
        else:
            response = await self._client.send(request, stream=True)
        try:
            declared = response.headers.get("content-length", "")
            if declared.isdigit() and int(declared) > self.max_response_bytes:
                raise _TooLarge(response)
            try:
                body = await read_body(response, self.max_response_bytes)
            except BodyTooLarge:
                raise _TooLarge(response) from None
            except UnsupportedEncoding as exc:
                raise _Unreadable(response, str(exc)) from None
        finally:
            await response.aclose()
        return response, body

    def _too_large(
        self, req: HttpRequest, response: httpx.Response, finish: Callable[..., None]
    ) -> ServiceRejection:
        """Record a response whose body passed the cap, and the rejection to raise."""
        message = (
            f"{req.method} {req.shown_url} answered {response.status_code} with a body over "
            f"the {self.max_response_bytes} byte limit; ask the API for a smaller page"
        )
        return self._unread(response, finish, "ResponseTooLargeError", message,
                            limit=self.max_response_bytes)

    def _too_deep(
        self, req: HttpRequest, response: httpx.Response, reason: str,
        finish: Callable[..., None],
    ) -> ServiceRejection:
        """A JSON body nested deeper than ``max_json_depth`` (spec §4.5): the call is
        finished (the server answered), the script gets a clear error."""
        message = (
            f"{req.method} {req.shown_url} answered {response.status_code} with {reason}; "
            "the body is not given to the script"
        )
        return self._unread(response, finish, "ResponseTooDeepError", message,
                            limit=self.max_json_depth)

    def _unreadable(
        self, req: HttpRequest, exc: _Unreadable, finish: Callable[..., None]
    ) -> ServiceRejection:
        response = exc.response
        message = (
            f"{req.method} {req.shown_url} answered {response.status_code} with a body in "
            f"Content-Encoding {exc.encoding!r}; only {ACCEPT_ENCODING} and identity are read"
        )
        return self._unread(response, finish, "ResponseDecodeError", message)

    def _unread(
        self, response: httpx.Response, finish: Callable[..., None], error: str, message: str,
        **props: int,
    ) -> ServiceRejection:
        """Journal a response whose body is not given to the script, as finished; the
        rejection named ``error`` the script gets instead, with the response's status and
        headers and ``props``."""
        headers = redact_headers(
            {name: response.headers[name] for name in response.headers}, self.redact
        )
        finish(
            outcome="response",
            status=response.status_code,
            response={"status": response.status_code, "headers": headers, "data": None},
            error=message,
        )
        return ServiceRejection(
            error, message, {"status": response.status_code, "headers": headers, **props}
        )
