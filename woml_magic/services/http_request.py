"""The request object a script hands to ``services.http.request`` (spec §4.1).

``parse_request`` turns the parsed-JSON ``request`` and ``options`` into a frozen
``HttpRequest`` or rejects with a ``TypeError``-named ``ServiceRejection`` whose one
sentence names the bad value and what is allowed. Nothing here touches the network.
Also here: header redaction, decided before a byte leaves (as the host allow-list is,
in ``allow_list``), and secret references (spec §10.1): a request that holds them is
parsed twice, once as shown (references kept) and once as sent (values substituted),
and only the shown form is ever journaled or quoted in a message (``call_started``,
the call's first event).
Query strings and form bodies (spec §10.3) are encoded in ``http_form``.
"""

from __future__ import annotations

import base64
import dataclasses
import difflib
import json
import math
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import httpx

from ..errors import ServiceRejection
from ..events import CallStarted
from ..limits import DEFAULT_MAX_JSON_DEPTH, DEFAULT_TIMEOUT_S, loads_limited
from ..policy import MAX_DURATION, DurationError, parse_duration
from ..redaction import DEFAULT_REDACTED, REDACTED, redact_headers
from .http_form import FORM_TYPE, form_body, form_pairs, js_type, query_pairs
from .http_outcome import is_json_type
from .secrets import Secrets, encode_references, has_reference, json_escape

if TYPE_CHECKING:
    from .scope import CallScope

# Re-exported: the redaction names for services/, form_pairs for its callers.
__all__ = ["DEFAULT_REDACTED", "REDACTED", "form_pairs", "redact_headers"]


METHODS = ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS")
REQUEST_KEYS = (
    "method", "url", "headers", "query", "json", "body", "timeout", "idempotency", "form",
)
OPTION_KEYS = ("name",)
# Keys people bring from other HTTP clients, and what they mean here.
_HINTS = {
    "params": "query",
    "searchparams": "query",
    "data": "json",
    "formdata": "form",
    "fields": "form",
    "idempotencykey": "idempotency",
    "idempotency_key": "idempotency",
}
# The client frames the message itself; a script setting these would corrupt it.
_FRAMING_HEADERS = ("content-length", "transfer-encoding", "connection")
_TOKEN = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
_BAD_VALUE_CHARS = re.compile(r"[\r\n\x00]")
#: A URL's scheme and userinfo: what stands before the last ``@`` of its authority.
_USERINFO = re.compile(r"([A-Za-z][A-Za-z0-9+.\-]*://)([^/?#]*)@")


@dataclass(frozen=True)
class HttpRequest:
    """A validated request, ready to send (spec §4.1).

    ``headers`` are the headers the script set, plus ``Authorization: Basic`` for a
    URL's userinfo, ``Content-Type`` for ``json`` or ``form`` and the idempotency
    header, in that order, with real values; ``url`` keeps the userinfo for showing
    (``shown_url``) and is sent without it. ``timeout``
    is seconds and, as in httpx, bounds each phase (connecting, waiting for a pooled
    connection, each write, each read) rather than the whole call; the step's
    ``timeout`` bounds that.

    When the request held secret references (spec §10.1), ``url``, ``headers``,
    ``content`` and ``idempotency`` hold the values, and ``display`` the request as
    written, references kept: ``shown_url``, ``shown_headers`` and
    ``shown_idempotency`` read it, and they are all that is journaled or quoted.
    Values are never in ``repr``.
    """

    method: str
    url: httpx.URL = field(repr=False)
    headers: tuple[tuple[str, str], ...] = field(repr=False)
    content: bytes | None = field(repr=False)
    timeout: float
    idempotency: tuple[str, str] | None = field(repr=False)
    name: str | None
    display: HttpRequest | None = field(default=None, repr=False, compare=False)
    #: The display form's URL with references restored (set with ``display``).
    display_url: str | None = field(default=None, compare=False)

    @property
    def shown_url(self) -> str:
        """The URL as journaled: no fragment, a password in it replaced by ``•••``, and
        secret references as written."""
        if self.display_url is not None:
            return self.display_url
        if not self.url.userinfo and not self.url.fragment:
            return str(self.url)  # as it stands: copy_with would parse it again per call
        text = str(self.url.copy_with(username=None, password=None, fragment=None))
        if self.url.userinfo:
            user = self.url.userinfo.split(b":", 1)[0].decode("ascii", "replace")
            prefix = f"{self.url.scheme}://"
            text = f"{prefix}{user}:{REDACTED}@{text[len(prefix) :]}"
        return text

    @property
    def shown_headers(self) -> tuple[tuple[str, str], ...]:
        """The headers as written: secret references, not values (before redaction)."""
        return self.headers if self.display is None else self.display.headers

    @property
    def shown_idempotency(self) -> tuple[str, str] | None:
        """The idempotency header and value as written (spec §10.1)."""
        return self.idempotency if self.display is None else self.display.idempotency


