"""How an HTTP call ended, in the script's terms (spec §4.1, §4.2).

    response, status < 400      resolves {status, headers, data, replayed}
    response, status >= 400     HttpError        definitive; props status, data, headers
    no byte can have left       NetworkError     definitive (refused, DNS, connect or
                                                 pool timeout, host not allowed)
    request may have arrived    AmbiguousError   ambiguous: true (read/write timeout,
                                                 connection closed or reset after sending)
    body over the size cap      ResponseTooLargeError   props status, headers, limit

``classify_transport_error`` is the one place an httpx exception becomes definitive or
ambiguous; anything it does not know is ambiguous, because calling an unknown failure
definitive could let a retry repeat an effect (spec §4.2, fail closed).
"""

from __future__ import annotations

from typing import Any

import httpx

from ..limits import DEFAULT_MAX_JSON_DEPTH, DEFAULT_TIMEOUT_S, JSONLimitError, loads_limited
from ..outcomes import CallFailure
from ..policy import format_duration

_UNKNOWN = "whether the server acted on it is unknown"

# Order matters: subclasses before their bases (ConnectTimeout is a TimeoutException).
_TABLE: tuple[tuple[type[Exception], CallFailure, str], ...] = (
    (
        httpx.ConnectTimeout,
        "network-error",
        "connecting took longer than {timeout}; nothing was sent",
    ),
    (
        httpx.PoolTimeout,
        "network-error",
        "no connection became free within {timeout}; nothing was sent",
    ),
    (httpx.ConnectError, "network-error", "could not connect ({detail}); nothing was sent"),
    (httpx.UnsupportedProtocol, "network-error", "the request could not be sent ({detail})"),
    (httpx.LocalProtocolError, "network-error", "the request could not be sent ({detail})"),
    (httpx.ProxyError, "network-error", "the proxy refused the request ({detail})"),
    (
        httpx.ReadTimeout,
        "ambiguous",
        f"no response arrived within {{timeout}} after the request was sent; {_UNKNOWN}",
    ),
    (
        httpx.WriteTimeout,
        "ambiguous",
        "sending the request took longer than {timeout} "
        f"and part of it may have reached the server; {_UNKNOWN}",
    ),
    (
        httpx.RemoteProtocolError,
        "ambiguous",
        "the server closed the connection after the "
        f"request was sent, without a complete response; {_UNKNOWN}",
    ),
    (
        httpx.ReadError,
        "ambiguous",
        "the connection was closed or reset after the request "
        f"was sent, before a complete response arrived; {_UNKNOWN}",
    ),
    (
        httpx.WriteError,
        "ambiguous",
        "the connection failed while the request was being "
        f"sent and part of it may have reached the server; {_UNKNOWN}",
    ),
    (
        httpx.DecodingError,
        "ambiguous",
        f"the response could not be decoded ({{detail}}); {_UNKNOWN}",
    ),
)


def classify_transport_error(
    exc: Exception, timeout: float = DEFAULT_TIMEOUT_S
) -> tuple[CallFailure, str]:
    """Say whether ``exc`` is definitive or ambiguous, and why, in one clause (spec §4.1).

    Definitive (``network-error``): no request byte can have reached the server.
    Ambiguous: the request may have reached the server but no response arrived.
    ``timeout`` (seconds) is quoted in timeout messages.
    """
    detail = str(exc) or type(exc).__name__
    for kind, outcome, template in _TABLE:
        if isinstance(exc, kind):
            return outcome, template.format(timeout=format_duration(timeout), detail=detail)
    return "ambiguous", f"the request failed after it may have been sent ({detail}); {_UNKNOWN}"


def is_json_type(content_type: str | None) -> bool:
    """``application/json`` or any ``application/*+json``, parameters ignored (spec §4.1)."""
    if not content_type:
        return False
    media = content_type.split(";", 1)[0].strip().lower()
    return media == "application/json" or (
        media.startswith("application/") and media.endswith("+json")
    )


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


class TooDeep(ValueError):
    """A JSON body nested deeper than the limit (spec §4.5); the message says how deep."""


def decode_data(
    body: bytes,
    content_type: str | None,
    charset: str | None,
    max_depth: int = DEFAULT_MAX_JSON_DEPTH,
) -> Any:
    """The response's ``data``: parsed JSON for JSON content types, else text (spec §4.1).

    A JSON content type with a body that does not parse (empty, truncated, NaN) gives
    the text instead of an error: the server has already answered, and turning its
    answer into a failure could make a retry repeat an effect it already had. A body
    nested deeper than ``max_depth`` raises ``TooDeep`` (never ``RecursionError``).
    """
    try:
        text = body.decode(charset or "utf-8", errors="replace")
    except LookupError:  # an unknown charset name from the server
        text = body.decode("utf-8", errors="replace")
    if is_json_type(content_type):
        try:
            return loads_limited(text, max_depth=max_depth, what="a JSON body")
        except JSONLimitError as exc:
            raise TooDeep(str(exc)) from None
        except ValueError:
            return text
    return text


def http_error_message(method: str, url: str, response: httpx.Response, data: Any) -> str:
    """``POST https://… answered 422 Unprocessable Entity: <problem detail>`` (spec §4.1)."""
    message = f"{method} {url} answered {response.status_code} {response.reason_phrase}".rstrip()
    if isinstance(data, dict):
        # RFC 9457 problem details, then common API error shapes.
        for key in ("detail", "title", "message", "error"):
            value = data.get(key)
            if isinstance(value, str) and value:
                return f"{message}: {value[:200]}"
    return message
