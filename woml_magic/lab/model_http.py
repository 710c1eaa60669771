"""``services.http.request`` answered by the server model, in the kernel, with no
sockets (spec §11): the lab's one ``HttpService`` sends through ``ModelTransport``, a
client's request is queued, the lab answers the queue in an order drawn from the seed,
and the script sees what the real HTTP service gives it — it is the real HTTP service,
with only the transport swapped (STYLE 13)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import random
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

import httpx

from ..clock import SimulatedClock
from ..engine import EngineConfig
from ..errors import WomlRunError
from ..redaction import redact_names
from ..services import HttpService
from ..services.scope import CALL_EXTENSION, CallTag
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

    def __init__(self, state: LabServer, clock: SimulatedClock, order: random.Random) -> None:
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


class ModelTransport(httpx.AsyncBaseTransport):
    """The server model as an httpx transport (spec §11): ``HttpService`` sends a
    client's request through its one pipeline — allow-list, faults, secrets, scrubbing,
    caps, spec §4.1's outcomes — and this hands it to the exchange and gives back the
    model's answer as a response, with no socket.

    Which client and attempt a request is comes from its ``CallTag`` (the service's
    ``CALL_EXTENSION``); ``clients`` maps each client's run id to its number. Any URL
    reaches the model: only the method, the path and the body are read.
    """

    def __init__(self, exchange: ModelExchange, clients: Mapping[str, int]) -> None:
        self._exchange = exchange
        self._clients = clients

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        tag = request.extensions.get(CALL_EXTENSION)
        if not isinstance(tag, CallTag) or tag.run_id not in self._clients:
            raise RuntimeError(
                f"a request to the lab's server model came from no lab client "
                f"({request.method} {request.url.path}); only the lab's HttpService sends "
                "to it"
            )
        answer = await self._exchange.submit(self._clients[tag.run_id], tag.attempt, request.method,
                                             request.url.path, _body(request))
        return httpx.Response(
            answer.status,
            headers=answer.headers,
            # A stream, not content=: no Content-Length the model did not send.
            stream=httpx.ByteStream(json.dumps(answer.data).encode()),
            request=request,
        )


def _body(request: httpx.Request) -> Any:
    """The request's body as the model takes it: JSON parsed, other text as text,
    None when empty."""
    content = request.content
    if not content:
        return None
    text = content.decode("utf-8", errors="replace")
    if request.headers.get("content-type", "").startswith("application/json"):
        with contextlib.suppress(ValueError):
            return json.loads(text)
    return text


def lab_http(config: EngineConfig, exchange: ModelExchange | None,
             clients: Mapping[str, int]) -> HttpService:
    """The one ``HttpService`` of a lab, shared by every client (spec §11): it sends
    through the server model (``exchange``; the model answers on the lab's clock, so a
    request in flight does not hold it), or, with None, over HTTP to a real API such
    as the demo API on 127.0.0.1, with one connection pool for the whole lab.
    ``clients`` maps a client's run id to its number."""
    transport = ModelTransport(exchange, clients) if exchange is not None else None
    return HttpService(redact=redact_names(config.redact_headers),
                       allow_hosts=config.http_allow,
                       transport=transport,
                       holds_clock=transport is None,
                       max_response_bytes=config.limits.max_response_bytes,
                       max_json_depth=config.limits.max_json_depth,
                       secrets=config.secrets,
                       faults=config.faults)


def json_copy(value: Any) -> Any:
    """A client's own copy of its payload (and a check that it is JSON, spec §6.1)."""
    try:
        return json.loads(json.dumps(value, allow_nan=False))
    except (TypeError, ValueError) as exc:
        raise WomlRunError(f"a lab client's payload must be a JSON value: {exc}") from None
