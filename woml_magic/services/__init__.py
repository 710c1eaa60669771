"""Services a script calls through ``services`` (spec §4).

``services.http.request`` is ``HttpService.request``, performed in the kernel process
(spec §4.1-§4.3). ``CallScope`` and ``StepCalls`` carry what a call needs to know about
its attempt and its step.
"""

from __future__ import annotations

from .http import MAX_RESPONSE_BYTES, HttpService
from .http_outcome import classify_transport_error
from .http_request import (
    DEFAULT_REDACTED,
    HostAllowList,
    HttpRequest,
    parse_request,
    redact_headers,
)
from .scope import CallScope, StepCalls

__all__ = [
    "DEFAULT_REDACTED",
    "MAX_RESPONSE_BYTES",
    "CallScope",
    "HostAllowList",
    "HttpRequest",
    "HttpService",
    "StepCalls",
    "classify_transport_error",
    "parse_request",
    "redact_headers",
]
