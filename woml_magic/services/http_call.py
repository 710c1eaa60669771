"""One managed call of ``services.http.request`` once validated (spec §4.1-§4.3):
its name claimed in its attempt (``claim_call``) and the ``ManagedCall`` the pipeline
of ``HttpService.request`` (``http.py``) carries from step to step: its tag for the
transport, its ``CallFinished`` (scrubbed of secret values, spec §10.1), and the
``AmbiguousError`` that marks its attempt for the ambiguity guard (spec §4.2).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..errors import ServiceRejection
from ..events import CallFinished, CallStarted
from .faults import CallFaults
from .http_request import HttpRequest
from .scope import CallScope, CallTag
from .secrets import Secrets

_KEY_HINT = (
    " Give the request idempotency: {header: 'Idempotency-Key', value: "
    "attempt.idempotencyKey} if the API supports it, so a retry is safe."
)


def claim_call(req: HttpRequest, scope: CallScope) -> int:
    """Claim ``req``'s name in ``scope``'s attempt, where names of managed calls are
    unique (``TypeError`` otherwise), and return the call's index in the attempt."""
    if req.name is not None:
        if req.name in scope.names_used:
            raise ServiceRejection(
                "TypeError",
                f"the call name {req.name!r} is already used in this attempt; names of "
                f"managed calls must be unique within one attempt (e.g. "
                f"{req.name + '-2'!r})",
            )
        scope.names_used.add(req.name)
    index = scope.calls_made
    scope.calls_made += 1
    return index


@dataclass
class ManagedCall:
    """One call of ``HttpService.request`` once validated and claimed: the request, its
    attempt's scope, its index there and the faults acting on it."""

    req: HttpRequest
    scope: CallScope
    index: int
    faults: CallFaults
    started: CallStarted
    secrets: Secrets

    @property
    def tag(self) -> CallTag:
        scope = self.scope
        return CallTag(scope.run_id, scope.step_id, scope.attempt_number, self.index,
                       self.req.name)

    def finish(self, **kwargs: Any) -> None:
        """Emit the call's ``CallFinished`` with ``kwargs``, its response and error
        scrubbed of secret values (spec §10.1)."""
        if self.secrets:
            for key in ("response", "error"):
                kwargs[key] = self.secrets.scrub_json(kwargs.get(key))
        scope = self.scope
        scope.emit(CallFinished(run_id=scope.run_id, at=scope.now(), step_id=scope.step_id,
                                number=scope.attempt_number, call_index=self.index,
                                name=self.req.name, injected=self.faults.injected, **kwargs))

    def mark_unkeyed(self) -> None:
        """The call may have reached the server: without ``idempotency`` its attempt is
        marked for the ambiguity guard (spec §4.2)."""
        if self.req.idempotency is None:
            self.scope.unkeyed_ambiguity = True

    def ambiguous(self, message: str) -> ServiceRejection:
        """The ``AmbiguousError`` of this call (spec §4.1); without ``idempotency`` the
        attempt is marked and the message says how to make a retry safe."""
        if self.req.idempotency is None:
            message = message.rstrip(".") + "." + _KEY_HINT
        self.mark_unkeyed()
        return ServiceRejection("AmbiguousError", message, {"ambiguous": True})
