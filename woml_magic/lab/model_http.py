"""``services.http.request`` answered by the server model, in the kernel, with no
sockets (spec §11): a client's request is queued, the lab answers the queue in an order
drawn from the seed, and the script sees what the real HTTP service would give it."""

from __future__ import annotations

import asyncio
import contextlib
import json
import random
from dataclasses import dataclass
from typing import Any, Protocol

import httpx

from ..engine import EngineConfig
from ..errors import ServiceRejection, WomlRunError
from ..events import CallFinished
from ..limits import DEFAULT_TIMEOUT_S
from ..redaction import redact_headers, redact_names
from ..services import CallScope, HttpService
from ..services.http import claim_call
from ..services.http_outcome import http_error_message
from ..services.http_request import call_started, parse_request
from ..services.scope import is_reattachable
from .labclock import LabClock
from .server import ModelResponse


class LabServer(Protocol):
    """What a lab's clients talk to without sockets (``server.ServerState``)."""

    def handle(self, now: float, client: int, method: str = "POST", path: str = "/",
               body: Any = None, *, attempt: int = 0) -> ModelResponse:
        """Answer one request at simulated time ``now``."""
        ...


@dataclass
class _Pending:
    client: int
    attempt: int
    method: str
    path: str
    body: Any
    answer: asyncio.Future[ModelResponse]


class ModelExchange:
    """The requests the server model holds until the next settled step (module
    docstring), then answers in an order drawn from the seed."""

    def __init__(self, state: LabServer, clock: LabClock, order: random.Random) -> None:
        self.state = state
        self.clock = clock
        self._pending: list[_Pending] = []
        self._order = order

    def submit(self, client: int, attempt: int, method: str, path: str,
               body: Any) -> asyncio.Future[ModelResponse]:
        answer: asyncio.Future[ModelResponse] = asyncio.get_running_loop().create_future()
        self._pending.append(_Pending(client, attempt, method, path, body, answer))
        self.clock.kick()
        return answer

    def flush(self) -> bool:
        """Answer the requests of this instant; whether there were any."""
        pending = [p for p in self._pending if not p.answer.done()]
        self._pending = []
        if not pending:
            return False
        # Arrival order is this machine's scheduling: sort it away (a client's own
        # requests keep theirs), then draw the order the server sees from the seed.
        pending.sort(key=lambda p: p.client)
        self._order.shuffle(pending)
        now = self.clock.now()
        for p in pending:
            p.answer.set_result(self.state.handle(now, p.client, p.method, p.path, p.body,
                                                  attempt=p.attempt))
        return True


class ModelHttp:
    """``services.http.request`` of one client, answered by the server model (spec §4.1
    as ``HttpService`` answers it: the same validation, events, results and errors).

    The server answers at the next settled step, at the same simulated instant. Any
    URL reaches the model: only the method, the path and the body are read.
    """

    def __init__(self, exchange: ModelExchange, client: int, *, config: EngineConfig) -> None:
        self._exchange = exchange
        self._client = client
        self._redact = redact_names(config.redact_headers)
        self._secrets = config.secrets

    async def __call__(self, args: list[Any], scope: CallScope) -> dict[str, Any]:
        raw = args[0] if args else None
        req = parse_request(raw, args[1] if len(args) > 1 else None,
                            default_timeout=DEFAULT_TIMEOUT_S, secrets=self._secrets)
        index = claim_call(req, scope)
        scope.emit(call_started(req, scope, index, self._redact))

        def finish(**kwargs: Any) -> None:
            scope.emit(CallFinished(run_id=scope.run_id, at=scope.now(), step_id=scope.step_id,
                                    number=scope.attempt_number, call_index=index,
                                    name=req.name, **kwargs))

        stored = scope.step_calls.reattach.get(req.name) if req.name is not None else None
        if stored is not None:  # spec §4.3: a named 2xx call is not sent again
            finish(outcome="response", status=stored.get("status"), replayed=True,
                   response=stored)
            return {**stored, "replayed": True}
        body = raw.get("json", raw.get("body")) if isinstance(raw, dict) else None
        try:
            response = await self._exchange.submit(
                self._client, scope.attempt_number, req.method, req.url.path, body)
        except asyncio.CancelledError:
            # The attempt ended with the request sent and unanswered (spec §4.1, §4.2).
            if req.idempotency is None:
                scope.unkeyed_ambiguity = True
            with contextlib.suppress(Exception):
                finish(outcome="ambiguous",
                       error="the attempt ended while the request was in flight; whether "
                             "the server acted on it is unknown")
            raise
        data = response.data
        # As httpx gives them to HttpService: names in lower case (spec §4.1's shape).
        headers = {name.lower(): value for name, value in response.headers.items()}
        if self._secrets:
            data = self._secrets.scrub_json(data)
        record = {"status": response.status, "headers": redact_headers(headers, self._redact),
                  "data": data}
        if response.status >= 400:
            message = http_error_message(req.method, req.shown_url,
                                         httpx.Response(response.status), data)
            finish(outcome="response", status=response.status, response=record, error=message)
            raise ServiceRejection("HttpError", message, dict(record))
        finish(outcome="response", status=response.status, response=record)
        if req.name is not None and is_reattachable(response.status):
            scope.step_calls.reattach[req.name] = record
        return {"status": response.status, "headers": headers, "data": data,
                "replayed": False}


class SharedHttp:
    """``services.http.request`` of every client against a real API (the demo API on
    127.0.0.1): one ``HttpService`` and its connection pool for the whole lab."""

    def __init__(self, config: EngineConfig) -> None:
        self.service = HttpService(redact=redact_names(config.redact_headers),
                                   allow_hosts=config.http_allow,
                                   max_response_bytes=config.limits.max_response_bytes,
                                   max_json_depth=config.limits.max_json_depth,
                                   secrets=config.secrets)

    async def __call__(self, args: list[Any], scope: CallScope) -> Any:
        return await self.service.request(args[0] if args else None,
                                          args[1] if len(args) > 1 else None, scope)



def json_copy(value: Any) -> Any:
    """A client's own copy of its payload (and a check that it is JSON, spec §6.1)."""
    try:
        return json.loads(json.dumps(value, allow_nan=False))
    except (TypeError, ValueError) as exc:
        raise WomlRunError(f"a lab client's payload must be a JSON value: {exc}") from None