def call_started(
    req: HttpRequest, scope: CallScope, index: int, redact: tuple[str, ...]
) -> CallStarted:
    """The ``call-started`` event of ``req``, the ``index``-th call of ``scope``'s attempt
    (spec §5.2): the request as shown, headers named in ``redact`` (lower case) as
    ``•••``, the idempotency value too if its header is one of them."""
    key_header, key_value = req.shown_idempotency or (None, None)
    if key_header is not None and key_header.lower() in redact:
        key_value = REDACTED  # configured as sensitive: respect that even for keys
    return CallStarted(
        run_id=scope.run_id, at=scope.now(), step_id=scope.step_id,
        number=scope.attempt_number, call_index=index, name=req.name, method=req.method,
        url=req.shown_url, request_headers=redact_headers(dict(req.shown_headers), redact),
        idempotency_header=key_header, idempotency_value=key_value,
    )


def _reject(message: str) -> ServiceRejection:
    return ServiceRejection("TypeError", message)


def _unknown_key(key: str, allowed: tuple[str, ...], where: str) -> ServiceRejection:
    hint = _HINTS.get(key.lower())
    if hint is None:
        close = difflib.get_close_matches(key, allowed, n=1, cutoff=0.6)
        hint = close[0] if close else None
    suggestion = f"; did you mean {hint!r}?" if hint else ""
    return _reject(
        f"unknown key {key!r} in {where}; allowed keys are {', '.join(allowed)}{suggestion}"
    )


def _check_header(name: Any, value: Any, where: str) -> tuple[str, str]:
    if not isinstance(name, str) or not _TOKEN.fullmatch(name):
        raise _reject(f"{where} has an invalid header name {name!r}; use letters, digits and -")
    if not isinstance(value, str):
        raise _reject(
            f"{where} header {name!r} is a {js_type(value)}; header values must be "
            f"strings (write String(value))"
        )
    if _BAD_VALUE_CHARS.search(value):
        raise _reject(
            f"{where} header {name!r} contains a line break or NUL; header values are "
            "one line of text"
        )
    if not value.isascii():
        raise _reject(
            f"{where} header {name!r} contains non-ASCII text; HTTP header values are "
            "ASCII (encode it, e.g. with encodeURIComponent)"
        )
    if name.lower() in _FRAMING_HEADERS:
        raise _reject(f"{where} header {name!r} is set by the HTTP client itself; remove it")
    return name, value


def _parse_headers(value: Any) -> list[tuple[str, str]]:
    if value is None:
        return []
    if not isinstance(value, dict):
        raise _reject(
            f"request.headers must be an object of strings like "
            f'{{"Accept": "application/json"}}, got {js_type(value)}'
        )
    out: list[tuple[str, str]] = []
    seen: dict[str, str] = {}
    for name, val in value.items():
        out.append(_check_header(name, val, "request.headers"))
        if name.lower() in seen:
            raise _reject(
                f"request.headers sets {seen[name.lower()]!r} and {name!r}; header names "
                "are case-insensitive, so give each once"
            )
        seen[name.lower()] = name
    return out


def _parse_url(value: Any) -> httpx.URL:
    allowed = "an absolute http:// or https:// URL such as https://api.example.com/customers"
    if not isinstance(value, str) or not value:
        raise _reject(f"request.url is required and must be {allowed}, got {js_type(value)}")
    try:
        url = httpx.URL(value)
    except httpx.InvalidURL as exc:
        raise _reject(f"request.url {value!r} is not a valid URL ({exc}); use {allowed}") from None
    if url.scheme not in ("http", "https") or not url.host:
        raise _reject(f"request.url {value!r} is not {allowed}")
    return url


