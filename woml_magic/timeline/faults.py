"""The faults injected into a call, as the timeline reads them (spec §10.2).

The fault service records what it did to a call in the call's ``injected``, one
``KIND (--fault CALL@N=KIND)`` each (``services/faults.py``); ``fault_kinds`` reads the
kinds back, ``fault_words`` says them as the badge does, and ``NOT_SENT_FAULTS`` and
``DISCARDING_FAULTS`` say which kinds never sent the request and which sent it and
dropped its answer (the key's lineage, spec §10.3, judges a call by them).
"""

from __future__ import annotations

import re

from ..model import Call

#: Injected faults (spec §10.2) that answer without sending the request.
NOT_SENT_FAULTS = ("network-error", "status=")

#: Injected faults (spec §10.2) that send the request, read the answer and drop it.
DISCARDING_FAULTS = ("drop-response", "timeout-after-send")

#: A fault's kind in a call's ``injected``: each reads ``KIND (--fault CALL@N=KIND)``.
_FAULT_KIND = re.compile(r"([^\s,;()]+) \(--fault ")


def injected_of(call: Call) -> str | None:
    """The faults injected into ``call`` (spec §10.2), as the fault service recorded
    them (``"drop-response (--fault create-charge@1=drop-response)"``), or ``None``."""
    return call.injected or None


def fault_kinds(injected: str) -> tuple[str, ...]:
    """The kinds of the faults a call's ``injected`` describes, in order:
    ``"drop-response (--fault create-charge@1=drop-response)"`` → ``("drop-response",)``;
    a delay and another fault on one call give both (``"delay=2s"``, ``"status=503"``).
    A description not in that form is its own kind."""
    kinds = tuple(_FAULT_KIND.findall(injected))
    return kinds or (" ".join(injected.split()),)


def fault_words(injected: str) -> str:
    """The faults in a few words, as the badge shows them: ``"delay=2s, drop-response"``."""
    return ", ".join(fault_kinds(injected))
