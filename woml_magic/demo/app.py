"""``DemoApp``: the demo API without a socket — state, idempotency, faults (spec §8).

Everything the demo API decides is decided here; ``server.py`` only frames HTTP/1.1
around it and ``DemoAPI`` (``api.py``) runs the two together on 127.0.0.1. Every
request goes through one state machine, each step a public method:

1. ``begin`` (under the lock): take the next fault, route, read the key, then replay,
   refuse or execute; returns the request's ``Exchange``;
2. the caller holds the response ``exchange.delay`` seconds, outside the lock, the key
   still in flight (a duplicate meanwhile gets 409);
3. ``finish`` (under the lock): the response is stored under its key (the key leaves
   flight) and the request's log is closed;
4. the caller sends ``exchange.response``, or closes the connection without a byte
   when ``exchange.drop`` (``drop_response_next``).

``reject`` logs a request the HTTP layer refused before reading its body (411, 413).
"""

from __future__ import annotations

import copy
import json
import math
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

from ..errors import DemoAPIError
from .exchange import DemoRequest, Exchange, Fault, RequestLog
from .idempotency import IdempotencyStore, fingerprint, parse_key
from .problems import JSON_TYPE, ProblemError, Response, fail, json_response, problem
from .resources import COLLECTIONS, new_record, validate_charge, validate_customer


def _positive_count(n: int, what: str) -> int:
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise DemoAPIError(f"{what}: n={n!r} must be a positive integer.")
    return n


