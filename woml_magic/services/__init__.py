"""Services a script calls through ``services`` (spec §4).

``config`` declares ``EngineConfig``, what a run may use, given whole to
``RunServices``; ``registry`` names the services and performs them for a run
(``RunServices``);
``services.http.request`` is ``HttpService.request``, performed in the kernel process
(spec §4.1-§4.3); ``services.sleep`` waits on the run's clock (spec §4.4);
``services.secret`` gives a reference to a value in ``Secrets`` (spec §10.1);
``faults`` reads injected faults (spec §10.2).
``CallScope`` and ``StepCalls`` carry what a call needs to know about its attempt and
its step. Names load on first use, so the script worker can read ``SERVICE_NAMES``
without loading httpx.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._lazy import lazy_exports

__all__ = [
    "DEFAULT_REDACTED",
    "MAX_RESPONSE_BYTES",
    "SERVICE_NAMES",
    "CallScope",
    "Fault",
    "HostAllowList",
    "HttpRequest",
    "HttpService",
    "RunServices",
    "Secrets",
    "StepCalls",
    "classify_transport_error",
    "parse_fault",
    "parse_faults",
    "parse_request",
    "redact_headers",
]

_LAZY = {
    "DEFAULT_REDACTED": "http_request",
    "HostAllowList": "allow_list",
    "HttpRequest": "http_request",
    "parse_request": "http_request",
    "redact_headers": "http_request",
    "MAX_RESPONSE_BYTES": "http",
    "HttpService": "http",
    "classify_transport_error": "http_outcome",
    "CallScope": "scope",
    "StepCalls": "scope",
    "SERVICE_NAMES": "registry",
    "RunServices": "registry",
    "Fault": "faults",
    "parse_fault": "faults",
    "parse_faults": "faults",
    "Secrets": "secrets",
}

if TYPE_CHECKING:
    from .allow_list import HostAllowList
    from .faults import Fault, parse_fault, parse_faults
    from .http import MAX_RESPONSE_BYTES, HttpService
    from .http_outcome import classify_transport_error
    from .http_request import (
        DEFAULT_REDACTED,
        HttpRequest,
        parse_request,
        redact_headers,
    )
    from .registry import SERVICE_NAMES, RunServices
    from .scope import CallScope, StepCalls
    from .secrets import Secrets


__getattr__, __dir__ = lazy_exports(__name__, _LAZY, __all__, globals())