def _parse_timeout(value: Any, default: float) -> float:
    if value is None:
        return default
    limit = MAX_DURATION.total_seconds()
    allowed = 'a duration such as "5s" or "250ms", or a number of milliseconds, up to 24h'
    if isinstance(value, str):
        try:
            seconds = parse_duration(value).total_seconds()
        except DurationError as exc:
            raise _reject(f"request.timeout: {exc}") from None
    elif isinstance(value, (int, float)) and not isinstance(value, bool):
        seconds = value / 1000 if math.isfinite(value) else -1.0
    else:
        raise _reject(f"request.timeout is {js_type(value)}; use {allowed}")
    if not 0 < seconds <= limit:
        raise _reject(f"request.timeout {value!r} is out of range; use {allowed} (more than 0)")
    return seconds


def _parse_idempotency(value: Any) -> tuple[str, str] | None:
    if value is None:
        return None
    shape = '{header: "Idempotency-Key", value: attempt.idempotencyKey}'
    if not isinstance(value, dict):
        raise _reject(f"request.idempotency must be an object like {shape}, got {js_type(value)}")
    for key in value:
        if key not in ("header", "value"):
            raise _unknown_key(key, ("header", "value"), "request.idempotency")
    header, key_value = value.get("header"), value.get("value")
    for field_name, got in (("header", header), ("value", key_value)):
        if not isinstance(got, str) or not got:
            raise _reject(
                f"request.idempotency.{field_name} must be a non-empty string, got "
                f"{js_type(got) if got != '' else 'an empty string'}; write {shape}"
            )
    return _check_header(header, key_value, "request.idempotency")


def _parse_name(options: Any) -> str | None:
    if options is None:
        return None
    if not isinstance(options, dict):
        raise _reject(
            f'options must be an object like {{name: "create-customer"}}, got {js_type(options)}'
        )
    for key in options:
        if key not in OPTION_KEYS:
            raise _unknown_key(key, OPTION_KEYS, "options")
    name = options.get("name")
    if name is None:
        return None
    if not isinstance(name, str) or not name.strip():
        raise _reject(
            f"options.name must be a non-empty string naming the managed call, got "
            f"{js_type(name) if name != '' else 'an empty string'}"
        )
    return name


def parse_request(
    request: Any, options: Any, *, default_timeout: float = DEFAULT_TIMEOUT_S,
    secrets: Secrets | None = None,
) -> HttpRequest:
    """Validate a script's ``request`` and ``options`` (spec §4.1, §10.1, §10.3).

    ``request`` and ``options`` arrive as parsed JSON (JavaScript ``undefined`` keys are
    absent; ``null`` counts as absent). ``json``, ``form`` and ``body`` are mutually
    exclusive; ``json`` adds ``Content-Type: application/json`` and ``form``
    ``application/x-www-form-urlencoded`` unless the script set one.

    Secret references (``⟦woml-secret:NAME⟧``) anywhere in ``request`` are replaced by
    the values of ``secrets`` in what is sent; a name not set is a ``TypeError`` naming
    it. The returned request's ``shown_*`` keep the references, and no rejection
    message quotes a value.
    """
    if not has_reference(request):
        return _parse(request, options, default_timeout)
    store = secrets if secrets is not None else Secrets()
    if isinstance(request, dict) and isinstance(request.get("url"), str):
        request = {**request, "url": _userinfo_encoded(request["url"])}
    placed, restore = store.placeholders(request)
    try:
        shown = _parse(placed, options, default_timeout)
    except ServiceRejection as rejection:
        raise _reject(restore(rejection.message)) from None
    sent = store.substitute(request)
    body = request.get("body")
    if isinstance(body, str) and has_reference(body):
        sent["body"] = _body_sent(store, body, request.get("headers"))
    try:
        real = _parse(sent, options, default_timeout)
    except ServiceRejection as rejection:
        raise _reject(store.scrub(rejection.message)) from None
    display = dataclasses.replace(
        shown,
        headers=tuple((restore(k), restore(v)) for k, v in shown.headers),
        idempotency=None if shown.idempotency is None
        else (restore(shown.idempotency[0]), restore(shown.idempotency[1])),
    )
    return dataclasses.replace(real, display=display, display_url=restore(shown.shown_url))


def _userinfo_encoded(url: str) -> str:
    """``url`` with each secret reference in its userinfo (``http://user:REF@host/``)
    percent-encoded, so the value is sent percent-encoded there (spec §10.1): a
    password holding ``@``, ``:``, ``/`` or ``#`` then stays the password, and the
    ``Authorization: Basic`` header built from it carries it exactly."""
    match = _USERINFO.match(url)
    if match is None or not has_reference(match.group(2)):
        return url
    return match.group(1) + encode_references(match.group(2)) + url[match.end(2) :]