class DemoApp:
    """The demo API's behaviour with no socket: records, keys, faults (spec §8).

    ``require_keys`` makes ``Idempotency-Key`` mandatory on POST; ``ttl`` is how long a
    stored key lives, in seconds on ``clock`` (injectable for tests); ``log`` receives
    one line per finished request. Thread-safe: one lock guards all state, and the
    HTTP layer calls ``begin`` / ``finish`` / ``reject`` from one thread per connection.
    """

    def __init__(
        self,
        *,
        require_keys: bool = False,
        ttl: float = 24 * 3600,
        clock: Callable[[], float] = time.monotonic,
        log: Callable[[str], None] | None = None,
    ) -> None:
        if isinstance(ttl, bool) or not isinstance(ttl, (int, float)) or not 0 < ttl < math.inf:
            raise DemoAPIError(f"ttl {ttl!r} must be a positive, finite number of seconds.")
        self.require_keys = require_keys
        self._log_line = log
        self._lock = threading.Lock()
        self._store = IdempotencyStore(float(ttl), clock)
        self._records: dict[str, list[dict[str, Any]]] = {name: [] for name in COLLECTIONS}
        self._counters: dict[str, int] = dict.fromkeys(COLLECTIONS, 0)
        self._log: list[RequestLog] = []
        self._faults: list[Fault] = []

    # -- faults (spec §8) -----------------------------------------------------------

    def fail_next(self, n: int = 1, status: int = 503) -> None:
        """Answer the next ``n`` requests with a ``status`` problem before execution.

        Nothing runs and nothing is stored, so a retry with the same key executes
        afresh. Faults queue in call order and each request, on any endpoint, takes
        the first queued one.
        """
        _positive_count(n, "fail_next")
        if isinstance(status, bool) or not isinstance(status, int) or not 400 <= status <= 599:
            raise DemoAPIError(f"fail_next: status {status!r} must be an error status, 400 to 599.")
        with self._lock:
            self._faults.extend([("fail", float(status))] * n)

    def drop_response_next(self, n: int = 1) -> None:
        """Execute the next ``n`` requests and store their responses, then close the
        connection without sending a byte: the client cannot tell whether it happened."""
        _positive_count(n, "drop_response_next")
        with self._lock:
            self._faults.extend([("drop", 0.0)] * n)

    def delay_next(self, n: int = 1, seconds: float = 1.0) -> None:
        """Hold the responses of the next ``n`` requests for ``seconds`` (real time).

        The request executes first (its record exists), then waits with its key still
        in flight — a duplicate meanwhile gets 409 — then its response is stored and
        sent. A client whose read timeout is shorter sees an ambiguous outcome.
        """
        _positive_count(n, "delay_next")
        if (
            isinstance(seconds, bool)
            or not isinstance(seconds, (int, float))
            or not (0 <= seconds <= 3600)
        ):
            raise DemoAPIError(f"delay_next: seconds {seconds!r} must be from 0 to 3600.")
        with self._lock:
            self._faults.extend([("delay", float(seconds))] * n)

    # -- what happened -----------------------------------------------------------

    def records(self, collection: str) -> list[dict[str, Any]]:
        """Copies of the records created in ``collection`` ("customers" or "charges"),
        duplicates included, in creation order."""
        if collection not in self._records:
            raise DemoAPIError(
                f"unknown collection {collection!r}; use one of {', '.join(COLLECTIONS)}."
            )
        with self._lock:
            return copy.deepcopy(self._records[collection])

    @property
    def requests(self) -> list[DemoRequest]:
        """Every request received, in arrival order, with its outcome."""
        with self._lock:
            return [entry.freeze() for entry in self._log]

    def reset(self) -> None:
        """Forget every record, request, stored key and queued fault; ids restart at 0001."""
        with self._lock:
            for records in self._records.values():
                records.clear()
            self._counters = dict.fromkeys(COLLECTIONS, 0)
            self._log.clear()
            self._faults.clear()
            self._store.clear()

    # -- the state machine of one request (called by server.py) ---------------------

    def reject(
        self, method: str, path: str, headers: Mapping[str, str], response: Response
    ) -> None:
        """Log a request the HTTP layer refused before reading it (e.g. 411, 413)."""
        with self._lock:
            self._log.append(
                RequestLog(
                    method,
                    path,
                    dict(headers),
                    outcome="rejected",
                    status=response.status,
                    answered=True,
                )
            )

    def begin(
        self, method: str, path: str, headers: Mapping[str, str], key_values: list[str], body: bytes
    ) -> Exchange:
        """Decide the response to one request and run its effect (spec §8).

        ``key_values`` are all the request's ``Idempotency-Key`` header values (a
        repeated header is refused). The returned ``Exchange`` goes to ``finish``.
        """
        with self._lock:
            log = RequestLog(method, path, dict(headers))
            self._log.append(log)
            exchange = Exchange(log)
            kind, value = self._faults.pop(0) if self._faults else (None, 0.0)
            log.fault = kind
            if kind == "fail":
                log.outcome = "failed-injected"
                exchange.response = problem(
                    int(value),
                    f"this {int(value)} was injected by fail_next() before execution; "
                    "nothing ran or was stored, so a retry with the same key executes afresh.",
                    slug="injected-fault",
                    title="Injected fault",
                )
            else:
                try:
                    exchange.response = self._process(exchange, method, path, key_values, body)
                except ProblemError as error:
                    exchange.response = error.response
                    if log.outcome == "pending":  # refused before execution began
                        log.outcome = "rejected"
                exchange.drop = kind == "drop"
                exchange.delay = log.delay = value if kind == "delay" else 0.0
            log.status = exchange.response.status
            return exchange

    def finish(self, exchange: Exchange) -> None:
        """Store ``exchange``'s response under its key (the key leaves flight) and close
        its log; call it once the delay is over, before the response is sent."""
        with self._lock:
            if exchange.pending is not None:
                store_key, entry = exchange.pending
                self._store.complete(store_key, entry, exchange.response)
            if exchange.drop:
                exchange.log.outcome = "dropped"
            else:
                exchange.log.answered = True
        if self._log_line is not None:
            self._log_line(exchange.log.line())

    def _process(
        self, exchange: Exchange, method: str, path: str, key_values: list[str], body: bytes
    ) -> Response:
        """Route, check the key, then replay, refuse or execute (spec §8, in that order)."""
        log = exchange.log
        collection = _route(method, path)
        if method == "GET":
            log.outcome = "executed"
            return json_response(200, {"data": copy.deepcopy(self._records[collection])})
        key = parse_key(key_values)
        log.idempotency_key = key
        if key is None and self.require_keys:
            raise fail(
                400,
                f"POST {path} requires an Idempotency-Key header; send a unique key per "
                "logical operation and reuse it on every retry.",
                slug="idempotency-key-missing",
                title="Idempotency-Key missing",
            )
        value = _parse_json(_header(log.headers, "Content-Type"), body)
        log.json = value
        if key is None:
            return self._execute(log, collection, value)
        store_key = (key, method, path)
        body_print = fingerprint(value)
        entry = self._store.get(store_key)
        if entry is not None and entry.fingerprint != body_print:
            log.outcome = "mismatch"
            raise fail(
                422,
                f"Idempotency-Key {key!r} was already used for POST {path} with a different "
                "body; use a new key for a new operation.",
                slug="idempotency-key-reused",
                title="Idempotency-Key reused",
            )
        if entry is not None and entry.response is None:
            log.outcome = "conflict"
            raise fail(
                409,
                f"a request with Idempotency-Key {key!r} is still being processed; retry "
                "after it finishes to get its stored response.",
                slug="idempotency-key-in-use",
                title="Idempotency-Key in use",
                headers=(("Retry-After", "1"),),
            )
        if entry is not None and entry.response is not None:
            log.outcome = "replayed"
            return entry.response.with_headers(("Idempotent-Replayed", "true"))
        exchange.pending = (store_key, self._store.begin(store_key, body_print))
        try:
            return self._execute(log, collection, value)
        except ProblemError as error:
            # spec §8: a request whose execution began stores its error too.
            return error.response

    def _execute(self, log: RequestLog, collection: str, value: Any) -> Response:
        """Validate and create one record; its 400 is part of the execution (stored)."""
        log.outcome = "executed"
        if collection == "customers":
            fields = validate_customer(value)
        else:
            fields = validate_charge(value, self._records["customers"])
        self._counters[collection] += 1
        record = new_record(collection, self._counters[collection], fields)
        self._records[collection].append(record)
        log.record_id = record["id"]
        return json_response(201, record)


