"""``PaymentProvider``: a payment API's TEST MODE on 127.0.0.1 (spec §10, §8).

    from woml_magic.demo import PaymentProvider
    with PaymentProvider(secret_key="sk_test_…") as provider:
        provider.url                        # http://127.0.0.1:PORT
        ...                                 # a workflow POSTs {provider.url}/v1/charges
        provider.records("charges")         # the ledger, duplicates included

Something to prototype an integration against before the real provider's test mode,
in the style of the most used payment API (Stripe's): ``POST /v1/customers`` and
``POST /v1/charges`` take ``application/x-www-form-urlencoded`` parameters with
nested keys (``metadata[order]=7``) and answer the new object (``cus_0001``,
``ch_0001``); ``GET`` lists them (``{"object": "list", "data": [...]}``, newest
first). Every request needs ``Authorization: Bearer <the test key>`` (else 401, and
a wrong key is quoted back, as providers do: that is what WOML's scrubbing of
echoed secrets is for, spec §10.1). Errors are ``{"error": {"type", "message",
"param"?, "code"?}}``.

Idempotency is the demo API's own state machine (``DemoApp``: ``begin`` → held →
``finish``), so replay, 409 while in flight and key expiry are decided in one place.
This module adds only what the provider family does differently:

- authentication, routes under ``/v1``, form parameters and their validation, all
  checked *before* the key: a refused request is not stored under its key (Stripe:
  "if incoming parameters failed validation … no idempotent result is saved");
- a key is the account's, not the endpoint's: reusing it on another endpoint is
  400 ``idempotency_error``; so is reusing it with other parameters (the IETF draft
  and the demo API say 422; the provider family says 400);
- the objects' shape, and the errors' (the demo API's problems are translated).
"""

from __future__ import annotations

import hmac
import re
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any
from urllib.parse import parse_qsl

from ..errors import DemoAPIError
from .api import HOST, DemoAPI
from .exchange import Exchange, RequestLog
from .idempotency import canonical_json, parse_key
from .problems import JSON_TYPE, PROBLEM_TYPE, ProblemError, Response, json_response

__all__ = ["FORM_TYPE", "PaymentProvider", "parse_form"]

FORM_TYPE = "application/x-www-form-urlencoded"

#: The provider's routes and the demo app's collection each one names.
ROUTES: dict[str, str] = {"/v1/customers": "customers", "/v1/charges": "charges"}
#: Every object's id starts with its prefix, as the family's do.
PREFIXES: dict[str, str] = {"customers": "cus", "charges": "ch"}

#: The parameters each endpoint takes (anything else is "Received unknown parameter").
PARAMETERS: dict[str, tuple[str, ...]] = {
    "customers": ("email", "name", "description", "metadata"),
    "charges": ("amount", "currency", "customer", "source", "description", "metadata"),
}

#: The family's upper bound for an amount in the smallest currency unit.
MAX_AMOUNT = 99_999_999
#: At most this many metadata keys per object, as the family allows.
MAX_METADATA_KEYS = 50
#: How much of a wrong key the 401 quotes back: all of a key of the usual length.
ECHO_CHARS = 40
#: At most this many form fields per request (``parse_qsl`` raises beyond it).
MAX_FIELDS = 1000

_NAME = re.compile(r"([^\[\]]+)((?:\[[^\[\]]*\])*)")
_SEGMENT = re.compile(r"\[([^\[\]]*)\]")
_CURRENCY = re.compile(r"[A-Za-z]{3}")

_NO_KEY = (
    "You did not provide an API key. You need to provide your API key in the "
    "Authorization header, using Bearer auth (e.g. 'Authorization: Bearer YOUR_SECRET_KEY')."
)


def _reply(
    status: int,
    message: str,
    *,
    kind: str = "invalid_request_error",
    param: str | None = None,
    code: str | None = None,
    headers: tuple[tuple[str, str], ...] = (),
) -> Response:
    """The family's error: ``{"error": {"type", "message", "param"?, "code"?}}``."""
    body: dict[str, str] = {"type": kind, "message": message}
    if param is not None:
        body["param"] = param
    if code is not None:
        body["code"] = code
    return json_response(status, {"error": body}, *headers)


def _error(status: int, message: str, **kwargs: Any) -> ProblemError:
    """``_reply(...)`` ready to raise while a request is being admitted."""
    return ProblemError(_reply(status, message, **kwargs))


# -- form parameters ------------------------------------------------------------------


