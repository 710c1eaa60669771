"""An attempt's HTTP calls and error in words, as every timeline says them (spec §6.3:
"HTTP calls (method, URL, status, idempotency header sent, replayed or not)", "error
with the cell line").

Shared by the text table and the HTML details panel, so both say the same.
"""

from __future__ import annotations

from ..model import Call
from ..outcomes import AMBIGUOUS, NETWORK_ERROR, RESPONSE, RUNNING

#: The server's header for a replayed response (IETF Idempotency-Key draft, Stripe).
REPLAY_HEADER = "idempotent-replayed"


def server_replayed(call: Call) -> bool:
    """Whether the server answered ``call`` with ``Idempotent-Replayed: true``.

    ``Call.response`` holds what the HTTP service recorded: ``{status, headers, data}``
    with the response headers (names as the server sent them, secrets redacted).
    """
    response = call.response
    headers = response.get("headers") if isinstance(response, dict) else None
    if not isinstance(headers, dict):
        return False
    return any(
        str(k).lower() == REPLAY_HEADER and str(v).strip().lower() == "true"
        for k, v in headers.items()
    )


def call_verdict(call: Call) -> str:
    """What became of ``call``, in words (spec §6.3: "replayed or not").

    ``reattached from the journal`` (the HTTP service returned the journaled response,
    nothing was sent, ``Call.replayed``), ``replayed by the server`` (the server
    answered ``Idempotent-Replayed: true``: it had already done this and did not do it
    again), ``sent fresh`` (any other response); without a response: ``no response
    (network error)``, ``effect unknown (ambiguous)`` or ``in flight``.
    """
    if call.replayed:
        return "reattached from the journal"
    if call.outcome == RESPONSE:
        return "replayed by the server" if server_replayed(call) else "sent fresh"
    return {
        NETWORK_ERROR: "no response (network error)",
        AMBIGUOUS: "effect unknown (ambiguous)",
        RUNNING: "in flight",
    }.get(call.outcome, call.outcome)


def error_text(name: str, message: str, line: int | None) -> str:
    """An attempt's error in one line: ``TypeError: boom @ line 7`` (spec §3.2)."""
    where = f" @ line {line}" if line is not None else " (line unknown)"
    return f"{name}: {message}{where}"