def _route(method: str, path: str) -> str:
    """The collection ``path`` names, or a 404/405 problem."""
    collection = path.removeprefix("/")
    if collection not in COLLECTIONS:
        raise fail(
            404,
            f"there is no resource at {path!r}; the demo API serves /customers and /charges.",
        )
    if method not in ("GET", "POST"):
        raise fail(
            405,
            f"{path} does not support {method}; use GET to list or POST to create.",
            headers=(("Allow", "GET, POST"),),
        )
    return collection


def _header(headers: Mapping[str, str], name: str) -> str | None:
    """The value of header ``name``, whatever case the client spelled it in."""
    wanted = name.lower()
    return next((value for key, value in headers.items() if key.lower() == wanted), None)


def _parse_json(headers_type: str | None, body: bytes) -> Any:
    """The request body as JSON: ``application/json`` (any charset param), else 415/400."""
    media = (headers_type or "").split(";")[0].strip().lower()
    if media != JSON_TYPE:
        raise fail(
            415,
            f"Content-Type {headers_type!r} is not supported; send the body as application/json.",
            headers=(("Accept-Post", JSON_TYPE),),
        )

    def refuse_constant(name: str) -> Any:
        raise ValueError(f"{name} is not JSON")

    try:
        return json.loads(body.decode("utf-8"), parse_constant=refuse_constant)
    except (UnicodeDecodeError, ValueError) as error:
        raise fail(
            400,
            f"the body is not valid UTF-8 JSON ({error}); send one JSON object.",
            slug="malformed-json",
            title="Malformed JSON",
        ) from None