def parse_form(body: bytes) -> dict[str, Any]:
    """The parameters of a form body, nesting rebuilt: ``metadata[order]=7`` →
    ``{"metadata": {"order": "7"}}``; ``items[0][price]=p`` → ``{"items": {"0":
    {"price": "p"}}}`` (indexes stay keys: no endpoint here takes an array), and
    ``tags[]=a&tags[]=b`` counts ``"0"``, ``"1"``. Values are strings, as sent.

    Raises ``ProblemError`` (400) for a body that is not UTF-8 URL encoding, a name
    that is not ``name[key]…``, or a parameter given twice or as a value and a hash.
    """
    try:
        pairs = parse_qsl(body.decode("utf-8"), keep_blank_values=True, strict_parsing=False,
                          errors="strict", max_num_fields=MAX_FIELDS)
    except (UnicodeDecodeError, ValueError) as error:
        raise _error(400, f"The body could not be read as {FORM_TYPE} ({error}); send "
                     "URL-encoded UTF-8 name=value pairs joined by &.") from None
    params: dict[str, Any] = {}
    for name, value in pairs:
        match = _NAME.fullmatch(name)
        if match is None:
            raise _error(400, f"Invalid parameter name {name!r}: write a nested parameter as "
                         "name[key][key], with no bracket left open.", param=name)
        _insert(params, [match.group(1), *_SEGMENT.findall(match.group(2))], value, name)
    return params


def _insert(params: dict[str, Any], path: list[str], value: str, name: str) -> None:
    """Put ``value`` at ``path`` in ``params``; ``""`` (``a[]``) is the next index."""
    node = params
    for depth, part in enumerate(path):
        key = part or str(len(node))
        if depth == len(path) - 1:
            if key in node:
                raise _error(400, f"Parameter {name!r} was given more than once "
                             f"(or as a hash and as a value); send it once.", param=name)
            node[key] = value
            return
        child = node.setdefault(key, {})
        if not isinstance(child, dict):
            raise _error(400, f"Parameter {name!r} treats {key!r} as a hash, but it was "
                         "also given as a value; send one or the other.", param=name)
        node = child


# -- validation -----------------------------------------------------------------------


def _string(params: Mapping[str, Any], name: str) -> str | None:
    value = params.get(name)
    if value is not None and not isinstance(value, str):
        raise _error(400, f"Invalid string for {name}: a hash was sent ({name}[…]); send "
                     f"{name}=value.", param=name)
    return value


def _metadata(params: Mapping[str, Any]) -> dict[str, str]:
    value = params.get("metadata", {})
    if value == "":  # metadata= clears it, as the family reads an empty value
        return {}
    if not isinstance(value, dict):
        raise _error(400, "Invalid hash for metadata: send it as metadata[key]=value.",
                     param="metadata")
    if len(value) > MAX_METADATA_KEYS:
        raise _error(400, f"metadata has {len(value)} keys; at most {MAX_METADATA_KEYS} "
                     "are allowed.", param="metadata")
    for key, item in value.items():
        if not isinstance(item, str):
            raise _error(400, f"Invalid value for metadata[{key}]: metadata values are "
                         "strings, not hashes.", param=f"metadata[{key}]")
    return dict(value)


def _amount(params: Mapping[str, Any]) -> int:
    text = _string(params, "amount")
    if text is None:
        raise _error(400, "Missing required param: amount.", param="amount")
    if not text.isascii() or not text.isdigit():
        raise _error(400, f"Invalid integer: {text}. amount is a whole number in the "
                     "currency's smallest unit (2500 is 25.00).", param="amount")
    amount = int(text)
    if not 1 <= amount <= MAX_AMOUNT:
        raise _error(400, f"Invalid amount {amount}: it must be from 1 to {MAX_AMOUNT}.",
                     param="amount")
    return amount


def _currency(params: Mapping[str, Any]) -> str:
    text = _string(params, "currency")
    if text is None:
        raise _error(400, "Missing required param: currency.", param="currency")
    if not _CURRENCY.fullmatch(text):
        raise _error(400, f"Invalid currency: {text}. Use a three-letter ISO code such as "
                     "eur or usd.", param="currency")
    return text.lower()