def _body_sent(store: Secrets, body: str, headers: Any) -> str:
    """``body`` with its references replaced for sending, escaped for where they stand
    (spec §10.1): a body that is JSON as written (so every reference is inside a JSON
    string) gets each value JSON-escaped and stays valid JSON; a body sent as JSON that
    is not JSON as written is refused, as where a reference stands cannot be known; any
    other body gets the values as they are."""
    try:
        loads_limited(body, max_depth=DEFAULT_MAX_JSON_DEPTH, what="request.body")
    except ValueError:
        content_type = next((v for k, v in headers.items() if isinstance(k, str)
                             and k.lower() == "content-type" and isinstance(v, str)),
                            None) if isinstance(headers, dict) else None
        if is_json_type(content_type):
            raise _reject(
                f"request.body is sent as {content_type} but is not valid JSON as written, "
                "so a secret reference in it cannot be escaped for where it stands; build "
                "the body with JSON.stringify(...) or give the object as json"
            ) from None
        return str(store.substitute(body))
    return str(store.substitute(body, escape=json_escape))


def _parse(request: Any, options: Any, default_timeout: float) -> HttpRequest:
    if not isinstance(request, dict):
        raise _reject(
            f'services.http.request expects an object like {{url: "https://…"}}, '
            f"got {js_type(request)}"
        )
    for key in request:
        if key not in REQUEST_KEYS:
            raise _unknown_key(key, REQUEST_KEYS, "request")
    method = request.get("method", "GET")
    if not isinstance(method, str) or method.upper() not in METHODS:
        raise _reject(f"request.method {method!r} is not allowed; use one of {', '.join(METHODS)}")
    url = _parse_url(request.get("url"))
    headers = _parse_headers(request.get("headers"))
    if url.userinfo:
        headers.append(_basic_auth(url, headers))
    query = query_pairs(request.get("query"))
    if query:
        url = url.copy_merge_params(tuple(query))
    has_json, body, form = "json" in request, request.get("body"), request.get("form")
    given = [k for k, there in (("json", has_json), ("form", form is not None),
                                ("body", body is not None)) if there]
    if len(given) > 1:
        raise _reject(
            f"request has both {given[0]} and {given[1]}; give json (a value sent as "
            "application/json), form (an object sent as application/x-www-form-urlencoded) "
            "or body (a string), not both"
        )
    has_type = any(k.lower() == "content-type" for k, _ in headers)
    content: bytes | None = None
    if has_json:
        content = json.dumps(request["json"], ensure_ascii=False, separators=(",", ":")).encode()
        if not has_type:
            headers.append(("Content-Type", "application/json"))
    elif form is not None:
        content = form_body(form)
        if not has_type:
            headers.append(("Content-Type", FORM_TYPE))
    elif body is not None:
        if not isinstance(body, str):
            raise _reject(
                f"request.body is {js_type(body)}; body must be a string "
                "(use json for objects, or JSON.stringify)"
            )
        content = body.encode()
    idempotency = _parse_idempotency(request.get("idempotency"))
    if idempotency is not None:
        clash = [k for k, _ in headers if k.lower() == idempotency[0].lower()]
        if clash:
            raise _reject(
                f"header {clash[0]!r} is given both in request.headers and in "
                "request.idempotency; keep it only in request.idempotency"
            )
        headers.append(idempotency)
    return HttpRequest(
        method=method.upper(),
        url=url,
        headers=tuple(headers),
        content=content,
        timeout=_parse_timeout(request.get("timeout"), default_timeout),
        idempotency=idempotency,
        name=_parse_name(options),
    )


def _basic_auth(url: httpx.URL, headers: list[tuple[str, str]]) -> tuple[str, str]:
    """The ``Authorization: Basic`` header of a URL's userinfo (RFC 7617: base64 of
    ``user:password`` in UTF-8), as httpx would add it while sending. Made here so the
    request carries, and the journal shows (as ``•••``), every header that is sent;
    ``TypeError`` when the script sets ``Authorization`` too."""
    clash = [name for name, _ in headers if name.lower() == "authorization"]
    if clash:
        raise _reject(
            f"request.url has a user and password and request.headers sets {clash[0]!r}; "
            "give the credentials once: in the URL for Basic auth, or in the header"
        )
    pair = f"{url.username}:{url.password}".encode("utf-8", "surrogatepass")
    return "Authorization", "Basic " + base64.b64encode(pair).decode("ascii")
