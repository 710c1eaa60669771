"""The lab's real clients: N runs of one workflow on one simulated clock (spec §11).

Each client is a real run — its scripts in the QuickJS worker, the same ``Engine``
and ``AttemptRunner``, the same outcome rules (spec §3.2) — with its own ``Run`` (id
``lab-<seed>-<n>``, so its idempotency keys are §3.5's) and its own view of one
``LabClock`` that every client shares. A client's ``services.http.request`` is
answered by the server model in-process (``ModelHttp``: no socket), or, against the
demo API, sent over HTTP to 127.0.0.1 by one shared ``HttpService``.

Deterministic from the seed. The lab moves in *settled steps*: whenever no script is
running and the event loop is idle (every client waits on a worker, the server or
the clock), the lab clock's ``on_idle`` does the first of

1. give free script workers to the clients waiting for one (``LabPool.settle``), in
   an order drawn from the seed;
2. answer the requests the server model holds, in an order drawn from the seed
   (``ModelExchange.flush``; a real server sees simultaneous requests in no
   particular order);
3. jump the clock to the next timer.

Between two settled steps scripts run concurrently on the warm workers, but nothing
they do is decided until the next step, and every decision depends only on what the
clients did, never on which process answered first. ``LabClock`` does not move while
real work happens: script execution costs no simulated time in a lab (unlike the
plain simulated clock, spec §5.1), so how fast this machine is changes nothing.

The model's answers reach the script at the instant of the request (the model's
``latency`` is the model path's, ``simulate``): a script waiting on simulated time
holds a real worker, and with every worker held the clients still waiting for one
would start late. Such late starts (scripts that ``services.sleep``) are counted
(``LabClock.late``). A script that keeps the clock still for ``STALL_S`` seconds of
real time (an endless loop, a request the demo API never answers) lets the lab move
on around it, so its step's timeout can end it; such a lab is no longer
deterministic, and says so (``LabClock.stalls``).
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import contextvars
import functools
import heapq
import itertools
import json
import random
import time
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import httpx

from ..clock import Clock, ClockKind
from ..engine import AttemptRunner, Engine, EngineConfig, check_scripts
from ..errors import ServiceRejection, WomlRunError
from ..events import CallFinished, Event
from ..limits import DEFAULT_TIMEOUT_S
from ..model import Run, Workflow
from ..redaction import redact_headers, redact_names
from ..runtime import ScriptWorker
from ..runtime.pool import WorkerPool
from ..services import CallScope, HttpService, RunServices
from ..services.http import claim_call
from ..services.http_outcome import http_error_message
from ..services.http_request import call_started, parse_request
from ..services.registry import Handler
from ..services.scope import is_reattachable
from .server import ModelResponse

#: Scripts' ``Date.now()`` in a lab at simulated time 0: 2025-01-01T00:00:00Z, the same
#: in every lab, so a script that reads the date is as deterministic as the rest.
LAB_EPOCH_S = 1_735_689_600.0

#: Real seconds the clock may stand still without any progress before it moves on
#: around whatever holds it (module docstring).
STALL_S = 1.0

#: Warm script workers for a lab (measured on 2 cores: bench/lab.py; 3 was fastest).
DEFAULT_WORKERS = 3

#: Consecutive loop iterations the clock waits for ready callbacks before jumping
#: anyway (another simulated clock on the same loop defers too; see clock.py).
_MAX_DEFERRALS = 10_000

#: The base URL a client's payload names for a model server: any URL reaches the
#: model (only the path and method are read), this one says so.
MODEL_URL = "http://model.lab"


def stream(seed: int, name: str) -> random.Random:
    """The seed's random stream ``name``: each kind of draw has its own, so adding one
    draw never shifts another (``simulate`` names its streams the same way)."""
    return random.Random(f"woml-lab:{seed}:{name}")  # noqa: S311 - a simulation, not a secret


class LabClock(Clock):
    """One simulated clock for every client of a lab (module docstring).

    Time stands still while anything holds ``busy()``; when nothing does and the loop
    is idle, ``on_idle`` may give the clients work at this instant (a settled step),
    and otherwise time jumps to the earliest timer.
    """

    kind: ClockKind = "simulated"

    def __init__(self, on_idle: Callable[[], bool] | None = None) -> None:
        """``on_idle``: called when nothing real is happening; True if it gave the
        clients something to do at this instant (then time stays)."""
        super().__init__()
        self._wall0 = LAB_EPOCH_S
        self._now = 0.0
        self._on_idle = on_idle
        self._timers: list[tuple[float, int, asyncio.Future[None]]] = []
        self._seq = itertools.count()
        self._holds = 0
        self._progress = time.monotonic()
        self._handle: asyncio.Handle | None = None
        self._watchdog: asyncio.TimerHandle | None = None
        self._deferrals = 0
        #: How many times the clock moved on without the lab being settled: around work
        #: that held it ``STALL_S`` real seconds, or a loop that never went idle.
        self.stalls = 0

    def now(self) -> float:
        return self._now

    def set_on_idle(self, on_idle: Callable[[], bool]) -> None:
        """Who delivers work when every client waits (the server's exchange)."""
        self._on_idle = on_idle

    async def sleep(self, seconds: float) -> None:
        if seconds <= 0:
            return
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        heapq.heappush(self._timers, (self._now + seconds, next(self._seq), fut))
        self.kick()
        try:
            await fut
        finally:
            if not fut.done():
                fut.cancel()
            self.kick()

    @contextlib.contextmanager
    def busy(self) -> Iterator[None]:
        self._holds += 1
        self._progress = time.monotonic()
        try:
            yield
        finally:
            self._holds -= 1
            self._progress = time.monotonic()
            self.kick()

    def kick(self) -> None:
        """Look at the timers again on the next loop iteration."""
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # outside a loop nothing can be waiting
            return
        if self._handle is None:  # else a look is already due, and sees this change too
            self._handle = loop.call_soon(self._advance)

    def _advance(self) -> None:
        self._handle = None
        loop = asyncio.get_running_loop()
        if self._holds and not self._stalled():
            # Real work under way: time waits for it (a watchdog looks again later).
            if self._watchdog is None:
                self._watchdog = loop.call_later(STALL_S, self._watch)
            return
        # Tasks woken by the last timer or answer must make their move first.
        if getattr(loop, "_ready", None):
            if self._deferrals < _MAX_DEFERRALS:
                self._deferrals += 1
                self._handle = loop.call_soon(self._advance)
                return
            self.stalls += 1  # the loop never settled (another clock deferring too?)
        self._deferrals = 0
        if self._on_idle is not None and self._on_idle():
            return  # answers delivered at this instant; their clients move next
        while self._timers and self._timers[0][2].done():
            heapq.heappop(self._timers)
        if not self._timers:
            return
        self._now = max(self._now, self._timers[0][0])
        while self._timers and self._timers[0][0] <= self._now:
            _, _, fut = heapq.heappop(self._timers)
            if not fut.done():
                fut.set_result(None)
        if self._timers:
            self.kick()

    def _stalled(self) -> bool:
        """Whether work has held the clock ``STALL_S`` real seconds with no progress
        (then the clock moves on around it, and counts it)."""
        if time.monotonic() - self._progress < STALL_S:
            return False
        self.stalls += 1
        self._progress = time.monotonic()
        return True

    def _watch(self) -> None:
        self._watchdog = None
        if self._holds:
            self.kick()


class ClientClock(Clock):
    """One client's view of the lab's clock: seconds since that client started (every
    time its ``Run`` shows is on it, spec §5.1); waits and work are the lab clock's."""

    kind: ClockKind = "simulated"

    def __init__(self, lab: LabClock, start: float) -> None:
        super().__init__()
        self._lab = lab
        self.start = start

    def now(self) -> float:
        return self._lab.now() - self.start

    def epoch_ms(self) -> float:
        return self._lab.epoch_ms()

    async def sleep(self, seconds: float) -> None:
        await self._lab.sleep(seconds)

    def busy(self) -> contextlib.AbstractContextManager[None]:
        return self._lab.busy()


#: The lab client the current task works for (each client's task sets it; the
#: engine's tasks inherit it): the pool gives workers in an order of clients.
CLIENT: contextvars.ContextVar[int] = contextvars.ContextVar("woml_lab_client", default=-1)


class LabPool(WorkerPool):
    """A fixed number of warm script workers shared by every client (spec §4.5).

    Clients that ask for a worker wait until the next settled step (module
    docstring); ``settle`` then queues them in an order drawn from the seed and gives
    out the free workers. A worker given back goes to the next client of that queue
    at once: who gets it does not depend on which attempt ended first.
    """

    def __init__(self, workers: int, order: random.Random) -> None:
        super().__init__(keep=workers)
        self._workers = workers
        self._free = workers
        self._order = order
        self._asking: list[tuple[int, asyncio.Future[None]]] = []
        self._queue: collections.deque[asyncio.Future[None]] = collections.deque()
        self.on_change: Callable[[], None] = lambda: None

    def waiting(self) -> list[asyncio.Future[None]]:
        """The requests for a worker not given yet (to count late starts)."""
        return [f for _, f in self._asking] + [f for f in self._queue if not f.done()]

    async def warm(self) -> None:
        """Start every worker at once, before the clients need them."""
        started = [ScriptWorker() for _ in range(self._workers - len(self._idle))]
        await asyncio.gather(*(worker.start() for worker in started))
        self._idle.extend(started)

    def settle(self) -> bool:
        """Queue the clients that asked since the last step, in the seed's order, and
        give out free workers; whether any was given."""
        if self._asking:
            asking = sorted(self._asking, key=lambda a: a[0])
            self._asking = []
            self._order.shuffle(asking)
            self._queue.extend(f for _, f in asking)
        return self._give() > 0

    def _give(self) -> int:
        given = 0
        while self._free and self._queue:
            fut = self._queue.popleft()
            if not fut.done():
                fut.set_result(None)
                self._free -= 1
                given += 1
        return given

    def _release(self) -> None:
        self._free += 1
        self._give()
        self.on_change()

    @contextlib.asynccontextmanager
    async def worker(self) -> AsyncIterator[ScriptWorker]:
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._asking.append((CLIENT.get(), fut))
        self.on_change()
        try:
            await fut
        except asyncio.CancelledError:
            if fut.done() and not fut.cancelled():
                self._release()  # given, but the attempt was cancelled before using it
            raise
        try:
            async with super().worker() as worker:
                yield worker
        finally:
            self._release()


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


@dataclass
class ClientRun:
    """One lab client: its number, when it started on the lab's clock, and its ``Run``
    (``lab.ClientSummary`` reads it)."""

    client: int
    start: float
    run: Run


def client_payload(client: int, base_url: str) -> dict[str, Any]:
    """What ``context.payload`` holds for client ``client`` by default."""
    return {"client": client, "api": base_url}


@dataclass
class ClientsRun:
    """What ``run_clients`` gives back: every client in order, and how the lab went.

    ``late``: attempts that waited for a worker while the clock moved on (every worker
    was held by a script waiting on the clock); ``stalls``: times the clock moved on
    before the lab had settled (``LabClock.stalls``; then the lab is not
    deterministic); ``seconds``: the real time it took.
    """

    clients: list[ClientRun]
    workers: int
    late: int = 0
    stalls: int = 0
    seconds: float = 0.0

    @property
    def deterministic(self) -> bool:
        """Whether nothing but the seed decided the lab (no stall)."""
        return self.stalls == 0


class _SettledStep:
    """The lab clock's ``on_idle``: workers first, then the server, then the clock
    (module docstring)."""

    def __init__(self, pool: LabPool, exchange: ModelExchange | None) -> None:
        self._pool = pool
        self._exchange = exchange
        self.late: set[asyncio.Future[None]] = set()

    def __call__(self) -> bool:
        if self._pool.settle():
            return True
        if self._exchange is not None and self._exchange.flush():
            return True
        self.late.update(self._pool.waiting())
        return False


async def run_clients(
    workflow: Workflow,
    starts: Sequence[float],
    *,
    seed: int,
    server: LabServer | None,
    base_url: str,
    payload: Callable[[int], Any] | None = None,
    workers: int = DEFAULT_WORKERS,
    config: EngineConfig | None = None,
) -> ClientsRun:
    """Run one real client per entry of ``starts`` (its start time on the lab clock,
    seconds) to its end.

    ``server``: the model's state (answers in-process), or None for real HTTP (an
    API at ``base_url``, such as the demo API; ``config.http_allow`` should name it).
    ``payload(n)`` is client ``n``'s payload (default ``client_payload``). Cancelling
    the calling task cancels every client's run (their running attempts end
    ``cancelled``, spec §3.2).
    """
    began = time.perf_counter()
    config = config or EngineConfig()
    clock = LabClock()
    pool = LabPool(workers, stream(seed, "workers"))
    pool.on_change = clock.kick
    exchange: ModelExchange | None = None
    shared: SharedHttp | None = None
    http_for: Callable[[int], Handler]
    if server is not None:
        exchange = ModelExchange(server, clock, stream(seed, "server-order"))
        http_for = functools.partial(ModelHttp, exchange, config=config)
    else:
        shared = SharedHttp(config)
        http_for = lambda _n: shared  # noqa: E731 - one HttpService for every client
    step = _SettledStep(pool, exchange)
    clock.set_on_idle(step)
    make_payload = payload or (lambda n: client_payload(n, base_url))
    clients = [ClientRun(n, start, Run(id=f"lab-{seed}-{n}", workflow=workflow,
                                       clock="simulated", payload=_json_copy(make_payload(n))))
               for n, start in enumerate(starts)]
    try:
        await check_scripts(workflow, pool)  # spec §2.3: nothing runs if one fails
        await pool.warm()

        async def one(client: ClientRun) -> None:
            CLIENT.set(client.client)
            await clock.sleep(client.start)
            view = ClientClock(clock, client.start)
            services = RunServices(view, limits=config.limits,
                                   redact_headers=config.redact_headers,
                                   http_allow=config.http_allow, secrets=config.secrets,
                                   http=http_for(client.client))

            def attempts(r: Run, c: Clock, emit: Callable[[Event], None]) -> AttemptRunner:
                return AttemptRunner(r, c, pool=pool, config=config, emit=emit,
                                     services=services)

            await Engine(client.run, view, attempts=attempts).execute()

        tasks = [asyncio.ensure_future(one(client)) for client in clients]
        try:
            await asyncio.gather(*tasks)
        except BaseException:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            raise
    finally:
        await pool.aclose()
        if shared is not None:
            await shared.service.aclose()
    return ClientsRun(clients, workers, late=len(step.late), stalls=clock.stalls,
                      seconds=time.perf_counter() - began)


def _json_copy(value: Any) -> Any:
    """A client's own copy of its payload (and a check that it is JSON, spec §6.1)."""
    try:
        return json.loads(json.dumps(value, allow_nan=False))
    except (TypeError, ValueError) as exc:
        raise WomlRunError(f"a lab client's payload must be a JSON value: {exc}") from None