def validate(
    collection: str, params: Mapping[str, Any], customers: Sequence[Mapping[str, Any]]
) -> dict[str, Any]:
    """The fields of a new customer or charge made of ``params``, or ``ProblemError``
    (400) naming the parameter: unknown ones are refused; a charge needs ``amount``
    (an integer), ``currency`` (three letters) and a ``customer`` that exists or a
    ``source`` (any token, e.g. ``tok_visa``: nothing is really charged)."""
    for name in params:
        if name not in PARAMETERS[collection]:
            raise _error(400, f"Received unknown parameter: {name}. This endpoint takes "
                         f"{', '.join(PARAMETERS[collection])}.", param=name)
    common = {"description": _string(params, "description"), "metadata": _metadata(params)}
    if collection == "customers":
        return {"email": _string(params, "email"), "name": _string(params, "name"), **common}
    customer, source = _string(params, "customer"), _string(params, "source")
    fields = {"amount": _amount(params), "currency": _currency(params)}
    if customer is None and source is None:
        raise _error(400, "Must provide source or customer.")
    if customer is not None and not any(c["id"] == customer for c in customers):
        raise _error(400, f"No such customer: {customer!r}", param="customer",
                     code="resource_missing")
    return {**fields, "customer": customer, "source": source, **common,
            "paid": True, "captured": True, "status": "succeeded"}


# -- the provider ---------------------------------------------------------------------


def _check_key(secret_key: object) -> str:
    """``secret_key`` if it is a test key; the messages never quote it."""
    if not isinstance(secret_key, str):
        raise DemoAPIError(f"secret_key must be a string like 'sk_test_…', not "
                           f"{type(secret_key).__name__}.")
    if not secret_key.startswith("sk_test_"):
        raise DemoAPIError("secret_key must start with 'sk_test_': this provider mimics TEST "
                           "MODE, and a live key has no business in a notebook.")
    if len(secret_key) < 12 or not all("!" <= c <= "~" for c in secret_key):
        raise DemoAPIError("secret_key must be 'sk_test_' and at least 4 more printable "
                           "ASCII characters, with no spaces.")
    return secret_key


def _header(headers: Mapping[str, str], name: str) -> str | None:
    return next((v for k, v in headers.items() if k.lower() == name), None)


def _echo(key: str) -> str:
    """A wrong key as the 401 quotes it: its first ``ECHO_CHARS`` characters."""
    return key if len(key) <= ECHO_CHARS else key[:ECHO_CHARS] + "…"


class PaymentProvider(DemoAPI):
    """A payment provider's TEST MODE on 127.0.0.1, with the demo API's idempotency.

    ``with PaymentProvider(secret_key="sk_test_…") as provider: provider.url``. Only
    requests with ``Authorization: Bearer <secret_key>`` get past the door.
    ``records("customers" | "charges")`` is the ledger, ``requests`` every request
    received (headers as sent: the Authorization header holds the key, so do not
    print them in a notebook you share), ``reset()`` empties both. The demo API's
    faults (``fail_next``, ``drop_response_next``, ``delay_next``) work here too, for
    requests that get past authentication and validation; from a workflow, prefer
    ``--fault`` (spec §10.2), which works on any API. ``ttl``, ``clock``, ``port``,
    ``host`` and ``log`` are ``DemoAPI``'s.
    """

    def __init__(
        self,
        *,
        secret_key: str,
        ttl: float = 24 * 3600,
        clock: Callable[[], float] = time.monotonic,
        port: int = 0,
        host: str = HOST,
        log: Callable[[str], None] | None = None,
    ) -> None:
        self._secret_key = _check_key(secret_key)
        super().__init__(ttl=ttl, clock=clock, port=port, host=host, log=log)

    @property
    def url(self) -> str:
        """``http://127.0.0.1:PORT`` of the running provider."""
        if not self.running:
            raise DemoAPIError("the payment provider is not running; call start() or use "
                               "`with PaymentProvider(secret_key=...)`.")
        return super().url

    def start(self) -> PaymentProvider:
        """Bind 127.0.0.1:``port`` and serve in a background thread; returns ``self``."""
        super().start()
        return self

    def __enter__(self) -> PaymentProvider:
        return self if self.running else self.start()

    def __repr__(self) -> str:
        where = self.url if self.running else "stopped"
        return f"<PaymentProvider {where} test mode>"

    # -- one request: the door, then DemoApp's state machine --------------------------

    def begin(
        self, method: str, path: str, headers: Mapping[str, str], key_values: list[str], body: bytes
    ) -> Exchange:
        """Authenticate, route and validate the request; then let ``DemoApp.begin``
        replay, refuse or execute it under its key, and answer in the family's shape."""
        try:
            collection, params = self._admit(method, path, headers, key_values, body)
        except ProblemError as error:
            self.reject(method, path, headers, error.response)
            log = RequestLog(method, path, dict(headers), outcome="rejected",
                             status=error.response.status, answered=True)
            return Exchange(log, response=error.response)
        inner = {k: v for k, v in headers.items() if k.lower() != "content-type"}
        inner["Content-Type"] = JSON_TYPE
        exchange = super().begin(method, f"/{collection}", inner, key_values,
                                 canonical_json(params) if method == "POST" else b"")
        with self._lock:
            # The demo app saw its own route and a JSON body; the log shows the request.
            exchange.log.path, exchange.log.headers = path, dict(headers)
            exchange.response = self._translate(exchange, method, path)
            exchange.log.status = exchange.response.status
        return exchange

    def _admit(
        self, method: str, path: str, headers: Mapping[str, str], key_values: list[str],
        body: bytes,
    ) -> tuple[str, dict[str, Any]]:
        """The collection and the parameters of a request fit to reach the ledger."""
        self._authenticate(headers)
        collection = ROUTES.get(path)
        if collection is None or method not in ("GET", "POST"):
            raise _error(404, f"Unrecognized request URL ({method}: {path}); this provider "
                         "serves GET and POST on /v1/customers and /v1/charges.")
        if method == "GET":
            return collection, {}
        media = (_header(headers, "content-type") or "").split(";")[0].strip().lower()
        if body and media != FORM_TYPE:
            raise _error(400, f"Content-Type {media or 'none'!r} is not read here: send the "
                         f"parameters as {FORM_TYPE} (form: {{...}} in a WOML script).")
        params = parse_form(body)
        validate(collection, params, self.records("customers"))
        self._check_scope(key_values, path)
        return collection, params

    def _authenticate(self, headers: Mapping[str, str]) -> None:
        """401 unless ``Authorization: Bearer <the test key>``; a wrong key is quoted."""
        scheme, _, token = (_header(headers, "authorization") or "").strip().partition(" ")
        token = token.strip()
        challenge = (("WWW-Authenticate", 'Bearer realm="PaymentProvider"'),)
        if scheme.lower() != "bearer" or not token:
            raise _error(401, _NO_KEY, headers=challenge)
        if not hmac.compare_digest(token.encode(), self._secret_key.encode()):
            raise _error(401, f"Invalid API Key provided: {_echo(token)}", headers=challenge)

    def _check_scope(self, key_values: list[str], path: str) -> None:
        """400 when the key is stored for another endpoint: a key is the account's."""
        try:
            key = parse_key(key_values)
        except ProblemError:
            return  # DemoApp refuses a malformed key itself
        if key is None:
            return
        with self._lock:
            other = next((p for p, c in ROUTES.items()
                          if p != path
                          and self._store.get((key, "POST", f"/{c}")) is not None), None)
        if other is not None:
            raise _error(400, "Keys for idempotent requests can only be used for the same "
                         f"endpoint they were first used for ({other!r} vs {path!r}). Try "
                         f"using a key other than {key!r} if you meant to execute a "
                         "different request.", kind="idempotency_error")

    def _translate(self, exchange: Exchange, method: str, path: str) -> Response:
        """The demo app's answer in the family's shape (the stored ones already are)."""
        response, log = exchange.response, exchange.log
        key = log.idempotency_key
        if log.outcome == "mismatch":
            return _reply(400, "Keys for idempotent requests can only be used with the same "
                          "parameters they were first used with. Try using a key other than "
                          f"{key!r} if you meant to execute a different request.",
                          kind="idempotency_error")
        if log.outcome == "conflict":
            return _reply(409, "There is currently another in-progress request using this "
                          f"idempotency key: {key}. Please try again later.",
                          kind="idempotency_error", code="idempotency_key_in_use",
                          headers=(("Retry-After", "1"),))
        if dict(response.headers).get("Content-Type") == PROBLEM_TYPE:
            extra = tuple(h for h in response.headers if h[0] != "Content-Type")
            kind = "api_error" if response.status >= 500 else "invalid_request_error"
            return _reply(response.status, response.json()["detail"], kind=kind,
                          headers=extra)
        if method == "GET" and response.status == 200:
            listed = list(reversed(response.json()["data"]))  # newest first
            return json_response(200, {"object": "list", "url": path, "has_more": False,
                                       "data": listed})
        return response

    def _execute(self, log: RequestLog, collection: str, value: Any) -> Response:
        """Create the object (``DemoApp`` calls this under its lock, the key in flight)."""
        log.outcome = "executed"
        fields = validate(collection, value, self._records["customers"])
        self._counters[collection] += 1
        record = {"id": f"{PREFIXES[collection]}_{self._counters[collection]:04d}",
                  "object": collection[:-1], **fields,
                  "livemode": False, "created": int(time.time())}
        self._records[collection].append(record)
        log.record_id = record["id"]
        return json_response(200, record)
